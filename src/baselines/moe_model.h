// Mixture-of-experts baseline (paper 4.3.2): embeddings -> n_prelude dense blocks
// (full attention) -> core_depth MoE blocks (attention with MoEConfig::core_attention,
// LoL's strided windows by default; SwiGLU FFN replaced by n_experts experts with
// top-k token routing) -> n_coda dense blocks -> norm -> LM head.
//
// Routing (the same rule as LoL's, paper Appendix A, applied per token): probabilities
// p = softmax(gate(x) [+ noise in training]); the top_k experts of p + b are selected
// (b: per-layer balancing bias, selection only); the output is sum_e p_e E_e(x) over
// the selected experts, so gradients reach the gate through p. Loss-free balancing
// (Wang et al. 2024): after each optimizer step b_e += u sign(mean load - load_e) with
// the tokens routed to each expert since the last update.
//
// Tensor names (Qwen2-MoE style): model.embed_tokens.weight, model.layers.{i}.* (dense
// layers: nn::Block names), MoE layers: model.layers.{i}.{input_layernorm,self_attn,
// post_attention_layernorm}.*, model.layers.{i}.mlp.gate.weight [E, d],
// model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight,
// model.layers.{i}.mlp.balance_bias [E] (buffer), model.norm.weight, lm_head.weight.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "baselines/attention_layout.h"
#include "baselines/moe_config.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"

namespace lol::baselines {

/// Top-k routed SwiGLU experts with loss-free balancing.
class SparseMoEImpl : public torch::nn::Module {
 public:
  SparseMoEImpl(int64_t d_model, int64_t ffn_hidden, int64_t n_experts, int64_t top_k, double noise_std);
  /// x [n, d_model] (tokens to route) -> [n, d_model]. In training mode adds router noise
  /// and counts the selected experts into pending_load().
  torch::Tensor forward(const torch::Tensor& x);
  /// Applies b_e += rate * sign(mean - load_e) with the pending load, clears it and
  /// returns the load used ([E] int64). No-op when nothing was counted or rate = 0.
  torch::Tensor update_balance(double rate);
  const torch::Tensor& pending_load() const { return pending_load_; }
  void clear_pending_load() { pending_load_.zero_(); }

  torch::nn::Linear gate{nullptr};
  torch::nn::ModuleList experts{nullptr};  ///< n_experts nn::MLP
  torch::Tensor balance_bias;              ///< [E] buffer

 private:
  int64_t top_k_;
  double noise_std_;
  torch::Tensor pending_load_;  ///< [E] int64, CPU
};
TORCH_MODULE(SparseMoE);

/// Pre-norm block whose FFN is a SparseMoE.
class MoEBlockImpl : public torch::nn::Module {
 public:
  MoEBlockImpl(const TransformerShape& shape, int64_t expert_ffn, int64_t n_experts, int64_t top_k, double noise_std);
  /// x [N, d] -> x + attn + moe over the rows `valid` ([n] int64; padding rows get no FFN).
  torch::Tensor forward(const torch::Tensor& x, TokenLayout& layout, const LayerAttention& a, nn::RoPE& rope);

  nn::RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  nn::Attention self_attn{nullptr};
  SparseMoE mlp{nullptr};
};
TORCH_MODULE(MoEBlock);

class MoEModelImpl : public torch::nn::Module {
 public:
  explicit MoEModelImpl(const MoEConfig& cfg);
  void reset_parameters(uint64_t seed);
  /// tokens [batch, seq] int64, doc_ids [batch, seq] or undefined (-1 = padding) ->
  /// logits [batch, seq, vocab]. Throws InputError for bad tokens.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids = {});
  /// Balancing update of every MoE layer; returns the loads used, [core_depth][E].
  std::vector<std::vector<int64_t>> update_balance();
  /// Discards the loads counted since the last update.
  void clear_pending_load();
  /// The MoE block at core depth l (0-based).
  MoEBlockImpl& moe_layer(int64_t l);
  const MoEConfig& config() const { return cfg_; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  nn::RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};
  nn::RoPE rope;

 private:
  MoEConfig cfg_;
  std::shared_ptr<torch::nn::Module> body_;
};
TORCH_MODULE(MoEModel);

}  // namespace lol::baselines
