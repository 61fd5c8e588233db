// SwiGLU feed-forward (Shazeer 2020), HF naming: down_proj(silu(gate_proj(x)) * up_proj(x)).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace lol::nn {

class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(int64_t d_model, int64_t hidden);
  /// x [..., d_model] -> [..., d_model]
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(MLP);

}  // namespace lol::nn
