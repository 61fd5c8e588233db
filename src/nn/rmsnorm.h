// RMSNorm (Zhang & Sennrich 2019) as in Hugging Face Llama/Qwen2:
// y = weight * x / sqrt(mean(x^2, last dim) + eps), computed in float32 (float64
// inputs in float64). With layer_norm (GPT-2's blocks): LayerNorm (Ba et al. 2016),
// y = weight * (x - mean) / sqrt(var + eps) + bias, LibTorch's layer_norm.
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "nn/weight_stacks.h"

namespace lol::nn {

class RMSNormImpl : public torch::nn::Module {
 public:
  /// layer_norm: a LayerNorm with a bias [dim] (registered as "bias") instead.
  RMSNormImpl(int64_t dim, double eps, bool layer_norm = false);
  /// x [..., dim] -> [..., dim]
  torch::Tensor forward(const torch::Tensor& x);
  /// FiLM-modulated norm (LoL paper Appendix A): scale * RMSNorm(x) + shift, with scale and
  /// shift [dim] (either may be undefined = 1 / 0); one fused node on CPU. x [..., dim] ->
  /// [..., dim]. Throws c10::Error when scale or shift is not broadcastable to [dim].
  /// (Not an overload of forward: torch::nn::ModuleHolder needs a single forward.)
  /// Throws InputError for a LayerNorm (no FiLM in GPT-2's blocks).
  torch::Tensor modulated(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& shift);
  torch::Tensor weight;
  torch::Tensor bias;  ///< [dim] with layer_norm, else undefined
  double eps;
  bool is_layer_norm() const { return bias.defined(); }
};
TORCH_MODULE(RMSNorm);

/// Grouped RMSNorm for one routed depth's experts: x [N, dim] (or [..., dim], N rows in
/// all) is cut into consecutive row blocks of sizes[g] rows and block g is normalized
/// with weights[g] [dim]; scale and shift [dim] (FiLM, optional) apply to every row.
/// One autograd node on CPU (float32/64). Equal to RMSNorm::modulated on each block.
/// Off the CPU kernels equal groups broadcast the stacked weights, stacked through
/// `stacks` when it is not null (nn::WeightStacks).
/// Throws lol::InputError when the sizes do not sum to the rows or their count differs
/// from the weights'; c10::Error when a weight, scale or shift is not [dim].
torch::Tensor rms_norm(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                       const std::vector<int64_t>& sizes, const torch::Tensor& scale, const torch::Tensor& shift,
                       double eps, WeightStacks* stacks = nullptr);

/// The composed-operation formula of rms_norm (any device): w * x / sqrt(mean(x^2) + eps)
/// over the last dimension of x [..., dim], with w broadcastable to x (e.g. [G, 1, dim]
/// per group of rows of x [G, m, dim]); float32 arithmetic for half-precision x, float64
/// for float64 (paper Appendix A; Llama/Qwen2's RMSNorm). No FiLM shift: add it after.
torch::Tensor rms_norm_composed(const torch::Tensor& x, const torch::Tensor& w, double eps);

}  // namespace lol::nn
