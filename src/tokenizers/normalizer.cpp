#include "tokenizers/normalizer.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

#if defined(LOL_HAVE_ICU) && LOL_HAVE_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#define LOL_TOKENIZERS_ICU 1
#endif

namespace lol::tokenizers {
namespace {

bool is_ascii(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & 0x8080808080808080ULL) return false;
  }
  for (; i < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) & 0x80) return false;
  return true;
}

#ifdef LOL_TOKENIZERS_ICU
const icu::Normalizer2& nfc_instance() {
  static const icu::Normalizer2* n = [] {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* p = icu::Normalizer2::getNFCInstance(err);
    if (U_FAILURE(err) || !p) throw std::runtime_error(std::string("ICU NFC instance: ") + u_errorName(err));
    return p;
  }();
  return *n;
}

icu::StringPiece piece(std::string_view s) { return icu::StringPiece(s.data(), int32_t(s.size())); }
#endif

}  // namespace

bool nfc_available() {
#ifdef LOL_TOKENIZERS_ICU
  return true;
#else
  return false;
#endif
}

bool is_nfc(std::string_view text) {
  if (is_ascii(text)) return true;
#ifdef LOL_TOKENIZERS_ICU
  UErrorCode err = U_ZERO_ERROR;
  const bool ok = nfc_instance().isNormalizedUTF8(piece(text), err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU NFC check: ") + u_errorName(err));
  return ok;
#else
  return true;
#endif
}

std::string to_nfc(std::string_view text) {
  if (is_nfc(text)) return std::string(text);
#ifdef LOL_TOKENIZERS_ICU
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  UErrorCode err = U_ZERO_ERROR;
  nfc_instance().normalizeUTF8(0, piece(text), sink, nullptr, err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU NFC: ") + u_errorName(err));
  return out;
#else
  return std::string(text);
#endif
}

}  // namespace lol::tokenizers
