#include "lol/dispatch.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstring>
#include <string>

#include "core/index_tensor.h"
#include "core/runtime.h"
#include "nn/vec_math.h"
#include "util/error.h"

namespace lol {

namespace {

void check_rows(const std::vector<int64_t>& idx, int64_t rows, const char* what) {
  std::vector<uint8_t> seen(size_t(rows), 0);
  for (auto r : idx) {
    if (r < 0 || r >= rows)
      throw InputError(std::string(what) + ": row " + std::to_string(r) + " outside [0, " + std::to_string(rows) + ")");
    if (seen[size_t(r)]++)
      throw InputError(std::string(what) + ": row " + std::to_string(r) + " dispatched twice");
  }
}

bool cpu_kernel(const torch::Tensor& s) {
  return cpu_kernel_device(s) && s.dim() == 2 && (s.scalar_type() == torch::kFloat32 || s.scalar_type() == torch::kFloat64);
}

/// dst[dst_row(i)] = src[src_row(i)] for i in [0, n), rows of d elements.
template <typename DstRow, typename SrcRow>
void copy_rows(char* dst, const char* src, int64_t n, int64_t row_bytes, int64_t d, DstRow dst_row, SrcRow src_row) {
  at::parallel_for(0, n, nn::rows_per_task(d), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(dst + dst_row(i) * row_bytes, src + src_row(i) * row_bytes, size_t(row_bytes));
  });
}

struct GatherRowsFunction : public torch::autograd::Function<GatherRowsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& s,
                               const std::vector<int64_t>* idx) {
    RECORD_FUNCTION("lol::gather_rows", std::vector<c10::IValue>());
    auto sc = s.contiguous();
    const int64_t n = int64_t(idx->size()), d = s.size(1), rb = d * int64_t(s.element_size());
    auto out = torch::empty({n, d}, s.options());
    const int64_t* ip = idx->data();
    copy_rows(static_cast<char*>(out.data_ptr()), static_cast<const char*>(sc.data_ptr()), n, rb, d,
              [](int64_t i) { return i; }, [ip](int64_t i) { return ip[i]; });
    ctx->saved_data["idx"] = *idx;
    ctx->saved_data["rows"] = s.size(0);
    return out;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::gather_rows_backward", std::vector<c10::IValue>());
    const auto idx = ctx->saved_data["idx"].toIntVector();
    const int64_t rows = ctx->saved_data["rows"].toInt();
    auto g = grads[0].contiguous();
    const int64_t n = int64_t(idx.size()), d = g.size(1), rb = d * int64_t(g.element_size());
    // Rows not gathered get no gradient: zero them only when there are any.
    auto ds = n == rows ? torch::empty({rows, d}, g.options()) : torch::zeros({rows, d}, g.options());
    const int64_t* ip = idx.data();
    copy_rows(static_cast<char*>(ds.data_ptr()), static_cast<const char*>(g.data_ptr()), n, rb, d,
              [ip](int64_t i) { return ip[i]; }, [](int64_t i) { return i; });
    return {ds, torch::Tensor()};
  }
};

template <typename T>
void residual_forward(const T* delta, const T* alpha, const int64_t* idx, const int64_t* win, T* out, int64_t n,
                      int64_t d) {
  at::parallel_for(0, n, nn::rows_per_task(d), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T* o = out + idx[i] * d;
      const T* x = delta + i * d;
      const T a = alpha[win[i]];
      for (int64_t j = 0; j < d; ++j) o[j] += a * x[j];
    }
  });
}

/// d_delta[i] = alpha[win[i]] g[idx[i]]; dot[i] = <g[idx[i]], delta[i]> (in double).
template <typename T>
void residual_backward(const T* g, const T* delta, const T* alpha, const int64_t* idx, const int64_t* win,
                       T* d_delta, double* dot, int64_t n, int64_t d) {
  at::parallel_for(0, n, nn::rows_per_task(d), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* gr = g + idx[i] * d;
      const T* x = delta + i * d;
      T* dx = d_delta + i * d;
      const T a = alpha[win[i]];
      double acc = 0.0;
      for (int64_t j = 0; j < d; ++j) {
        dx[j] = a * gr[j];
        acc += double(gr[j]) * double(x[j]);
      }
      dot[i] = acc;
    }
  });
}

