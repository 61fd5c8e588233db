#include "model/ref_lol.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace reftest {

namespace {

const torch::Tensor& W(const Weights& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) throw std::runtime_error("reference: missing weight '" + name + "'");
  return it->second;
}

torch::Tensor mm_t(const torch::Tensor& x, const torch::Tensor& weight) { return torch::matmul(x, weight.t()); }

torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

/// Rotate-half RoPE with the Hugging Face float32 tables (inv_freq, angles, cos, sin all
/// computed in float32, then cast to x's dtype). x [n, heads, hd], pos: n positions.
torch::Tensor rope(const torch::Tensor& x, const std::vector<int64_t>& pos, double theta) {
  const int64_t n = x.size(0), hd = x.size(2), half = hd / 2;
  auto idx = torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd);
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), idx);
  auto p = torch::empty({n}, torch::kFloat32);
  for (int64_t i = 0; i < n; ++i) p[i] = float(pos[i]);
  auto ang = torch::outer(p, inv_freq);
  auto c = ang.cos().to(x.scalar_type()).unsqueeze(1);
  auto s = ang.sin().to(x.scalar_type()).unsqueeze(1);
  auto x1 = x.slice(2, 0, half), x2 = x.slice(2, half, hd);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, 2);
}

/// Causal self-attention over n rows; query i sees keys j <= i with visible[j].
torch::Tensor attention(const Weights& w, const std::string& pre, const lol::LoLConfig& c, const torch::Tensor& hn,
                        const std::vector<int64_t>& pos, const std::vector<uint8_t>& visible) {
  const int64_t n = hn.size(0), H = c.n_heads, Hkv = c.n_kv_heads, hd = c.head_dim(), G = H / Hkv;
  auto q = rope(mm_t(hn, W(w, pre + "q_proj.weight")).view({n, H, hd}), pos, c.rope_theta);
  auto k = rope(mm_t(hn, W(w, pre + "k_proj.weight")).view({n, Hkv, hd}), pos, c.rope_theta);
  auto v = mm_t(hn, W(w, pre + "v_proj.weight")).view({n, Hkv, hd});
  // Query head h reads kv head h / G (Hugging Face repeat_kv).
  auto kh = k.repeat_interleave(G, 1).permute({1, 0, 2});  // [H, n, hd]
  auto vh = v.repeat_interleave(G, 1).permute({1, 0, 2});
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> keys;
    for (int64_t j = 0; j <= i; ++j)
      if (visible[j]) keys.push_back(j);
    if (keys.empty()) {
      rows.push_back(torch::zeros({H, hd}, hn.options()));
      continue;
    }
    auto idx = torch::tensor(keys, torch::kInt64);
    auto keys_h = kh.index_select(1, idx);  // [H, m, hd]
    auto vals_h = vh.index_select(1, idx);
    auto scores = (q[i].unsqueeze(1) * keys_h).sum(-1) / std::sqrt(double(hd));  // [H, m]
    auto p = torch::softmax(scores, -1);
    rows.push_back((p.unsqueeze(-1) * vals_h).sum(1));  // [H, hd]
  }
  auto o = torch::stack(rows, 0).reshape({n, H * hd});
  return mm_t(o, W(w, pre + "o_proj.weight"));
}

/// One pre-norm block; `film` is the FiLM prefix ("" outside the routed core).
torch::Tensor block(const Weights& w, const std::string& pre, const std::string& film, const lol::LoLConfig& c,
                    const torch::Tensor& x, const std::vector<int64_t>& pos, const std::vector<uint8_t>& visible) {
  auto hn = rmsnorm(x, W(w, pre + "input_layernorm.weight"), c.norm_eps);
  if (!film.empty()) hn = W(w, film + "attn_gamma") * hn + W(w, film + "attn_beta");
  auto h = x + attention(w, pre + "self_attn.", c, hn, pos, visible);
  auto m = rmsnorm(h, W(w, pre + "post_attention_layernorm.weight"), c.norm_eps);
  if (!film.empty()) m = W(w, film + "ffn_gamma") * m + W(w, film + "ffn_beta");
  auto ff = mm_t(torch::silu(mm_t(m, W(w, pre + "mlp.gate_proj.weight"))) * mm_t(m, W(w, pre + "mlp.up_proj.weight")),
                   W(w, pre + "mlp.down_proj.weight"));
  return h + ff;
}

