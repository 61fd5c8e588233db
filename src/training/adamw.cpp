#include "training/adamw.h"

#include <cmath>

namespace lol::training {

void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  int64_t step, const AdamWHyper& h) {
  torch::NoGradGuard ng;
  param.mul_(1.0 - h.lr * h.weight_decay);
  exp_avg.lerp_(grad, 1.0 - h.beta1);
  exp_avg_sq.mul_(h.beta2).addcmul_(grad, grad, 1.0 - h.beta2);
  const double bc1 = 1.0 - std::pow(h.beta1, double(step));
  const double bc2 = 1.0 - std::pow(h.beta2, double(step));
  const double step_size = h.lr / bc1;
  auto denom = (exp_avg_sq.sqrt() / std::sqrt(bc2)).add_(h.eps);
  param.addcdiv_(exp_avg, denom, -step_size);
}

}  // namespace lol::training
