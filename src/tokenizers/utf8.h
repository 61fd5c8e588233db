// UTF-8 helpers for the tokenizers: lossy repair (U+FFFD for bad bytes), streamed
// printing, white space; validation and code points come from util/utf8.h.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "util/utf8.h"

namespace lol::tokenizers {

// Validation, decoding and encoding of code points (util/utf8.h), as the tokenizers name them.
using ::lol::append_utf8;
using ::lol::decode_utf8;
using ::lol::find_invalid_utf8;
using ::lol::utf8_sequence_length;

/// `text` with every maximal ill-formed subsequence replaced by U+FFFD (the same
/// policy as Rust's String::from_utf8_lossy, which Hugging Face decoders use).
std::string to_valid_utf8(std::string_view text);

/// Turns a byte stream (the decoded bytes of generated tokens, appended one token at
/// a time) into printable text: push() returns the valid UTF-8 text up to the last
/// complete character; a character whose bytes are split across tokens (byte-level
/// BPE, <0xXX> byte fallback) waits for its last byte instead of printing U+FFFD.
/// finish() returns what is still held back (an incomplete character, as U+FFFD).
/// The concatenated output equals to_valid_utf8 of all bytes pushed.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;  // bytes not returned yet: at most an incomplete character
};

/// True for the Unicode White_Space code points (as Rust's char::is_whitespace).
bool is_unicode_whitespace(char32_t cp);

/// True when a well-formed UTF-8 character starts at text[pos] and is White_Space.
/// False for pos >= text.size() and for bytes that start no well-formed character.
bool whitespace_starts_at(std::string_view text, std::size_t pos);

/// True when the well-formed UTF-8 character that ends just before text[pos] (its last
/// byte at pos - 1) is White_Space. False for pos == 0 and for ill-formed bytes.
bool whitespace_ends_at(std::string_view text, std::size_t pos);

}  // namespace lol::tokenizers
