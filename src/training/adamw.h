// AdamW (Loshchilov & Hutter 2017), the update of torch.optim.AdamW (amsgrad off).
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace lol::training {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

/// One AdamW update in place, `step` = this update's 1-based count for the parameter:
///   p *= 1 - lr * wd
///   m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
///   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  int64_t step, const AdamWHyper& h);

}  // namespace lol::training
