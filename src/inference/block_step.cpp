#include "inference/block_step.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/index_tensor.h"
#include "core/runtime.h"
#include "inference/ops.h"
#include "nn/mlp.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"
#include "nn/moe_routing.h"

namespace lol::inference {

namespace {

/// RMSNorm of x with weight w, or LayerNorm with bias when `bias` is defined (GPT-2).
torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, double eps) {
  return bias.defined() ? torch::layer_norm(x, {w.size(0)}, w, bias, eps) : rms_norm(x, w, eps);
}

/// The attention's input: RMSNorm (+ FiLM), or x itself in a block without input norms (OLMo 2/3).
torch::Tensor attn_norm(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, double eps) {
  if (!b.ln1.defined()) return x;
  if (b.ln1_b.defined()) return norm(x, b.ln1, b.ln1_b, eps);  // GPT-2 (no FiLM: dense models only)
  return film ? rms_norm_film(x, b.ln1, eps, film->attn_gamma, film->attn_beta) : rms_norm(x, b.ln1, eps);
}

/// q_norm / k_norm on `heads` [rows, n, hd] (a view, normalised in place): per head with
/// weights [hd], over all n heads with weights [n hd].
void qk_norm_(torch::Tensor heads, const torch::Tensor& w, double eps) {
  if (w.size(0) == heads.size(2)) {
    heads.copy_(nn::rms_norm_composed(heads, w, eps));
    return;
  }
  const auto flat = heads.reshape({heads.size(0), heads.size(1) * heads.size(2)});
  heads.copy_(nn::rms_norm_composed(flat, w, eps).view(heads.sizes()));
}

/// Gated FFN: down(act(gate(m)) * up(m)) with gate|up fused (SwiGLU for act = SiLU).
torch::Tensor gated_ffn(const torch::Tensor& m, const torch::Tensor& w_gate_up, const torch::Tensor& w_down,
                        nn::Activation act = nn::Activation::SiLU) {
  auto gu = dense(m, w_gate_up);
  const int64_t F = w_down.size(1);
  return dense(nn::gated_activation(gu.narrow(1, 0, F), gu.narrow(1, F, F), act), w_down);
}

/// A dense block's FFN with its biases: gated, or down(act(up m)) (GPT-2).
torch::Tensor dense_ffn(const PackedBlock& b, const torch::Tensor& m) {
  if (b.gated_mlp && !b.b_gate_up.defined() && !b.b_down.defined()) return gated_ffn(m, b.w_gate_up, b.w_down, b.act);
  auto u = dense(m, b.w_gate_up, b.b_gate_up);
  if (b.gated_mlp) {
    const int64_t F = b.w_down.size(1);
    u = nn::gated_activation(u.narrow(1, 0, F), u.narrow(1, F, F), b.act);
  } else {
    u = nn::activation(u, b.act);
  }
  return dense(u, b.w_down, b.b_down);
}

/// MoE FFN (nn::SparseMoEImpl::forward in eval mode): p = softmax(gate(m)), the top-k
/// experts of p + b, sum of p_e E_e(m) (p_e renormalised over the selected experts with
/// moe_normalize), each expert run once on its rows; plus sigmoid(shared_gate m) times the
/// shared expert with one (Qwen2-MoE).
torch::Tensor moe_ffn(const PackedBlock& b, const torch::Tensor& m) {
  const int64_t E = b.moe_gate.size(0);
  auto probs = nn::routing_probabilities(dense(m, b.moe_gate));
  auto sel = std::get<1>((probs + b.moe_bias.unsqueeze(0)).topk(b.top_k, -1));
  auto weight = nn::selected_weights(probs, sel, b.moe_normalize, m.scalar_type());
  const auto g = nn::group_by_expert(sel.to(torch::kCPU).contiguous(), E);
  auto out = b.shared_gate.defined()
                  ? torch::sigmoid(dense(m, b.shared_gate)) * gated_ffn(m, b.shared_gate_up, b.shared_down)
                  : torch::zeros_like(m);
  if (g.expert.empty()) return out;
  auto tok_t = index_tensor(g.token, m.device());
  auto w = weight.reshape({-1}).index_select(0, index_tensor(g.slot, m.device())).unsqueeze(1);
  auto xs = m.index_select(0, tok_t);  // rows in expert order
  std::vector<torch::Tensor> ys;
  int64_t off = 0;
  for (size_t j = 0; j < g.expert.size(); ++j) {
    const size_t e = size_t(g.expert[j]);
    ys.push_back(gated_ffn(xs.narrow(0, off, g.size[j]), b.expert_gate_up[e], b.expert_down[e]));
    off += g.size[j];
  }
  return out.index_add_(0, tok_t, w * torch::cat(ys));
}

/// attn-output projection and the FFN half of the block: a + ffn(norm(x + a)) (a parallel
/// block, GPT-NeoX: a + ffn(norm(x)); Phi: a + ffn(ln1(x))); with
/// sandwich norms (Gemma 3) a and ffn are each normalised first; without input norms
/// (OLMo 2/3) the FFN reads x + a itself.
torch::Tensor finish(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, const torch::Tensor& o,
                     double eps) {
  auto a = dense(o, b.w_o, b.b_o);
  if (b.ln_attn_out.defined()) a = rms_norm(a, b.ln_attn_out, eps);
  const auto h = b.parallel_residual ? x : x + a;  // (GPT-NeoX's parallel block: the FFN reads x)
  auto m = b.shared_input_norm ? attn_norm(b, film, x, eps)  // (Phi: the attention's normalised input)
           : !b.ln2.defined()  ? h
           : b.ln2_b.defined() ? norm(h, b.ln2, b.ln2_b, eps)
           : film            ? rms_norm_film(h, b.ln2, eps, film->ffn_gamma, film->ffn_beta)
                             : rms_norm(h, b.ln2, eps);
  auto f = b.is_moe() ? moe_ffn(b, m) : dense_ffn(b, m);
  return a + (b.ln_ffn_out.defined() ? rms_norm(f, b.ln_ffn_out, eps) : f);
}

std::atomic<int64_t> padded_calls{0};

/// Weights gathered per call at most (the used experts' rows of the stacked tensors when
/// they are not the whole library): beyond it, copying them costs more memory traffic
/// than the per-expert products' launches (a heuristic, not timed on a GPU).
constexpr double kMaxGatheredWeightBytes = 256.0 * (1 << 20);

/// The padded layout of several experts' rows: G equal groups of m rows (group g's rows,
/// then padding slots that copy an appended zero row).
struct Padding {
  int64_t G = 0, m = 0;
  bool all = false;      ///< the groups are experts 0..L-1 in order: the stacked tensors as they are
  torch::Tensor source;  ///< [G m] row of x each padded row copies (n: the zero row)
  torch::Tensor slot;    ///< [n] padded row of each row of x
  torch::Tensor experts; ///< [G] the groups' experts (rows of the stacked weights)
};

/// A padded layout when it applies (see block_delta), else G = 0.
Padding plan_padding(const std::vector<BlockGroup>& groups, const PackedLibrary* stacked, const torch::Tensor& x) {
  Padding p;
  const int64_t n = x.size(0), G = int64_t(groups.size());
  if (G < 2 || !stacked || !stacked->defined() || cpu_kernel_device(x) || n == 0) return p;
  int64_t m = 0;
  for (const auto& g : groups) {
    if (g.expert < 0 || g.rows.empty()) return p;
    m = std::max(m, int64_t(g.rows.size()));
  }
  if (G * m > 2 * n) return p;
  bool all = G == stacked->w_qkv.size(0);
  for (int64_t g = 0; g < G && all; ++g) all = groups[size_t(g)].expert == g;
  if (!all) {
    double bytes = 0;
    for (const auto* t : {&stacked->ln1, &stacked->ln2, &stacked->w_qkv, &stacked->b_qkv, &stacked->w_o,
                          &stacked->w_gate_up, &stacked->w_down})
      if (t->defined()) bytes += double(t->numel() / t->size(0)) * double(t->element_size());
    if (double(G) * bytes > kMaxGatheredWeightBytes) return p;
  }
  std::vector<int64_t> source(size_t(G * m), n), slot(size_t(n), 0), experts;
  for (int64_t g = 0; g < G; ++g) {
    const auto& rows = groups[size_t(g)].rows;
    for (size_t j = 0; j < rows.size(); ++j) {
      source[size_t(g * m) + j] = rows[j];
      slot[size_t(rows[j])] = g * m + int64_t(j);
    }
    experts.push_back(groups[size_t(g)].expert);
  }
  auto t = index_tensors({&source, &slot, &experts}, x.device());  // one upload
  p.G = G;
  p.m = m;
  p.all = all;
  p.source = t[0];
  p.slot = t[1];
  p.experts = t[2];
  return p;
}

/// rows [n, k] -> [G, m, k]: each padded row a copy of its source row (or zeros).
torch::Tensor pad(const torch::Tensor& rows, const Padding& p) {
  return torch::cat({rows, torch::zeros({1, rows.size(1)}, rows.options())})
      .index_select(0, p.source)
      .view({p.G, p.m, rows.size(1)});
}

/// [G, m, k] -> the n rows of x, in x's order.
torch::Tensor unpad(const torch::Tensor& padded, const Padding& p) {
  return padded.view({p.G * p.m, padded.size(2)}).index_select(0, p.slot);
}

/// RMSNorm of [G, m, d] rows with each group's weight [G, d] (and FiLM's gamma/beta):
/// the arithmetic of nn::rms_norm's composed path (w * gamma per element, then + beta).
torch::Tensor grouped_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& gamma,
                           const torch::Tensor& beta, double eps) {
  auto y = nn::rms_norm_composed(x, (gamma.defined() ? w * gamma : w).unsqueeze(1), eps);  // w: [G, 1, d]
  return beta.defined() ? y + beta : y;
}

