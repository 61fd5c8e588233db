// One decoder block (nn::Block) applied to the new tokens of a decoding step, with
// cached attention. Inside the routed core, rows may run different experts: each
// expert's projections run once on its rows, attention runs once for all rows
// (it does not depend on the expert once q/k/v are projected), and FiLM follows both
// norms (paper Appendix A).
#pragma once
#include <utility>
#include <vector>

#include <torch/types.h>

#include "inference/kv_cache.h"
#include "inference/packed_model.h"

namespace lol::inference {

/// Rows that run one block: `rows` (indices into x), empty = every row. `expert`: the
/// block's row in PackedModel::stacked (-1 outside the library).
struct BlockGroup {
  const PackedBlock* block = nullptr;
  std::vector<int64_t> rows;
  int64_t expert = -1;
};

/// Residual update y - x = attn + mlp of the block(s) for rows x [n, d].
/// groups partition the rows; film is null outside the routed core; rope holds the
/// RoPE factors C and S [n, 1, 2, hd/2] of the tokens' positions (nn::rotation_factors). Writes the visible
/// tokens' keys/values into `cache` (see cached_attention). Returns [n, d].
/// Off the fused CPU kernels (a GPU) several library experts (`stacked` given, every
/// group's expert set) run as equal groups padded to the largest one, each projection
/// one batched product with the stacked weights, while the padding at most doubles the
/// rows (as nn::grouped_block_delta in training) and, when the groups are not the whole
/// library in order, the used experts' weights (copied out of the stack) stay under
/// 256 MiB; one product per expert otherwise.
torch::Tensor block_delta(const std::vector<BlockGroup>& groups, const PackedFiLM* film, const torch::Tensor& x,
                          KVCache& cache, const AttnPlan& plan, const std::pair<torch::Tensor, torch::Tensor>& rope,
                          const LoLConfig& cfg, const PackedLibrary* stacked = nullptr);

/// Calls of block_delta that ran padded expert groups, since the process started (for tests).
int64_t padded_block_delta_calls();

}  // namespace lol::inference
