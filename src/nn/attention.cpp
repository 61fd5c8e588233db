#include "nn/attention.h"

#include <cmath>
#include <limits>

namespace lol::nn {

torch::Tensor segment_causal_mask(const torch::Tensor& slot_valid, const torch::Tensor& key_visible) {
  const int64_t L = slot_valid.size(1);
  auto causal = torch::ones({L, L}, slot_valid.options().dtype(torch::kBool)).tril();
  auto keys = key_visible.defined() ? (slot_valid & key_visible) : slot_valid;
  return causal.unsqueeze(0) & keys.unsqueeze(1);
}

namespace {

/// masked_attention(); `rows_may_be_empty` = false promises that every query row has
/// at least one allowed key (true whenever no key-visibility mask is applied: slot 0
/// of a segment is always valid and causally visible). Then the final multiplication
/// by the mask is skipped: softmax already gives exactly 0 to blocked keys, so the
/// result and its gradients are unchanged, and one [S, H, Lq, Lk] temporary less is
/// kept for backward.
torch::Tensor attention_impl(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& allowed, bool rows_may_be_empty) {
  const int64_t S = q.size(0), H = q.size(1), Lq = q.size(2), hd = q.size(3);
  const int64_t Hkv = k.size(1), Lk = k.size(2);
  const int64_t G = H / Hkv;
  const double scale = 1.0 / std::sqrt(double(hd));
  // Group query heads by their kv head: no copy of k/v per query head.
  auto qg = q.reshape({S, Hkv, G * Lq, hd});
  auto scores = torch::matmul(qg, k.transpose(-1, -2)).mul_(scale);  // [S, Hkv, G*Lq, Lk]
  scores = scores.view({S, Hkv, G, Lq, Lk});
  auto mask = allowed.view({S, 1, 1, Lq, Lk});
  scores.masked_fill_(mask.logical_not(), std::numeric_limits<float>::lowest());  // in place: no copy
  auto probs = torch::softmax(scores, -1);
  if (rows_may_be_empty) probs = probs * mask.to(scores.scalar_type());
  auto out = torch::matmul(probs.view({S, Hkv, G * Lq, Lk}), v);  // [S, Hkv, G*Lq, hd]
  return out.view({S, H, Lq, hd});
}

}  // namespace

torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& allowed) {
  return attention_impl(q, k, v, allowed, /*rows_may_be_empty=*/true);
}

AttentionImpl::AttentionImpl(const AttentionShape& s) : shape(s) {
  using torch::nn::LinearOptions;
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_heads * s.head_dim).bias(s.qkv_bias)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_kv_heads * s.head_dim).bias(s.qkv_bias)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_kv_heads * s.head_dim).bias(s.qkv_bias)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(s.n_heads * s.head_dim, s.d_model).bias(false)));
}

void AttentionImpl::project(const torch::Tensor& x, const torch::Tensor& pos, RoPE& rope, torch::Tensor& q,
                            torch::Tensor& k, torch::Tensor& v) {
  const int64_t N = x.size(0);
  q = rope.apply(q_proj(x).view({N, shape.n_heads, shape.head_dim}), pos);
  k = rope.apply(k_proj(x).view({N, shape.n_kv_heads, shape.head_dim}), pos);
  v = v_proj(x).view({N, shape.n_kv_heads, shape.head_dim});
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& pos, const SegmentLayout& layout,
                                     const torch::Tensor& key_visible, RoPE& rope) {
  const int64_t N = x.size(0);
  torch::Tensor q, k, v;
  project(x, pos, rope, q, k, v);
  // [N, h, hd] -> [S, L, h, hd] -> [S, h, L, hd]
  auto qp = layout.to_padded(q).permute({0, 2, 1, 3});
  auto kp = layout.to_padded(k).permute({0, 2, 1, 3});
  auto vp = layout.to_padded(v).permute({0, 2, 1, 3});
  torch::Tensor kv_vis;
  if (key_visible.defined()) kv_vis = layout.to_padded(key_visible.to(torch::kUInt8)).to(torch::kBool);
  auto allowed = segment_causal_mask(layout.slot_valid, kv_vis);
  auto o = attention_impl(qp.contiguous(), kp.contiguous(), vp.contiguous(), allowed,
                          /*rows_may_be_empty=*/kv_vis.defined());  // [S, H, L, hd]
  auto flat = layout.from_padded(o.permute({0, 2, 1, 3}).contiguous());               // [N, H, hd]
  return o_proj(flat.view({N, shape.n_heads * shape.head_dim}));
}

}  // namespace lol::nn
