// AdamW (Loshchilov & Hutter 2017), the update of torch.optim.AdamW (amsgrad off).
#pragma once
#include <cstdint>
#include <vector>

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
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
///   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
void adamw_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  int64_t step, const AdamWHyper& h);

/// The same update of n parameters at once with LibTorch's multi-tensor (`_foreach_`)
/// operators: 10 operator calls for the whole list instead of 8 per parameter, which is
/// what a GPU step's host time is made of (docs/benchmarks.md "CUDA"). steps[i] and
/// weight_decay[i] belong to parameter i (h.weight_decay is not used). All lists have n
/// entries; the tensors of one list share a device and dtype, and param i, grad i and
/// the moments i have one shape. Throws std::invalid_argument on mismatched list lengths.
void adamw_update(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq,
                  const std::vector<int64_t>& steps, const std::vector<double>& weight_decay, const AdamWHyper& h);

}  // namespace lol::training
