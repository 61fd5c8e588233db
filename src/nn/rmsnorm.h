// RMSNorm (Zhang & Sennrich 2019) as in Hugging Face Llama/Qwen2:
// y = weight * x / sqrt(mean(x^2, last dim) + eps), computed in float32 (float64
// inputs in float64).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace lol::nn {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  /// x [..., dim] -> [..., dim]
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(RMSNorm);

}  // namespace lol::nn
