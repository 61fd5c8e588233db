#include "tokenizers/byte_unicode.h"

#include <array>

#include "tokenizers/utf8.h"

namespace lol::tokenizers {
namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // every mapped code point is < 0x144
  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? char32_t(b) : next++;
      to_byte[to_cp[b]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return tables().to_cp[b]; }

int unicode_to_byte(char32_t cp) {
  const auto& t = tables().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

std::string bytes_to_token(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(byte_to_unicode(b), out);
  return out;
}

bool token_to_bytes(std::string_view token, std::string& out) {
  out.clear();
  std::size_t pos = 0;
  while (pos < token.size()) {
    if (utf8_sequence_length(token, pos) == 0) return false;
    const int b = unicode_to_byte(decode_utf8(token, pos));
    if (b < 0) return false;
    out += char(b);
  }
  return true;
}

}  // namespace lol::tokenizers
