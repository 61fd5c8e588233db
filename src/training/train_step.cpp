#include "training/train_step.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "training/batcher.h"
#include "training/loss.h"

namespace lol::training {

StepTotals forward_backward(TrainableModel& model, const std::vector<TrainBatch>& micro_batches,
                            const torch::Device& device) {
  StepTotals t;
  for (const auto& mb : micro_batches) t.targets += mb.n_targets;
  const double denom = double(std::max<int64_t>(t.targets, 1));
  for (const auto& mb_cpu : micro_batches) {
    TrainBatch mb = to_device(mb_cpu, device);
    auto logits = model.forward(mb);
    auto ls = masked_ce_sum(logits, mb.targets, mb.target_mask);
    (ls / denom).backward();
    t.loss_sum += ls.item<double>();
    t.tokens += mb.n_tokens;
    t.flops += model.train_flops_per_token(mb.tokens.size(1)) * double(mb.n_tokens);
  }
  return t;
}

double clip_gradients(const std::vector<GroupedParam>& params, double clip) {
  // Multi-tensor norms per dtype (one operator call per dtype, not one per parameter),
  // combined in float64.
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.tensor.grad().defined()) {
      grads.push_back(p.tensor.grad());
      by_dtype[p.tensor.grad().scalar_type()].push_back(p.tensor.grad().detach());
    }
  if (grads.empty()) return 0.0;
  std::vector<torch::Tensor> norms;
  for (const auto& [dtype, list] : by_dtype) norms.push_back(torch::stack(at::_foreach_norm(list)).to(torch::kFloat64));
  const double total = torch::cat(norms).norm().item<double>();
  if (clip > 0 && std::isfinite(total)) {
    const double coef = clip / (total + 1e-6);
    if (coef < 1.0) {
      torch::NoGradGuard ng;
      at::_foreach_mul_(grads, coef);
    }
  }
  return total;
}

}  // namespace lol::training
