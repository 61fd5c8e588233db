#include "nn/attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

namespace lol::nn {

int kernel_threads(int64_t tasks) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  at::parallel_for(0, tasks, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  return int(ids.size());
}

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

// ---------------------------------------------------------------------------------
// Direct CPU kernel for attention over segments (float32 / float64), used by
// AttentionImpl::forward on CPU. It reads q/k/v in their flat [N, heads, hd] layout
// through each segment's row list (no padded copies, no [S, L, L] mask, no batched
// matmul whose per-matrix dispatch dominates at window sizes), computes only the
// causal triangle j <= i of each segment, and keeps the softmax probabilities
// (packed triangles, half of the padded [S, H, L, L] the composed path keeps) for
// the backward. Tested equal to masked_attention() on the padded layout
// (tests/model/test_fused_ops.cpp) and, through the model, to the per-window
// reference (ReferenceEquivalence).
namespace {

// The float32 tasks are compiled three times (x86-64-v4 = AVX-512, v3 = AVX2 + FMA,
// baseline SSE2) and the loader picks the widest the CPU has (GCC function
// multi-versioning); the templates are inlined into each clone so that their loops are
// vectorised for its ISA. Other compilers and architectures build the baseline only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOL_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define LOL_KERNEL_INLINE __attribute__((always_inline)) inline
#else
#define LOL_KERNEL_CLONES
#define LOL_KERNEL_INLINE inline
#endif

/// Segment table on the CPU: row lists (the layout's gather), lengths and the offset of
/// each segment's probability triangles (len (len + 1) / 2 per head).
struct Segments {
  torch::Tensor gather;  ///< [n_seg * max_len] int64
  torch::Tensor len;     ///< [n_seg] int64
  torch::Tensor tri;     ///< [n_seg] int64
  int64_t max_len = 0, tri_total = 0;
  int64_t n_seg() const { return len.size(0); }
};

Segments read_segments(const SegmentLayout& layout) {
  Segments g;
  g.max_len = layout.max_len;
  g.gather = layout.gather.to(torch::kCPU).contiguous();
  g.len = torch::empty({layout.n_seg}, torch::kInt64);
  g.tri = torch::empty({layout.n_seg}, torch::kInt64);
  const int64_t* gp = g.gather.data_ptr<int64_t>();
  int64_t* lp = g.len.data_ptr<int64_t>();
  int64_t* tp = g.tri.data_ptr<int64_t>();
  for (int64_t s = 0; s < layout.n_seg; ++s) {
    int64_t n = 0;
    while (n < g.max_len && gp[s * g.max_len + n] != layout.n_tokens) ++n;
    lp[s] = n;
    tp[s] = g.tri_total;
    g.tri_total += n * (n + 1) / 2;
  }
  return g;
}

template <typename T>
struct AttnArgs {
  const T *q, *k, *v;   // [N, H, hd], [N, Hkv, hd], [N, Hkv, hd]
  const bool* visible;  // [N] or nullptr (all visible)
  int64_t H, Hkv, hd;
  T scale;
};

/// Copies kv head `hk` of the segment's L rows of src [N, Hkv, hd] into a local buffer:
/// [L, hd] row-major, or [hd, L] when `transpose` (so that loops over keys run contiguously).
template <typename T>
LOL_KERNEL_INLINE void load_segment_head(const T* src, const AttnArgs<T>& a, const int64_t* rows, int64_t L,
                                         int64_t hk, T* dst, bool transpose) {
  const int64_t hd = a.hd;
  for (int64_t j = 0; j < L; ++j) {
    const T* r = src + (rows[j] * a.Hkv + hk) * hd;
    if (transpose)
      for (int64_t d = 0; d < hd; ++d) dst[d * L + j] = r[d];
    else
      std::copy(r, r + hd, dst + j * hd);
  }
}

/// exp(x) for the softmax: float32 through a branch-free Cephes-style polynomial that
/// the compiler vectorises (std::exp is a libm call per element); double through
/// std::exp. Float: x is clamped to [-87, 88] (so exp(-inf) is ~1e-38, callers mask it
/// to 0); the polynomial's relative error is ~1e-7 (a few ulp). The kernel's softmax is
/// tested equal to the composed one (tests/model/test_fused_ops.cpp).
template <typename T>
LOL_KERNEL_INLINE T softmax_exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    // x = n ln2 + r with n = round(x / ln2) (adding 1.5 * 2^23 rounds to an integer in
    // the float's low mantissa bits), |r| <= ln2 / 2; ln2 in two parts (Cephes).
    const float t = x * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    const int32_t ni = __builtin_bit_cast(int32_t, t) - 0x4B400000;   // n as an integer, -126..127
    return y * __builtin_bit_cast(float, (ni + 127) << 23);           // * 2^n
  } else {
    return std::exp(x);
  }
}

