#include "nn/weight_stacks.h"

#include <ATen/core/grad_mode.h>

namespace lol::nn {

torch::Tensor WeightStacks::stack(const std::vector<torch::Tensor>& weights) {
  std::pair<bool, std::vector<const void*>> key{at::GradMode::is_enabled(), {}};
  key.second.reserve(weights.size());
  for (const auto& w : weights) key.second.push_back(w.unsafeGetTensorImpl());
  auto it = stacks_.find(key);
  if (it != stacks_.end()) return it->second.stacked;
  auto stacked = torch::stack(weights);
  stacks_.emplace(std::move(key), Entry{weights, stacked});
  return stacked;
}

torch::Tensor stack_weights(const std::vector<torch::Tensor>& weights, WeightStacks* cache) {
  return cache ? cache->stack(weights) : torch::stack(weights);
}

}  // namespace lol::nn
