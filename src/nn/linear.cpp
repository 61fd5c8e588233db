#include "nn/linear.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "core/runtime.h"
#include "core/task_parallel.h"
#include "util/error.h"

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

/// Calls fn(g, first_row) for every group g with rows, concurrently when `concurrent`
/// (lol::run_tasks: one expert's GEMM per thread at a time, BLAS single-threaded).
template <typename F>
void for_each_group(const std::vector<int64_t>& sizes, bool concurrent, const F& fn) {
  std::vector<int64_t> first(sizes.size(), 0);
  for (size_t g = 1; g < sizes.size(); ++g) first[g] = first[g - 1] + sizes[g - 1];
  run_tasks(sizes, concurrent, [&](int64_t g) { fn(g, first[size_t(g)]); });
}

/// Groups may run concurrently when each writes its own memory: CPU tensors and, for the
/// weight-gradient accumulation, distinct weights.
bool groups_concurrent(const torch::Tensor& x, at::TensorList weights) {
  if (!x.device().is_cpu() || weights.size() < 2) return false;
  std::vector<const void*> ids;
  for (const auto& w : weights) ids.push_back(w.unsafeGetTensorImpl());
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) == ids.end();
}

/// x [N, in], weights[g] [out, in], biases empty or one [out] per group;
/// sizes: rows per group. One autograd node for all groups.
struct GroupedLinearFunction : public torch::autograd::Function<GroupedLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                               at::TensorList biases, const std::vector<int64_t>& sizes) {
    RECORD_FUNCTION("lol::linear", std::vector<c10::IValue>());
    const int64_t G = int64_t(weights.size());
    const bool bias = !biases.empty();
    torch::Tensor y;
    if (G == 1) {
      y = bias ? at::addmm(biases[0], x, weights[0].t()) : at::mm(x, weights[0].t());
    } else {
      y = torch::empty({x.size(0), weights[0].size(0)}, x.options());
      for_each_group(sizes, groups_concurrent(x, weights), [&](int64_t g, int64_t off) {
        const int64_t n = sizes[size_t(g)];
        auto yg = y.narrow(0, off, n);
        auto xg = x.narrow(0, off, n);
        if (bias)
          at::addmm_out(yg, biases[size_t(g)], xg, weights[size_t(g)].t());
        else
          at::mm_out(yg, xg, weights[size_t(g)].t());
      });
    }
    std::vector<torch::Tensor> save{x};
    save.insert(save.end(), weights.begin(), weights.end());
    save.insert(save.end(), biases.begin(), biases.end());
    ctx->save_for_backward(save);
    ctx->saved_data["sizes"] = sizes;
    ctx->saved_data["bias"] = bias;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::linear_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const bool bias = ctx->saved_data["bias"].toBool();
    const size_t G = sizes.size();
    const auto& x = saved[0];
    auto g = grads[0].contiguous();
    // Outputs: dx, one dW per group, one db per group (with biases), nothing for sizes.
    torch::autograd::tensor_list out(1 + G + (bias ? G : 0) + 1);
    // With create_graph (grad mode on) the gradients must be graph outputs: returned to
    // autograd, computed with differentiable (not out=) operations.
    const bool fuse = !torch::GradMode::is_enabled();
    torch::Tensor dx;
    if (ctx->needs_input_grad(0) && G > 1) dx = fuse ? torch::empty(x.sizes(), x.options()) : torch::Tensor();
    std::vector<torch::Tensor> dx_parts(fuse ? 0 : G);
    std::vector<torch::Tensor> weights(saved.begin() + 1, saved.begin() + 1 + int64_t(G));
    // Returned (unfused) gradients are written into `out` per group: concurrent only when fused.
    const bool concurrent = fuse && groups_concurrent(x, weights);
    for_each_group(sizes, concurrent, [&](int64_t e, int64_t off) {
      const int64_t n = sizes[size_t(e)];
      auto ge = g.narrow(0, off, n), xe = x.narrow(0, off, n);
      const auto& w = weights[size_t(e)];
      if (dx.defined()) {
        auto dxe = dx.narrow(0, off, n);
        at::mm_out(dxe, ge, w);
      } else if (ctx->needs_input_grad(0)) {
        (fuse ? out[0] : dx_parts[size_t(e)]) = at::mm(ge, w);
      }
      if (ctx->needs_input_grad(size_t(1 + e))) {
        if (fuse)
          accumulate_grad(w, ge.t(), xe);
        else
          out[size_t(1 + e)] = at::mm(ge.t(), xe);
      }
      if (bias && ctx->needs_input_grad(1 + G + size_t(e))) {
        if (fuse)
          accumulate_grad(saved[1 + G + size_t(e)], ge.sum(0), torch::Tensor());
        else
          out[1 + G + size_t(e)] = ge.sum(0);
      }
    });
    if (dx.defined()) {
      out[0] = dx;
    } else if (ctx->needs_input_grad(0) && !fuse) {
      for (size_t e = 0; e < G; ++e)
        if (!dx_parts[e].defined()) dx_parts[e] = torch::zeros({sizes[e], x.size(1)}, x.options());
      out[0] = G == 1 ? dx_parts[0] : torch::cat(dx_parts);
    }
    if (ctx->needs_input_grad(0) && !out[0].defined()) out[0] = torch::zeros(x.sizes(), x.options());
    return out;
  }
};

