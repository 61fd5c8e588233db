#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/mask_fill.h"
#include "nn/vec_math.h"
#include "core/runtime.h"

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
                             const torch::Tensor& allowed, bool rows_may_be_empty, double softcap = 0) {
  const int64_t S = q.size(0), H = q.size(1), Lq = q.size(2), hd = q.size(3);
  const int64_t Hkv = k.size(1), Lk = k.size(2);
  const int64_t G = H / Hkv;
  const double scale = 1.0 / std::sqrt(double(hd));
  // Group query heads by their kv head: no copy of k/v per query head.
  auto qg = q.reshape({S, Hkv, G * Lq, hd});
  auto scores = torch::matmul(qg, k.transpose(-1, -2)).mul_(scale);  // [S, Hkv, G*Lq, Lk]
  scores = soft_cap(scores, softcap);  // Gemma 2 (0: unchanged)
  scores = scores.view({S, Hkv, G, Lq, Lk});
  auto mask = allowed.view({S, 1, 1, Lq, Lk});
  scores.masked_fill_(mask.logical_not(), lowest_finite(scores.scalar_type()));  // in place: no copy
  auto probs = score_softmax(scores);
  if (rows_may_be_empty) probs = probs * mask.to(scores.scalar_type());
  auto out = torch::matmul(probs.view({S, Hkv, G * Lq, Lk}), v);  // [S, Hkv, G*Lq, hd]
  return out.view({S, H, Lq, hd});
}

}  // namespace

torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& allowed, double softcap) {
  return attention_impl(q, k, v, allowed, /*rows_may_be_empty=*/true, softcap);
}

