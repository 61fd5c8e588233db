#include "nn/rmsnorm.h"
#include "nn/linear.h"
#include "nn/vec_math.h"
#include "core/runtime.h"
#include "util/error.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace lol::nn {

namespace {

constexpr int64_t kRowGrain = 128;

/// Composed-operation RMSNorm (any device and dtype): the reference formula, in float32
/// for half-precision inputs (as Hugging Face does) and float64 for float64 inputs.
torch::Tensor rms_norm_ops(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xf = x.scalar_type() == torch::kFloat64 ? x : x.to(torch::kFloat32);
  auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * y.to(x.scalar_type());
}

/// x on the CPU in float32/64; weight, scale and shift (the last two optional) [d] of x's dtype.
bool cpu_kernel_applies(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& s,
                        const torch::Tensor& b) {
  auto vector_like_x = [&](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == x.scalar_type() && t.dim() == 1 && t.size(0) == x.size(-1);
  };
  return cpu_kernel_device(x) && x.dim() >= 1 && x.numel() > 0 &&
         (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) && vector_like_x(w) &&
         (!s.defined() || vector_like_x(s)) && (!b.defined() || vector_like_x(b));
}

/// Rows [b, e) of the forward: y = w * x * r (+ bias) per row, r = 1 / sqrt(mean(x^2) + eps)
/// (sum of squares in double; `omp simd` reduction, so its order follows the vector width).
template <typename T>
LOL_KERNEL_INLINE void forward_rows(const T* __restrict xp, const T* __restrict wp, const T* __restrict bp,
                                    T* __restrict yp, T* __restrict rp, int64_t d, double eps, int64_t b, int64_t e) {
  for (int64_t n = b; n < e; ++n) {
    const T* xr = xp + n * d;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * double(xr[i]);
    const T rn = T(1.0 / std::sqrt(ss / double(d) + eps));
    rp[n] = rn;
    T* yr = yp + n * d;
    if (bp)
      for (int64_t i = 0; i < d; ++i) yr[i] = wp[i] * (xr[i] * rn) + bp[i];
    else
      for (int64_t i = 0; i < d; ++i) yr[i] = wp[i] * (xr[i] * rn);
  }
}

/// Rows [b, e) of the backward: dx = r (g w - xhat mean(g w xhat)); pw[i] += g xhat and
/// (pb non-null) pb[i] += g, the chunk's partial sums of dw and db.
template <typename T>
LOL_KERNEL_INLINE void backward_rows(const T* __restrict gp, const T* __restrict xp, const T* __restrict wp,
                                     const T* __restrict rp, T* __restrict dxp, double* __restrict pw,
                                     double* __restrict pb, int64_t d, int64_t b, int64_t e) {
  for (int64_t n = b; n < e; ++n) {
    const T* gr = gp + n * d;
    const T* xr = xp + n * d;
    const T rn = rp[n];
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < d; ++i) {
      const T xh = xr[i] * rn;
      dot += double(gr[i] * wp[i]) * double(xh);
      pw[i] += double(gr[i]) * double(xh);
    }
    if (pb)
      for (int64_t i = 0; i < d; ++i) pb[i] += double(gr[i]);
    const T m = T(dot / double(d));
    T* dr = dxp + n * d;
    for (int64_t i = 0; i < d; ++i) dr[i] = rn * (gr[i] * wp[i] - xr[i] * rn * m);
  }
}

LOL_KERNEL_CLONES void forward_rows_f32(const float* xp, const float* wp, const float* bp, float* yp, float* rp,
                                        int64_t d, double eps, int64_t b, int64_t e) {
  forward_rows<float>(xp, wp, bp, yp, rp, d, eps, b, e);
}

LOL_KERNEL_CLONES void backward_rows_f32(const float* gp, const float* xp, const float* wp, const float* rp,
                                         float* dxp, double* pw, double* pb, int64_t d, int64_t b, int64_t e) {
  backward_rows<float>(gp, xp, wp, rp, dxp, pw, pb, d, b, e);
}

/// Row blocks of a grouped norm: group g covers rows [start[g], start[g + 1]) and uses
/// row g of the [G, d] weight matrix. start has G + 1 entries, start[G] = N.
std::vector<int64_t> group_starts(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> start{0};
  for (auto n : sizes) start.push_back(start.back() + n);
  return start;
}

