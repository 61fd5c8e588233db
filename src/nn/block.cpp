#include "nn/block.h"

namespace lol::nn {

FiLMImpl::FiLMImpl(int64_t d) {
  attn_gamma = register_parameter("attn_gamma", torch::ones({d}));
  attn_beta = register_parameter("attn_beta", torch::zeros({d}));
  ffn_gamma = register_parameter("ffn_gamma", torch::ones({d}));
  ffn_beta = register_parameter("ffn_beta", torch::zeros({d}));
}

BlockImpl::BlockImpl(const BlockShape& s) {
  self_attn = register_module("self_attn", Attention(s.attn));
  mlp = register_module("mlp", MLP(s.attn.d_model, s.ffn_hidden));
  input_layernorm = register_module("input_layernorm", RMSNorm(s.attn.d_model, s.norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(s.attn.d_model, s.norm_eps));
}

torch::Tensor BlockImpl::delta(const torch::Tensor& x, const BlockContext& ctx) {
  auto h = input_layernorm(x);
  if (ctx.film) h = ctx.film->attn_gamma * h + ctx.film->attn_beta;
  torch::Tensor kv = ctx.key_visible ? *ctx.key_visible : torch::Tensor();
  auto a = self_attn(h, *ctx.pos, *ctx.layout, kv, *ctx.rope);
  auto m_in = post_attention_layernorm(x + a);
  if (ctx.film) m_in = ctx.film->ffn_gamma * m_in + ctx.film->ffn_beta;
  return a + mlp(m_in);
}

}  // namespace lol::nn
