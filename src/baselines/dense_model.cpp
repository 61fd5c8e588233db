#include "baselines/dense_model.h"

#include <cmath>

#include "baselines/init.h"
#include "nn/mask_fill.h"
#include "util/error.h"

namespace lol::baselines {

void check_tokens(const torch::Tensor& tokens, int64_t vocab_size, int64_t max_seq_len, const std::string& what) {
  if (tokens.dim() != 2) throw InputError(what + ": tokens must be [batch, seq], got " + std::to_string(tokens.dim()) + " dims");
  if (tokens.size(1) > max_seq_len)
    throw InputError(what + ": sequence length " + std::to_string(tokens.size(1)) + " exceeds max_seq_len = " +
                     std::to_string(max_seq_len));
  if (tokens.numel() > 0) {
    const int64_t mn = tokens.min().item<int64_t>(), mx = tokens.max().item<int64_t>();
    if (mn < 0 || mx >= vocab_size)
      throw InputError(what + ": token id " + std::to_string(mn < 0 ? mn : mx) + " outside [0, vocab_size = " +
                       std::to_string(vocab_size) + ")");
  }
}

DenseModelImpl::DenseModelImpl(const DenseConfig& c)
    : rope(c.effective_head_dim(), c.rope_theta, c.rope_scaling, c.rotary_dim()), cfg_(c) {
  c.validate("dense model config");
  if (c.rope_local_theta > 0) rope_local = nn::RoPE(c.effective_head_dim(), c.rope_local_theta, {}, c.rotary_dim());
  body_ = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens = body_->register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  layers = body_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layers; ++i) layers->push_back(nn::Block(c.layer_block_shape(i)));
  if (c.learned_positions())
    embed_positions = body_->register_module("embed_positions", torch::nn::Embedding(c.max_seq_len, c.d_model));
  norm = body_->register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps, c.norm == "layernorm"));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(c.lm_head_bias)));
  reset_parameters(0);
}

void DenseModelImpl::reset_parameters(uint64_t seed) { init_transformer_weights(*this, cfg_.n_layers, seed); }

torch::Tensor DenseModelImpl::hidden(const torch::Tensor& tokens, const torch::Tensor& doc_ids) {
  check_tokens(tokens, cfg_.vocab_size, cfg_.max_seq_len, "dense model");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const auto dev = embed_tokens->weight.device();
  TokenLayout L(B, T, doc_ids, dev);
  auto s = embed_at(tokens.to(dev).reshape({B * T}), L.pos());  // [B T, d]
  for (int64_t i = 0; i < cfg_.n_layers; ++i)
    s = block_forward(*layers[i]->as<nn::Block>(), s, L, cfg_.layer_attention(i), layer_rope(i));
  return norm(s.view({B, T, cfg_.d_model}));
}

double embedding_scale(const DenseConfig& c) { return c.scale_embeddings ? std::sqrt(double(c.d_model)) : 1.0; }

torch::Tensor scale_embedding_rows(const torch::Tensor& e, double scale) {
  if (scale == 1.0) return e;
  // The factor rounded to the compute dtype first, as transformers' Gemma does.
  return e * torch::scalar_tensor(scale, e.options());
}

torch::Tensor multiply_embedding_rows(const torch::Tensor& e, double multiplier) {
  // A float64 scalar, as transformers' Granite multiplies by a Python float.
  return multiplier == 1.0 ? e : e * multiplier;
}

torch::Tensor final_logits(const torch::Tensor& l, double logit_scale, double logits_scaling, double softcap) {
  auto out = logit_scale == 1.0 ? l : l * logit_scale;
  return nn::soft_cap(logits_scaling == 1.0 ? out : out / logits_scaling, softcap);
}

torch::Tensor DenseModelImpl::embed(const torch::Tensor& tokens) {
  return multiply_embedding_rows(scale_embedding_rows(embed_tokens(tokens), embedding_scale(cfg_)),
                                 cfg_.embedding_multiplier);
}

torch::Tensor DenseModelImpl::embed_at(const torch::Tensor& tokens, const torch::Tensor& pos) {
  auto e = embed(tokens);
  return embed_positions ? e + embed_positions(pos.to(e.device())) : e;
}

nn::RoPE& DenseModelImpl::layer_rope(int64_t layer) { return cfg_.local_rope(layer) ? rope_local : rope; }

torch::Tensor DenseModelImpl::logits(const torch::Tensor& h) {
  auto l = cfg_.tie_word_embeddings ? torch::matmul(h, embed_tokens->weight.t()) : lm_head(h);
  return final_logits(l, cfg_.logit_scale, cfg_.logits_scaling, cfg_.final_logit_softcap);
}

torch::Tensor DenseModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids) {
  return logits(hidden(tokens, doc_ids));
}

}  // namespace lol::baselines
