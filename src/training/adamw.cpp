#include "training/adamw.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace lol::training {

void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  int64_t step, const AdamWHyper& h) {
  adamw_update({param}, {grad}, {exp_avg}, {exp_avg_sq}, {step}, {h.weight_decay}, h);
}

void adamw_update(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq,
                  const std::vector<int64_t>& steps, const std::vector<double>& weight_decay, const AdamWHyper& h) {
  const size_t n = params.size();
  if (grads.size() != n || exp_avg.size() != n || exp_avg_sq.size() != n || steps.size() != n ||
      weight_decay.size() != n)
    throw std::invalid_argument("adamw_update: lists of " + std::to_string(n) + " parameters, " +
                                std::to_string(grads.size()) + " gradients, " + std::to_string(exp_avg.size()) +
                                " / " + std::to_string(exp_avg_sq.size()) + " moments, " +
                                std::to_string(steps.size()) + " steps, " + std::to_string(weight_decay.size()) +
                                " weight decays (expected equal lengths)");
  if (n == 0) return;
  torch::NoGradGuard ng;
  std::vector<at::Scalar> decay, inv_sqrt_bc2, neg_step_size;
  bool any_decay = false;
  for (size_t i = 0; i < n; ++i) {
    decay.emplace_back(1.0 - h.lr * weight_decay[i]);
    any_decay |= weight_decay[i] != 0.0;
    const double bc1 = 1.0 - std::pow(h.beta1, double(steps[i]));
    const double bc2 = 1.0 - std::pow(h.beta2, double(steps[i]));
    inv_sqrt_bc2.emplace_back(std::sqrt(bc2));
    neg_step_size.emplace_back(-h.lr / bc1);
  }
  if (any_decay) at::_foreach_mul_(params, decay);                 // p *= 1 - lr wd
  at::_foreach_mul_(exp_avg, h.beta1);                             // m = beta1 m + (1 - beta1) g
  at::_foreach_add_(exp_avg, grads, 1.0 - h.beta1);
  at::_foreach_mul_(exp_avg_sq, h.beta2);                          // v = beta2 v + (1 - beta2) g^2
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1.0 - h.beta2);
  auto denom = at::_foreach_sqrt(exp_avg_sq);                      // sqrt(v) / sqrt(1 - beta2^t) + eps
  at::_foreach_div_(denom, inv_sqrt_bc2);
  at::_foreach_add_(denom, h.eps);
  at::_foreach_addcdiv_(params, exp_avg, denom, neg_step_size);    // p -= lr / (1 - beta1^t) m / denom
}

}  // namespace lol::training
