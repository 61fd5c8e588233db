// Rotary position embedding (Su et al. 2024), rotate-half convention as in Hugging
// Face Llama/Qwen2: inv_freq_j = theta^(-2j/head_dim); for position p,
// x' = x * cos(p f) + rotate_half(x) * sin(p f), rotate_half([x1, x2]) = [-x2, x1].
#pragma once
#include <torch/types.h>

namespace lol::nn {

class RoPE {
 public:
  RoPE() = default;
  RoPE(int64_t head_dim, double theta);
  /// x [N, heads, head_dim], pos [N] int64 (any device) -> rotated x.
  /// Tables grow on demand; built in float32 as HF does.
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& pos);
  int64_t head_dim() const { return head_dim_; }

 private:
  void ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype);
  int64_t head_dim_ = 0;
  double theta_ = 10000.0;
  torch::Tensor cos_, sin_;  // [max_pos, head_dim/2]
};

}  // namespace lol::nn