/// Forward of one (segment, kv head) for its G query heads: for each query i,
/// p_ij = softmax over visible j <= i of (q_i . k_j) * scale, o_i = sum_j p_ij v_j.
/// A query with no visible key gets o_i = 0 and p_i. = 0. P: this segment's [H, tri] block.
/// The max / exp / sum reductions are `omp simd` loops (the file is built with -fopenmp
/// or -fopenmp-simd, never -ffast-math): vectorised, summed in lanes.
template <typename T>
LOL_KERNEL_INLINE void forward_task(const AttnArgs<T>& a, const int64_t* rows, int64_t L, int64_t hk, T* out, T* P) {
  const int64_t hd = a.hd, G = a.H / a.Hkv;
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> kt(size_t(hd * L)), vv(size_t(L * hd));  // K transposed [hd, L], V [L, hd]
  load_segment_head(a.k, a, rows, L, hk, kt.data(), /*transpose=*/true);
  load_segment_head(a.v, a, rows, L, hk, vv.data(), /*transpose=*/false);
  // Key visibility of the segment's rows: additive (0 / -inf) for the max, multiplicative
  // (1 / 0) for the exponentials; visible_upto[i]: whether any key j <= i is visible
  // (not read from the max: an `omp simd` max reduction may start at the lowest finite value).
  std::vector<T> neg_v(size_t(L), T(0)), keep_v(size_t(L), T(1));
  std::vector<uint8_t> visible_upto(size_t(L), 1);
  if (a.visible) {
    bool any = false;
    for (int64_t j = 0; j < L; ++j) {
      if (!a.visible[rows[j]]) neg_v[size_t(j)] = -inf, keep_v[size_t(j)] = T(0);
      else any = true;
      visible_upto[size_t(j)] = any;
    }
  }
  const T* __restrict neg = neg_v.data();
  const T* __restrict keep = keep_v.data();
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = hk * G + g;
    T* Ph = P + h * (L * (L + 1) / 2);
    for (int64_t i = 0; i < L; ++i) {
      T* __restrict p = Ph + i * (i + 1) / 2;  // p[0 .. i]
      const int64_t n = i + 1;
      const T* qi = a.q + (rows[i] * a.H + h) * hd;
      std::fill(p, p + n, T(0));
      for (int64_t d = 0; d < hd; ++d) {
        const T qd = qi[d] * a.scale;
        const T* kd = kt.data() + d * L;
        for (int64_t j = 0; j < n; ++j) p[j] += qd * kd[j];
      }
      T* oi = out + (rows[i] * a.H + h) * hd;
      if (!visible_upto[size_t(i)]) {  // no visible key: o_i = 0, p_i. = 0
        std::fill(p, p + n, T(0));
        continue;
      }
      T m = -inf;
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < n; ++j) m = std::max(m, p[j] + neg[j]);
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        const T e = keep[j] * softmax_exp<T>(p[j] + neg[j] - m);
        p[j] = e;
        sum += e;
      }
      const T inv = T(1) / sum;
      for (int64_t j = 0; j < n; ++j) p[j] *= inv;
      for (int64_t j = 0; j < n; ++j) {
        const T pj = p[j];
        const T* vj = vv.data() + j * hd;
        for (int64_t d = 0; d < hd; ++d) oi[d] += pj * vj[d];
      }
    }
  }
}

