#include "nn/rmsnorm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

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

bool cpu_kernel_applies(const torch::Tensor& x, const torch::Tensor& w) {
  return x.device().is_cpu() && w.device().is_cpu() && x.dim() >= 1 && x.numel() > 0 &&
         (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) &&
         w.scalar_type() == x.scalar_type() && w.dim() == 1 && w.size(0) == x.size(-1);
}

/// y = w * x * r per row, r = 1 / sqrt(mean(x^2) + eps) (sum in double); x, y [N, d].
template <typename T>
void forward_cpu(const torch::Tensor& x, const torch::Tensor& w, double eps, torch::Tensor& y, torch::Tensor& r) {
  const int64_t N = x.size(0), d = x.size(1);
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  T* yp = y.data_ptr<T>();
  T* rp = r.data_ptr<T>();
  at::parallel_for(0, N, kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* xr = xp + n * d;
      double ss = 0.0;
      for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * double(xr[i]);
      const T rn = T(1.0 / std::sqrt(ss / double(d) + eps));
      rp[n] = rn;
      T* yr = yp + n * d;
      for (int64_t i = 0; i < d; ++i) yr[i] = wp[i] * (xr[i] * rn);
    }
  });
}

/// dx = r (g w - xhat mean(g w xhat)), dw = sum_rows g xhat, xhat = x r.
template <typename T>
void backward_cpu(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& r,
                  torch::Tensor& dx, torch::Tensor& dw) {
  const int64_t N = x.size(0), d = x.size(1);
  const int64_t chunks = (N + kRowGrain - 1) / kRowGrain;
  std::vector<double> partial(size_t(chunks * d), 0.0);
  const T* gp = g.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  const T* rp = r.data_ptr<T>();
  T* dxp = dx.data_ptr<T>();
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double* pw = partial.data() + c * d;
      for (int64_t n = c * kRowGrain; n < std::min(N, (c + 1) * kRowGrain); ++n) {
        const T* gr = gp + n * d;
        const T* xr = xp + n * d;
        const T rn = rp[n];
        double dot = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          const T xh = xr[i] * rn;
          dot += double(gr[i] * wp[i]) * double(xh);
          pw[i] += double(gr[i]) * double(xh);
        }
        const T m = T(dot / double(d));
        T* dr = dxp + n * d;
        for (int64_t i = 0; i < d; ++i) dr[i] = rn * (gr[i] * wp[i] - xr[i] * rn * m);
      }
    }
  });
  T* dwp = dw.data_ptr<T>();
  for (int64_t i = 0; i < d; ++i) {
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[size_t(c * d + i)];
    dwp[i] = T(s);
  }
}

/// One autograd node per RMSNorm (instead of ~7 for the composed formula).
struct RMSNormFunction : public torch::autograd::Function<RMSNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               double eps) {
    RECORD_FUNCTION("lol::rms_norm", std::vector<c10::IValue>());
    auto x2 = x.reshape({-1, x.size(-1)}).contiguous();
    auto wc = w.contiguous();
    auto y = torch::empty_like(x2);
    auto r = torch::empty({x2.size(0)}, x2.options());
    if (x.scalar_type() == torch::kFloat32)
      forward_cpu<float>(x2, wc, eps, y, r);
    else
      forward_cpu<double>(x2, wc, eps, y, r);
    ctx->save_for_backward({x2, wc, r});
    return y.view(x.sizes());
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::rms_norm_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto& x2 = saved[0];
    auto g = grads[0].reshape(x2.sizes()).contiguous();
    auto dx = torch::empty_like(x2);
    auto dw = torch::empty_like(saved[1]);
    if (x2.scalar_type() == torch::kFloat32)
      backward_cpu<float>(g, x2, saved[1], saved[2], dx, dw);
    else
      backward_cpu<double>(g, x2, saved[1], saved[2], dx, dw);
    return {dx.view(grads[0].sizes()), dw, torch::Tensor()};
  }
};

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (cpu_kernel_applies(x, weight)) return RMSNormFunction::apply(x, weight, eps);
  return rms_norm_ops(x, weight, eps);
}

}  // namespace lol::nn
