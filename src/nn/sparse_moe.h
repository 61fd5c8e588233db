// Top-k token-routed SwiGLU experts with loss-free load balancing: the FFN of the MoE
// baseline's blocks and of LoL's MoE prelude/coda (LoL paper 4.3.2, the 3:2 comparison).
//
// Routing (LoL's rule, paper Appendix A, applied per token): p = softmax(gate(x)
// [+ noise in training]); the top_k experts of p + b are selected (b: balancing bias,
// selection only; ties -> lowest index); the output is sum_e p_e E_e(x) over the selected
// experts, so gradients reach the gate through p. Loss-free balancing (Wang et al. 2024):
// update_balance applies b_e += u sign(mean load - load_e) with the tokens routed to each
// expert since the last update. With normalize_top_k the selected weights are divided by
// their sum (Mixtral's and Qwen3-MoE's rule: softmax over the selected experts' logits).
// The softmax runs in float32 at least and the weights are cast to x's dtype, as
// transformers' MixtralSparseMoeBlock computes them. With a shared expert (Qwen2-MoE) every
// token also gets sigmoid(shared_expert_gate x) shared_expert(x).
//
// Tensor names (Qwen2-MoE style, under the block's "mlp"): gate.weight [E, d_model],
// experts.{e}.{gate,up,down}_proj.weight, balance_bias [E] (buffer); with a shared expert
// shared_expert.{gate,up,down}_proj.weight and shared_expert_gate.weight [1, d_model].
#pragma once
#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "nn/mlp.h"

namespace lol::nn {

/// Shape of a block's MoE FFN; n_experts = 0 means a dense SwiGLU FFN.
struct MoEShape {
  int64_t n_experts = 0;          ///< E experts (0 = dense FFN)
  int64_t top_k = 1;              ///< k active experts per token, 1 <= k <= E
  double router_noise_std = 0.0;  ///< Gaussian noise on the gate logits in training
  /// The selected experts' weights divided by their sum (Hugging Face's norm_topk_prob:
  /// Mixtral always, Qwen3-MoE by default); false: the softmax probabilities as they are
  /// (LoL's rule, OLMoE).
  bool normalize_top_k = false;
  /// > 0: a shared expert of that many hidden units that every token runs, weighted by
  /// sigmoid(shared_expert_gate x) (Qwen2-MoE's shared_expert); 0: none.
  int64_t shared_expert_hidden = 0;
};

class SparseMoEImpl : public torch::nn::Module {
 public:
  /// E = n_experts SwiGLU experts of `expert_hidden` hidden units each.
  /// `normalize`: MoEShape::normalize_top_k; `shared_hidden`: MoEShape::shared_expert_hidden.
  SparseMoEImpl(int64_t d_model, int64_t expert_hidden, int64_t n_experts, int64_t top_k, double noise_std,
                bool normalize = false, int64_t shared_hidden = 0);
  /// x [n, d_model] (tokens to route) -> [n, d_model]. In training mode adds router noise
  /// and counts the selected experts into pending_load().
  torch::Tensor forward(const torch::Tensor& x);
  /// Applies b_e += rate * sign(mean - load_e) with the pending load, clears it and
  /// returns the load used ([E] int64). No-op when nothing was counted or rate = 0.
  torch::Tensor update_balance(double rate);
  /// (token, expert) selections counted in training since the last update ([E] int64, CPU).
  const torch::Tensor& pending_load() const { return pending_load_; }
  /// Replaces the pending load (e.g. with its sum over data-parallel ranks).
  void set_pending_load(const torch::Tensor& load);
  void clear_pending_load() { pending_load_.zero_(); }
  int64_t n_experts() const { return int64_t(experts->size()); }
  int64_t top_k() const { return top_k_; }
  bool normalize_top_k() const { return normalize_; }

  torch::nn::Linear gate{nullptr};
  torch::nn::ModuleList experts{nullptr};  ///< n_experts nn::MLP
  torch::Tensor balance_bias;              ///< [E] buffer
  MLP shared_expert{nullptr};              ///< the shared expert (MoEShape::shared_expert_hidden), or null
  torch::nn::Linear shared_expert_gate{nullptr};  ///< [1, d_model] its sigmoid gate, or null

 private:
  int64_t top_k_;
  double noise_std_;
  bool normalize_;
  torch::Tensor pending_load_;  ///< [E] int64, CPU
};
TORCH_MODULE(SparseMoE);

}  // namespace lol::nn
