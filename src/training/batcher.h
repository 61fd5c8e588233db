// Turns a dataset split (dataset/shards.h) into micro-batches in a deterministic,
// resumable order.
//
// Two layouts (data.packing):
//  - "pad": one sequence (task example) per row, rows padded to the batch's longest
//    sequence; padding has doc id -1 and no target. prompt_len and router_only are
//    passed through.
//  - "pack": documents are concatenated into rows of exactly seq_len tokens (a long
//    document continues on the next row); each row numbers its documents 0, 1, ...
//    so the model blocks attention between them (paper Appendix A). prompt_len is the
//    first document's when the row starts at a document's beginning, else 0.
// Targets: position t predicts token t+1 of the same row; it counts when both are
// in the same document and loss_mask[t+1] = 1 (loss_mask marks target tokens), so
// targets never cross a document boundary.
// Order: epoch e visits the sequences in a permutation drawn from (seed, e)
// (identity when shuffle is off); batches run across epoch boundaries so every
// batch is full. The position (epoch, index, offset) is saved for exact resume.
// Data parallel (issue 14): with a Shard {rank, count}, rank r visits only positions
// r, r + count, r + 2 count, ... of each epoch's order, so the ranks' streams are
// disjoint and together are the single-process stream (training drops the last
// n mod count sequences of each epoch so that every rank's epoch has the same length).
// That holds for "pad" rows; with "pack" each rank packs its own sequences, so its rows
// are cut elsewhere than one process's (docs/distributed.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/shards.h"
#include "training/trainable.h"

namespace lol::training {

struct BatchLayout {
  int64_t batch_size = 8;  ///< rows per micro-batch
  int64_t seq_len = 0;     ///< pad: maximum row length (0 = longest sequence); pack: row length
  bool pack = false;
  /// The setting that sets seq_len, as errors name it ("data.seq_len" in a run config;
  /// `lol eval lm` uses "--seq-len").
  std::string seq_len_setting = "data.seq_len";
};

/// Which part of the data stream a data-parallel rank reads (see above).
struct Shard {
  int64_t rank = 0;   ///< 0..count-1
  int64_t count = 1;  ///< number of ranks
};

class Batcher {
 public:
  /// `split` must outlive the Batcher. `wrap` = false stops after one pass (evaluation).
  /// Throws InputError naming `where` when the split is empty, (pad) a sequence is
  /// longer than seq_len, the shard is invalid, or (wrap) the split has fewer
  /// sequences than shard.count.
  Batcher(const data::SplitData& split, const BatchLayout& layout, uint64_t seed, bool shuffle, bool wrap,
          std::string where, Shard shard = {});

  /// The next micro-batch (CPU tensors). With wrap = false, the last batch may have
  /// fewer rows and done() turns true after it.
  TrainBatch next();
  bool done() const { return done_; }

  /// Row length bound: the longest row next() can return.
  int64_t max_row_length() const { return max_len_; }

  /// {"epoch", "index", "offset"}: restore with set_position() for exact resume.
  nlohmann::json position() const;
  void set_position(const nlohmann::json& pos, const std::string& where);
  int64_t epoch() const { return epoch_; }

 private:
  void start_epoch(int64_t e);
  void advance_sequence();
  const data::SplitData& split_;
  BatchLayout layout_;
  uint64_t seed_;
  bool shuffle_, wrap_;
  std::string where_;
  Shard shard_;
  int64_t max_len_ = 0;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, index_ = 0, offset_ = 0;
  bool done_ = false;
};

/// Permutation of 0..n-1 for (seed, epoch): Fisher-Yates driven by splitmix64, so it
/// is identical on every platform and standard library.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

/// The positions of `order` that shard `s` visits: order[s.rank], order[s.rank +
/// s.count], ...; with `equal_length` at most order.size() / s.count of them.
std::vector<int64_t> shard_order(const std::vector<int64_t>& order, const Shard& s, bool equal_length);

/// Builds a batch from rows given as token/doc/mask/router vectors of equal length
/// per row (padded inside). Exposed for tests. `loss_mask[r][t]` marks target tokens.
TrainBatch assemble_batch(const std::vector<std::vector<int32_t>>& tokens, const std::vector<std::vector<int64_t>>& doc,
                          const std::vector<std::vector<uint8_t>>& loss_mask,
                          const std::vector<std::vector<uint8_t>>& router_only, const std::vector<int64_t>& prompt_len);

/// Copies a batch's tensors to `device`.
TrainBatch to_device(const TrainBatch& b, const torch::Device& device);

}  // namespace lol::training
