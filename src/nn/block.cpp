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
  // FiLM (gamma_s * RMSNorm_s(x) + beta_s) runs inside the norms' fused kernel.
  const FiLMImpl* f = ctx.film;
  auto h = f ? input_layernorm->modulated(x, f->attn_gamma, f->attn_beta) : input_layernorm(x);
  torch::Tensor kv = ctx.key_visible ? *ctx.key_visible : torch::Tensor();
  auto a = self_attn(h, *ctx.pos, *ctx.layout, kv, *ctx.rope);
  auto r = x + a;
  auto m_in = f ? post_attention_layernorm->modulated(r, f->ffn_gamma, f->ffn_beta) : post_attention_layernorm(r);
  return a + mlp(m_in);
}

}  // namespace lol::nn
