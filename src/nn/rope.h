// Rotary position embedding (Su et al. 2024), rotate-half convention as in Hugging
// Face Llama/Qwen2: inv_freq_j = theta^(-2j/r) (or its scaled form, nn/rope_scaling.h);
// for position p, x' = a (x * cos(p f) + rotate_half(x) * sin(p f)),
// rotate_half([x1, x2]) = [-x2, x1], a = the scaling's attention factor (1 unless yarn
// or longrope). r, the rotary dimension, is head_dim, or less with Phi-3's
// partial_rotary_factor: then only the first r dimensions of a head rotate (pairs i and
// i + r/2) and the others pass unchanged (transformers' Phi3 apply_rotary_pos_emb).
#pragma once
#include <utility>

#include <torch/types.h>

#include "nn/rope_scaling.h"

namespace lol::nn {

/// The inverse frequencies [rotary_dim / 2] in float32 and the cos/sin multiplier,
/// computed with transformers' float32 operations for `scaling` (modeling_rope_utils.py:
/// default, linear, llama3, yarn, longrope; dynamic is default within its limit).
struct RopeFrequencies {
  torch::Tensor inv_freq;  ///< [rotary_dim / 2] float32, radians per position
  double attention_factor = 1.0;
};
/// `seq_len`: the length of the forward call's sequence (its largest position + 1), which
/// picks longrope's factor list (RopeScaling::uses_long_factors); unused by other types.
/// Throws InputError when longrope's lists do not hold rotary_dim / 2 values.
RopeFrequencies rope_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling = {},
                                 int64_t seq_len = 0);

/// cos and sin of positions 0..positions-1 times the frequencies, each
/// [positions, rotary_dim / 2] float32, multiplied by the attention factor (as
/// transformers' rotary embedding: float32, then cast to the model dtype by the caller).
std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t rotary_dim, double theta, const RopeScaling& scaling,
                                                    int64_t positions, int64_t seq_len = 0);

/// The rotation table [positions, 2, rotary_dim] in `dtype` on `device`, built from
/// rope_tables (float32, then cast, so values equal HF's bit for bit): row p holds
/// C = [cos, cos] and S = [-sin, sin] of position p, so that
/// rotate(x, p) = x * C + swap_halves(x) * S, which is x1 c - x2 s, x2 c + x1 s exactly
/// (negation is exact): one gather per call and four element-wise operations on a GPU,
/// where each operation is a kernel launch. The fused CPU kernels read the
/// halves they need: cos at p * 2 * r, sin at p * 2 * r + 3 * r / 2 (r = rotary_dim).
/// `seq_len`: see rope_frequencies.
torch::Tensor rope_rotation_table(int64_t rotary_dim, double theta, const RopeScaling& scaling, int64_t positions,
                                  torch::ScalarType dtype, const torch::Device& device, int64_t seq_len = 0);

/// The factors C and S of rotate_with_factors, views [N, 1, 2, rotary_dim / 2] of table
/// rows [N, 2, rotary_dim] gathered from rope_rotation_table (one per token).
std::pair<torch::Tensor, torch::Tensor> rotation_factors(const torch::Tensor& rows);

/// rotate(x, positions) = x * C + swap_halves(x) * S with the factors of the tokens'
/// positions (rotation_factors): x [N, heads, head_dim] (the last dimension contiguous),
/// -> [N, heads, head_dim]; with factors of a rotary dimension r < head_dim only
/// x[..., :r] rotates and x[..., r:] is copied. inverse = true rotates back (the
/// transpose, the backward of a rotation): x * C + swap_halves(x * S). Composed
/// operations (a flip, two products and a sum: four kernels on a GPU), any device and
/// dtype; HF's x cos + rotate_half(x) sin bit for bit.
torch::Tensor rotate_with_factors(const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& s,
                                  bool inverse = false);

class RoPE {
 public:
  RoPE() = default;
  /// rotary_dim: the rotated leading dimensions of a head (0 = head_dim; even, <= head_dim).
  /// Throws InputError for an odd or too large rotary_dim, or longrope factor lists
  /// that do not hold rotary_dim / 2 values.
  RoPE(int64_t head_dim, double theta, RopeScaling scaling = {}, int64_t rotary_dim = 0);
  /// x [N, heads, head_dim], pos [N] int64 (any device) -> rotated x.
  /// Tables grow on demand; built in float32 as HF does. Throws InputError for a
  /// position at or beyond the scaling's position_limit() (dynamic NTK).
  /// pos_bound > 0: the caller guarantees every position < pos_bound, which sizes the
  /// tables without reading max(pos) back from a GPU (one host synchronisation per call);
  /// the fused CPU kernel, which indexes the tables unchecked, and longrope, whose
  /// factors depend on the call's largest position (transformers' seq_len), always read
  /// them. A broken promise on the composed path fails in index_select (c10::Error on
  /// the CPU, a fatal device-side assert on a GPU): pass only bounds that hold by
  /// construction.
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& pos, int64_t pos_bound = 0);
  int64_t head_dim() const { return head_dim_; }
  int64_t rotary_dim() const { return rotary_dim_; }

 private:
  torch::Tensor& ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype);
  int64_t head_dim_ = 0, rotary_dim_ = 0;
  double theta_ = 10000.0;
  RopeScaling scaling_;
  torch::Tensor table_;       // [max_pos, 2, rotary_dim]: rope_rotation_table
  torch::Tensor table_long_;  // the same with longrope's long factors (sequences beyond the original length)
};

/// Throws InputError when `positions` positions exceed `scaling`'s position_limit().
void check_rope_positions(const RopeScaling& scaling, int64_t positions);

}  // namespace lol::nn