// ---------------------------------------------------------------------------------
// Direct CPU kernel for attention over segments (float32 / float64), used by
// AttentionImpl::forward on CPU. It reads q/k/v in their flat [N, heads, hd] layout
// through each segment's row list (no padded copies, no [S, L, L] mask, no batched
// matmul whose per-matrix dispatch dominates at window sizes), computes only the
// causal triangle j <= i of each segment, and keeps the softmax probabilities
// (packed triangles, half of the padded [S, H, L, L] the composed path keeps) for
// the backward. Each (segment, kv head) task walks its queries kRows at a time with the
// products register-tiled (score_tiles, weighted_rows, accumulate_keys: 64-byte vector
// accumulators; head dims 16/32/64/128 compiled with fixed loop lengths, others with
// runtime ones). Float32 tasks run in ISA clones (nn/vec_math.h). Tested equal to
// masked_attention() on the padded layout (tests/model/test_fused_ops.cpp: float64 to
// 1e-12, segments shorter and longer than the tiles, head_dim 8 and 32) and, through the
// model, to the per-window reference (ReferenceEquivalence).
namespace {

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

/// Register tiling of the kernel: queries are processed kRows at a time (their q, o, dO,
/// dq rows live in registers), scores kKeyVecs SIMD vectors of keys at a time. Each key
/// or value row is then loaded once per kRows queries instead of once per query.
constexpr int64_t kRows = 4;
constexpr int64_t kKeyVecs = 2;

/// A 64-byte SIMD vector of T (16 floats or 8 doubles; GCC / clang vector extension:
/// on AVX2 or SSE the compiler splits it into 2 or 4 registers). Accumulators are
/// arrays of these, which the compiler keeps in registers (plain T arrays it keeps in
/// memory: one load and store per multiply-add).
template <typename T>
struct Simd {
  typedef T V __attribute__((vector_size(64)));
  static constexpr int64_t kLanes = int64_t(64 / sizeof(T));
  // Through references, not by value: the calling convention of a 64-byte vector
  // differs between the ISA clones (-Wpsabi).
  static LOL_KERNEL_INLINE void load(V& v, const T* p) { __builtin_memcpy(&v, p, sizeof v); }
  static LOL_KERNEL_INLINE void store(T* p, const V& v) { __builtin_memcpy(p, &v, sizeof v); }
};

/// Keys per score tile, and the padded key count (row stride of the score and
/// transposed-key buffers) of a segment of L rows.
template <typename T>
constexpr int64_t key_tile() {
  return kKeyVecs * Simd<T>::kLanes;
}
template <typename T>
int64_t padded_keys(int64_t L) {
  return (L + key_tile<T>() - 1) / key_tile<T>() * key_tile<T>();
}

/// Head dimension: HD when the kernel is instantiated for it (loops of fixed length,
/// accumulators in registers), otherwise the runtime value.
template <int HD>
constexpr int64_t head_dim_or(int64_t runtime) {
  return HD > 0 ? HD : runtime;
}

/// Local [kRows, hd] buffer of a task: a fixed-size array when HD is known, else heap.
template <typename T, int HD>
struct RowTile {
  static constexpr int64_t kCols = HD > 0 ? HD : 1;
  alignas(64) T fixed[kRows * kCols];
  std::vector<T> heap;
  T* p;
  explicit RowTile(int64_t hd) : p(fixed) {
    if constexpr (HD == 0) {
      heap.assign(size_t(kRows * hd), T(0));
      p = heap.data();
    }
  }
};

/// Copies kv head `hk` of the segment's L rows of src [N, Hkv, hd] into a local buffer:
/// [L, hd] row-major, or [hd, ld] when `transpose` (ld >= L; so that loops over keys run
/// contiguously; columns L..ld-1 are left as they are).
template <typename T>
LOL_KERNEL_INLINE void load_segment_head(const T* src, const AttnArgs<T>& a, const int64_t* rows, int64_t L,
                                         int64_t hk, T* dst, bool transpose, int64_t ld = 0) {
  const int64_t hd = a.hd;
  for (int64_t j = 0; j < L; ++j) {
    const T* r = src + (rows[j] * a.Hkv + hk) * hd;
    if (transpose)
      for (int64_t d = 0; d < hd; ++d) dst[d * ld + j] = r[d];
    else
      std::copy(r, r + hd, dst + j * hd);
  }
}

/// Copies rows i0 .. i0+nr-1 of head h of src [N, heads, hd] into tile [kRows, hd]
/// times `mul`; tile rows nr .. kRows-1 become 0.
template <typename T, int HD>
LOL_KERNEL_INLINE void load_rows(const T* src, int64_t heads, int64_t h, const int64_t* rows, int64_t i0,
                                 int64_t nr, int64_t hd_rt, T mul, T* tile) {
  const int64_t hd = head_dim_or<HD>(hd_rt);
  for (int64_t r = 0; r < kRows; ++r) {
    T* t = tile + r * hd;
    if (r < nr) {
      const T* s = src + (rows[i0 + r] * heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) t[d] = s[d] * mul;
    } else {
      for (int64_t d = 0; d < hd; ++d) t[d] = T(0);
    }
  }
}

/// S[r, j] = sum_d A[r, d] Bt[d, j] for the kRows tile rows and keys j < jn (in tiles
/// of key_tile<T>(); Bt is [hd, ld] with ld = padded_keys). A: [kRows, hd]; S: [kRows, ld].
template <typename T, int HD>
LOL_KERNEL_INLINE void score_tiles(const T* __restrict A, const T* __restrict Bt, int64_t ld, int64_t jn,
                                   int64_t hd_rt, T* __restrict S) {
  using V = typename Simd<T>::V;
  constexpr int64_t W = Simd<T>::kLanes;
  const int64_t hd = head_dim_or<HD>(hd_rt);
  for (int64_t j0 = 0; j0 < jn; j0 += key_tile<T>()) {
    V acc[kRows][kKeyVecs] = {};
    for (int64_t d = 0; d < hd; ++d) {
      V b[kKeyVecs];
#pragma GCC unroll 4
      for (int64_t v = 0; v < kKeyVecs; ++v) Simd<T>::load(b[v], Bt + d * ld + j0 + v * W);
#pragma GCC unroll 8
      for (int64_t r = 0; r < kRows; ++r) {
        const T ar = A[r * hd + d];
#pragma GCC unroll 4
        for (int64_t v = 0; v < kKeyVecs; ++v) acc[r][v] += ar * b[v];
      }
    }
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < kKeyVecs; ++v) Simd<T>::store(S + r * ld + j0 + v * W, acc[r][v]);
  }
}

