#include "nn/block.h"

#include <string>

#include "util/error.h"

namespace lol::nn {

FiLMImpl::FiLMImpl(int64_t d) {
  attn_gamma = register_parameter("attn_gamma", torch::ones({d}));
  attn_beta = register_parameter("attn_beta", torch::zeros({d}));
  ffn_gamma = register_parameter("ffn_gamma", torch::ones({d}));
  ffn_beta = register_parameter("ffn_beta", torch::zeros({d}));
}

BlockImpl::BlockImpl(const BlockShape& s) {
  self_attn = register_module("self_attn", Attention(s.attn));
  if (s.moe.n_experts > 0) {
    moe = register_module("mlp", SparseMoE(s.attn.d_model, s.ffn_hidden, s.moe.n_experts, s.moe.top_k,
                                           s.moe.router_noise_std));
  } else {
    mlp = register_module("mlp", MLP(s.attn.d_model, s.ffn_hidden));
  }
  input_layernorm = register_module("input_layernorm", RMSNorm(s.attn.d_model, s.norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(s.attn.d_model, s.norm_eps));
}

torch::Tensor BlockImpl::delta(const torch::Tensor& x, const BlockContext& ctx) {
  return grouped_block_delta({this}, {x.size(0)}, x, ctx);
}

torch::Tensor BlockImpl::ffn(const torch::Tensor& h, const torch::Tensor* rows) {
  if (!is_moe()) return mlp(h);
  if (!rows || rows->size(0) == h.size(0)) return moe(h);
  return torch::zeros_like(h).index_add(0, *rows, moe(h.index_select(0, *rows)));
}

torch::Tensor grouped_block_delta(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                                  const torch::Tensor& x, const BlockContext& ctx) {
  std::vector<torch::Tensor> ln1, ln2;
  std::vector<AttentionImpl*> attn;
  std::vector<MLPImpl*> mlp;
  const bool moe = blocks.at(0)->is_moe();
  for (auto* b : blocks) {
    if (b->is_moe() && blocks.size() > 1)
      throw InputError("grouped_block_delta: " + std::to_string(blocks.size()) +
                       " blocks with an MoE FFN among them: expected an MoE block to run alone");
    ln1.push_back(b->input_layernorm->weight);
    ln2.push_back(b->post_attention_layernorm->weight);
    attn.push_back(b->self_attn.get());
    if (!moe) mlp.push_back(b->mlp.get());
  }
  const double eps = blocks.at(0)->input_layernorm->eps;
  // FiLM (gamma_s * RMSNorm_s(x) + beta_s) runs inside the norms' fused kernel.
  const FiLMImpl* f = ctx.film;
  auto h = rms_norm(x, ln1, sizes, f ? f->attn_gamma : torch::Tensor(), f ? f->attn_beta : torch::Tensor(), eps);
  torch::Tensor kv = ctx.key_visible ? *ctx.key_visible : torch::Tensor();
  auto a = grouped_attention(attn, sizes, h, *ctx.pos, *ctx.layout, kv, *ctx.rope, ctx.pos_bound);
  auto r = x + a;
  auto m_in = rms_norm(r, ln2, sizes, f ? f->ffn_gamma : torch::Tensor(), f ? f->ffn_beta : torch::Tensor(), eps);
  return a + (moe ? blocks[0]->ffn(m_in, ctx.ffn_rows) : grouped_mlp(mlp, sizes, m_in));
}

}  // namespace lol::nn
