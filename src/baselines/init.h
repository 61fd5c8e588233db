// Weight initialisation shared by the baseline models, the same rule as LoL's
// LoLModel::reset_parameters (so that FLOPs-matched comparisons start alike):
// normal(0, 0.02) for matrices and embeddings, o_proj/down_proj scaled by
// 1/sqrt(2 * layers), norm weights 1, biases 0.
#pragma once
#include <cstdint>

#include <torch/nn/module.h>

namespace lol::baselines {

/// Re-initialises every parameter of `m` (names decide the rule, see above) from a CPU
/// generator seeded with `seed`; `layers` = block applications per token.
/// Buffers are left unchanged.
void init_transformer_weights(torch::nn::Module& m, int64_t layers, uint64_t seed);

}  // namespace lol::baselines
