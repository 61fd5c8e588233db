// GPT-2's reversible byte <-> Unicode character mapping used by byte-level BPE
// (Radford et al. 2019, `bytes_to_unicode` in OpenAI's encoder.py; Hugging Face's
// ByteLevel pre-tokenizer/decoder). Printable bytes '!'..'~', U+00A1..U+00AC and
// U+00AE..U+00FF map to themselves; the other 68 bytes map, in increasing byte
// order, to U+0100, U+0101, ... (so ' ' -> 'Ġ' U+0120 and '\n' -> 'Ċ' U+010A).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lol::tokenizers {

/// The code point that byte b maps to.
char32_t byte_to_unicode(uint8_t b);

/// The byte that code point cp stands for, or -1 when cp is not in the mapping.
int unicode_to_byte(char32_t cp);

/// Maps every byte of `bytes` to its character (UTF-8 encoded): the vocabulary
/// spelling of a byte string, e.g. " the" -> "Ġthe".
std::string bytes_to_token(std::string_view bytes);

/// Inverse of bytes_to_token. Returns false (and leaves `out` unspecified) when
/// `token` is not valid UTF-8 or holds a character outside the mapping.
bool token_to_bytes(std::string_view token, std::string& out);

}  // namespace lol::tokenizers
