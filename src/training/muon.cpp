#include "training/muon.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace lol::training {

torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps, torch::ScalarType dtype, double eps) {
  if (g.dim() != 2) throw std::invalid_argument("newton_schulz: expected a 2-D matrix, got " + std::to_string(g.dim()) + "-D");
  return newton_schulz_batched(g.unsqueeze(0), steps, dtype, eps).squeeze(0);
}

torch::Tensor newton_schulz_batched(const torch::Tensor& g, int64_t steps, torch::ScalarType dtype, double eps) {
  if (g.dim() != 3)
    throw std::invalid_argument("newton_schulz_batched: expected [n, rows, cols], got " + std::to_string(g.dim()) + "-D");
  torch::NoGradGuard ng;
  torch::Tensor x = g.to(dtype);
  const bool transposed = g.size(1) > g.size(2);
  if (transposed) x = x.transpose(1, 2);
  x = x / at::linalg_vector_norm(x, 2, {1, 2}, /*keepdim=*/true).clamp_min(eps);
  for (int64_t i = 0; i < steps; ++i) {
    auto a = torch::bmm(x, x.transpose(1, 2));
    auto b = torch::baddbmm(a, a, a, /*beta=*/kNsB, /*alpha=*/kNsC);
    x = torch::baddbmm(x, b, x, /*beta=*/kNsA);
  }
  if (transposed) x = x.transpose(1, 2);
  return x.to(g.scalar_type()).contiguous();
}

double muon_adjusted_lr(double lr, int64_t rows, int64_t cols) {
  return lr * 0.2 * std::sqrt(double(std::max(rows, cols)));
}

void muon_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& buf, const MuonHyper& h) {
  muon_update({param}, {grad}, {buf}, {h.weight_decay}, h);
}

void muon_update(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                 const std::vector<double>& weight_decay, const MuonHyper& h) {
  const size_t n = params.size();
  if (grads.size() != n || bufs.size() != n || weight_decay.size() != n)
    throw std::invalid_argument("muon_update: lists of " + std::to_string(n) + " parameters, " +
                                std::to_string(grads.size()) + " gradients, " + std::to_string(bufs.size()) +
                                " momentum buffers, " + std::to_string(weight_decay.size()) +
                                " weight decays (expected equal lengths)");
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i)
    if (params[i].dim() != 2 || params[i].sizes() != params[0].sizes())
      throw std::invalid_argument("muon_update: parameter " + std::to_string(i) +
                                  " is not a matrix of the group's shape (one call updates matrices of one shape)");
  torch::NoGradGuard ng;
  at::_foreach_mul_(bufs, h.momentum);  // buf = momentum buf + (1 - momentum) grad
  at::_foreach_add_(bufs, grads, 1.0 - h.momentum);
  torch::Tensor b = torch::stack(bufs);
  torch::Tensor u = h.nesterov ? torch::stack(grads).lerp_(b, h.momentum) : b;
  auto o = newton_schulz_batched(u, h.ns_steps, h.ns_dtype).unbind(0);
  std::vector<at::Scalar> decay;
  bool any_decay = false;
  for (double wd : weight_decay) {
    decay.emplace_back(1.0 - h.lr * wd);
    any_decay |= wd != 0.0;
  }
  if (any_decay) at::_foreach_mul_(params, decay);
  at::_foreach_add_(params, o, -muon_adjusted_lr(h.lr, params[0].size(0), params[0].size(1)));
}

}  // namespace lol::training
