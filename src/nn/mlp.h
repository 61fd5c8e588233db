// SwiGLU feed-forward (Shazeer 2020), HF naming: down_proj(silu(gate_proj(x)) * up_proj(x)).
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "nn/weight_stacks.h"

namespace lol::nn {

class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(int64_t d_model, int64_t hidden);
  /// x [..., d_model] -> [..., d_model]
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(MLP);

/// Grouped SwiGLU for one routed depth's experts: x [N, d_model] cut into consecutive row
/// blocks of sizes[g] rows, block g through experts[g]; one autograd node per projection
/// (nn::grouped_linear; `stacks` as there). Returns [N, d_model]. Throws lol::InputError
/// on mismatched sizes.
torch::Tensor grouped_mlp(const std::vector<MLPImpl*>& experts, const std::vector<int64_t>& sizes,
                          const torch::Tensor& x, WeightStacks* stacks = nullptr);

}  // namespace lol::nn
