#include "training/train_step.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

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
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.tensor.grad().defined()) norms.push_back(p.tensor.grad().detach().to(torch::kFloat32).norm());
  if (norms.empty()) return 0.0;
  const double total = torch::stack(norms).norm().item<double>();
  if (clip > 0 && std::isfinite(total)) {
    const double coef = clip / (total + 1e-6);
    if (coef < 1.0) {
      torch::NoGradGuard ng;
      for (const auto& p : params)
        if (p.tensor.grad().defined()) p.tensor.mutable_grad().mul_(coef);
    }
  }
  return total;
}

}  // namespace lol::training
