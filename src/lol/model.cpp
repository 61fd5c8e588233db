#include "lol/model.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/finite.h"
#include "core/index_tensor.h"
#include "lol/dispatch.h"
#include "lol/router_inputs.h"
#include "lol/windows.h"
#include "nn/moe_routing.h"
#include "util/error.h"

namespace lol {

nn::BlockShape block_shape(const LoLConfig& c) {
  nn::BlockShape s;
  s.attn.d_model = c.d_model;
  s.attn.n_heads = c.n_heads;
  s.attn.n_kv_heads = c.n_kv_heads;
  s.attn.head_dim = c.head_dim();
  s.ffn_hidden = c.ffn_hidden;
  s.norm_eps = c.norm_eps;
  return s;
}

nn::BlockShape prelude_coda_shape(const LoLConfig& c) {
  nn::BlockShape s = block_shape(c);
  if (!c.moe_prelude_coda()) return s;
  if (c.prelude_coda_expert_ffn > 0) s.ffn_hidden = c.prelude_coda_expert_ffn;
  s.moe.n_experts = c.prelude_coda_experts;
  s.moe.top_k = c.prelude_coda_top_k;
  s.moe.router_noise_std = c.router_noise_std;
  return s;
}

namespace {

/// A document: a maximal run of equal, non-negative doc ids in one row.
struct Doc {
  int64_t row, begin, end, prompt;
};

/// Per-forward token bookkeeping, built on the CPU.
struct TokenLayout {
  int64_t B = 0, T = 0;
  std::vector<Doc> docs;
  std::vector<int64_t> valid_rows;  // flat rows that are not padding
  torch::Tensor valid_rows_t;       // [n_valid] int64 on the device, with an MoE prelude/coda and padding
  torch::Tensor pos;                // [B*T] int64 position within document
  torch::Tensor key_visible;        // [B*T] bool or undefined
  nn::SegmentLayout full;           // documents as causal segments
};

/// Windows of one routed depth: where each lies in the batch (row, begin within the row,
/// its document's begin) and, in `router`, the flat-row form the router inputs and the
/// dispatch use (start = row * T + begin, len, k, doc_first_window).
struct DepthWindows {
  std::vector<int64_t> row, begin, doc_begin;
  RouterWindows router;
};

/// `rows_tensor`: also the non-padding rows as a device tensor (an MoE prelude/coda routes only them).
TokenLayout make_token_layout(const LoLBatch& b, const torch::Device& dev, bool rows_tensor) {
  TokenLayout L;
  L.B = b.tokens.size(0);
  L.T = b.tokens.size(1);
  torch::Tensor doc = b.doc_ids.defined() ? b.doc_ids.to(torch::kCPU, torch::kInt64).contiguous()
                                          : torch::zeros({L.B, L.T}, torch::kInt64);
  torch::Tensor pl = b.prompt_len.defined() ? b.prompt_len.to(torch::kCPU, torch::kInt64).contiguous()
                                            : torch::zeros({L.B}, torch::kInt64);
  const int64_t* dp = doc.data_ptr<int64_t>();
  const int64_t* pp = pl.data_ptr<int64_t>();
  auto pos = torch::zeros({L.B * L.T}, torch::kInt64);
  int64_t* posp = pos.data_ptr<int64_t>();
  std::vector<int64_t> rows, offsets{0};
  for (int64_t r = 0; r < L.B; ++r) {
    int64_t i = 0;
    while (i < L.T) {
      int64_t id = dp[r * L.T + i];
      int64_t j = i + 1;
      while (j < L.T && dp[r * L.T + j] == id) ++j;
      if (id >= 0) {
        int64_t prompt = (i == 0) ? std::min<int64_t>(std::max<int64_t>(pp[r], 0), j - i) : 0;
        L.docs.push_back({r, i, j, prompt});
        for (int64_t t = i; t < j; ++t) {
          posp[r * L.T + t] = t - i;
          rows.push_back(r * L.T + t);
          L.valid_rows.push_back(r * L.T + t);
        }
        offsets.push_back(int64_t(rows.size()));
      }
      i = j;
    }
  }
  L.pos = pos.to(dev);
  if (rows_tensor && int64_t(L.valid_rows.size()) < L.B * L.T) L.valid_rows_t = index_tensor(L.valid_rows, dev);
  // Batches without router-only tokens (the trainer always passes the mask) take the
  // attention path without key-visibility masks.
  if (b.router_only.defined() && b.router_only.any().item<bool>())
    L.key_visible = b.router_only.reshape({L.B * L.T}).logical_not().to(dev);
  L.full = nn::SegmentLayout::from_csr(rows, offsets, L.B * L.T, dev);
  return L;
}

DepthWindows make_depth_windows(const TokenLayout& L, int64_t depth, const LoLConfig& c) {
  DepthWindows w;
  const int64_t delta = window_shift(depth, c.window, c.stride);
  for (const auto& d : L.docs) {
    const int64_t first = int64_t(w.row.size());
    int64_t cur = -1;
    for (int64_t t = d.begin; t < d.end; ++t) {
      int64_t k = window_of(t - d.begin, delta, c.window, d.prompt);
      if (k != cur) {
        cur = k;
        w.row.push_back(d.row);
        w.begin.push_back(t);
        w.doc_begin.push_back(d.begin);
        w.router.start.push_back(d.row * L.T + t);
        w.router.len.push_back(0);
        w.router.k.push_back(k);
        w.router.doc_first_window.push_back(first);
      }
      w.router.len.back()++;
    }
  }
  return w;
}

}  // namespace

LoLBodyImpl::LoLBodyImpl(const LoLConfig& c) {
  auto shape = block_shape(c);
  auto outer = prelude_coda_shape(c);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  prelude = register_module("prelude", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_prelude; ++i) prelude->push_back(nn::Block(outer));
  library = register_module("library", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.library_size; ++i) library->push_back(nn::Block(shape));
  coda = register_module("coda", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_coda; ++i) coda->push_back(nn::Block(outer));
  film = register_module("film", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.core_depth; ++i) film->push_back(nn::FiLM(c.d_model));
  if (c.untied_router) {
    routers = register_module("routers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.core_depth; ++i)
      routers->push_back(torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.library_size).bias(false)));
  } else {
    router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.library_size).bias(false)));
  }
  depth_embed = register_parameter("depth_embed", torch::zeros({c.core_depth, c.d_model}));
  norm = register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps));
  balance_bias = register_buffer("balance_bias", torch::zeros({c.library_size}));
}

