// Key/value caches and cached causal attention for incremental decoding (issue 6).
//
// A KVCache holds, for B sequences, the keys and values of one attention layer:
// k, v [B, Hkv, capacity, hd]. Only key-visible tokens are stored (router-only
// tokens are never attention keys, paper 4.1.3), in position order from slot 0.
// Full-attention layers (prelude, coda) keep every visible token of the sequence;
// a routed depth keeps only its current window (slots restart at 0 when a new window
// starts), so its capacity is bounded by the window size (or the prompt window).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace lol::inference {

class KVCache {
 public:
  KVCache() = default;
  /// Zero-filled cache for `batch` rows of `capacity` slots.
  KVCache(int64_t batch, int64_t kv_heads, int64_t head_dim, int64_t capacity, const torch::TensorOptions& opt);
  /// Ensures capacity >= slots: grows to max(slots, 2 capacity), keeping contents.
  void reserve(int64_t slots);
  int64_t capacity() const { return k.defined() ? k.size(2) : 0; }
  /// Bytes held by k and v.
  int64_t bytes() const;

  torch::Tensor k, v;  ///< [B, Hkv, capacity, hd]
};

/// Tokens of one attention segment: `count` new tokens of one sequence (positions
/// in order) that attend causally to each other and to the `base` keys already in
/// cache row `row`. Tokens are entries first .. first+count-1 of the step's token list.
struct AttnSegment {
  int64_t row = 0, base = 0, first = 0, count = 0;
};

/// Index tensors of one cached attention call, built once per step and shared by
/// every layer with the same token layout.
struct AttnPlan {
  int64_t n = 0, S = 0, Lq = 0, Lk = 0;
  /// Keys read: cache slots k_begin .. Lk - 1 (k_begin > 0 only with a sliding window
  /// that leaves the first slots to every query); the masks' key axis has Lk - k_begin.
  int64_t k_begin = 0;
  int64_t row_begin = -1;      ///< >= 0: segment s uses cache row row_begin + s (a view, no copy)
  torch::Tensor rows;          ///< [S] cache rows otherwise
  bool one_per_segment = false;///< n == S, token s is segment s's only token
  torch::Tensor q_slot;        ///< [n] padded slot s * Lq + i of each token otherwise
  int64_t n_write = 0;         ///< visible tokens (written to the cache)
  bool write_all = false;      ///< every token is written, in token order
  torch::Tensor write_tok;     ///< [n_write] token index (when !write_all)
  torch::Tensor write_row, write_slot;  ///< [n_write] destination row and slot (when n_write > 1)
  int64_t single_tok = -1, single_row = -1, single_slot = -1;  ///< the write when n_write == 1
  torch::Tensor blocked;       ///< [S, 1, 1, Lq, Lk - k_begin] bool: key not allowed (undefined: all allowed)
  torch::Tensor keep;          ///< [S, 1, 1, Lq, Lk - k_begin] 0/1 in the model dtype, only when a query has no key
  int64_t needed_slots = 0;    ///< cache capacity the writes need

  /// `visible` [n] (nullptr: all tokens visible). A query at segment slot i sees the
  /// segment's base keys and its visible tokens at slots <= i (causal, paper 3.2).
  /// `window` W > 0: of those, only the last W (the key slots j with lim - W <= j < lim,
  /// lim = the query's key count): sliding-window attention, key j visible to the query
  /// at position i iff i - W < j <= i (Mistral / Qwen2 sliding layers, the dense
  /// baseline's "sliding"; baselines::TokenLayout::sliding_mask).
  static AttnPlan build(const std::vector<AttnSegment>& segs, int64_t n, const uint8_t* visible,
                        const torch::TensorOptions& opt, int64_t window = 0);
};

/// Writes the visible tokens' k/v into `cache`, then attends: q [n, H, hd],
/// k/v [n, Hkv, hd] (RoPE applied) -> [n, H hd]. Grouped-query heads as
/// nn::masked_attention (kv head j serves query heads j G .. j G + G - 1); a query with
/// no visible key outputs 0. The cache must have plan.needed_slots slots. softcap > 0:
/// scores soft-capped before the mask (nn::AttentionShape::softcap).
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache& cache,
                               const AttnPlan& plan, double softcap = 0);

}  // namespace lol::inference
