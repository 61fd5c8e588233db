// Shared pieces of top-k token routing to experts (nn/sparse_moe.h): grouping the
// selected (token, slot) pairs by expert, used by SparseMoE's training/eval forward and by
// the cached decoder (inference/block_step.cpp); and the per-layer expert loads of a
// model's MoE FFNs as one [n_layers, E] tensor, the unit that data-parallel training
// sums over ranks (LoL paper 4.3.2, loss-free balancing of Wang et al. 2024).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "nn/sparse_moe.h"

namespace lol::nn {

/// p = softmax(logits) over the experts, logits [n, E] -> [n, E], in float32 for 16-bit
/// logits (transformers' routers: F.softmax(router_logits, dtype=torch.float)), else in
/// the logits' dtype.
torch::Tensor routing_probabilities(const torch::Tensor& logits);
/// The weights of the selected experts sel [n, k] (int64) from p [n, E]: p's entries, with
/// `normalize` divided by their sum per token (MoEShape::normalize_top_k), cast to `dtype`. [n, k].
torch::Tensor selected_weights(const torch::Tensor& probs, const torch::Tensor& sel, bool normalize,
                               c10::ScalarType dtype);

/// The (token, slot) pairs of a top-k selection in expert order, each expert's in token order.
struct ExpertGroups {
  std::vector<int64_t> slot;    ///< flat pair index token * k + slot, grouped by expert
  std::vector<int64_t> token;   ///< token of each entry of `slot`
  std::vector<int64_t> expert;  ///< the experts with at least one pair, ascending
  std::vector<int64_t> size;    ///< pairs of each expert in `expert`
};

/// Groups sel [n_tokens, k] (int64 expert ids in [0, n_experts), CPU, contiguous) by expert.
ExpertGroups group_by_expert(const torch::Tensor& sel, int64_t n_experts);

/// Pending loads of `moes` (each [E] int64), stacked: [moes.size(), E] int64 on the CPU;
/// [0, n_experts] when `moes` is empty.
torch::Tensor stack_pending_loads(const std::vector<SparseMoEImpl*>& moes, int64_t n_experts);

/// Replaces moes[i]'s pending load with load[i] (e.g. the sum over data-parallel ranks).
/// Throws InputError naming `what` unless load is [moes.size(), n_experts].
void set_pending_loads(const std::vector<SparseMoEImpl*>& moes, const torch::Tensor& load, int64_t n_experts,
                       const std::string& what);

}  // namespace lol::nn