/// Equal groups as one batched product and one autograd node (the GPU's path): x [G m, in],
/// W [G, out, in] (the stacked weights), b [G, out] or none -> y [G m, out] with
/// y[rows of g] = x[rows of g] W_g^T + b_g. Autograd's bmm would add four nodes per call
/// (the views and transposes around the product), each a few host operations on a GPU.
struct BatchedLinearFunction : public torch::autograd::Function<BatchedLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& W,
                               const c10::optional<torch::Tensor>& bias) {
    const int64_t G = W.size(0);
    const torch::Tensor b = bias.value_or(torch::Tensor());
    auto x3 = x.reshape({G, x.size(0) / G, x.size(1)});
    auto wt = W.transpose(1, 2);
    auto y = b.defined() ? at::baddbmm(b.unsqueeze(1), x3, wt) : at::bmm(x3, wt);
    ctx->save_for_backward({x3, W});
    ctx->saved_data["bias"] = b.defined();
    return y.view({x.size(0), W.size(1)});
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x3 = saved[0], &W = saved[1];
    auto g3 = grads[0].reshape({x3.size(0), x3.size(1), W.size(1)});
    torch::Tensor dx, dW, db;
    if (ctx->needs_input_grad(0)) dx = at::bmm(g3, W).view({x3.size(0) * x3.size(1), x3.size(2)});
    if (ctx->needs_input_grad(1)) dW = at::bmm(g3.transpose(1, 2), x3);
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) db = g3.sum(1);
    return {dx, dW, db};
  }
};

}  // namespace

void check_groups(const std::vector<int64_t>& sizes, int64_t rows, size_t groups, const char* what) {
  if (sizes.size() != groups)
    throw InputError(std::string(what) + ": " + std::to_string(sizes.size()) + " group sizes for " +
                     std::to_string(groups) + " groups");
  int64_t sum = 0;
  for (auto n : sizes) {
    if (n < 0) throw InputError(std::string(what) + ": negative group size " + std::to_string(n));
    sum += n;
  }
  if (sum != rows)
    throw InputError(std::string(what) + ": group sizes sum to " + std::to_string(sum) + ", expected the " +
                     std::to_string(rows) + " rows of the input");
}

bool equal_groups(const std::vector<int64_t>& sizes) {
  return std::all_of(sizes.begin(), sizes.end(), [&](int64_t n) { return n == sizes[0]; });
}

torch::Tensor grouped_linear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                             const std::vector<torch::Tensor>& biases, const std::vector<int64_t>& sizes,
                             WeightStacks* stacks) {
  if (x.dim() != 2) throw InputError("grouped_linear: input must be [rows, in], got " + std::to_string(x.dim()) + " dims");
  if (weights.empty()) throw InputError("grouped_linear: no weights");
  check_groups(sizes, x.size(0), weights.size(), "grouped_linear");
  if (!biases.empty() && biases.size() != weights.size())
    throw InputError("grouped_linear: " + std::to_string(biases.size()) + " biases for " +
                     std::to_string(weights.size()) + " weights (expected none or one per weight)");
  const int64_t G = int64_t(weights.size());
  if (G > 1 && !cpu_kernel_device(x) && x.size(0) > 0 && equal_groups(sizes)) {
    // Equal groups off the CPU kernels (a GPU; nn::grouped_block_delta pads a routed
    // depth's experts to equal groups there): one batched product for all groups instead
    // of one product, and its views, per group. Autograd differentiates it.
    c10::optional<torch::Tensor> b;
    if (!biases.empty()) b = stack_weights(biases, stacks);
    return BatchedLinearFunction::apply(x, stack_weights(weights, stacks), b);
  }
  return GroupedLinearFunction::apply(x, at::TensorList(weights), at::TensorList(biases), sizes);
}

torch::Tensor grouped_linear(const torch::Tensor& x, const std::vector<const torch::nn::LinearImpl*>& layers,
                             const std::vector<int64_t>& sizes, WeightStacks* stacks) {
  std::vector<torch::Tensor> w, b;
  w.reserve(layers.size());
  for (const auto* l : layers) {
    w.push_back(l->weight);
    if (l->bias.defined()) b.push_back(l->bias);
  }
  if (!b.empty() && b.size() != w.size()) throw InputError("grouped_linear: some layers have a bias and some not");
  return grouped_linear(x, w, b, sizes, stacks);
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  std::vector<torch::Tensor> b;
  if (bias.defined()) b.push_back(bias);
  if (x.dim() == 2) return grouped_linear(x, {weight}, b, {x.size(0)});
  std::vector<int64_t> out(x.sizes().begin(), x.sizes().end());
  out.back() = weight.size(0);
  auto x2 = x.reshape({-1, x.size(-1)});
  return grouped_linear(x2, {weight}, b, {x2.size(0)}).view(out);
}

torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return linear(x, layer->weight, layer->bias);
}

}  // namespace lol::nn
