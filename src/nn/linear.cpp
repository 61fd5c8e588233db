#include "nn/linear.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

namespace lol::nn {

namespace {

/// param.grad <- param.grad + a b (one GEMM with beta = 1), or + a when b is undefined
/// (a is then a fresh tensor that becomes the gradient when there is none yet). The first
/// gradient of a step is the product itself (no zero fill).
void accumulate_grad(torch::Tensor param, const torch::Tensor& a, const torch::Tensor& b) {
  auto& acc = param.mutable_grad();
  if (!acc.defined()) {
    acc = b.defined() ? at::mm(a, b) : a;
  } else if (acc.is_contiguous() && acc.scalar_type() == a.scalar_type() && acc.device() == a.device()) {
    if (b.defined())
      acc.addmm_(a, b);
    else
      acc.add_(a);
  } else {
    acc = acc + (b.defined() ? at::mm(a, b) : a);
  }
}

/// bias: [out] or none.
struct AccumulatingLinearFunction : public torch::autograd::Function<AccumulatingLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const c10::optional<torch::Tensor>& bias) {
    RECORD_FUNCTION("lol::linear", std::vector<c10::IValue>());
    auto x2 = x.reshape({-1, x.size(-1)});
    const torch::Tensor b = bias.value_or(torch::Tensor());
    auto y = b.defined() ? at::addmm(b, x2, w.t()) : at::mm(x2, w.t());
    ctx->save_for_backward({x2, w, b});
    ctx->saved_data["x_sizes"] = x.sizes();
    std::vector<int64_t> out(x.sizes().begin(), x.sizes().end());
    out.back() = w.size(0);
    return y.view(out);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::linear_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w = saved[1], &b = saved[2];
    auto g = grads[0].reshape({-1, w.size(0)});
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = at::mm(g, w).view(ctx->saved_data["x_sizes"].toIntVector());
    // With create_graph the gradients must be graph outputs: return them to autograd.
    const bool fuse = !torch::GradMode::is_enabled();
    if (ctx->needs_input_grad(1)) {
      if (fuse)
        accumulate_grad(w, g.t(), x2);
      else
        dw = at::mm(g.t(), x2);
    }
    if (b.defined() && ctx->needs_input_grad(2)) {
      if (fuse)
        accumulate_grad(b, g.sum(0), torch::Tensor());
      else
        db = g.sum(0);
    }
    return {dx, dw, db};
  }
};

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  // (LibTorch 1.13's Function::apply takes no undefined tensor arguments: an optional.)
  const auto b = bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return AccumulatingLinearFunction::apply(x, weight, b);
}

torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return linear(x, layer->weight, layer->bias);
}

}  // namespace lol::nn
