// Gated feed-forward (Shazeer 2020), HF naming: down_proj(act(gate_proj(x)) * up_proj(x)):
// SwiGLU (act = SiLU: Llama, Qwen2, LoL paper Appendix A) or GeGLU (act = GELU, exact or
// tanh-approximated: Gemma). Not gated (GPT-2's MLP): down_proj(act(up_proj(x))), with
// biases on both projections.
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "nn/activation.h"
#include "nn/weight_stacks.h"

namespace lol::nn {

/// act(g) * u elementwise, g and u of one shape: SiLU through one fused autograd node on
/// CPU float32/float64, GELU through LibTorch's gelu.
torch::Tensor gated_activation(const torch::Tensor& g, const torch::Tensor& u, Activation act);
/// act(x) elementwise, x [...] -> the same shape (the ungated MLP's activation, GPT-2):
/// SiLU, exact GELU or tanh-approximated GELU (LibTorch's silu / gelu).
torch::Tensor activation(const torch::Tensor& x, Activation act);

class MLPImpl : public torch::nn::Module {
 public:
  /// gated = false: no gate_proj (down_proj(act(up_proj(x)))); bias: up/down (and gate) biases.
  MLPImpl(int64_t d_model, int64_t hidden, Activation act = Activation::SiLU, bool gated = true, bool bias = false);
  /// x [..., d_model] -> [..., d_model]
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};  ///< gate_proj null when not gated
  Activation act = Activation::SiLU;
  bool gated() const { return !gate_proj.is_empty(); }
};
TORCH_MODULE(MLP);

/// Grouped FFN (experts[0]'s activation and gating) for one routed depth's experts: x [N, d_model] cut into consecutive row
/// blocks of sizes[g] rows, block g through experts[g]; one autograd node per projection
/// (nn::grouped_linear; `stacks` as there). Returns [N, d_model]. Throws lol::InputError
/// on mismatched sizes.
torch::Tensor grouped_mlp(const std::vector<MLPImpl*>& experts, const std::vector<int64_t>& sizes,
                          const torch::Tensor& x, WeightStacks* stacks = nullptr);

}  // namespace lol::nn