/// C[r, :] = sum_{j < jn} S[r, j] B[j, :] for the kRows tile rows. S: [kRows, ld],
/// B: [jn, hd], C: [kRows, hd] (overwritten).
template <typename T, int HD>
LOL_KERNEL_INLINE void weighted_rows(const T* __restrict S, int64_t ld, const T* __restrict B, int64_t jn,
                                     int64_t hd_rt, T* __restrict C) {
  if constexpr (HD > 0) {
    using V = typename Simd<T>::V;
    constexpr int64_t W = Simd<T>::kLanes, NV = HD / W;
    static_assert(HD % W == 0, "specialised head dims are whole SIMD vectors");
    V acc[kRows][NV] = {};
    for (int64_t j = 0; j < jn; ++j) {
      V b[NV];
#pragma GCC unroll 16
      for (int64_t v = 0; v < NV; ++v) Simd<T>::load(b[v], B + j * HD + v * W);
#pragma GCC unroll 8
      for (int64_t r = 0; r < kRows; ++r) {
        const T s = S[r * ld + j];
#pragma GCC unroll 16
        for (int64_t v = 0; v < NV; ++v) acc[r][v] += s * b[v];
      }
    }
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < NV; ++v) Simd<T>::store(C + r * HD + v * W, acc[r][v]);
  } else {
    const int64_t hd = hd_rt;
    std::fill(C, C + kRows * hd, T(0));
    for (int64_t j = 0; j < jn; ++j) {
      const T* b = B + j * hd;
      for (int64_t r = 0; r < kRows; ++r) {
        const T s = S[r * ld + j];
        for (int64_t d = 0; d < hd; ++d) C[r * hd + d] += s * b[d];
      }
    }
  }
}

/// dK[j, :] += sum_r DS[r, j] Q[r, :] and dV[j, :] += sum_r PR[r, j] dO[r, :] for the
/// kRows tile rows and keys j < jn (DS, PR: [kRows, ld]; Q, dO: [kRows, hd]; dK, dV:
/// [L, hd]). Each key row is read and written once; the sum over r runs in registers.
template <typename T, int HD>
LOL_KERNEL_INLINE void accumulate_keys(const T* __restrict DS, const T* __restrict PR, int64_t ld, int64_t jn,
                                       const T* __restrict Q, const T* __restrict dO, int64_t hd_rt,
                                       T* __restrict dK, T* __restrict dV) {
  if constexpr (HD > 0) {
    using V = typename Simd<T>::V;
    constexpr int64_t W = Simd<T>::kLanes, NV = HD / W;
    V q[kRows][NV], o[kRows][NV];
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < NV; ++v) {
        Simd<T>::load(q[r][v], Q + r * HD + v * W);
        Simd<T>::load(o[r][v], dO + r * HD + v * W);
      }
    for (int64_t j = 0; j < jn; ++j) {
      T s[kRows], p[kRows];
      for (int64_t r = 0; r < kRows; ++r) s[r] = DS[r * ld + j], p[r] = PR[r * ld + j];
#pragma GCC unroll 16
      for (int64_t v = 0; v < NV; ++v) {
        V ak, av;
        Simd<T>::load(ak, dK + j * HD + v * W);
        Simd<T>::load(av, dV + j * HD + v * W);
#pragma GCC unroll 8
        for (int64_t r = 0; r < kRows; ++r) {
          ak += s[r] * q[r][v];
          av += p[r] * o[r][v];
        }
        Simd<T>::store(dK + j * HD + v * W, ak);
        Simd<T>::store(dV + j * HD + v * W, av);
      }
    }
  } else {
    const int64_t hd = hd_rt;
    for (int64_t j = 0; j < jn; ++j) {
      T* __restrict dk = dK + j * hd;
      T* __restrict dv = dV + j * hd;
      for (int64_t r = 0; r < kRows; ++r) {
        const T s = DS[r * ld + j], p = PR[r * ld + j];
        for (int64_t d = 0; d < hd; ++d) {
          dk[d] += s * Q[r * hd + d];
          dv[d] += p * dO[r * hd + d];
        }
      }
    }
  }
}

