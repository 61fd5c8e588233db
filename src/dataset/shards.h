// Token datasets on disk (written by `lol data` and `lol corpus`, read by the trainer).
//
// A dataset is a directory:
//   dataset.json   {"format": "lol-dataset", "version": 1, "task": "maze|sudoku|text",
//                   "vocab_size": V, "vocab": {word vocabulary} | "tokenizer": "tokenizer.json",
//                   "splits": {"train": [shard files], "valid": [...]}, "stats": {...}, "meta": {...}}
//   <split>-NNNNN.safetensors  shards, each holding whole sequences (examples or documents):
//     tokens       U16 | U32 [n_tokens]   token ids, sequences concatenated
//     offsets      I64 [n_seq + 1]        sequence s is tokens[offsets[s] .. offsets[s+1])
//     loss_mask    U8  [n_tokens]         optional (absent = 1 everywhere): positions whose
//                                         token is a training target
//     router_only  U8  [n_tokens]         optional: tokens visible only to the router (LoL 4.1.3)
//     prompt_len   I32 [n_seq]            optional: prompt window length (LoL Appendix A)
//     label        I64 [n_seq]            optional: per-sequence label (strategy 1..5, language id, ...)
// Files are plain safetensors, so Python users can open them with safetensors/numpy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::data {

/// One sequence (views into a loaded shard).
struct SequenceView {
  const int32_t* tokens = nullptr;
  const uint8_t* loss_mask = nullptr;    ///< nullptr = all 1
  const uint8_t* router_only = nullptr;  ///< nullptr = all 0
  int64_t length = 0;
  int32_t prompt_len = 0;
  int64_t label = -1;
};

/// All sequences of one split, in memory.
class SplitData {
 public:
  int64_t size() const { return int64_t(prompt_len_.size()); }
  SequenceView get(int64_t i) const;
  int64_t total_tokens() const { return int64_t(tokens_.size()); }
  bool has_loss_mask() const { return !loss_mask_.empty(); }
  bool has_router_only() const { return !router_only_.empty(); }
  bool has_labels() const { return !label_.empty(); }
  /// Appends a shard file (validated: offsets monotone, arrays of matching lengths,
  /// token ids < vocab_size). Throws InputError naming the file and array.
  void append_shard(const std::string& path, int64_t vocab_size);

 private:
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> loss_mask_, router_only_;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> prompt_len_;
  std::vector<int64_t> label_;
};

/// dataset.json plus access to splits.
class Dataset {
 public:
  /// Reads `dir`/dataset.json (strict). Throws InputError naming the file and field.
  static Dataset open(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const nlohmann::json& info() const { return info_; }
  int64_t vocab_size() const { return vocab_size_; }
  std::string task() const;
  bool has_split(const std::string& split) const;
  /// Loads every shard of a split. Throws InputError if the split is absent.
  SplitData load(const std::string& split) const;

 private:
  std::string dir_;
  nlohmann::json info_;
  int64_t vocab_size_ = 0;
};

/// Streams sequences into shards of about `shard_tokens` tokens each.
class ShardWriter {
 public:
  /// Writes `dir`/<split>-NNNNN.safetensors. Token dtype: U16 if vocab_size <= 65536, else U32.
  ShardWriter(std::string dir, std::string split, int64_t vocab_size, int64_t shard_tokens = 64 << 20);
  /// Appends one sequence. Empty optional arrays mean "default" for that sequence; a
  /// shard stores loss_mask / router_only / label only if some sequence gave them.
  void add(const std::vector<int32_t>& tokens, const std::vector<uint8_t>& loss_mask = {},
           const std::vector<uint8_t>& router_only = {}, int32_t prompt_len = 0, int64_t label = -1);
  /// Flushes the last shard; returns the shard file names (relative to dir).
  std::vector<std::string> finish();
  int64_t sequences() const { return n_seq_total_; }
  int64_t tokens() const { return n_tok_total_; }

 private:
  void flush();
  std::string dir_, split_;
  int64_t vocab_size_, shard_tokens_;
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> loss_mask_, router_only_;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> prompt_len_;
  std::vector<int64_t> label_;
  bool any_loss_ = false, any_router_ = false, any_label_ = false;
  std::vector<std::string> files_;
  int64_t n_seq_total_ = 0, n_tok_total_ = 0;
};

/// Throws InputError naming `flag` and `dir` when `dir` already holds a dataset
/// (dataset.json): dataset builders never overwrite one.
void require_no_dataset(const std::string& dir, const std::string& flag);

/// True for a shard file name as ShardWriter spells it: `<split>-NNNNN.safetensors`,
/// split in [a-z_]+, five decimal digits.
bool is_shard_name(const std::string& name);

/// Removes the regular files of `dir` named like shards (is_shard_name) that `splits`
/// ({"train": [names], ...}, dataset.json's "splits") does not list: those a run stopped
/// before writing its dataset.json left behind. Returns how many were removed. Call it
/// while holding the directory's io::DirLock.
int remove_unlisted_shards(const std::string& dir, const nlohmann::json& splits);

/// Writes dataset.json atomically. With `remove_stale` (the directory's lock showed an
/// earlier lol writer: io::DirLock::found_earlier_writer) the shards it does not list
/// are removed first (remove_unlisted_shards; a note on stderr names how many); files
/// of a directory no lol process wrote to are never removed.
void write_dataset_info(const std::string& dir, const nlohmann::json& info, bool remove_stale = false);

}  // namespace lol::data
