// UTF-8 helpers for the tokenizers: validation (with the offset of the first bad
// byte), code point decoding/encoding, and lossy repair (U+FFFD for bad bytes).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lol::tokenizers {

/// Byte offset of the first byte that does not start a well-formed UTF-8 sequence
/// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF), or
/// std::string_view::npos when the whole of `text` is valid. O(n), ASCII fast path.
std::size_t find_invalid_utf8(std::string_view text);

/// Length in bytes (1..4) of the well-formed UTF-8 sequence starting at text[pos],
/// or 0 when text[pos] does not start one. Requires pos < text.size().
int utf8_sequence_length(std::string_view text, std::size_t pos);

/// Decodes the code point at text[pos] and advances pos past it. Requires a
/// well-formed sequence at pos (see utf8_sequence_length).
char32_t decode_utf8(std::string_view text, std::size_t& pos);

/// Appends the UTF-8 encoding of code point cp (<= U+10FFFF) to out.
void append_utf8(char32_t cp, std::string& out);

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