/// Logits [n, V] of one document (positions 0..n-1 of the document).
torch::Tensor forward_doc(const Weights& w, const lol::LoLConfig& c, const std::vector<int64_t>& tokens,
                          const std::vector<uint8_t>& visible, int64_t prompt, int64_t doc_begin, const RefOptions& opt,
                          std::vector<RefDecision>* trace) {
  const int64_t n = int64_t(tokens.size());
  std::vector<int64_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = i;
  const auto& emb = W(w, "model.embed_tokens.weight");
  auto x = emb.index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < c.n_prelude; ++i)
    x = block(w, "model.prelude." + std::to_string(i) + ".", "", c, x, pos, visible);

  const int64_t D = opt.active_depth < 0 ? c.core_depth : opt.active_depth;
  const auto& bias = W(w, "model.balance_bias");
  for (int64_t l = 1; l <= D; ++l) {
    // Windows of this depth: maximal runs of equal window index.
    std::vector<std::pair<int64_t, int64_t>> win;  // [begin, end)
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = ref_window_index(j, l, c.window, c.stride, prompt);
      if (int64_t(win.size()) == k) win.push_back({j, j + 1});
      else if (int64_t(win.size()) == k + 1) win.back().second = j + 1;
      else throw std::runtime_error("reference: window indices not consecutive");
    }
    std::vector<torch::Tensor> mu;
    for (auto [b, e] : win) mu.push_back(x.slice(0, b, e).mean(0));
    const auto& Wr = c.untied_router ? W(w, "model.routers." + std::to_string(l - 1) + ".weight") : W(w, "model.router.weight");
    std::vector<torch::Tensor> pieces;
    for (int64_t k = 0; k < int64_t(win.size()); ++k) {
      torch::Tensor r;
      if (k == 0) {
        r = 0.5 * (W(w, "model.depth_embed")[l - 1] + x[0]);
      } else {
        r = mu[0];
        for (int64_t j = 1; j < k; ++j) r = r + mu[j];
        r = r / double(k);
      }
      auto a = torch::softmax(torch::matmul(Wr, r), -1);  // [L]
      auto ad = a.detach().to(torch::kFloat64), bd = bias.detach().to(torch::kFloat64);
      int64_t best = 0;
      std::vector<double> score(c.library_size);
      for (int64_t m = 0; m < c.library_size; ++m) score[m] = ad[m].item<double>() + bd[m].item<double>();
      for (int64_t m = 1; m < c.library_size; ++m)
        if (score[m] > score[best]) best = m;
      double second = -std::numeric_limits<double>::infinity();
      for (int64_t m = 0; m < c.library_size; ++m)
        if (m != best) second = std::max(second, score[m]);
      int64_t expert = best;
      torch::Tensor alpha;
      bool forced = false;
      if (opt.force) {
        if (auto fc = opt.force->at(l - 1, k)) {
          forced = true;
          expert = fc->expert;
          if (fc->alpha) alpha = torch::tensor(*fc->alpha, a.options());
        }
      }
      if (!alpha.defined()) alpha = a[expert];
      const auto [b, e] = win[k];
      std::vector<int64_t> wpos(pos.begin() + b, pos.begin() + e);
      std::vector<uint8_t> wvis(visible.begin() + b, visible.begin() + e);
      auto xs = x.slice(0, b, e);
      auto y = block(w, "model.library." + std::to_string(expert) + ".", "model.film." + std::to_string(l - 1) + ".", c,
                     xs, wpos, wvis);
      pieces.push_back(xs + alpha * (y - xs));
      if (trace) {
        RefDecision d;
        d.doc_begin = doc_begin;
        d.depth = l;
        d.k = k;
        d.begin = doc_begin + b;
        d.len = e - b;
        d.expert = expert;
        d.forced = forced;
        d.alpha = alpha.detach().to(torch::kFloat64).item<double>();
        for (int64_t m = 0; m < c.library_size; ++m) d.probs.push_back(ad[m].item<double>());
        d.margin = score[best] - second;
        trace->push_back(d);
      }
    }
    x = torch::cat(pieces, 0);
  }
  for (int64_t i = 0; i < c.n_coda; ++i) x = block(w, "model.coda." + std::to_string(i) + ".", "", c, x, pos, visible);
  x = rmsnorm(x, W(w, "model.norm.weight"), c.norm_eps);
  return mm_t(x, c.tie_embeddings ? emb : W(w, "lm_head.weight"));
}

}  // namespace

int64_t ref_window_index(int64_t j, int64_t depth, int64_t Wn, int64_t S, int64_t prompt_len) {
  const int64_t delta = ((depth - 1) * S) % Wn;
  if (prompt_len > 0) return j < prompt_len ? 0 : 1 + (j - prompt_len + delta) / Wn;
  return (j + delta) / Wn;
}

Weights weights_of(lol::LoLModel& m) {
  Weights w;
  for (auto& p : m->named_parameters(true)) w[p.key()] = p.value();
  for (auto& b : m->named_buffers(true)) w[b.key()] = b.value();
  return w;
}

torch::Tensor ref_forward_row(const Weights& w, const lol::LoLConfig& c, const RefRow& row, const RefOptions& opt,
                              std::vector<RefDecision>* trace) {
  const int64_t T = int64_t(row.tokens.size());
  const auto& emb = W(w, "model.embed_tokens.weight");
  std::vector<torch::Tensor> parts;
  int64_t i = 0;
  while (i < T) {
    const int64_t id = row.doc_ids.empty() ? 0 : row.doc_ids[i];
    int64_t j = i + 1;
    while (j < T && (row.doc_ids.empty() ? 0 : row.doc_ids[j]) == id) ++j;
    if (id < 0) {
      parts.push_back(torch::zeros({j - i, c.vocab_size}, emb.options()));
    } else {
      std::vector<int64_t> toks(row.tokens.begin() + i, row.tokens.begin() + j);
      std::vector<uint8_t> vis(j - i, 1);
      if (!row.router_only.empty())
        for (int64_t t = i; t < j; ++t) vis[t - i] = row.router_only[t] ? 0 : 1;
      parts.push_back(forward_doc(w, c, toks, vis, i == 0 ? row.prompt_len : 0, i, opt, trace));
    }
    i = j;
  }
  if (parts.empty()) return torch::zeros({0, c.vocab_size}, emb.options());
  return torch::cat(parts, 0);
}

}  // namespace reftest
