// Incremental (KV-cached) decoding of the dense Llama/Qwen2 transformer
// (baselines::DenseModel; issue 10: Hugging Face checkpoints), for B independent
// sequences ("rows"). It reuses the LoL decoder's pieces: the fused weight snapshot
// (PackedModel, with every layer as a "prelude" block), per-layer KV caches and
// cached attention (kv_cache.h), the block step of prefill calls (block_step.h) and
// the fused CPU kernels of decoding steps (cpu_decode.h).
//
// Feeding tokens in chunks of any size and then one at a time gives the logits of
// DenseModelImpl::forward on the whole sequence (eval mode) up to rounding.
// Full causal attention, and sliding-window layers (attention "sliding": key j visible
// to the query at position i iff i - W < j <= i, as Mistral's and Qwen2's sliding
// layers); strided attention is refused. Sliding layers keep every key in their cache
// (positions index the slots) and read only the last W.
//
// Tensors returned are created under c10::InferenceMode.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "baselines/dense_model.h"
#include "inference/cpu_decode.h"
#include "inference/kv_cache.h"
#include "inference/packed_model.h"

namespace lol::inference {

/// Snapshot of a dense model's weights in the decoder's layout: cfg.n_prelude =
/// layers, no routed core, no coda; q/k/v and gate/up fused per layer; RoPE tables
/// for `positions` positions. Same device and dtype as the model's embedding; any
/// head_dim (PackedModel::attn_head_dim) and Qwen3's q_norm / k_norm. Throws
/// InputError when the model uses strided attention.
PackedModel pack_dense_model(baselines::DenseModelImpl& m, int64_t positions);

struct DenseSessionOptions {
  int64_t batch_size = 1;  ///< B: rows
  int64_t max_len = 0;     ///< positions per row; 0 = the model's max_seq_len
  bool cpu_kernels = true; ///< decoding steps on CPU float32/float64 use cpu_decode.h's kernels
};

/// New tokens of one row.
struct DenseRowInput {
  int64_t row = 0;
  std::vector<int64_t> tokens;
};

class DenseDecodeSession {
 public:
  /// Snapshots the model (later parameter changes are not seen); rows start empty.
  /// Throws InputError for batch_size < 1, max_len outside [1, 2^24], or a model
  /// pack_dense_model refuses.
  explicit DenseDecodeSession(baselines::DenseModel model, const DenseSessionOptions& opt = {});
  DenseDecodeSession(const DenseDecodeSession&) = delete;
  DenseDecodeSession& operator=(const DenseDecodeSession&) = delete;

  /// Empties `row` (its cached keys are forgotten). Throws InputError for a bad row.
  void reset(int64_t row);

  /// Appends tokens to rows (distinct rows, any number of tokens each; empty inputs
  /// are skipped). Returns logits [inputs, V] at the last new token of each non-empty
  /// input, in input order, or with all_logits [sum of tokens, V]. Throws InputError
  /// for a bad or repeated row, a token id outside [0, V), or a row that would pass
  /// max_len.
  ///
  /// LongRoPE (nn/rope_scaling.h): each row's new tokens use the factor list of that
  /// row's sequence length after the call (transformers' longrope_frequency_update for
  /// a forward of that row alone, so results do not depend on batching), and a row whose
  /// cached length L <= original_max_position_embeddings = O receives tokens that carry
  /// it past O is recomputed from its first token with the long factors (its cache
  /// rebuilt), as transformers' Phi3ForCausalLM.prepare_inputs_for_generation drops the
  /// cache when the sequence first reaches O + 1 tokens: every cached key then has the
  /// rotation a full forward of the sequence gives it.
  torch::Tensor feed(const std::vector<DenseRowInput>& inputs, bool all_logits = false);

  /// One token for every row 0..B-1 (tokens [B]) -> logits [B, V].
  torch::Tensor step(const std::vector<int64_t>& tokens);

  int64_t batch_size() const { return int64_t(len_.size()); }
  int64_t length(int64_t row) const { return len_.at(row); }
  int64_t max_len() const { return max_len_; }
  /// Bytes held by the KV caches.
  int64_t cache_bytes() const;
  const PackedModel& weights() const { return w_; }

 private:
  PackedModel w_;
  int64_t max_len_ = 0;
  std::vector<int64_t> len_;      ///< positions fed per row
  /// Tokens fed per row, kept only with longrope (for the recomputation at the switch).
  std::vector<std::vector<int64_t>> history_;
  std::vector<KVCache> cache_;    ///< one per layer
  std::vector<int64_t> window_;   ///< per layer: W of a sliding layer, 0 for full attention
  std::unique_ptr<CpuDecoder> cpu_;
};

}  // namespace lol::inference