/// x [G, m, in] times each group's weight [G, out, in] (+ bias [G, out]) -> [G, m, out].
torch::Tensor grouped_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto wt = w.transpose(1, 2);
  return b.defined() ? at::baddbmm(b.unsqueeze(1), x, wt) : at::bmm(x, wt);
}

}  // namespace

int64_t padded_block_delta_calls() { return padded_calls.load(std::memory_order_relaxed); }

torch::Tensor block_delta(const std::vector<BlockGroup>& groups, const PackedFiLM* film, const torch::Tensor& x,
                          KVCache& cache, const AttnPlan& plan, const std::pair<torch::Tensor, torch::Tensor>& rope,
                          const LoLConfig& cfg, const PackedLibrary* stacked) {
  // The head size from the fused weights: d / H for LoL, a dense model's own head_dim.
  const int64_t H = cfg.n_heads, Hkv = cfg.n_kv_heads, hd = groups.at(0).block->w_qkv.size(0) / (H + 2 * Hkv);
  const int64_t n = x.size(0);
  const double eps = cfg.norm_eps;
  const bool single = groups.size() == 1 && groups[0].rows.empty();
  // q/k/v of block b's rows: the fused projection, then the q/k RMSNorms (Qwen3, OLMo 2).
  auto project = [&](const PackedBlock& b, const torch::Tensor& rows_x) {
    auto qkv = dense(attn_norm(b, film, rows_x, eps), b.w_qkv, b.b_qkv);
    if (b.q_norm.defined()) {  // in place on the product's q and k heads
      auto heads = qkv.view({rows_x.size(0), H + 2 * Hkv, hd});
      qk_norm_(heads.narrow(1, 0, H), b.q_norm, eps);
      qk_norm_(heads.narrow(1, H, Hkv), b.k_norm, eps);
    }
    return qkv;
  };
  auto attend = [&](const torch::Tensor& qkv) {
    auto heads = qkv.view({n, H + 2 * Hkv, hd});
    // (GPT-2: no rotary embedding; its positions were added to the input embeddings)
    auto qk = groups[0].block->rope ? nn::rotate_with_factors(heads.narrow(1, 0, H + Hkv), rope.first, rope.second)
                                    : heads.narrow(1, 0, H + Hkv);
    return cached_attention(qk.narrow(1, 0, H), qk.narrow(1, H, Hkv), heads.narrow(1, H + Hkv, Hkv), cache, plan,
                            groups[0].block->attn_softcap);
  };
  if (single) {
    const auto& b = *groups[0].block;
    return finish(b, film, x, attend(project(b, x)), eps);
  }
  const Padding p = plan_padding(groups, stacked, x);
  if (p.G > 0) {
    TORCH_CHECK(!groups[0].block->q_norm.defined() && !groups[0].block->ln_attn_out.defined() &&
                    groups[0].block->ln1.defined() && groups[0].block->act == nn::Activation::SiLU &&
                    !groups[0].block->gpt2_layout(),
                "block_delta: stacked library experts are Llama-layout SwiGLU blocks without q/k norm");
    padded_calls.fetch_add(1, std::memory_order_relaxed);
    // The used experts' stacked weights (all of them, in order: the tensors themselves).
    auto pick = [&](const torch::Tensor& t) { return !t.defined() || p.all ? t : t.index_select(0, p.experts); };
    const torch::Tensor none;
    auto xp = pad(x, p);
    auto qkv = grouped_dense(grouped_norm(xp, pick(stacked->ln1), film ? film->attn_gamma : none,
                                          film ? film->attn_beta : none, eps),
                             pick(stacked->w_qkv), pick(stacked->b_qkv));
    auto a = grouped_dense(pad(attend(unpad(qkv, p)), p), pick(stacked->w_o), none);
    auto m = grouped_norm(xp + a, pick(stacked->ln2), film ? film->ffn_gamma : none, film ? film->ffn_beta : none, eps);
    auto gu = grouped_dense(m, pick(stacked->w_gate_up), none);
    const int64_t F = gu.size(2) / 2;
    auto ffn = grouped_dense(torch::silu(gu.narrow(2, 0, F)) * gu.narrow(2, F, F), pick(stacked->w_down), none);
    return unpad(a + ffn, p);
  }
  // One product per expert on its rows.
  std::vector<torch::Tensor> idx(groups.size()), xs(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    idx[g] = groups[g].rows.empty() ? torch::arange(n, x.options().dtype(torch::kInt64))
                                    : index_tensor(groups[g].rows, x.device());
    xs[g] = x.index_select(0, idx[g]);
  }
  auto qkv = torch::empty({n, (H + 2 * Hkv) * hd}, x.options());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& b = *groups[g].block;
    qkv.index_copy_(0, idx[g], project(b, xs[g]));
  }
  auto o = attend(qkv);
  auto delta = torch::empty_like(x);
  for (size_t g = 0; g < groups.size(); ++g)
    delta.index_copy_(0, idx[g], finish(*groups[g].block, film, xs[g], o.index_select(0, idx[g]), eps));
  return delta;
}

}  // namespace lol::inference