/// Backward of one (segment, kv head) from the saved probabilities:
/// dp_ij = dO_i . v_j, ds_ij = p_ij (dp_ij - sum_j p_ij dp_ij),
/// dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i, dv_j = sum_i p_ij dO_i.
template <typename T>
LOL_KERNEL_INLINE void backward_task(const AttnArgs<T>& a, const T* dout, const int64_t* rows, int64_t L, int64_t hk,
                                     const T* P, T* dq, T* dk, T* dv) {
  const int64_t hd = a.hd, G = a.H / a.Hkv;
  std::vector<T> vt(size_t(hd * L)), kk(size_t(L * hd)), dkl(size_t(L * hd), T(0)), dvl(size_t(L * hd), T(0)),
      dp(size_t(L), T(0));
  load_segment_head(a.v, a, rows, L, hk, vt.data(), /*transpose=*/true);   // V transposed [hd, L]
  load_segment_head(a.k, a, rows, L, hk, kk.data(), /*transpose=*/false);  // K [L, hd]
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = hk * G + g;
    const T* Ph = P + h * (L * (L + 1) / 2);
    for (int64_t i = 0; i < L; ++i) {
      const T* p = Ph + i * (i + 1) / 2;
      const T* doi = dout + (rows[i] * a.H + h) * hd;
      const T* qi = a.q + (rows[i] * a.H + h) * hd;
      T* dqi = dq + (rows[i] * a.H + h) * hd;
      std::fill(dp.begin(), dp.begin() + i + 1, T(0));
      for (int64_t d = 0; d < hd; ++d) {
        const T od = doi[d];
        const T* vd = vt.data() + d * L;
        for (int64_t j = 0; j <= i; ++j) dp[size_t(j)] += od * vd[j];
      }
      T D = 0;
      for (int64_t j = 0; j <= i; ++j) D += p[j] * dp[size_t(j)];
      for (int64_t j = 0; j <= i; ++j) {
        const T pj = p[j];
        if (pj == T(0)) continue;
        const T ds = pj * (dp[size_t(j)] - D) * a.scale;
        const T* kj = kk.data() + j * hd;
        T* dkj = dkl.data() + j * hd;
        T* dvj = dvl.data() + j * hd;
        for (int64_t d = 0; d < hd; ++d) {
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
          dvj[d] += pj * doi[d];
        }
      }
    }
  }
  for (int64_t j = 0; j < L; ++j) {
    std::copy(dkl.data() + j * hd, dkl.data() + (j + 1) * hd, dk + (rows[j] * a.Hkv + hk) * hd);
    std::copy(dvl.data() + j * hd, dvl.data() + (j + 1) * hd, dv + (rows[j] * a.Hkv + hk) * hd);
  }
}

LOL_KERNEL_CLONES void forward_task_f32(const AttnArgs<float>& a, const int64_t* rows, int64_t L, int64_t hk,
                                         float* out, float* P) {
  forward_task<float>(a, rows, L, hk, out, P);
}

LOL_KERNEL_CLONES void backward_task_f32(const AttnArgs<float>& a, const float* dout, const int64_t* rows, int64_t L,
                                          int64_t hk, const float* P, float* dq, float* dk, float* dv) {
  backward_task<float>(a, dout, rows, L, hk, P, dq, dk, dv);
}

template <typename T>
AttnArgs<T> attn_args(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& visible) {
  return {q.data_ptr<T>(), k.data_ptr<T>(), v.data_ptr<T>(), visible.numel() > 0 ? visible.data_ptr<bool>() : nullptr,
          q.size(1),       k.size(1),       q.size(2),       T(1.0 / std::sqrt(double(q.size(2))))};
}

/// Runs fn(segment, kv head) over all pairs in parallel: the pairs write disjoint
/// rows of every output (segments are disjoint row sets).
template <typename F>
void for_each_task(const Segments& g, int64_t Hkv, const F& fn) {
  at::parallel_for(0, g.n_seg() * Hkv, 4, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) fn(t / Hkv, t % Hkv);
  });
}

