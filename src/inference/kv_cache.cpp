#include "inference/kv_cache.h"

#include <cmath>

#include "core/index_tensor.h"
#include "nn/mask_fill.h"

namespace lol::inference {

KVCache::KVCache(int64_t batch, int64_t kv_heads, int64_t head_dim, int64_t capacity, const torch::TensorOptions& opt) {
  k = torch::zeros({batch, kv_heads, capacity, head_dim}, opt);
  v = torch::zeros({batch, kv_heads, capacity, head_dim}, opt);
}

void KVCache::reserve(int64_t slots) {
  const int64_t cap = capacity();
  if (slots <= cap) return;
  const int64_t grown = std::max(slots, 2 * cap);
  auto grow = [&](torch::Tensor& t) {
    auto n = torch::zeros({t.size(0), t.size(1), grown, t.size(3)}, t.options());
    n.narrow(2, 0, cap).copy_(t);
    t = n;
  };
  grow(k);
  grow(v);
}

int64_t KVCache::bytes() const {
  return k.defined() ? int64_t(k.numel() * k.element_size() + v.numel() * v.element_size()) : 0;
}

AttnPlan AttnPlan::build(const std::vector<AttnSegment>& segs, int64_t n, const uint8_t* visible,
                         const torch::TensorOptions& opt, int64_t window) {
  AttnPlan p;
  const auto dev = opt.device();
  p.n = n;
  p.S = int64_t(segs.size());
  bool contiguous_rows = true;
  for (int64_t s = 0; s < p.S; ++s) {
    p.Lq = std::max(p.Lq, segs[s].count);
    if (segs[s].row != segs[0].row + s) contiguous_rows = false;
  }
  // Key limit of each query (keys at slots < lim) and the write destinations.
  std::vector<int64_t> lim(n, 0), w_tok, w_row, w_slot;
  w_tok.reserve(n);
  for (const auto& g : segs) {
    int64_t seen = g.base;
    for (int64_t i = 0; i < g.count; ++i) {
      const int64_t t = g.first + i;
      if (!visible || visible[t]) {
        w_tok.push_back(t);
        w_row.push_back(g.row);
        w_slot.push_back(seen);
        ++seen;
      }
      lim[t] = seen;
    }
    p.Lk = std::max(p.Lk, seen);
  }
  p.needed_slots = p.Lk;
  if (contiguous_rows && p.S > 0)
    p.row_begin = segs[0].row;
  else {
    std::vector<int64_t> rows(p.S);
    for (int64_t s = 0; s < p.S; ++s) rows[s] = segs[s].row;
    p.rows = index_tensor(rows, dev);
  }
  p.one_per_segment = (p.Lq == 1 && n == p.S);
  for (int64_t s = 0; s < p.S && p.one_per_segment; ++s) p.one_per_segment = segs[s].first == s;
  std::vector<int64_t> qs(n, 0);
  if (!p.one_per_segment) {
    for (int64_t s = 0; s < p.S; ++s)
      for (int64_t i = 0; i < segs[s].count; ++i) qs[segs[s].first + i] = s * p.Lq + i;
    p.q_slot = index_tensor(qs, dev);
  }
  p.n_write = int64_t(w_tok.size());
  p.write_all = p.n_write == n;
  for (int64_t i = 0; i < p.n_write && p.write_all; ++i) p.write_all = w_tok[i] == i;
  if (p.n_write == 1) {  // written through views: no index upload
    p.single_tok = w_tok[0];
    p.single_row = w_row[0];
    p.single_slot = w_slot[0];
  } else if (p.n_write > 1) {
    const auto t = index_tensors({&w_tok, &w_row, &w_slot}, dev);  // one upload on a GPU
    if (!p.write_all) p.write_tok = t[0];
    p.write_row = t[1];
    p.write_slot = t[2];
  }
  // Sliding window: a query sees keys [lim - W, lim); slots before the smallest start
  // are read by no query and left out.
  auto first_key = [&](int64_t l) { return window > 0 ? std::max<int64_t>(0, l - window) : int64_t(0); };
  if (window > 0) {
    p.k_begin = p.Lk;
    for (const auto& g : segs)
      for (int64_t i = 0; i < g.count; ++i) p.k_begin = std::min(p.k_begin, first_key(lim[g.first + i]));
  }
  const int64_t Lkv = p.Lk - p.k_begin;
  // Masks: a padded query slot, or a key slot outside the query's [first key, limit), is blocked.
  bool any_blocked = false, any_empty = false;
  std::vector<uint8_t> blocked(p.S * p.Lq * Lkv, 1);
  for (int64_t s = 0; s < p.S; ++s) {
    for (int64_t i = 0; i < p.Lq; ++i) {
      const int64_t l = i < segs[s].count ? lim[segs[s].first + i] : 0;
      const int64_t f = i < segs[s].count ? first_key(l) : 0;
      if (l == 0) any_empty = true;
      if (l < p.Lk || f > p.k_begin) any_blocked = true;
      if (l > f)
        std::fill(blocked.begin() + (s * p.Lq + i) * Lkv + (f - p.k_begin),
                  blocked.begin() + (s * p.Lq + i) * Lkv + (l - p.k_begin), uint8_t(0));
    }
  }
  if (any_blocked && Lkv > 0) {
    auto b = torch::from_blob(blocked.data(), {p.S, 1, 1, p.Lq, Lkv}, torch::kUInt8).to(torch::kBool);
    p.blocked = dev.is_cpu() ? b : b.to(dev);
    if (any_empty) p.keep = p.blocked.logical_not().to(opt.dtype());
  }
  return p;
}

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache& cache,
                               const AttnPlan& p, double softcap) {
  using torch::indexing::Slice;
  const int64_t n = q.size(0), H = q.size(1), hd = q.size(2), Hkv = k.size(1);
  const int64_t G = H / Hkv;
  // 1. Store the visible tokens' keys and values.
  if (p.n_write == 1) {
    cache.k.select(0, p.single_row).select(1, p.single_slot).copy_(k[p.single_tok]);
    cache.v.select(0, p.single_row).select(1, p.single_slot).copy_(v[p.single_tok]);
  } else if (p.n_write > 1) {
    auto kw = p.write_all ? k : k.index_select(0, p.write_tok);
    auto vw = p.write_all ? v : v.index_select(0, p.write_tok);
    cache.k.index_put_({p.write_row, Slice(), p.write_slot}, kw);
    cache.v.index_put_({p.write_row, Slice(), p.write_slot}, vw);
  }
  const int64_t Lkv = p.Lk - p.k_begin;
  if (Lkv == 0) return torch::zeros({n, H * hd}, q.options());
  // 2. Keys and values of the segments: [S, Hkv, Lk - k_begin, hd].
  torch::Tensor K, V;
  if (p.row_begin >= 0) {
    K = cache.k.narrow(0, p.row_begin, p.S).narrow(2, p.k_begin, Lkv);
    V = cache.v.narrow(0, p.row_begin, p.S).narrow(2, p.k_begin, Lkv);
  } else {
    K = cache.k.narrow(2, p.k_begin, Lkv).index_select(0, p.rows);
    V = cache.v.narrow(2, p.k_begin, Lkv).index_select(0, p.rows);
  }
  // 3. Queries [S, Hkv, G Lq, hd].
  torch::Tensor Q;
  if (p.one_per_segment) {
    Q = q.reshape({p.S, Hkv, G, hd});
  } else {
    Q = torch::zeros({p.S * p.Lq, H, hd}, q.options()).index_copy_(0, p.q_slot, q);
    Q = Q.view({p.S, p.Lq, H, hd}).permute({0, 2, 1, 3}).reshape({p.S, Hkv, G * p.Lq, hd});
  }
  // 4. Masked softmax attention (same arithmetic as nn::masked_attention).
  const double scale = 1.0 / std::sqrt(double(hd));
  auto scores = torch::matmul(Q, K.transpose(-1, -2)).mul_(scale);  // [S, Hkv, G Lq, Lk]
  scores = nn::soft_cap(scores, softcap);
  if (p.blocked.defined()) {
    scores = scores.view({p.S, Hkv, G, p.Lq, Lkv}).masked_fill_(p.blocked, nn::lowest_finite(scores.scalar_type()));
    scores = scores.view({p.S, Hkv, G * p.Lq, Lkv});
  }
  auto probs = nn::score_softmax(scores);
  if (p.keep.defined()) probs = probs.view({p.S, Hkv, G, p.Lq, Lkv}).mul_(p.keep).view({p.S, Hkv, G * p.Lq, Lkv});
  auto out = torch::matmul(probs, V);  // [S, Hkv, G Lq, hd]
  if (p.one_per_segment) return out.view({n, H * hd});
  out = out.view({p.S, H, p.Lq, hd}).permute({0, 2, 1, 3}).reshape({p.S * p.Lq, H * hd});
  return out.index_select(0, p.q_slot);
}

}  // namespace lol::inference