/// Forward of one (segment, kv head) for its G query heads: for each query i,
/// p_ij = softmax over visible j <= i of (q_i . k_j) * scale, o_i = sum_j p_ij v_j.
/// A query with no visible key gets o_i = 0 and p_i. = 0. P: this segment's [H, tri] block.
/// Queries go kRows at a time: scores of the block's causal key range (score_tiles),
/// softmax per row (entries j > i set to 0), then o = P V (weighted_rows).
/// The max / exp / sum reductions are `omp simd` loops (the file is built with -fopenmp
/// or -fopenmp-simd, never -ffast-math): vectorised, summed in lanes.
template <typename T, int HD>
LOL_KERNEL_INLINE void forward_task(const AttnArgs<T>& a, const int64_t* rows, int64_t L, int64_t hk, T* out, T* P) {
  const int64_t hd = head_dim_or<HD>(a.hd), G = a.H / a.Hkv;
  const int64_t ld = padded_keys<T>(L);
  const T inf = std::numeric_limits<T>::infinity();
  // K transposed [hd, ld] (padding columns 0), V [L, hd], scores of a query block [kRows, ld].
  std::vector<T> kt(size_t(hd * ld), T(0)), vv(size_t(L * hd)), S(size_t(kRows * ld));
  load_segment_head(a.k, a, rows, L, hk, kt.data(), /*transpose=*/true, ld);
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
  RowTile<T, HD> qs(hd), o(hd);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = hk * G + g;
    T* Ph = P + h * (L * (L + 1) / 2);
    for (int64_t i0 = 0; i0 < L; i0 += kRows) {
      const int64_t nr = std::min(kRows, L - i0), jn = i0 + nr;  // keys 0 .. jn-1
      load_rows<T, HD>(a.q, a.H, h, rows, i0, nr, hd, a.scale, qs.p);
      score_tiles<T, HD>(qs.p, kt.data(), ld, jn, hd, S.data());
      for (int64_t r = 0; r < kRows; ++r) {
        T* __restrict s = S.data() + r * ld;
        const int64_t i = i0 + r, n = i + 1;
        if (r >= nr || !visible_upto[size_t(i)]) {  // no visible key: o_i = 0, p_i. = 0
          std::fill(s, s + jn, T(0));
          if (r < nr) std::fill(Ph + i * n / 2, Ph + i * n / 2 + n, T(0));
          continue;
        }
        T m = -inf;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j] + neg[j]);
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; ++j) {
          const T e = keep[j] * vec::exp<T>(s[j] + neg[j] - m);
          s[j] = e;
          sum += e;
        }
        const T inv = T(1) / sum;
        T* __restrict p = Ph + i * n / 2;  // row i of the triangle: p[0 .. i]
        for (int64_t j = 0; j < n; ++j) p[j] = s[j] = s[j] * inv;
        std::fill(s + n, s + jn, T(0));
      }
      weighted_rows<T, HD>(S.data(), ld, vv.data(), jn, hd, o.p);
      for (int64_t r = 0; r < nr; ++r)
        std::copy(o.p + r * hd, o.p + (r + 1) * hd, out + (rows[i0 + r] * a.H + h) * hd);
    }
  }
}

