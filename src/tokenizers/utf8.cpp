#include "tokenizers/utf8.h"

#include <cstdint>

namespace lol::tokenizers {

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const int len = utf8_sequence_length(text, i);
    if (len > 0) {
      out.append(text.data() + i, std::size_t(len));
      i += std::size_t(len);
      continue;
    }
    // Maximal ill-formed subsequence (Unicode §3.9 "U+FFFD substitution of maximal
    // subparts"): a valid lead byte followed by the longest run of continuation bytes
    // that could still begin a well-formed sequence, else one byte.
    std::size_t skip = 1;
    const unsigned c = s[i];
    int need = (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : 0;
    for (int k = 1; k <= need && i + std::size_t(k) < n; ++k) {
      const unsigned ck = s[i + std::size_t(k)];
      unsigned lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
      }
      if (ck < lo || ck > hi) break;
      skip = std::size_t(k) + 1;
    }
    out += "\xEF\xBF\xBD";
    i += skip;
  }
  return out;
}

bool is_unicode_whitespace(char32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool whitespace_starts_at(std::string_view text, std::size_t pos) {
  if (pos >= text.size() || utf8_sequence_length(text, pos) == 0) return false;
  return is_unicode_whitespace(decode_utf8(text, pos));
}

bool whitespace_ends_at(std::string_view text, std::size_t pos) {
  if (pos == 0 || pos > text.size()) return false;
  // The character's first byte: at most 3 continuation bytes (10xxxxxx) back.
  std::size_t start = pos - 1;
  while (start > 0 && pos - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  if (start + std::size_t(utf8_sequence_length(text, start)) != pos) return false;
  return is_unicode_whitespace(decode_utf8(text, start));
}

namespace {

/// Start of an incomplete UTF-8 sequence at the end of `s` that more bytes could
/// complete (a lead byte followed by fewer continuation bytes than it needs), else s.size().
std::size_t incomplete_tail(std::string_view s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  const std::size_t cut = incomplete_tail(pending_);
  std::string out = to_valid_utf8(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace lol::tokenizers
