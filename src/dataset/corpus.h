// Text corpus preparation (issue 7, `lol corpus`): documents streamed out of text /
// JSONL files (documents.h) are tokenized and written as token shards
// (shards.h: uint16 ids when the vocabulary fits, else uint32), one sequence per
// document, with an optional per-document label id, split deterministically into
// train and validation. The result is what `lol train` reads with
// data.packing = "pack" (documents concatenated into rows, attention blocked
// between documents: paper Appendix A).
//
// Output directory:
//   dataset.json      task "text", vocab_size, "tokenizer": "tokenizer.json",
//                     splits, stats (documents/tokens/bytes per split and label),
//                     meta (inputs, options, and "labels": the id -> name table)
//   tokenizer.json    the tokenizer used (+ tokenizer_config.json), so that models
//                     trained on the corpus can decode
//   train-NNNNN.safetensors, valid-NNNNN.safetensors
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/documents.h"

namespace lol::data {

struct CorpusOptions {
  std::vector<std::string> files;   ///< inputs (*.jsonl read as JSON lines, anything else as text)
  /// Held-out inputs read after `files`: every document goes to the validation split
  /// (no hash split, no max_bytes_per_label cap). Empty = split `files` by hash only.
  std::vector<std::string> valid_files;
  DocumentSourceOptions source;     ///< text/label fields, plain-text document split
  std::string tokenizer = "byte";   ///< "byte" or a tokenizer.json file / directory (text_tokenizer.h)
  double valid_fraction = 0.01;     ///< expected share of documents in the validation split, in [0, 1)
  uint64_t seed = 0;                ///< split seed
  bool add_bos = false;             ///< put the tokenizer's BOS token before every document
  bool add_eos = false;             ///< put the tokenizer's EOS token after every document
  int64_t shard_tokens = 16 << 20;  ///< tokens per shard file (bounds memory use)
  bool progress = true;             ///< progress bar on stderr
};

/// True when document `index` belongs to the validation split: a splitmix64 hash of
/// (index, seed), read as a number in [0, 1), is below `fraction`. Independent of
/// everything else about the document, so the split of a document never changes
/// when other documents are added or removed.
bool is_valid_document(int64_t index, uint64_t seed, double fraction);

/// Tokenizes and writes the corpus into `out_dir` (created; an existing dataset.json
/// there is an InputError). Documents that encode to no token are skipped. Label
/// ids are given in order of first appearance. Returns the "stats" object written
/// to dataset.json. Throws lol::InputError for bad options, unreadable or malformed
/// input (naming file:line) and text that is not valid UTF-8 (naming the document
/// and the byte offset), or a BOS/EOS request the tokenizer has no token for.
nlohmann::json build_corpus(const CorpusOptions& options, const std::string& out_dir);

}  // namespace lol::data