/// Backward of one (segment, kv head) from the saved probabilities:
/// dp_ij = dO_i . v_j, ds_ij = p_ij (dp_ij - sum_j p_ij dp_ij),
/// dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i, dv_j = sum_i p_ij dO_i.
/// Queries go kRows at a time as in the forward; dk and dv accumulate in local [L, hd]
/// buffers, each key row once per query block.
template <typename T, int HD>
LOL_KERNEL_INLINE void backward_task(const AttnArgs<T>& a, const T* dout, const int64_t* rows, int64_t L, int64_t hk,
                                     const T* P, T* dq, T* dk, T* dv) {
  const int64_t hd = head_dim_or<HD>(a.hd), G = a.H / a.Hkv;
  const int64_t ld = padded_keys<T>(L);
  // V transposed [hd, ld], K [L, hd], local dK and dV [L, hd], a query block's
  // dp -> ds and p rows [kRows, ld].
  std::vector<T> vt(size_t(hd * ld), T(0)), kk(size_t(L * hd)), dkl(size_t(L * hd), T(0)),
      dvl(size_t(L * hd), T(0)), DS(size_t(kRows * ld)), PR(size_t(kRows * ld));
  load_segment_head(a.v, a, rows, L, hk, vt.data(), /*transpose=*/true, ld);
  load_segment_head(a.k, a, rows, L, hk, kk.data(), /*transpose=*/false);
  RowTile<T, HD> dos(hd), qr(hd), acc(hd);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t h = hk * G + g;
    const T* Ph = P + h * (L * (L + 1) / 2);
    for (int64_t i0 = 0; i0 < L; i0 += kRows) {
      const int64_t nr = std::min(kRows, L - i0), jn = i0 + nr;
      load_rows<T, HD>(dout, a.H, h, rows, i0, nr, hd, T(1), dos.p);
      load_rows<T, HD>(a.q, a.H, h, rows, i0, nr, hd, T(1), qr.p);
      score_tiles<T, HD>(dos.p, vt.data(), ld, jn, hd, DS.data());  // dp
      for (int64_t r = 0; r < kRows; ++r) {
        T* __restrict ds = DS.data() + r * ld;
        T* __restrict pr = PR.data() + r * ld;
        const int64_t i = i0 + r, n = r < nr ? i + 1 : 0;
        const T* __restrict p = Ph + i * (i + 1) / 2;
        T D = 0;
        for (int64_t j = 0; j < n; ++j) D += p[j] * ds[j];
        for (int64_t j = 0; j < n; ++j) {
          pr[j] = p[j];
          ds[j] = p[j] * (ds[j] - D) * a.scale;
        }
        std::fill(ds + n, ds + jn, T(0));
        std::fill(pr + n, pr + jn, T(0));
      }
      weighted_rows<T, HD>(DS.data(), ld, kk.data(), jn, hd, acc.p);  // dq
      for (int64_t r = 0; r < nr; ++r)
        std::copy(acc.p + r * hd, acc.p + (r + 1) * hd, dq + (rows[i0 + r] * a.H + h) * hd);
      accumulate_keys<T, HD>(DS.data(), PR.data(), ld, jn, qr.p, dos.p, hd, dkl.data(), dvl.data());
    }
  }
  for (int64_t j = 0; j < L; ++j) {
    std::copy(dkl.data() + j * hd, dkl.data() + (j + 1) * hd, dk + (rows[j] * a.Hkv + hk) * hd);
    std::copy(dvl.data() + j * hd, dvl.data() + (j + 1) * hd, dv + (rows[j] * a.Hkv + hk) * hd);
  }
}

/// forward_task / backward_task for the head dimensions the kernel is specialised for
/// (16, 32, 64, 128), else with HD = 0 (runtime head_dim). A plain switch, no lambda:
/// everything is inlined into the caller, so into each ISA clone of the f32 entry points.
template <typename T>
LOL_KERNEL_INLINE void forward_any(const AttnArgs<T>& a, const int64_t* rows, int64_t L, int64_t hk, T* out, T* P) {
  switch (a.hd) {
    case 16: return forward_task<T, 16>(a, rows, L, hk, out, P);
    case 32: return forward_task<T, 32>(a, rows, L, hk, out, P);
    case 64: return forward_task<T, 64>(a, rows, L, hk, out, P);
    case 128: return forward_task<T, 128>(a, rows, L, hk, out, P);
    default: return forward_task<T, 0>(a, rows, L, hk, out, P);
  }
}

