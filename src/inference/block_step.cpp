#include "inference/block_step.h"

#include <vector>

#include "core/index_tensor.h"
#include "inference/ops.h"
#include "nn/moe_routing.h"

namespace lol::inference {

namespace {

torch::Tensor attn_norm(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, double eps) {
  return film ? rms_norm_film(x, b.ln1, eps, film->attn_gamma, film->attn_beta) : rms_norm(x, b.ln1, eps);
}

/// SwiGLU: down(silu(gate(m)) * up(m)) with gate|up fused.
torch::Tensor swiglu(const torch::Tensor& m, const torch::Tensor& w_gate_up, const torch::Tensor& w_down) {
  auto gu = dense(m, w_gate_up);
  const int64_t F = w_down.size(1);
  auto act = torch::silu(gu.narrow(1, 0, F)) * gu.narrow(1, F, F);
  return dense(act, w_down);
}

/// MoE FFN (nn::SparseMoEImpl::forward in eval mode): p = softmax(gate(m)), the top-k
/// experts of p + b, sum of p_e E_e(m), each expert run once on its rows.
torch::Tensor moe_ffn(const PackedBlock& b, const torch::Tensor& m) {
  const int64_t E = b.moe_gate.size(0);
  auto probs = torch::softmax(dense(m, b.moe_gate), -1);
  auto sel = std::get<1>((probs + b.moe_bias.unsqueeze(0)).topk(b.top_k, -1));
  auto weight = probs.gather(1, sel);
  const auto g = nn::group_by_expert(sel.to(torch::kCPU).contiguous(), E);
  auto out = torch::zeros_like(m);
  if (g.expert.empty()) return out;
  auto tok_t = index_tensor(g.token, m.device());
  auto w = weight.reshape({-1}).index_select(0, index_tensor(g.slot, m.device())).unsqueeze(1);
  auto xs = m.index_select(0, tok_t);  // rows in expert order
  std::vector<torch::Tensor> ys;
  int64_t off = 0;
  for (size_t j = 0; j < g.expert.size(); ++j) {
    const size_t e = size_t(g.expert[j]);
    ys.push_back(swiglu(xs.narrow(0, off, g.size[j]), b.expert_gate_up[e], b.expert_down[e]));
    off += g.size[j];
  }
  return out.index_add_(0, tok_t, w * torch::cat(ys));
}

/// attn-output projection and the FFN half of the block: a + ffn(norm(x + a)).
torch::Tensor finish(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, const torch::Tensor& o,
                     double eps) {
  auto a = dense(o, b.w_o);
  auto h = x + a;
  auto m = film ? rms_norm_film(h, b.ln2, eps, film->ffn_gamma, film->ffn_beta) : rms_norm(h, b.ln2, eps);
  return a + (b.is_moe() ? moe_ffn(b, m) : swiglu(m, b.w_gate_up, b.w_down));
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
