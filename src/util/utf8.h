// UTF-8 code points (RFC 3629), shared by the Jinja interpreter and the tokenizers:
// validation (with the offset of the first bad byte), decoding and encoding.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lol {

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

}  // namespace lol
