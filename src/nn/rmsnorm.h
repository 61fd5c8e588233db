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
  torch::Tensor forward(const torch::Tensor& x) { return modulated(x, {}, {}); }
  /// FiLM-modulated norm (LoL paper Appendix A): scale * RMSNorm(x) + shift, with scale and
  /// shift [dim] (either may be undefined = 1 / 0); one fused node on CPU. x [..., dim] ->
  /// [..., dim]. Throws c10::Error when scale or shift is not broadcastable to [dim].
  /// (Not an overload of forward: torch::nn::ModuleHolder needs a single forward.)
  torch::Tensor modulated(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& shift);
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(RMSNorm);

}  // namespace lol::nn
