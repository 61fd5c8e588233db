// Cross entropy over the positions whose target counts (loss-masked language modelling).
#pragma once
#include <torch/types.h>

namespace lol::training {

/// Sum of -log softmax(logits)[target] over positions where `mask` is true.
/// logits [B, T, V] (any float dtype; computed in float32), targets [B, T] int64 (values at
/// masked-out positions are ignored and may be anything, e.g. -100), mask [B, T] bool.
/// Returns a float32 scalar (0 when no position counts), differentiable w.r.t. logits.
torch::Tensor masked_ce_sum(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& mask);

/// Number of counted positions whose argmax logit equals the target.
int64_t masked_correct(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& mask);

}  // namespace lol::training
