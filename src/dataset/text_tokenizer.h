// Tokenizer selection for text corpora and the `lol tokenizer` / `lol corpus`
// commands (issue 7): a tokenizer is named either "byte" (the byte-level
// tokenizer, ids 0..255 = bytes, then <pad> <bos> <eos>) or by a path to a
// tokenizer.json file or a directory holding tokenizer.json (or vocab.json +
// merges.txt), as accepted by tokenizers::load_tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace lol::data {

/// The tokenizer named by `spec` ("byte", or a tokenizer.json file / directory).
/// Throws lol::InputError naming `spec` when it is neither.
std::unique_ptr<tokenizers::Tokenizer> open_text_tokenizer(const std::string& spec);

/// Decoded length in bytes of every id 0..vocab_size()-1 (special added tokens and
/// unused ids count 0 bytes): the byte count behind a token sequence is the sum
/// over its ids. Used for bits per byte (issue 7, `lol eval lm`).
std::vector<int32_t> token_byte_lengths(const tokenizers::Tokenizer& tok);

}  // namespace lol::data
