#include "inference/block_step.h"

#include "inference/ops.h"

namespace lol::inference {

namespace {

torch::Tensor attn_norm(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, double eps) {
  return film ? rms_norm_film(x, b.ln1, eps, film->attn_gamma, film->attn_beta) : rms_norm(x, b.ln1, eps);
}

/// attn-output projection and the MLP half of the block: a + mlp(norm(x + a)).
torch::Tensor finish(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, const torch::Tensor& o,
                     double eps) {
  auto a = dense(o, b.w_o);
  auto h = x + a;
  auto m = film ? rms_norm_film(h, b.ln2, eps, film->ffn_gamma, film->ffn_beta) : rms_norm(h, b.ln2, eps);
  auto gu = dense(m, b.w_gate_up);
  const int64_t F = b.w_down.size(1);
  auto act = torch::silu(gu.narrow(1, 0, F)) * gu.narrow(1, F, F);
  return a + dense(act, b.w_down);
}

}  // namespace

torch::Tensor block_delta(const std::vector<BlockGroup>& groups, const PackedFiLM* film, const torch::Tensor& x,
                          KVCache& cache, const AttnPlan& plan, const torch::Tensor& cos, const torch::Tensor& sin,
                          const LoLConfig& cfg) {
  const int64_t n = x.size(0), H = cfg.n_heads, Hkv = cfg.n_kv_heads, hd = cfg.head_dim();
  const double eps = cfg.norm_eps;
  const bool single = groups.size() == 1 && !groups[0].idx.defined();
  std::vector<torch::Tensor> xs(groups.size());
  torch::Tensor qkv;
  if (single) {
    xs[0] = x;
    qkv = dense(attn_norm(*groups[0].block, film, x, eps), groups[0].block->w_qkv, groups[0].block->b_qkv);
  } else {
    qkv = torch::empty({n, (H + 2 * Hkv) * hd}, x.options());
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& b = *groups[g].block;
      xs[g] = x.index_select(0, groups[g].idx);
      qkv.index_copy_(0, groups[g].idx, dense(attn_norm(b, film, xs[g], eps), b.w_qkv, b.b_qkv));
    }
  }
  auto heads = qkv.view({n, H + 2 * Hkv, hd});
  auto qk = rope(heads.narrow(1, 0, H + Hkv), cos, sin);
  auto o = cached_attention(qk.narrow(1, 0, H), qk.narrow(1, H, Hkv), heads.narrow(1, H + Hkv, Hkv), cache, plan);
  if (single) return finish(*groups[0].block, film, x, o, eps);
  auto delta = torch::empty_like(x);
  for (size_t g = 0; g < groups.size(); ++g)
    delta.index_copy_(0, groups[g].idx, finish(*groups[g].block, film, xs[g], o.index_select(0, groups[g].idx), eps));
  return delta;
}

}  // namespace lol::inference