template <typename T>
LOL_KERNEL_INLINE void backward_any(const AttnArgs<T>& a, const T* dout, const int64_t* rows, int64_t L, int64_t hk,
                                    const T* P, T* dq, T* dk, T* dv) {
  switch (a.hd) {
    case 16: return backward_task<T, 16>(a, dout, rows, L, hk, P, dq, dk, dv);
    case 32: return backward_task<T, 32>(a, dout, rows, L, hk, P, dq, dk, dv);
    case 64: return backward_task<T, 64>(a, dout, rows, L, hk, P, dq, dk, dv);
    case 128: return backward_task<T, 128>(a, dout, rows, L, hk, P, dq, dk, dv);
    default: return backward_task<T, 0>(a, dout, rows, L, hk, P, dq, dk, dv);
  }
}

LOL_KERNEL_CLONES void forward_task_f32(const AttnArgs<float>& a, const int64_t* rows, int64_t L, int64_t hk,
                                         float* out, float* P) {
  forward_any<float>(a, rows, L, hk, out, P);
}

LOL_KERNEL_CLONES void backward_task_f32(const AttnArgs<float>& a, const float* dout, const int64_t* rows, int64_t L,
                                          int64_t hk, const float* P, float* dq, float* dk, float* dv) {
  backward_any<float>(a, dout, rows, L, hk, P, dq, dk, dv);
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
      forward_any<T>(a, gp + s * g.max_len, lp[s], hk, op, pp + a.H * tp[s]);
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
      backward_any<T>(a, dop, gp + s * g.max_len, lp[s], hk, pp + a.H * tp[s], dqp, dkp, dvp);
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
  return cpu_kernel_device(q) && (q.scalar_type() == torch::kFloat32 || q.scalar_type() == torch::kFloat64);
}

}  // namespace

AttentionImpl::AttentionImpl(const AttentionShape& s) : shape(s) {
  using torch::nn::LinearOptions;
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_heads * s.head_dim).bias(s.qkv_bias)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_kv_heads * s.head_dim).bias(s.qkv_bias)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(s.d_model, s.n_kv_heads * s.head_dim).bias(s.qkv_bias)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(s.n_heads * s.head_dim, s.d_model).bias(s.o_bias)));
  if (s.qk_norm) {
    const int64_t q_width = s.qk_norm_across_heads ? s.n_heads * s.head_dim : s.head_dim;
    const int64_t k_width = s.qk_norm_across_heads ? s.n_kv_heads * s.head_dim : s.head_dim;
    q_norm = register_module("q_norm", RMSNorm(q_width, s.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(k_width, s.norm_eps));
  }
}

namespace {

std::vector<const torch::nn::LinearImpl*> layers_of(const std::vector<AttentionImpl*>& experts,
                                                    torch::nn::Linear AttentionImpl::*member) {
  std::vector<const torch::nn::LinearImpl*> out;
  out.reserve(experts.size());
  for (auto* e : experts) out.push_back((e->*member).get());
  return out;
}

}  // namespace

