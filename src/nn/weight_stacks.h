// Stacked expert weights, made once per forward pass.
//
// Off the fused CPU kernels (a GPU) a routed depth's experts run as one batched product
// with their weights stacked ([G, out, in]; nn::grouped_linear, nn::rms_norm). Stacking
// per call made one stack per weight kind per routed depth, and in backward one unstack
// and one gradient sum per expert weight and depth: for the small preset 72 stacks and
// ~500 gradient additions per step, the largest part of LoL's extra operator launches on
// a GPU (docs/benchmarks.md, "First run on an H100"). With a WeightStacks cache the
// depths that use the same experts in the same order share one stack: autograd sums the
// stack's gradient over those depths once ([G, ...] at a time) and unstacks it once.
#pragma once
#include <map>
#include <vector>

#include <torch/types.h>

namespace lol::nn {

/// Stacks of weight lists, each made at most once during the cache's lifetime. Live for
/// one forward pass only: the stacks are copies, so they go stale when an optimizer step
/// changes the weights in place. Not thread-safe (one forward pass runs on one thread).
class WeightStacks {
 public:
  /// torch::stack(weights) ([G, ...] from G tensors of one shape), the cached one when
  /// the same tensors, in the same order, were stacked before under the same grad mode.
  /// Throws c10::Error when the shapes differ (as torch::stack).
  torch::Tensor stack(const std::vector<torch::Tensor>& weights);
  /// Stacks made so far (distinct lists).
  size_t size() const { return stacks_.size(); }

 private:
  struct Entry {
    std::vector<torch::Tensor> sources;  ///< held so that no address is reused while cached
    torch::Tensor stacked;
  };
  std::map<std::pair<bool, std::vector<const void*>>, Entry> stacks_;
};

/// torch::stack(weights) through `cache` when it is not null.
torch::Tensor stack_weights(const std::vector<torch::Tensor>& weights, WeightStacks* cache);

}  // namespace lol::nn