/// y = W[g] * x * r (+ b) per row of group g; x, y [N, d], W [G, d], b [d] or undefined; r [N].
template <typename T>
void forward_cpu(const torch::Tensor& x, const torch::Tensor& W, const std::vector<int64_t>& start,
                 const torch::Tensor& b, double eps, torch::Tensor& y, torch::Tensor& r) {
  const int64_t N = x.size(0), d = x.size(1);
  const T* xp = x.data_ptr<T>();
  const T* wp = W.data_ptr<T>();
  const T* bp = b.defined() ? b.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  T* rp = r.data_ptr<T>();
  at::parallel_for(0, N, rows_per_task(d), [&](int64_t rb, int64_t re) {
    // The last group starting at or before rb (empty groups before it are skipped).
    int64_t g = int64_t(std::upper_bound(start.begin(), start.end(), rb) - start.begin()) - 1;
    for (int64_t lo = rb; lo < re; ++g) {
      const int64_t hi = std::min(re, start[size_t(g + 1)]);
      if (hi <= lo) continue;
      if constexpr (std::is_same_v<T, float>)
        forward_rows_f32(xp, wp + g * d, bp, yp, rp, d, eps, lo, hi);
      else
        forward_rows<T>(xp, wp + g * d, bp, yp, rp, d, eps, lo, hi);
      lo = hi;
    }
  });
}

/// dx = r (g W[g] - xhat mean(g W[g] xhat)), dW[g] = sum over group g's rows of g xhat,
/// xhat = x r; db = sum over all rows of g when db is defined.
template <typename T>
void backward_cpu(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& W,
                  const std::vector<int64_t>& start, const torch::Tensor& r, torch::Tensor& dx, torch::Tensor& dW,
                  torch::Tensor& db) {
  const int64_t d = x.size(1), G = W.size(0);
  // Fixed chunks of kRowGrain rows inside each group (the partial sums do not depend on
  // the thread count): chunk c covers rows [chunk_begin[c], chunk_begin[c + 1]).
  std::vector<int64_t> chunk_begin, chunk_group;
  std::vector<int64_t> first_chunk(size_t(G + 1));
  for (int64_t e = 0; e < G; ++e) {
    first_chunk[size_t(e)] = int64_t(chunk_group.size());
    for (int64_t rb = start[size_t(e)]; rb < start[size_t(e + 1)]; rb += kRowGrain) {
      chunk_begin.push_back(rb);
      chunk_group.push_back(e);
    }
  }
  first_chunk[size_t(G)] = int64_t(chunk_group.size());
  const int64_t chunks = int64_t(chunk_group.size());
  const bool shift = db.defined();
  // Per chunk of rows: d partial sums of g xhat, then (with a shift) d of g.
  const int64_t stride = shift ? 2 * d : d;
  std::vector<double> partial(size_t(chunks * stride), 0.0);
  const T* gp = g.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const T* wp = W.data_ptr<T>();
  const T* rp = r.data_ptr<T>();
  T* dxp = dx.data_ptr<T>();
  at::parallel_for(0, chunks, std::max<int64_t>(1, rows_per_task(d) / kRowGrain), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double* pw = partial.data() + c * stride;
      double* pb = shift ? pw + d : nullptr;
      const int64_t e = chunk_group[size_t(c)];
      const int64_t rb = chunk_begin[size_t(c)], re = std::min(start[size_t(e + 1)], rb + kRowGrain);
      if constexpr (std::is_same_v<T, float>)
        backward_rows_f32(gp, xp, wp + e * d, rp, dxp, pw, pb, d, rb, re);
      else
        backward_rows<T>(gp, xp, wp + e * d, rp, dxp, pw, pb, d, rb, re);
    }
  });
  T* dwp = dW.data_ptr<T>();
  for (int64_t e = 0; e < G; ++e)
    for (int64_t i = 0; i < d; ++i) {
      double sw = 0.0;
      for (int64_t c = first_chunk[size_t(e)]; c < first_chunk[size_t(e + 1)]; ++c) sw += partial[size_t(c * stride + i)];
      dwp[e * d + i] = T(sw);
    }
  if (shift) {
    T* dbp = db.data_ptr<T>();
    for (int64_t i = 0; i < d; ++i) {
      double sb = 0.0;
      for (int64_t c = 0; c < chunks; ++c) sb += partial[size_t(c * stride + d + i)];
      dbp[i] = T(sb);
    }
  }
}

