#include "training/muon.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>

namespace lol::training {

torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps, torch::ScalarType dtype, double eps) {
  if (g.dim() != 2) throw std::invalid_argument("newton_schulz: expected a 2-D matrix, got " + std::to_string(g.dim()) + "-D");
  torch::NoGradGuard ng;
  torch::Tensor x = g.to(dtype);
  const bool transposed = g.size(0) > g.size(1);
  if (transposed) x = x.t();
  x = x / x.norm().clamp_min(eps);
  for (int64_t i = 0; i < steps; ++i) {
    auto a = torch::mm(x, x.t());
    auto b = torch::addmm(a, a, a, /*beta=*/kNsB, /*alpha=*/kNsC);
    x = torch::addmm(x, b, x, /*beta=*/kNsA);
  }
  if (transposed) x = x.t();
  return x.to(g.scalar_type()).contiguous();
}

double muon_adjusted_lr(double lr, int64_t rows, int64_t cols) {
  return lr * 0.2 * std::sqrt(double(std::max(rows, cols)));
}

void muon_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& buf, const MuonHyper& h) {
  torch::NoGradGuard ng;
  buf.lerp_(grad, 1.0 - h.momentum);
  torch::Tensor u = h.nesterov ? grad.lerp(buf, h.momentum) : buf;
  torch::Tensor o = newton_schulz(u, h.ns_steps, h.ns_dtype);
  param.mul_(1.0 - h.lr * h.weight_decay);
  param.add_(o, -muon_adjusted_lr(h.lr, param.size(0), param.size(1)));
}

}  // namespace lol::training
