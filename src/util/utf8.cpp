#include "util/utf8.h"

#include <cstdint>
#include <cstring>

namespace lol {

int utf8_sequence_length(std::string_view text, std::size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  const unsigned c = s[pos];
  if (c < 0x80) return 1;
  auto cont = [&](std::size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(pos + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (pos + 1 >= n) return 0;
    const unsigned c1 = s[pos + 1];
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
    return cont(pos + 1) && cont(pos + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (pos + 1 >= n) return 0;
    const unsigned c1 = s[pos + 1];
    if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c == 0xF4 && c1 > 0x8F) return 0;  // > U+10FFFF
    return cont(pos + 1) && cont(pos + 2) && cont(pos + 3) ? 4 : 0;
  }
  return 0;
}

std::size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    // ASCII fast path: 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const int len = utf8_sequence_length(text, i);
    if (len == 0) return i;
    i += std::size_t(len);
  }
  return std::string_view::npos;
}

char32_t decode_utf8(std::string_view text, std::size_t& pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned c = s[pos];
  if (c < 0x80) {
    ++pos;
    return c;
  }
  if (c < 0xE0) {
    const char32_t cp = ((c & 0x1F) << 6) | (s[pos + 1] & 0x3F);
    pos += 2;
    return cp;
  }
  if (c < 0xF0) {
    const char32_t cp = ((c & 0x0F) << 12) | ((s[pos + 1] & 0x3F) << 6) | (s[pos + 2] & 0x3F);
    pos += 3;
    return cp;
  }
  const char32_t cp = ((c & 0x07) << 18) | ((s[pos + 1] & 0x3F) << 12) |
                      ((s[pos + 2] & 0x3F) << 6) | (s[pos + 3] & 0x3F);
  pos += 4;
  return cp;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace lol
