#include "inference/decode_session.h"

#include <algorithm>

#include "core/finite.h"
#include "core/index_tensor.h"
#include "inference/block_step.h"
#include "inference/feed_checks.h"
#include "inference/ops.h"
#include "nn/rope.h"
#include "lol/windows.h"
#include "util/error.h"

namespace lol::inference {

namespace {

torch::Tensor column(const std::vector<double>& v, const torch::TensorOptions& opt) {
  auto t = torch::from_blob(const_cast<double*>(v.data()), {int64_t(v.size()), 1}, torch::kFloat64).clone();
  return t.to(opt.device(), opt.dtype().toScalarType());
}

}  // namespace

/// Token layout of one feed() call: inputs concatenated in input order.
struct DecodeSession::Step {
  std::vector<int64_t> row;     ///< [A] row of each input
  std::vector<int64_t> offset;  ///< [A + 1] first token of each input
  std::vector<int64_t> pos;     ///< [N] position of each token in its row
  std::vector<uint8_t> visible; ///< [N] key-visible (not router-only)
  bool all_visible = true;
  bool all_rows = false;        ///< inputs are rows 0..B-1 in order, one token each
  bool fast = false;            ///< one token per input and CPU kernels available
  torch::Tensor rope_rows;      ///< [N, 2, hd] (nn::rope_rotation_table)
  std::pair<torch::Tensor, torch::Tensor> rope;  ///< their factors (nn::rotation_factors)
  int64_t N() const { return int64_t(pos.size()); }
  int64_t A() const { return int64_t(row.size()); }
};

DecodeSession::DecodeSession(LoLModel model, const SessionOptions& opt) : opt_(opt) {
  c10::InferenceMode guard;
  const auto& c = model->config();
  if (opt.batch_size < 1) throw InputError("batch size " + std::to_string(opt.batch_size) + ": expected >= 1");
  if (opt.depth < -1) throw InputError("routed depth " + std::to_string(opt.depth) + ": expected >= 0 (or -1: as trained)");
  max_len_ = opt.max_len > 0 ? opt.max_len : c.max_seq_len;
  if (max_len_ > (int64_t(1) << 24)) throw InputError("max_len " + std::to_string(max_len_) + ": expected <= 2^24");
  w_ = PackedModel::from(*model, max_len_);
  plan_ = make_depth_plan(w_.trained_depth, opt.depth < 0 ? w_.trained_depth : opt.depth, opt.depth_rule);
  const int64_t B = opt.batch_size, Hkv = c.n_kv_heads, hd = c.head_dim();
  const auto o = w_.options();
  const int64_t full_cap = std::min<int64_t>(max_len_, 64);
  for (int64_t i = 0; i < c.n_prelude; ++i) prelude_cache_.emplace_back(B, Hkv, hd, full_cap, o);
  for (int64_t i = 0; i < c.n_coda; ++i) coda_cache_.emplace_back(B, Hkv, hd, full_cap, o);
  for (int64_t d = 0; d < plan_.size(); ++d) {
    core_cache_.emplace_back(B, Hkv, hd, std::min(c.window, max_len_), o);
    win_sum_.push_back(torch::zeros({B, c.d_model}, o));
    mu_sum_.push_back(torch::zeros({B, c.d_model}, o));
  }
  rows_.resize(B);
  for (int64_t r = 0; r < B; ++r) rows_[r].depth.resize(plan_.size());
  if (opt.cpu_kernels) cpu_ = CpuDecoder::create(w_);
}

void DecodeSession::reset(int64_t row, int64_t prompt_len, const RoutingPath* force) {
  c10::InferenceMode guard;
  if (row < 0 || row >= batch_size())
    throw InputError("row " + std::to_string(row) + ": expected 0 <= row < batch size " + std::to_string(batch_size()));
  if (prompt_len < 0) throw InputError("prompt_len " + std::to_string(prompt_len) + ": expected >= 0");
  if (force) {
    for (size_t d = 0; d < force->expert.size(); ++d)
      for (size_t k = 0; k < force->expert[d].size(); ++k)
        if (force->expert[d][k] >= w_.cfg.library_size)
          throw InputError("routing path: expert[" + std::to_string(d) + "][" + std::to_string(k) + "] = " +
                           std::to_string(force->expert[d][k]) + ": expected < library_size " +
                           std::to_string(w_.cfg.library_size));
  }
  Row& r = rows_[row];
  r = Row();
  r.prompt_len = prompt_len;
  r.force = force;
  r.depth.resize(plan_.size());
  for (int64_t d = 0; d < plan_.size(); ++d) {
    win_sum_[d][row].zero_();
    mu_sum_[d][row].zero_();
  }
}

torch::Tensor DecodeSession::step(const std::vector<int64_t>& tokens) {
  check_step_tokens(int64_t(tokens.size()), batch_size());
  std::vector<RowInput> in(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    in[r].row = int64_t(r);
    in[r].tokens = {tokens[r]};
  }
  return feed(in);
}

torch::Tensor DecodeSession::feed(const std::vector<RowInput>& inputs, bool all_logits) {
  c10::InferenceMode guard;
  const auto& c = w_.cfg;
  const auto opt = w_.options();
  const auto dev = opt.device();
  // ---- validate and lay out the new tokens
  Step st;
  st.offset.push_back(0);
  std::vector<int64_t> tokens;
  std::vector<uint8_t> seen(batch_size(), 0);
  for (const auto& in : inputs) {
    if (in.tokens.empty()) continue;
    check_feed_row(in.row, seen);
    const int64_t n = int64_t(in.tokens.size());
    if (!in.router_only.empty() && int64_t(in.router_only.size()) != n)
      throw InputError("feed: row " + std::to_string(in.row) + ": router_only has " +
                       std::to_string(in.router_only.size()) + " flags for " + std::to_string(n) + " tokens");
    const Row& r = rows_[in.row];
    check_feed_tokens(in.row, in.tokens, r.n, max_len_, c.vocab_size);
    for (int64_t i = 0; i < n; ++i) {
      tokens.push_back(in.tokens[i]);
      st.pos.push_back(r.n + i);
      const uint8_t vis = in.router_only.empty() ? 1 : (in.router_only[i] ? 0 : 1);
      st.visible.push_back(vis);
      st.all_visible &= vis != 0;
    }
    st.row.push_back(in.row);
    st.offset.push_back(int64_t(tokens.size()));
  }
  const int64_t N = st.N(), A = st.A();
  if (A == 0) return torch::zeros({0, c.vocab_size}, opt);
  st.all_rows = (A == batch_size() && N == A);
  for (int64_t a = 0; a < A && st.all_rows; ++a) st.all_rows = st.row[a] == a;
  st.fast = cpu_ && N == A;  // a decoding step: the fused CPU kernels apply
  torch::Tensor tokens_t;
  if (!st.fast) {
    const auto t = index_tensors({&tokens, &st.pos}, dev);  // one upload on a GPU
    tokens_t = t[0];
    st.rope_rows = w_.rope_table.index_select(0, t[1]);
    st.rope = nn::rotation_factors(st.rope_rows);
  } else {
    tokens_t = index_tensor(tokens, dev);
  }

  // ---- prelude and coda (full causal attention within the row)
  std::vector<AttnSegment> segs(A);
  std::vector<DecodeToken> toks(st.fast ? N : 0);
  int64_t need = 0;
  for (int64_t a = 0; a < A; ++a) {
    const int64_t vis = rows_[st.row[a]].vis;
    segs[a] = {st.row[a], vis, st.offset[a], st.offset[a + 1] - st.offset[a]};
    if (st.fast) {
      toks[a] = {st.row[a], st.pos[a], vis, st.visible[a] != 0};
      need = std::max(need, vis + st.visible[a]);
    }
  }
  AttnPlan full_plan;
  if (!st.fast) {
    full_plan = AttnPlan::build(segs, N, st.all_visible ? nullptr : st.visible.data(), opt);
    need = full_plan.needed_slots;
  }
  for (auto& kv : prelude_cache_) kv.reserve(need);
  for (auto& kv : coda_cache_) kv.reserve(need);
  torch::Tensor x = w_.embed.index_select(0, tokens_t);
  auto full_block = [&](const PackedBlock& blk, KVCache& cache) {
    if (!st.fast) return x + block_delta({{&blk, {}}}, nullptr, x, cache, full_plan, st.rope, c);
    auto y = torch::empty_like(x);
    cpu_->block(blk, nullptr, x, y, toks.data(), nullptr, cache);
    return y;
  };
  for (int64_t i = 0; i < c.n_prelude; ++i) x = full_block(w_.prelude[i], prelude_cache_[i]);

  // ---- routed core
  for (int64_t d = 0; d < plan_.size(); ++d) x = run_core_depth(d, x, st);

  // ---- coda, final norm, LM head
  for (int64_t i = 0; i < c.n_coda; ++i) x = full_block(w_.coda[i], coda_cache_[i]);
  for (int64_t a = 0; a < A; ++a) {
    Row& r = rows_[st.row[a]];
    for (int64_t t = st.offset[a]; t < st.offset[a + 1]; ++t) r.vis += st.visible[t];
    r.n += st.offset[a + 1] - st.offset[a];
  }
  torch::Tensor h = x;
  if (!all_logits && N != A) {
    std::vector<int64_t> last(A);
    for (int64_t a = 0; a < A; ++a) last[a] = st.offset[a + 1] - 1;
    h = x.index_select(0, index_tensor(last, dev));
  }
  return dense(rms_norm(h, w_.norm, c.norm_eps), w_.head);
}

torch::Tensor DecodeSession::run_core_depth(int64_t d, const torch::Tensor& x, const Step& st) {
  const auto& c = w_.cfg;
  const auto opt = w_.options();
  const auto dev = opt.device();
  const int64_t pd = plan_.param[d];
  const int64_t shift = window_shift(d + 1, c.window, c.stride);
  const int64_t N = st.N(), A = st.A(), B = batch_size();
  torch::Tensor& win_sum = win_sum_[d];
  torch::Tensor& mu_sum = mu_sum_[d];

  // ---- 1. Runs: maximal stretches of one input's new tokens inside one window.
  struct Run {
    int64_t input, row, k, first, count, round;
    bool fresh;  // starts a window (else continues the row's current window)
  };
  std::vector<Run> runs;
  std::vector<int64_t> run_of_tok(N), last_run(A);
  int64_t rounds = 0;
  for (int64_t a = 0; a < A; ++a) {
    const Row& r = rows_[st.row[a]];
    int64_t round = 0;
    for (int64_t t = st.offset[a]; t < st.offset[a + 1]; ++t) {
      const int64_t k = window_of(st.pos[t], shift, c.window, r.prompt_len);
      if (t == st.offset[a] || k != runs.back().k) {
        const bool fresh = t == st.offset[a] ? k != r.depth[d].k : true;
        runs.push_back({a, st.row[a], k, t, 0, round++, fresh});
      }
      runs.back().count++;
      run_of_tok[t] = int64_t(runs.size()) - 1;
    }
    last_run[a] = int64_t(runs.size()) - 1;
    rounds = std::max(rounds, round);
  }
  const int64_t G = int64_t(runs.size());

  // ---- 2. Window sums of the depth's input states (Algorithm 1 line 7).
  // tot[g]: sum over run g's window so far (the row's carried sum when g continues it).
  torch::Tensor run_sum = G == N ? x : torch::zeros({G, c.d_model}, opt).index_add_(0, index_tensor(run_of_tok, dev), x);
  std::vector<int64_t> cont_run, cont_row;
  for (int64_t g = 0; g < G; ++g)
    if (!runs[g].fresh) {
      cont_run.push_back(g);
      cont_row.push_back(runs[g].row);
    }
  torch::Tensor tot = run_sum;
  if (!cont_run.empty()) {
    if (st.all_rows && int64_t(cont_run.size()) == B)
      tot = run_sum + win_sum;
    else
      tot = run_sum.index_add(0, index_tensor(cont_run, dev), win_sum.index_select(0, index_tensor(cont_row, dev)));
  }
  // Windows completed by this step, in window order per row: a row's carried window
  // (closed by a fresh first run) and every run but the row's last. Source rows index
  // cat(win_sum [B], tot [G]).
  std::vector<int64_t> item_src, item_row;
  std::vector<double> item_cnt;
  std::vector<int64_t> fresh_runs, fresh_k0, fresh_kpos;       // indices into runs
  std::vector<int64_t> pair_target, pair_item;                 // router sums of fresh k > 0 runs
  for (int64_t a = 0; a < A; ++a) {
    const int64_t row = st.row[a];
    const DepthRow& dr = rows_[row].depth[d];
    const int64_t first_item = int64_t(item_src.size());
    int64_t g0 = a == 0 ? 0 : last_run[a - 1] + 1;
    for (int64_t g = g0; g <= last_run[a]; ++g) {
      const Run& run = runs[g];
      if (g == g0 && run.fresh && dr.k >= 0) {
        item_src.push_back(row);
        item_row.push_back(row);
        item_cnt.push_back(double(dr.wcnt));
      }
      if (run.fresh) {
        fresh_runs.push_back(g);
        if (run.k == 0) {
          fresh_k0.push_back(int64_t(fresh_runs.size()) - 1);
        } else {
          const int64_t target = int64_t(fresh_kpos.size());
          fresh_kpos.push_back(int64_t(fresh_runs.size()) - 1);
          for (int64_t it = first_item; it < int64_t(item_src.size()); ++it) {
            pair_target.push_back(target);
            pair_item.push_back(it);
          }
        }
      }
      if (g < last_run[a]) {
        item_src.push_back(B + g);
        item_row.push_back(row);
        item_cnt.push_back(double(run.count + (run.fresh ? 0 : dr.wcnt)));
      }
    }
  }
  torch::Tensor mu_items;
  if (!item_src.empty())
    mu_items = torch::cat({win_sum, tot}).index_select(0, index_tensor(item_src, dev)) / column(item_cnt, opt);

  // ---- 3. Router decisions for windows that start now (Algorithm 1 lines 10-15).
  const int64_t F = int64_t(fresh_runs.size());
  std::vector<int64_t> sel(F);
  std::vector<double> probs_cpu;
  if (F > 0) {
    torch::Tensor r0, r1;
    if (!fresh_k0.empty()) {
      std::vector<int64_t> first_tok;
      for (int64_t f : fresh_k0) first_tok.push_back(runs[fresh_runs[f]].first);
      r0 = 0.5 * (w_.depth_embed[pd].unsqueeze(0) + x.index_select(0, index_tensor(first_tok, dev)));
    }
    if (!fresh_kpos.empty()) {
      std::vector<int64_t> rows_k;
      std::vector<double> ks;
      for (int64_t f : fresh_kpos) {
        rows_k.push_back(runs[fresh_runs[f]].row);
        ks.push_back(double(runs[fresh_runs[f]].k));
      }
      auto num = mu_sum.index_select(0, index_tensor(rows_k, dev));
      if (!pair_target.empty())
        num.index_add_(0, index_tensor(pair_target, dev), mu_items.index_select(0, index_tensor(pair_item, dev)));
      r1 = num / column(ks, opt);
    }
    torch::Tensor r;
    if (!r1.defined()) {
      r = r0;
    } else if (!r0.defined()) {
      r = r1;
    } else {
      r = torch::empty({F, c.d_model}, opt);
      r.index_copy_(0, index_tensor(fresh_k0, dev), r0);
      r.index_copy_(0, index_tensor(fresh_kpos, dev), r1);
    }
    auto probs = torch::softmax(dense(r, w_.router[pd]), -1);
    auto sel_t = (probs + w_.balance_bias.unsqueeze(0)).argmax(-1).to(torch::kCPU).contiguous();
    std::copy(sel_t.data_ptr<int64_t>(), sel_t.data_ptr<int64_t>() + F, sel.begin());
    auto pc = probs.to(torch::kCPU, torch::kFloat64).contiguous();
    probs_cpu.assign(pc.data_ptr<double>(), pc.data_ptr<double>() + F * c.library_size);
    if (!all_finite(probs_cpu.data(), int64_t(probs_cpu.size())))
      throw_non_finite("generation: the router probabilities at routed depth " + std::to_string(d + 1),
                       probs.scalar_type());
  }
  // Decisions: forced entries replace the router's; alpha is the router probability
  // of the chosen expert unless the path fixes it (stored as float32, like forward()).
  std::vector<int64_t> run_expert(G);
  std::vector<double> run_alpha(G);
  for (int64_t g = 0; g < G; ++g) {
    const DepthRow& dr = rows_[runs[g].row].depth[d];
    run_expert[g] = dr.expert;
    run_alpha[g] = dr.alpha;
  }
  for (int64_t f = 0; f < F; ++f) {
    const Run& run = runs[fresh_runs[f]];
    Row& row = rows_[run.row];
    int64_t e = sel[f];
    bool forced = false;
    std::optional<double> fixed;
    if (row.force) {
      if (auto fc = row.force->at(d, run.k)) {
        e = fc->expert;
        forced = true;
        if (fc->alpha) fixed = double(float(*fc->alpha));
      }
    }
    const double* p = probs_cpu.data() + f * c.library_size;
    run_expert[fresh_runs[f]] = e;
    run_alpha[fresh_runs[f]] = fixed ? *fixed : p[e];
    if (opt_.record_trace) {
      WindowDecision dec;
      dec.depth = d;
      dec.k = run.k;
      dec.begin = st.pos[run.first];
      dec.expert = e;
      dec.alpha = run_alpha[fresh_runs[f]];
      dec.forced = forced;
      dec.probs.assign(p, p + c.library_size);
      row.trace.push_back(std::move(dec));
    }
  }

  // ---- 4. Router state: completed windows' means, the open window's sum and count.
  if (!item_src.empty()) mu_sum.index_add_(0, index_tensor(item_row, dev), mu_items);
  if (st.all_rows) {
    win_sum.copy_(tot);
  } else {
    std::vector<int64_t> rows_a(A);
    for (int64_t a = 0; a < A; ++a) rows_a[a] = st.row[a];
    win_sum.index_copy_(0, index_tensor(rows_a, dev), tot.index_select(0, index_tensor(last_run, dev)));
  }
  std::vector<int64_t> base(G);  // visible keys already cached for each run's window
  for (int64_t g = 0; g < G; ++g) base[g] = runs[g].fresh ? 0 : rows_[runs[g].row].depth[d].wlen;
  for (int64_t a = 0; a < A; ++a) {
    const Run& run = runs[last_run[a]];
    DepthRow& dr = rows_[run.row].depth[d];
    dr.wcnt = run.fresh ? run.count : dr.wcnt + run.count;
    dr.k = run.k;
    dr.expert = run_expert[last_run[a]];
    dr.alpha = run_alpha[last_run[a]];
  }

  // ---- 5. Experts (Algorithm 1 lines 16-17), one round per run index within a row:
  // a row's runs of one step belong to successive windows and never attend to each
  // other, so each round holds at most one run (one window cache) per row.
  if (st.fast) return run_core_depth_fast(d, x, st, base, run_expert, run_alpha);
  auto x_out = rounds == 1 ? torch::Tensor() : torch::empty_like(x);
  for (int64_t q = 0; q < rounds; ++q) {
    std::vector<int64_t> tok;  // tokens of this round (indices into x), run by run
    std::vector<uint8_t> vis;
    std::vector<AttnSegment> segs;
    std::vector<double> alpha_tok;
    std::vector<std::vector<int64_t>> by_expert(c.library_size);
    bool same_alpha = true;
    for (int64_t g = 0; g < G; ++g) {
      const Run& run = runs[g];
      if (run.round != q) continue;
      segs.push_back({run.row, base[g], int64_t(tok.size()), run.count});
      for (int64_t t = run.first; t < run.first + run.count; ++t) {
        by_expert[run_expert[g]].push_back(int64_t(tok.size()));
        tok.push_back(t);
        vis.push_back(st.visible[t]);
        alpha_tok.push_back(run_alpha[g]);
        same_alpha &= run_alpha[g] == alpha_tok[0];
      }
      int64_t nv = 0;
      for (int64_t t = run.first; t < run.first + run.count; ++t) nv += st.visible[t];
      rows_[run.row].depth[d].wlen = base[g] + nv;
    }
    const int64_t n = int64_t(tok.size());
    const bool whole = n == N;  // every token, in order (a single round)
    auto plan = AttnPlan::build(segs, n, st.all_visible ? nullptr : vis.data(), opt);
    core_cache_[d].reserve(plan.needed_slots);
    std::vector<BlockGroup> groups;
    for (int64_t e = 0; e < c.library_size; ++e) {
      if (by_expert[e].empty()) continue;
      groups.push_back({&w_.library[e], int64_t(by_expert[e].size()) == n ? std::vector<int64_t>() : by_expert[e], e});
    }
    torch::Tensor tok_t = whole ? torch::Tensor() : index_tensor(tok, dev);
    auto xr = whole ? x : x.index_select(0, tok_t);
    auto rope = whole ? st.rope : nn::rotation_factors(st.rope_rows.index_select(0, tok_t));
    auto delta = block_delta(groups, &w_.film[pd], xr, core_cache_[d], plan, rope, c, &w_.stacked);
    // s <- s + alpha (E(s) - s)   (Algorithm 1 line 17)
    auto out = same_alpha ? xr + delta * alpha_tok[0] : xr + column(alpha_tok, opt) * delta;
    if (rounds == 1) return out;
    x_out.index_copy_(0, tok_t, out);
  }
  return x_out;
}

torch::Tensor DecodeSession::run_core_depth_fast(int64_t d, const torch::Tensor& x, const Step& st,
                                                const std::vector<int64_t>& base,
                                                const std::vector<int64_t>& expert,
                                                const std::vector<double>& alpha) {
  // One token per input: token t is run t, one round.
  const auto& c = w_.cfg;
  const int64_t N = st.N();
  std::vector<DecodeToken> toks(N);
  std::vector<std::vector<int64_t>> by_expert(c.library_size);
  int64_t need = 0;
  for (int64_t t = 0; t < N; ++t) {
    toks[t] = {st.row[t], st.pos[t], base[t], st.visible[t] != 0};
    need = std::max(need, base[t] + st.visible[t]);
    rows_[st.row[t]].depth[d].wlen = base[t] + st.visible[t];
    by_expert[expert[t]].push_back(t);
  }
  core_cache_[d].reserve(need);
  const PackedFiLM* film = &w_.film[plan_.param[d]];
  auto y = torch::empty_like(x);
  for (int64_t e = 0; e < c.library_size; ++e) {
    const auto& rows = by_expert[e];
    if (rows.empty()) continue;
    if (int64_t(rows.size()) == N) {
      cpu_->block(w_.library[e], film, x, y, toks.data(), alpha.data(), core_cache_[d]);
      break;
    }
    std::vector<DecodeToken> tg;
    std::vector<double> ag;
    for (int64_t t : rows) {
      tg.push_back(toks[t]);
      ag.push_back(alpha[t]);
    }
    auto idx = index_tensor(rows, x.device());
    auto xg = x.index_select(0, idx);
    auto yg = torch::empty_like(xg);
    cpu_->block(w_.library[e], film, xg, yg, tg.data(), ag.data(), core_cache_[d]);
    y.index_copy_(0, idx, yg);
  }
  return y;
}

int64_t DecodeSession::full_cache_bytes() const {
  int64_t b = 0;
  for (const auto& kv : prelude_cache_) b += kv.bytes();
  for (const auto& kv : coda_cache_) b += kv.bytes();
  return b;
}

int64_t DecodeSession::core_cache_bytes() const {
  int64_t b = 0;
  for (const auto& kv : core_cache_) b += kv.bytes();
  for (const auto& t : win_sum_) b += int64_t(t.numel() * t.element_size());
  for (const auto& t : mu_sum_) b += int64_t(t.numel() * t.element_size());
  return b;
}

}  // namespace lol::inference
