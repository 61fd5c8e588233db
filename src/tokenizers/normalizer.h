// Unicode NFC normalization for the tokenizer.json normalizer {"type": "NFC"}
// (Qwen2). Implemented with ICU when lol_tokenizers is compiled with
// LOL_HAVE_ICU=1 and linked with icu-uc; without it, nfc_available() is false and
// the normalizer is recorded but not applied (text is assumed to be NFC already).
#pragma once
#include <string>
#include <string_view>

namespace lol::tokenizers {

/// True when NFC normalization is compiled in.
bool nfc_available();

/// True when `text` (valid UTF-8) is known to be in NFC: always for ASCII; with
/// ICU, the exact answer; without ICU, true (cannot tell).
bool is_nfc(std::string_view text);

/// NFC of valid UTF-8 `text` (Unicode canonical decomposition, then canonical
/// composition). Returns `text` unchanged when it is already NFC or when NFC is not
/// available.
std::string to_nfc(std::string_view text);

}  // namespace lol::tokenizers
