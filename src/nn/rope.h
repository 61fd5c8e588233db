// Rotary position embedding (Su et al. 2024), rotate-half convention as in Hugging
// Face Llama/Qwen2: inv_freq_j = theta^(-2j/head_dim) (or its scaled form, nn/rope_scaling.h);
// for position p, x' = a (x * cos(p f) + rotate_half(x) * sin(p f)),
// rotate_half([x1, x2]) = [-x2, x1], a = the scaling's attention factor (1 unless yarn).
#pragma once
#include <utility>

#include <torch/types.h>

#include "nn/rope_scaling.h"

namespace lol::nn {

/// The inverse frequencies [head_dim / 2] in float32 and the cos/sin multiplier, computed
/// with transformers' float32 operations for `scaling` (modeling_rope_utils.py:
/// default, linear, llama3, yarn; dynamic is default within its limit).
struct RopeFrequencies {
  torch::Tensor inv_freq;  ///< [head_dim / 2] float32, radians per position
  double attention_factor = 1.0;
};
RopeFrequencies rope_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling = {});

/// cos and sin of positions 0..positions-1 times the frequencies, each
/// [positions, head_dim / 2] float32, multiplied by the attention factor (as
/// transformers' rotary embedding: float32, then cast to the model dtype by the caller).
std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t head_dim, double theta, const RopeScaling& scaling,
                                                    int64_t positions);

class RoPE {
 public:
  RoPE() = default;
  RoPE(int64_t head_dim, double theta, RopeScaling scaling = {});
  /// x [N, heads, head_dim], pos [N] int64 (any device) -> rotated x.
  /// Tables grow on demand; built in float32 as HF does. Throws InputError for a
  /// position at or beyond the scaling's position_limit() (dynamic NTK).
  /// pos_bound > 0: the caller guarantees every position < pos_bound, which sizes the
  /// tables without reading max(pos) back from a GPU (one host synchronisation per call);
  /// the fused CPU kernel, which indexes the tables unchecked, always reads them. A broken
  /// promise on the composed path fails in index_select (c10::Error on the CPU, a fatal
  /// device-side assert on a GPU): pass only bounds that hold by construction.
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& pos, int64_t pos_bound = 0);
  int64_t head_dim() const { return head_dim_; }

 private:
  void ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype);
  int64_t head_dim_ = 0;
  double theta_ = 10000.0;
  RopeScaling scaling_;
  torch::Tensor cos_, sin_;  // [max_pos, head_dim/2]
};

/// Throws InputError when `positions` positions exceed `scaling`'s position_limit().
void check_rope_positions(const RopeScaling& scaling, int64_t positions);

}  // namespace lol::nn
