// Dense decoder-only transformer in the Llama/Qwen2 layout (paper 4.2, Appendix B.2),
// built from the same nn::Block as LoL, with Hugging Face tensor names:
//   model.embed_tokens.weight [V, d]
//   model.layers.{i}.input_layernorm.weight [d]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias when qkv_bias)
//   model.layers.{i}.post_attention_layernorm.weight [d]
//   (sandwich_norm, Gemma 3: also pre_feedforward_layernorm, post_feedforward_layernorm; nn/block.h)
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight
//   model.norm.weight [d]
//   lm_head.weight [V, d] (absent when tie_word_embeddings; lm_head.bias [V] with lm_head_bias, Phi)
// GPT-2's layout (DenseConfig norm / mlp / o_bias / mlp_bias / positions): every norm a
// LayerNorm with a .bias, o_proj and mlp.{up,down}_proj biases, no gate_proj, and
//   model.embed_positions.weight [max_seq_len, d] (learned absolute positions, no RoPE).
// Attention per layer: DenseConfig::layer_attention (full / sliding / strided).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "baselines/attention_layout.h"
#include "baselines/dense_config.h"
#include "nn/block.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"

namespace lol::baselines {

/// Throws InputError unless tokens is [batch, seq] with seq <= max_seq_len and ids in
/// [0, vocab_size); `what` names the model in the message.
void check_tokens(const torch::Tensor& tokens, int64_t vocab_size, int64_t max_seq_len, const std::string& what);

/// sqrt(d_model) when c.scale_embeddings, else 1.
double embedding_scale(const DenseConfig& c);
/// Embedding rows e [..., d_model] times `scale` (embedding_scale) rounded to e's dtype
/// first (Gemma's normalizer); e itself when scale is 1.
torch::Tensor scale_embedding_rows(const torch::Tensor& e, double scale);
/// Embedding rows e [..., d_model] times `multiplier` as a float64 scalar (Granite's
/// embedding_multiplier: not rounded to e's dtype first); e itself when it is 1.
torch::Tensor multiply_embedding_rows(const torch::Tensor& e, double multiplier);
/// Logits l [..., vocab] times `logit_scale` (Cohere; 1: unchanged), divided by
/// `logits_scaling` (Granite; 1: unchanged), then soft-capped at `softcap` (nn::soft_cap;
/// Gemma 2; 0: none).
torch::Tensor final_logits(const torch::Tensor& l, double logit_scale, double logits_scaling, double softcap);

class DenseModelImpl : public torch::nn::Module {
 public:
  /// Validates `cfg` (InputError) and initialises the weights with seed 0.
  explicit DenseModelImpl(const DenseConfig& cfg);
  /// Re-initialises every weight (baselines/init.h) from `seed`.
  void reset_parameters(uint64_t seed);

  /// tokens [batch, seq] int64, doc_ids [batch, seq] int64 or undefined (one document
  /// per row; -1 = padding) -> logits [batch, seq, vocab]. A packed row computes for each
  /// document exactly what the document computes alone (positions restart at 0).
  /// Throws InputError for token ids outside [0, vocab_size) or seq > max_seq_len.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids = {});
  /// Final hidden states after model.norm, before lm_head: [batch, seq, d_model].
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& doc_ids = {});
  /// Logits of hidden states h [..., d_model] -> [..., vocab] (lm_head or tied embedding,
  /// then final_logits: times logit_scale, divided by logits_scaling, soft-capped at
  /// final_logit_softcap).
  torch::Tensor logits(const torch::Tensor& h);
  /// Input embeddings of tokens [...] int64 -> [..., d_model]: embed_tokens, times
  /// sqrt(d_model) with scale_embeddings (Gemma), times embedding_multiplier (Granite).
  /// Positions are not added (see embed_at).
  torch::Tensor embed(const torch::Tensor& tokens);
  /// embed(tokens) plus, with learned positions (GPT-2), embed_positions(pos); pos [...]
  /// int64 of tokens' shape, each < max_seq_len.
  torch::Tensor embed_at(const torch::Tensor& tokens, const torch::Tensor& pos);
  /// The RoPE of layer `layer`: rope_local for a sliding layer when rope_local_theta > 0
  /// (Gemma 3), else rope.
  nn::RoPE& layer_rope(int64_t layer);
  const DenseConfig& config() const { return cfg_; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};  ///< n_layers nn::Block
  nn::RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};     ///< nullptr when tie_word_embeddings
  torch::nn::Embedding embed_positions{nullptr};  ///< [max_seq_len, d] with learned positions, else nullptr
  nn::RoPE rope;
  nn::RoPE rope_local;  ///< sliding layers' RoPE when rope_local_theta > 0 (else unused)

 private:
  DenseConfig cfg_;
  std::shared_ptr<torch::nn::Module> body_;  ///< registered as "model": holds embed_tokens, layers, norm
};
TORCH_MODULE(DenseModel);

}  // namespace lol::baselines