/// One autograd node per norm call (instead of ~7 for the composed formula, ~10 with the
/// FiLM scale and shift), for all groups of rows at once. scale and shift [d] are optional
/// (FiLM, paper Appendix A) and shared by the groups: the kernels run with the effective
/// weights W_g * scale, and the scale's gradient is the weight gradient's other factor
/// (d(w s) = dw_eff: dw = dw_eff s, ds = sum_g dw_eff_g w_g).
struct RMSNormFunction : public torch::autograd::Function<RMSNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                               const c10::optional<torch::Tensor>& scale, const c10::optional<torch::Tensor>& shift,
                               const std::vector<int64_t>& sizes, double eps) {
    RECORD_FUNCTION("lol::rms_norm", std::vector<c10::IValue>());
    auto x2 = x.reshape({-1, x.size(-1)}).contiguous();
    const torch::Tensor s = scale.value_or(torch::Tensor());
    auto W = weights.size() == 1 ? weights[0].unsqueeze(0) : torch::stack(weights);  // [G, d]
    auto W_eff = (s.defined() ? W * s : W).contiguous();
    auto b = shift.has_value() && shift->defined() ? shift->contiguous() : torch::Tensor();
    auto y = torch::empty_like(x2);
    auto r = torch::empty({x2.size(0)}, x2.options());
    const auto start = group_starts(sizes);
    if (x.scalar_type() == torch::kFloat32)
      forward_cpu<float>(x2, W_eff, start, b, eps, y, r);
    else
      forward_cpu<double>(x2, W_eff, start, b, eps, y, r);
    ctx->save_for_backward({x2, W, s, r, W_eff});
    ctx->saved_data["shift"] = b.defined();
    ctx->saved_data["sizes"] = sizes;
    return y.view(x.sizes());
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::rms_norm_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &W = saved[1], &s = saved[2], &r = saved[3], &W_eff = saved[4];
    const auto start = group_starts(ctx->saved_data["sizes"].toIntVector());
    auto g = grads[0].reshape(x2.sizes()).contiguous();
    auto dx = torch::empty_like(x2);
    auto dW_eff = torch::empty_like(W_eff);
    torch::Tensor db;
    if (ctx->saved_data["shift"].toBool()) db = torch::empty({W_eff.size(1)}, W_eff.options());
    if (x2.scalar_type() == torch::kFloat32)
      backward_cpu<float>(g, x2, W_eff, start, r, dx, dW_eff, db);
    else
      backward_cpu<double>(g, x2, W_eff, start, r, dx, dW_eff, db);
    torch::Tensor dW = dW_eff, ds;
    if (s.defined()) {
      dW = dW_eff * s;
      ds = (dW_eff * W).sum(0);
    }
    // dx, one weight gradient per group, scale, shift, nothing for sizes and eps.
    torch::autograd::tensor_list out{dx.view(grads[0].sizes())};
    for (int64_t e = 0; e < W.size(0); ++e) out.push_back(dW[e]);
    out.insert(out.end(), {ds, db, torch::Tensor(), torch::Tensor()});
    return out;
  }
};

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_, bool layer_norm) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
  if (layer_norm) bias = register_parameter("bias", torch::zeros({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (is_layer_norm()) return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
  return modulated(x, {}, {});
}

torch::Tensor RMSNormImpl::modulated(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& shift) {
  if (is_layer_norm()) {
    if (scale.defined() || shift.defined()) throw InputError("LayerNorm: FiLM modulation is not implemented");
    return forward(x);
  }
  return rms_norm(x, {weight}, {x.dim() == 0 ? 0 : x.numel() / std::max<int64_t>(1, x.size(-1))}, scale, shift, eps);
}

torch::Tensor rms_norm(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                       const std::vector<int64_t>& sizes, const torch::Tensor& scale, const torch::Tensor& shift,
                       double eps, WeightStacks* stacks) {
  if (weights.empty()) throw InputError("rms_norm: no weights");
  if (x.dim() < 1) throw InputError("rms_norm: input must have at least one dimension");
  const int64_t d = x.size(-1);
  check_groups(sizes, d == 0 ? 0 : x.numel() / d, weights.size(), "rms_norm");
  // FiLM folds into the norm: scale * (weight * xhat) + shift = (scale * weight) * xhat + shift.
  bool kernel = true;
  for (const auto& w : weights) kernel = kernel && cpu_kernel_applies(x, w, scale, shift);
  if (kernel) {
    auto opt = [](const torch::Tensor& t) { return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt; };
    return RMSNormFunction::apply(x, at::TensorList(weights), opt(scale), opt(shift), sizes, eps);
  }
  // Composed path: one weight row per input row (each group's weight broadcast over its
  // rows; no index upload or host synchronisation on a GPU).
  torch::Tensor w = weights[0], xv = x;
  const int64_t G = int64_t(weights.size());
  const bool batched = G > 1 && equal_groups(sizes);
  if (batched) {
    // Equal groups (the padded expert layout of nn::grouped_block_delta): x as [G, rows/G, d],
    // each group's weight [G, 1, d] broadcast over its rows.
    w = stack_weights(weights, stacks).unsqueeze(1);
    xv = x.reshape({G, sizes[0], d});
  } else if (G > 1) {
    std::vector<torch::Tensor> rows;
    rows.reserve(weights.size());
    for (size_t g = 0; g < weights.size(); ++g) rows.push_back(weights[g].unsqueeze(0).expand({sizes[g], d}));
    w = torch::cat(rows).view(x.sizes());
  }
  auto y = rms_norm_ops(xv, scale.defined() ? w * scale : w, eps);
  if (batched) y = y.view(x.sizes());
  return shift.defined() ? y + shift : y;
}

torch::Tensor rms_norm_composed(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return rms_norm_ops(x, w, eps);
}

}  // namespace lol::nn
