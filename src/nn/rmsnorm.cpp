#include "nn/rmsnorm.h"
#include "nn/vec_math.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

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
  return x.device().is_cpu() && x.dim() >= 1 && x.numel() > 0 &&
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

/// y = w * x * r (+ b) per row; x, y [N, d], b [d] or undefined; r [N].
template <typename T>
void forward_cpu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, double eps, torch::Tensor& y,
                 torch::Tensor& r) {
  const int64_t N = x.size(0), d = x.size(1);
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  const T* bp = b.defined() ? b.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  T* rp = r.data_ptr<T>();
  at::parallel_for(0, N, rows_per_task(d), [&](int64_t rb, int64_t re) {
    if constexpr (std::is_same_v<T, float>)
      forward_rows_f32(xp, wp, bp, yp, rp, d, eps, rb, re);
    else
      forward_rows<T>(xp, wp, bp, yp, rp, d, eps, rb, re);
  });
}

/// dx = r (g w - xhat mean(g w xhat)), dw = sum_rows g xhat, xhat = x r; db = sum_rows g
/// when db is defined.
template <typename T>
void backward_cpu(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& r,
                  torch::Tensor& dx, torch::Tensor& dw, torch::Tensor& db) {
  const int64_t N = x.size(0), d = x.size(1);
  const int64_t chunks = (N + kRowGrain - 1) / kRowGrain;
  const bool shift = db.defined();
  // Per chunk of rows: d partial sums of g xhat, then (with a shift) d of g.
  const int64_t stride = shift ? 2 * d : d;
  std::vector<double> partial(size_t(chunks * stride), 0.0);
  const T* gp = g.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  const T* rp = r.data_ptr<T>();
  T* dxp = dx.data_ptr<T>();
  // Fixed chunks of kRowGrain rows (the partial sums do not depend on the thread count).
  at::parallel_for(0, chunks, std::max<int64_t>(1, rows_per_task(d) / kRowGrain), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double* pw = partial.data() + c * stride;
      double* pb = shift ? pw + d : nullptr;
      const int64_t rb = c * kRowGrain, re = std::min(N, (c + 1) * kRowGrain);
      if constexpr (std::is_same_v<T, float>)
        backward_rows_f32(gp, xp, wp, rp, dxp, pw, pb, d, rb, re);
      else
        backward_rows<T>(gp, xp, wp, rp, dxp, pw, pb, d, rb, re);
    }
  });
  T* dwp = dw.data_ptr<T>();
  T* dbp = shift ? db.data_ptr<T>() : nullptr;
  for (int64_t i = 0; i < d; ++i) {
    double sw = 0.0, sb = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += partial[size_t(c * stride + i)];
      if (shift) sb += partial[size_t(c * stride + d + i)];
    }
    dwp[i] = T(sw);
    if (shift) dbp[i] = T(sb);
  }
}

/// One autograd node per RMSNorm (instead of ~7 for the composed formula, ~10 with the
/// FiLM scale and shift). scale and shift [d] are optional (FiLM, paper Appendix A): the
/// kernels run with the effective weight w * scale, and the scale's gradient is the
/// weight gradient's other factor (d(w s) = dw_eff: dw = dw_eff s, ds = dw_eff w).
struct RMSNormFunction : public torch::autograd::Function<RMSNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const c10::optional<torch::Tensor>& scale, const c10::optional<torch::Tensor>& shift,
                               double eps) {
    RECORD_FUNCTION("lol::rms_norm", std::vector<c10::IValue>());
    auto x2 = x.reshape({-1, x.size(-1)}).contiguous();
    const torch::Tensor s = scale.value_or(torch::Tensor());
    auto w_eff = (s.defined() ? w * s : w).contiguous();
    auto b = shift.has_value() && shift->defined() ? shift->contiguous() : torch::Tensor();
    auto y = torch::empty_like(x2);
    auto r = torch::empty({x2.size(0)}, x2.options());
    if (x.scalar_type() == torch::kFloat32)
      forward_cpu<float>(x2, w_eff, b, eps, y, r);
    else
      forward_cpu<double>(x2, w_eff, b, eps, y, r);
    ctx->save_for_backward({x2, w, s, r, w_eff});
    ctx->saved_data["shift"] = b.defined();
    return y.view(x.sizes());
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::rms_norm_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w = saved[1], &s = saved[2], &r = saved[3], &w_eff = saved[4];
    auto g = grads[0].reshape(x2.sizes()).contiguous();
    auto dx = torch::empty_like(x2);
    auto dw_eff = torch::empty_like(w_eff);
    torch::Tensor db;
    if (ctx->saved_data["shift"].toBool()) db = torch::empty_like(w_eff);
    if (x2.scalar_type() == torch::kFloat32)
      backward_cpu<float>(g, x2, w_eff, r, dx, dw_eff, db);
    else
      backward_cpu<double>(g, x2, w_eff, r, dx, dw_eff, db);
    torch::Tensor dw = dw_eff, ds;
    if (s.defined()) {
      dw = dw_eff * s;
      ds = dw_eff * w;
    }
    return {dx.view(grads[0].sizes()), dw, ds, db, torch::Tensor()};
  }
};

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::modulated(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& shift) {
  // FiLM folds into the norm: scale * (weight * xhat) + shift = (scale * weight) * xhat + shift.
  if (cpu_kernel_applies(x, weight, scale, shift)) {
    auto opt = [](const torch::Tensor& t) { return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt; };
    return RMSNormFunction::apply(x, weight, opt(scale), opt(shift), eps);
  }
  auto y = rms_norm_ops(x, scale.defined() ? weight * scale : weight, eps);
  return shift.defined() ? y + shift : y;
}

}  // namespace lol::nn
