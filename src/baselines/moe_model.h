// Mixture-of-experts baseline (paper 4.3.2): embeddings -> n_prelude blocks (full
// attention) -> core_depth MoE blocks (attention with MoEConfig::core_attention, LoL's
// strided windows by default; SwiGLU FFN replaced by n_experts experts with top-k token
// routing, nn/sparse_moe.h) -> n_coda blocks -> norm -> LM head. Prelude and coda blocks
// are dense, or MoE blocks too with moe_prelude_coda (the paper's 3:2 comparison).
// Loss-free balancing (Wang et al. 2024): after each optimizer step every MoE layer
// applies b_e += u sign(mean load - load_e) with the tokens routed to each of its experts.
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
#include "nn/block.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"
#include "nn/sparse_moe.h"

namespace lol::baselines {

class MoEModelImpl : public torch::nn::Module {
 public:
  explicit MoEModelImpl(const MoEConfig& cfg);
  void reset_parameters(uint64_t seed);
  /// tokens [batch, seq] int64, doc_ids [batch, seq] or undefined (-1 = padding) ->
  /// logits [batch, seq, vocab]. Throws InputError for bad tokens.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids = {});
  /// Balancing update of every MoE layer; returns the loads used, [n_moe_layers][E].
  std::vector<std::vector<int64_t>> update_balance();
  /// Discards the loads counted since the last update.
  void clear_pending_load();
  /// Loads counted since the last update, [n_moe_layers, E] int64 (CPU), and their
  /// replacement (e.g. by the sum over data-parallel ranks; InputError on a wrong shape).
  torch::Tensor pending_load() const;
  void set_pending_load(const torch::Tensor& load);
  /// The MoE FFN of the l-th MoE layer (0-based, in layer order: the core's first
  /// unless moe_prelude_coda). Throws std::out_of_range.
  nn::SparseMoEImpl& moe_layer(int64_t l) const;
  const MoEConfig& config() const { return cfg_; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  nn::RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};
  nn::RoPE rope;

 private:
  MoEConfig cfg_;
  std::shared_ptr<torch::nn::Module> body_;
  std::vector<int64_t> moe_index_;  ///< layer index of each MoE layer, in order
};
TORCH_MODULE(MoEModel);

}  // namespace lol::baselines