template <typename T>
void segment_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& visible, const Segments& g, torch::Tensor& out, torch::Tensor& P) {
  const auto a = attn_args<T>(q, k, v, visible);
  const int64_t *gp = g.gather.data_ptr<int64_t>(), *lp = g.len.data_ptr<int64_t>(), *tp = g.tri.data_ptr<int64_t>();
  T* op = out.data_ptr<T>();
  T* pp = P.data_ptr<T>();
  for_each_task(g, a.Hkv, [&](int64_t s, int64_t hk) {
    if constexpr (std::is_same_v<T, float>)
      forward_task_f32(a, gp + s * g.max_len, lp[s], hk, op, pp + a.H * tp[s]);
    else
      forward_task<T>(a, gp + s * g.max_len, lp[s], hk, op, pp + a.H * tp[s]);
  });
}

template <typename T>
void segment_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& visible, const Segments& g, const torch::Tensor& P,
                      const torch::Tensor& dout, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  const auto a = attn_args<T>(q, k, v, visible);
  const int64_t *gp = g.gather.data_ptr<int64_t>(), *lp = g.len.data_ptr<int64_t>(), *tp = g.tri.data_ptr<int64_t>();
  const T* pp = P.data_ptr<T>();
  const T* dop = dout.data_ptr<T>();
  T *dqp = dq.data_ptr<T>(), *dkp = dk.data_ptr<T>(), *dvp = dv.data_ptr<T>();
  for_each_task(g, a.Hkv, [&](int64_t s, int64_t hk) {
    if constexpr (std::is_same_v<T, float>)
      backward_task_f32(a, dop, gp + s * g.max_len, lp[s], hk, pp + a.H * tp[s], dqp, dkp, dvp);
    else
      backward_task<T>(a, dop, gp + s * g.max_len, lp[s], hk, pp + a.H * tp[s], dqp, dkp, dvp);
  });
}

/// Autograd node of the direct kernel. q [N, H, hd], k/v [N, Hkv, hd] contiguous,
/// visible [N] bool (empty = all visible). Rows in no segment get 0.
struct SegmentAttentionFunction : public torch::autograd::Function<SegmentAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& visible, const Segments& g) {
    // Named for profilers and FLOP counters: the last input is the number of causal
    // (query, key) pairs per head, so executed FLOPs = 4 H hd pairs.
    RECORD_FUNCTION("lol::segment_attention", std::vector<c10::IValue>({q, k, v, c10::IValue(g.tri_total)}));
    auto out = torch::zeros_like(q);
    auto P = torch::empty({q.size(1) * g.tri_total}, q.options());
    if (q.scalar_type() == torch::kFloat32)
      segment_forward<float>(q, k, v, visible, g, out, P);
    else
      segment_forward<double>(q, k, v, visible, g, out, P);
    ctx->save_for_backward({q, k, v, P});
    ctx->saved_data["visible"] = visible;
    ctx->saved_data["gather"] = g.gather;
    ctx->saved_data["len"] = g.len;
    ctx->saved_data["tri"] = g.tri;
    ctx->saved_data["max_len"] = g.max_len;
    return out;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::segment_attention_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    Segments g;
    g.gather = ctx->saved_data["gather"].toTensor();
    g.len = ctx->saved_data["len"].toTensor();
    g.tri = ctx->saved_data["tri"].toTensor();
    g.max_len = ctx->saved_data["max_len"].toInt();
    auto visible = ctx->saved_data["visible"].toTensor();
    auto dout = grads[0].contiguous();
    auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    if (q.scalar_type() == torch::kFloat32)
      segment_backward<float>(q, k, v, visible, g, saved[3], dout, dq, dk, dv);
    else
      segment_backward<double>(q, k, v, visible, g, saved[3], dout, dq, dk, dv);
    return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
  }
};

bool direct_kernel_applies(const torch::Tensor& q) {
  return q.device().is_cpu() && (q.scalar_type() == torch::kFloat32 || q.scalar_type() == torch::kFloat64);
}

}  // namespace

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
  if (direct_kernel_applies(q)) {
    auto vis = key_visible.defined() ? key_visible.to(torch::kCPU, torch::kBool).contiguous()
                                     : torch::empty({0}, torch::kBool);
    auto o = SegmentAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(), vis,
                                             read_segments(layout));
    return o_proj(o.view({N, shape.n_heads * shape.head_dim}));
  }
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