struct RoutedResidualFunction : public torch::autograd::Function<RoutedResidualFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& s,
                               const torch::Tensor& alpha, const torch::Tensor& delta,
                               const std::vector<int64_t>* idx, const std::vector<int64_t>* win) {
    RECORD_FUNCTION("lol::routed_residual", std::vector<c10::IValue>());
    auto out = s.clone(at::MemoryFormat::Contiguous);
    auto ac = alpha.contiguous(), dc = delta.contiguous();
    const int64_t n = int64_t(idx->size()), d = s.size(1);
    if (s.scalar_type() == torch::kFloat32)
      residual_forward<float>(dc.data_ptr<float>(), ac.data_ptr<float>(), idx->data(), win->data(),
                              out.data_ptr<float>(), n, d);
    else
      residual_forward<double>(dc.data_ptr<double>(), ac.data_ptr<double>(), idx->data(), win->data(),
                               out.data_ptr<double>(), n, d);
    ctx->save_for_backward({ac, dc});
    ctx->saved_data["idx"] = *idx;
    ctx->saved_data["win"] = *win;
    return out;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::routed_residual_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    const auto &alpha = saved[0], &delta = saved[1];
    const auto idx = ctx->saved_data["idx"].toIntVector(), win = ctx->saved_data["win"].toIntVector();
    auto g = grads[0].contiguous();
    const int64_t n = int64_t(idx.size()), d = delta.size(1);
    auto d_delta = torch::empty_like(delta);
    std::vector<double> dot(static_cast<size_t>(n));
    if (g.scalar_type() == torch::kFloat32)
      residual_backward<float>(g.data_ptr<float>(), delta.data_ptr<float>(), alpha.data_ptr<float>(), idx.data(),
                               win.data(), d_delta.data_ptr<float>(), dot.data(), n, d);
    else
      residual_backward<double>(g.data_ptr<double>(), delta.data_ptr<double>(), alpha.data_ptr<double>(),
                                idx.data(), win.data(), d_delta.data_ptr<double>(), dot.data(), n, d);
    std::vector<double> da(size_t(alpha.size(0)), 0.0);
    for (int64_t i = 0; i < n; ++i) da[size_t(win[size_t(i)])] += dot[size_t(i)];
    auto d_alpha = torch::from_blob(da.data(), {alpha.size(0)}, torch::kFloat64).to(alpha.scalar_type(), false, /*copy=*/true);
    // The identity part of s + ...: the incoming gradient itself.
    return {grads[0], d_alpha, d_delta, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gather_rows(const torch::Tensor& s, const std::vector<int64_t>& idx, const torch::Tensor& idx_t) {
  if (s.dim() != 2) throw InputError("gather_rows: states must be [rows, d_model]");
  check_rows(idx, s.size(0), "gather_rows");
  if (idx_t.defined() && idx_t.numel() != int64_t(idx.size()))
    throw InputError("gather_rows: " + std::to_string(idx_t.numel()) + " device indices for " +
                     std::to_string(idx.size()) + " rows");
  if (!cpu_kernel(s)) return s.index_select(0, idx_t.defined() ? idx_t : index_tensor(idx, s.device()));
  return GatherRowsFunction::apply(s, &idx);
}

torch::Tensor routed_residual(const torch::Tensor& s, const std::vector<int64_t>& idx,
                              const std::vector<int64_t>& window, const torch::Tensor& alpha,
                              const torch::Tensor& delta, const torch::Tensor& idx_t, const torch::Tensor& window_t) {
  if (s.dim() != 2 || delta.dim() != 2 || delta.size(1) != s.size(1) || delta.size(0) != int64_t(idx.size()))
    throw InputError("routed_residual: expected states [rows, d] and updates [" + std::to_string(idx.size()) +
                     ", d] (one per dispatched row)");
  if (window.size() != idx.size())
    throw InputError("routed_residual: " + std::to_string(window.size()) + " window ids for " +
                     std::to_string(idx.size()) + " rows");
  check_rows(idx, s.size(0), "routed_residual");
  for (auto w : window)
    if (w < 0 || w >= alpha.size(0))
      throw InputError("routed_residual: window " + std::to_string(w) + " outside [0, " +
                       std::to_string(alpha.size(0)) + ")");
  if ((idx_t.defined() && idx_t.numel() != int64_t(idx.size())) ||
      (window_t.defined() && window_t.numel() != int64_t(window.size())))
    throw InputError("routed_residual: the device indices do not match the host indices in length");
  if (!cpu_kernel(s) || alpha.dim() != 1 || !alpha.device().is_cpu() || alpha.scalar_type() != s.scalar_type() ||
      delta.scalar_type() != s.scalar_type()) {
    const auto dev = s.device();
    auto a = alpha.index_select(0, window_t.defined() ? window_t : index_tensor(window, dev)).unsqueeze(1);
    return s.index_add(0, idx_t.defined() ? idx_t : index_tensor(idx, dev), a * delta);
  }
  return RoutedResidualFunction::apply(s, alpha, delta, &idx, &window);
}

}  // namespace lol