LoLModelImpl::LoLModelImpl(const LoLConfig& c) : rope(c.head_dim(), c.rope_theta), cfg_(c), active_depth_(c.core_depth) {
  c.validate("LoLModel config");
  model = register_module("model", LoLBody(c));
  if (!c.tie_embeddings)
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  pending_load_ = torch::zeros({c.library_size}, torch::kInt64);
  reset_parameters(0);
}

void LoLModelImpl::reset_parameters(uint64_t seed) {
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  const double std = 0.02;
  const double layers = double(cfg_.n_prelude + cfg_.n_coda + cfg_.core_depth);
  const double out_std = std / std::sqrt(2.0 * std::max(1.0, layers));
  for (auto& p : named_parameters()) {
    const std::string& n = p.key();
    auto& t = p.value();
    auto ends_with = [&](const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
    if (ends_with("_gamma") || ends_with("layernorm.weight") || n == "model.norm.weight") {
      t.fill_(1.0);
    } else if (ends_with("_beta") || ends_with(".bias")) {
      t.zero_();
    } else {
      double s = (ends_with("o_proj.weight") || ends_with("down_proj.weight")) ? out_std : std;
      auto r = at::normal(0.0, s, t.sizes(), gen);
      t.copy_(r);
    }
  }
  model->balance_bias.zero_();
  for (auto* m : ffn_moes()) {
    m->balance_bias.zero_();
    m->clear_pending_load();
  }
}

void LoLModelImpl::set_active_depth(int64_t d) {
  if (d < 0 || d > cfg_.core_depth)
    throw InputError("active depth " + std::to_string(d) + " outside [0, core_depth = " + std::to_string(cfg_.core_depth) + "]");
  active_depth_ = d;
}

torch::Tensor LoLModelImpl::router_logits(int64_t d, const torch::Tensor& r) {
  if (cfg_.untied_router) return model->routers[d]->as<torch::nn::Linear>()->forward(r);
  return model->router(r);
}

LoLOutput LoLModelImpl::forward(const LoLBatch& batch, const ForwardOptions& opt) {
  const auto& c = cfg_;
  if (batch.tokens.dim() != 2) throw InputError("tokens must be [batch, seq]");
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  if (T > c.max_seq_len)
    throw InputError("sequence length " + std::to_string(T) + " exceeds max_seq_len = " + std::to_string(c.max_seq_len));
  if (B * T > 0) {
    auto mx = batch.tokens.max().item<int64_t>(), mn = batch.tokens.min().item<int64_t>();
    if (mn < 0 || mx >= c.vocab_size)
      throw InputError("token id " + std::to_string(mn < 0 ? mn : mx) + " outside [0, vocab_size = " +
                       std::to_string(c.vocab_size) + ")");
  }
  const auto dev = model->embed_tokens->weight.device();
  TokenLayout L = make_token_layout(batch, dev, c.moe_prelude_coda());
  torch::Tensor kv = L.key_visible;
  // An MoE prelude/coda FFN routes only the tokens (padding is neither run nor counted).
  nn::BlockContext full_ctx{&L.pos, &L.full, kv.defined() ? &kv : nullptr, &rope, nullptr,
                            L.valid_rows_t.defined() ? &L.valid_rows_t : nullptr, /*pos_bound=*/T};

  auto s = model->embed_tokens(batch.tokens.to(dev)).reshape({B * T, c.d_model});
  for (auto& m : *model->prelude) s = m->as<nn::Block>()->forward(s, full_ctx);

  LoLOutput out;
  const bool count_load = is_training();
  auto load = torch::zeros({c.library_size}, torch::kInt64);
  // The depths that use the same experts share their stacked weights (GPU path).
  nn::WeightStacks stacks;
  for (int64_t d = 0; d < active_depth_; ++d) {
    DepthWindows w = make_depth_windows(L, d + 1, c);
    const int64_t G = int64_t(w.row.size());
    if (G == 0) continue;
    // Router inputs (Algorithm 1 lines 7-14): mean state per window, then the mean of
    // the earlier windows' means; window 0 uses (e^(l) + s_first) / 2.
    const RouterWindows& rw = w.router;
    auto r = router_inputs(s, model->depth_embed[d], rw);
    auto logits = router_logits(d, r);
    if (is_training() && c.router_noise_std > 0) logits = logits + torch::randn_like(logits) * c.router_noise_std;
    auto probs = torch::softmax(logits, -1);
    // Top-1 with the balancing bias (selection only); ties -> lowest index.
    auto sel_dev = (probs.detach() + model->balance_bias.unsqueeze(0)).argmax(-1);
    auto sel_t = sel_dev.to(torch::kCPU).contiguous();  // the grouping below is the host's
    std::vector<int64_t> sel(sel_t.data_ptr<int64_t>(), sel_t.data_ptr<int64_t>() + G);
    std::vector<uint8_t> forced(G, 0), fixed_alpha(G, 0);
    bool any_forced = false;
    std::vector<double> alpha_vals(G, 0.0);
    if (opt.force) {
      for (int64_t g = 0; g < G; ++g) {
        if (auto fc = opt.force->at(d, rw.k[g])) {
          if (fc->expert >= c.library_size)
            throw InputError("routing path: expert " + std::to_string(fc->expert) + " >= library_size " +
                             std::to_string(c.library_size));
          sel[g] = fc->expert;
          forced[g] = 1;
          any_forced = true;
          if (fc->alpha) {
            fixed_alpha[g] = 1;
            alpha_vals[g] = *fc->alpha;
          }
        }
      }
    }
    if (any_forced) sel_dev = index_tensor(sel, dev);
    auto alpha = probs.gather(1, sel_dev.unsqueeze(1)).squeeze(1);
    bool any_fixed = false;
    for (auto f : fixed_alpha) any_fixed |= f != 0;
    if (any_fixed) {
      auto mask = torch::from_blob(fixed_alpha.data(), {G}, torch::kUInt8).clone().to(dev).to(torch::kBool);
      auto vals = torch::from_blob(alpha_vals.data(), {G}, torch::kFloat64).clone().to(dev, s.scalar_type());
      alpha = torch::where(mask, vals, alpha);
    }
    // Order the depth's tokens by expert (an expert's windows contiguous, each window's
    // tokens contiguous): one gather, one grouped block call for all used experts (each
    // operator once; the windows are the attention segments), one scatter-add back.
    std::vector<std::vector<int64_t>> by_expert(size_t(c.library_size));
    for (int64_t g = 0; g < G; ++g) by_expert[size_t(sel[g])].push_back(g);
    std::vector<int64_t> tok, tok_win, sizes, seg_offsets{0};
    tok.reserve(L.valid_rows.size());
    tok_win.reserve(L.valid_rows.size());
    std::vector<nn::BlockImpl*> used;
    for (int64_t e = 0; e < c.library_size; ++e) {
      const auto& wins = by_expert[size_t(e)];
      if (wins.empty()) continue;
      const int64_t start = int64_t(tok.size());
      for (int64_t g : wins) {
        for (int64_t t = 0; t < rw.len[g]; ++t) {
          tok.push_back(rw.start[g] + t);
          tok_win.push_back(g);
        }
        seg_offsets.push_back(int64_t(tok.size()));
      }
      used.push_back(model->library[e]->as<nn::Block>());
      sizes.push_back(int64_t(tok.size()) - start);
    }
    const int64_t n = int64_t(tok.size());
    auto tok_dev = index_tensors({&tok, &tok_win}, dev);  // one upload on a GPU
    const auto& tok_t = tok_dev[0];
    auto xs = gather_rows(s, tok, tok_t);
    auto pos_e = L.pos.index_select(0, tok_t);
    torch::Tensor kv_e;
    if (kv.defined()) kv_e = kv.index_select(0, tok_t);
    std::vector<int64_t> local(static_cast<size_t>(n));
    std::iota(local.begin(), local.end(), int64_t(0));
    auto layout = nn::SegmentLayout::from_csr(local, seg_offsets, n, dev);
    nn::BlockContext ctx{&pos_e, &layout, kv.defined() ? &kv_e : nullptr, &rope, model->film[d]->as<nn::FiLM>(),
                         nullptr, /*pos_bound=*/T, &stacks};
    auto delta = nn::grouped_block_delta(used, sizes, xs, ctx);
    s = routed_residual(s, tok, tok_win, alpha, delta, tok_t, tok_dev[1]);  // s <- s + alpha (E(s) - s)   (Algorithm 1 line 17)
    if (count_load) {
      auto* lp = load.data_ptr<int64_t>();
      for (int64_t g = 0; g < G; ++g)
        if (!forced[g]) lp[sel[g]]++;
    }
    if (opt.trace) {
      DepthTrace tr;
      tr.row = w.row;
      tr.k = rw.k;
      tr.begin = w.begin;
      tr.len = rw.len;
      tr.doc_begin = w.doc_begin;
      tr.expert = sel_t.clone();
      std::memcpy(tr.expert.data_ptr<int64_t>(), sel.data(), sizeof(int64_t) * G);
      tr.alpha = alpha.detach().to(torch::kCPU, torch::kFloat32);
      tr.probs = probs.detach().to(torch::kCPU, torch::kFloat32);
      tr.forced = torch::from_blob(forced.data(), {G}, torch::kUInt8).clone().to(torch::kBool);
      out.trace.push_back(std::move(tr));
    }
  }
  if (count_load) pending_load_ += load;

  for (auto& m : *model->coda) s = m->as<nn::Block>()->forward(s, full_ctx);
  auto h = s.view({B, T, c.d_model});
  if (opt.logits_at.defined()) {
    auto idx = opt.logits_at.to(dev, torch::kInt64);
    h = h.gather(1, idx.unsqueeze(-1).expand({B, idx.size(1), c.d_model}));
  }
  h = model->norm(h);
  out.logits = c.tie_embeddings ? torch::matmul(h, model->embed_tokens->weight.t()) : lm_head(h);
  return out;
}

torch::Tensor LoLModelImpl::update_balance() {
  auto load = pending_load_.clone();
  pending_load_.zero_();
  const int64_t total = load.sum().item<int64_t>();
  if (total == 0 || cfg_.balance_update_rate == 0) return load;
  torch::NoGradGuard ng;
  auto lf = load.to(torch::kFloat32);
  auto mean = lf.mean();
  auto step = torch::sign(mean - lf) * cfg_.balance_update_rate;
  model->balance_bias.add_(step.to(model->balance_bias.device(), model->balance_bias.scalar_type()));
  return load;
}

std::vector<nn::SparseMoEImpl*> LoLModelImpl::ffn_moes() const {
  std::vector<nn::SparseMoEImpl*> out;
  if (!cfg_.moe_prelude_coda()) return out;
  for (const auto* list : {&model->prelude, &model->coda})
    for (const auto& m : **list) out.push_back(m->as<nn::Block>()->moe.get());
  return out;
}

torch::Tensor LoLModelImpl::ffn_pending_load() const {
  return nn::stack_pending_loads(ffn_moes(), cfg_.prelude_coda_experts);
}

void LoLModelImpl::set_ffn_pending_load(const torch::Tensor& load) {
  nn::set_pending_loads(ffn_moes(), load, cfg_.prelude_coda_experts, "LoL model: prelude/coda expert load");
}

torch::Tensor LoLModelImpl::update_ffn_balance() {
  std::vector<torch::Tensor> v;
  for (auto* m : ffn_moes()) v.push_back(m->update_balance(cfg_.balance_update_rate));
  if (v.empty()) return torch::zeros({0, cfg_.prelude_coda_experts}, torch::kInt64);
  return torch::stack(v);
}

int64_t LoLModelImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

int64_t LoLModelImpl::active_parameters_per_token() const {
  // Everything except the experts that a token does not use: one expert per routed
  // depth run is active, so min(L, active depth) distinct experts at most.
  int64_t per_block = 0;
  for (const auto& p : const_cast<LoLBodyImpl&>(*model).library[0]->parameters()) per_block += p.numel();
  int64_t active_experts = std::min(cfg_.library_size, active_depth_);
  int64_t inactive_ffn = 0;  // experts of the MoE prelude/coda FFNs a token does not use
  for (auto* m : ffn_moes()) {
    int64_t expert = 0;
    for (const auto& p : m->experts[0]->parameters()) expert += p.numel();
    inactive_ffn += (m->n_experts() - m->top_k()) * expert;
  }
  return num_parameters() - (cfg_.library_size - active_experts) * per_block - inactive_ffn;
}

void require_finite_routing(const std::vector<DepthTrace>& trace, const std::string& where) {
  for (size_t d = 0; d < trace.size(); ++d)
    require_finite(trace[d].probs, where + ": the router probabilities at routed depth " + std::to_string(d + 1));
}

}  // namespace lol
