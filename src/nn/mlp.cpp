#include "nn/mlp.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/activation.h>

#include <cmath>

namespace lol::nn {

namespace {

/// silu(g) * u with one autograd node (instead of three): forward h = g s u with
/// s = sigmoid(g); backward dg = dh u s (1 + g (1 - s)), du = dh g s. CPU float32/64,
/// contiguous inputs of equal shape; the composed formula elsewhere.
template <typename T>
void swiglu_forward(const T* g, const T* u, T* h, int64_t n) {
  at::parallel_for(0, n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) h[i] = g[i] / (T(1) + std::exp(-g[i])) * u[i];
  });
}

template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  at::parallel_for(0, n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T s = T(1) / (T(1) + std::exp(-g[i]));
      du[i] = dh[i] * g[i] * s;
      dg[i] = dh[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
    }
  });
}

struct SwiGLUFunction : public torch::autograd::Function<SwiGLUFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& g, const torch::Tensor& u) {
    RECORD_FUNCTION("lol::swiglu", std::vector<c10::IValue>());
    auto gc = g.contiguous(), uc = u.contiguous();
    auto h = torch::empty_like(gc);
    if (g.scalar_type() == torch::kFloat32)
      swiglu_forward<float>(gc.data_ptr<float>(), uc.data_ptr<float>(), h.data_ptr<float>(), h.numel());
    else
      swiglu_forward<double>(gc.data_ptr<double>(), uc.data_ptr<double>(), h.data_ptr<double>(), h.numel());
    ctx->save_for_backward({gc, uc});
    return h;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::swiglu_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &u = saved[1];
    auto dh = grads[0].contiguous();
    auto dg = torch::empty_like(g), du = torch::empty_like(u);
    if (g.scalar_type() == torch::kFloat32)
      swiglu_backward<float>(g.data_ptr<float>(), u.data_ptr<float>(), dh.data_ptr<float>(), dg.data_ptr<float>(),
                             du.data_ptr<float>(), g.numel());
    else
      swiglu_backward<double>(g.data_ptr<double>(), u.data_ptr<double>(), dh.data_ptr<double>(),
                              dg.data_ptr<double>(), du.data_ptr<double>(), g.numel());
    return {dg, du};
  }
};

torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u) {
  const bool cpu_kernel = g.device().is_cpu() && g.sizes() == u.sizes() && g.scalar_type() == u.scalar_type() &&
                          (g.scalar_type() == torch::kFloat32 || g.scalar_type() == torch::kFloat64);
  if (cpu_kernel) return SwiGLUFunction::apply(g, u);
  return torch::silu(g) * u;
}

}  // namespace

MLPImpl::MLPImpl(int64_t d, int64_t h) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(d, h).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(d, h).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(h, d).bias(false)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) { return down_proj(swiglu(gate_proj(x), up_proj(x))); }

}  // namespace lol::nn
