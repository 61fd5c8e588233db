#include "nn/mlp.h"
#include "nn/linear.h"
#include "nn/vec_math.h"
#include "core/runtime.h"
#include "util/error.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/activation.h>

#include <cmath>
#include <type_traits>

namespace lol::nn {

namespace {

/// Elementwise bodies over [b, e), inlined into the float32 ISA clones below.
template <typename T>
LOL_KERNEL_INLINE void swiglu_forward_range(const T* __restrict g, const T* __restrict u, T* __restrict h, int64_t b,
                                            int64_t e) {
  for (int64_t i = b; i < e; ++i) h[i] = g[i] * vec::sigmoid<T>(g[i]) * u[i];
}

template <typename T>
LOL_KERNEL_INLINE void swiglu_backward_range(const T* __restrict g, const T* __restrict u, const T* __restrict dh,
                                             T* __restrict dg, T* __restrict du, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T s = vec::sigmoid<T>(g[i]);
    du[i] = dh[i] * g[i] * s;
    dg[i] = dh[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
  }
}

LOL_KERNEL_CLONES void swiglu_forward_f32(const float* g, const float* u, float* h, int64_t b, int64_t e) {
  swiglu_forward_range<float>(g, u, h, b, e);
}

LOL_KERNEL_CLONES void swiglu_backward_f32(const float* g, const float* u, const float* dh, float* dg, float* du,
                                           int64_t b, int64_t e) {
  swiglu_backward_range<float>(g, u, dh, dg, du, b, e);
}

template <typename T>
void swiglu_forward(const T* g, const T* u, T* h, int64_t n) {
  at::parallel_for(0, n, rows_per_task(1), [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>)
      swiglu_forward_f32(g, u, h, b, e);
    else
      swiglu_forward_range<T>(g, u, h, b, e);
  });
}

template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  at::parallel_for(0, n, rows_per_task(1), [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>)
      swiglu_backward_f32(g, u, dh, dg, du, b, e);
    else
      swiglu_backward_range<T>(g, u, dh, dg, du, b, e);
  });
}

/// silu(g) * u with one autograd node (instead of three): forward h = g s u with
/// s = sigmoid(g); backward dg = dh u s (1 + g (1 - s)), du = dh g s. CPU float32/64,
/// contiguous inputs of equal shape; the composed formula elsewhere.
/// The float32 bodies run in the ISA clones above, sigmoid through vec::exp.
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

}  // namespace

torch::Tensor activation(const torch::Tensor& x, Activation act) {
  if (act == Activation::GeluTanh) return torch::gelu(x, "tanh");
  if (act == Activation::Gelu) return torch::gelu(x);
  if (act == Activation::ReLU) return torch::relu(x);
  return torch::silu(x);
}

torch::Tensor gated_activation(const torch::Tensor& g, const torch::Tensor& u, Activation act) {
  if (act != Activation::SiLU) return activation(g, act) * u;
  const bool cpu_kernel = cpu_kernel_device(g) && g.sizes() == u.sizes() && g.scalar_type() == u.scalar_type() &&
                          (g.scalar_type() == torch::kFloat32 || g.scalar_type() == torch::kFloat64);
  if (cpu_kernel) return SwiGLUFunction::apply(g, u);
  return torch::silu(g) * u;
}

MLPImpl::MLPImpl(int64_t d, int64_t h, Activation a, bool gated, bool bias) : act(a) {
  using torch::nn::LinearOptions;
  if (gated) gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(d, h).bias(bias)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(d, h).bias(bias)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(h, d).bias(bias)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  if (!gated()) return linear(activation(linear(x, up_proj), act), down_proj);
  return linear(gated_activation(linear(x, gate_proj), linear(x, up_proj), act), down_proj);
}

torch::Tensor grouped_mlp(const std::vector<MLPImpl*>& experts, const std::vector<int64_t>& sizes,
                          const torch::Tensor& x, WeightStacks* stacks) {
  std::vector<const torch::nn::LinearImpl*> gate, up, down;
  for (auto* e : experts) {
    if (e->gated() != experts.at(0)->gated()) throw InputError("grouped_mlp: gated and ungated experts in one group");
    if (e->gated()) gate.push_back(e->gate_proj.get());
    up.push_back(e->up_proj.get());
    down.push_back(e->down_proj.get());
  }
  if (!experts.at(0)->gated())
    return grouped_linear(activation(grouped_linear(x, up, sizes, stacks), experts[0]->act), down, sizes, stacks);
  return grouped_linear(gated_activation(grouped_linear(x, gate, sizes, stacks), grouped_linear(x, up, sizes, stacks),
                                         experts.at(0)->act),
                        down, sizes, stacks);
}

}  // namespace lol::nn
