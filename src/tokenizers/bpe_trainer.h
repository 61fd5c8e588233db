// Byte-level BPE training (Sennrich et al. 2016; GPT-2's byte-level variant),
// producing a BpeTokenizer whose tokenizer.json Hugging Face `tokenizers` loads.
//
// Algorithm: texts are split into added tokens (the specials are cut out and not
// learned from) and pre-tokens (the regex); unique pre-tokens are counted. Every
// pre-token starts as its bytes. Repeatedly, the adjacent symbol pair with the
// highest total count (over unique words, weighted by their counts) is merged,
// updating the pair counts incrementally (only the words that contain the pair
// are touched). Ties: the pair with the smaller (left id, right id) wins, the
// same rule as Hugging Face's BpeTrainer. Stops at vocab_size tokens, or when the
// best pair is seen fewer than min_frequency times.
//
// Vocabulary layout: special tokens first (ids 0..k-1, in the given order), then
// the 256 byte tokens ordered by their mapped character's code point (so '!' is
// id k, as in GPT-2), then one token per merge in merge order. A merge whose
// string already exists reuses that id. The result is deterministic.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tokenizers/bpe_tokenizer.h"
#include "tokenizers/regex_splitter.h"

namespace lol::tokenizers {

struct TrainBpeOptions {
  int32_t vocab_size = 4096;                 ///< total, specials and the 256 bytes included
  std::vector<std::string> special_tokens;   ///< ids 0..k-1; cut out of training text
  std::string pattern = kGpt2Pattern;        ///< pre-tokenizer regex (kGpt2Pattern, kQwen2Pattern, ...)
  int64_t min_frequency = 2;                 ///< pairs seen fewer times are never merged
  std::string bos_token, eos_token, pad_token;  ///< roles; each empty or one of special_tokens
  bool progress = false;                     ///< progress bar on stderr
};

struct TrainBpeStats {
  int64_t texts = 0;         ///< documents (or file blocks) read
  int64_t bytes = 0;         ///< bytes of text read
  int64_t words = 0;         ///< pre-tokens counted
  int64_t unique_words = 0;  ///< distinct pre-tokens
  int32_t merges = 0;        ///< merges learned
  double count_seconds = 0, merge_seconds = 0;
};

/// Trains on the texts produced by `next_text` (called until it returns false;
/// each call fills its argument with one document). Throws lol::InputError when
/// vocab_size < k + 256, a special token is empty or repeated, a role names no
/// special token, the pattern does not compile, or a text is not valid UTF-8
/// (naming the document index and byte offset).
std::unique_ptr<BpeTokenizer> train_bpe(const std::function<bool(std::string&)>& next_text,
                                        const TrainBpeOptions& options, TrainBpeStats* stats = nullptr);

/// Trains on UTF-8 files. A file ending in ".jsonl" is read as JSON lines, one
/// document per line from its string field "text" (the shared corpora layout);
/// any other file is plain text, read in blocks of about 1 MiB cut after a
/// newline. Errors name the file and the byte offset (plain text) or line (JSONL).
std::unique_ptr<BpeTokenizer> train_bpe_files(const std::vector<std::string>& files,
                                              const TrainBpeOptions& options, TrainBpeStats* stats = nullptr);

}  // namespace lol::tokenizers