void grouped_project(const std::vector<AttentionImpl*>& experts, const std::vector<int64_t>& sizes,
                     const torch::Tensor& x, const torch::Tensor& pos, RoPE& rope, torch::Tensor& q, torch::Tensor& k,
                     torch::Tensor& v, int64_t pos_bound, WeightStacks* stacks) {
  const int64_t N = x.size(0);
  const auto& s = experts.at(0)->shape;
  auto project = [&](torch::nn::Linear AttentionImpl::*member, int64_t heads) {
    return grouped_linear(x, layers_of(experts, member), sizes, stacks).view({N, heads, s.head_dim});
  };
  // Qwen3: each head's RMSNorm, before RoPE; OLMo 2/3: one RMSNorm over all heads. Only
  // dense models have it (one group: LoL's library experts, the only multi-group caller,
  // have no qk_norm).
  TORCH_CHECK(!s.qk_norm || experts.size() == 1, "grouped_project: qk_norm with ", experts.size(), " expert groups");
  auto head_norm = [&](const torch::Tensor& t, RMSNorm AttentionImpl::*member) {
    if (!s.qk_norm) return t;
    if (!s.qk_norm_across_heads) return (experts[0]->*member)(t);
    return (experts[0]->*member)(t.reshape({N, t.size(1) * s.head_dim})).view({N, t.size(1), s.head_dim});
  };
  q = head_norm(project(&AttentionImpl::q_proj, s.n_heads), &AttentionImpl::q_norm);
  k = head_norm(project(&AttentionImpl::k_proj, s.n_kv_heads), &AttentionImpl::k_norm);
  if (s.rope) {
    q = rope.apply(q, pos, pos_bound);
    k = rope.apply(k, pos, pos_bound);
  }
  v = project(&AttentionImpl::v_proj, s.n_kv_heads);
}

void AttentionImpl::project(const torch::Tensor& x, const torch::Tensor& pos, RoPE& rope, torch::Tensor& q,
                            torch::Tensor& k, torch::Tensor& v) {
  grouped_project({this}, {x.size(0)}, x, pos, rope, q, k, v);
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& pos, const SegmentLayout& layout,
                                     const torch::Tensor& key_visible, RoPE& rope) {
  return grouped_attention({this}, {x.size(0)}, x, pos, layout, key_visible, rope);
}

torch::Tensor grouped_attention(const std::vector<AttentionImpl*>& experts, const std::vector<int64_t>& sizes,
                                const torch::Tensor& x, const torch::Tensor& pos, const SegmentLayout& layout,
                                const torch::Tensor& key_visible, RoPE& rope, int64_t pos_bound,
                                WeightStacks* stacks) {
  const int64_t N = x.size(0);
  const auto& shape = experts.at(0)->shape;
  torch::Tensor q, k, v;
  grouped_project(experts, sizes, x, pos, rope, q, k, v, pos_bound, stacks);
  const auto o_proj = layers_of(experts, &AttentionImpl::o_proj);
  if (direct_kernel_applies(q) && shape.softcap == 0) {
    auto vis = key_visible.defined() ? key_visible.to(torch::kCPU, torch::kBool).contiguous()
                                     : torch::empty({0}, torch::kBool);
    auto o = SegmentAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(), vis,
                                             read_segments(layout));
    return grouped_linear(o.view({N, shape.n_heads * shape.head_dim}), o_proj, sizes, stacks);
  }
  // [N, h, hd] -> [S, L, h, hd] -> [S, h, L, hd]
  auto qp = layout.to_padded(q).permute({0, 2, 1, 3});
  auto kp = layout.to_padded(k).permute({0, 2, 1, 3});
  auto vp = layout.to_padded(v).permute({0, 2, 1, 3});
  torch::Tensor kv_vis;
  if (key_visible.defined()) kv_vis = layout.to_padded(key_visible.to(torch::kUInt8)).to(torch::kBool);
  auto allowed = segment_causal_mask(layout.slot_valid, kv_vis);
  auto o = attention_impl(qp.contiguous(), kp.contiguous(), vp.contiguous(), allowed,
                          /*rows_may_be_empty=*/kv_vis.defined(), shape.softcap);  // [S, H, L, hd]
  auto flat = layout.from_padded(o.permute({0, 2, 1, 3}).contiguous());               // [N, H, hd]
  return grouped_linear(flat.view({N, shape.n_heads * shape.head_dim}), o_proj, sizes, stacks);
}

}  // namespace lol::nn
