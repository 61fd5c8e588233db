#include "training/loss.h"

#include <torch/nn/functional/loss.h>

namespace lol::training {

namespace {
torch::Tensor counted_rows(const torch::Tensor& mask) { return mask.reshape({-1}).nonzero().reshape({-1}); }
}  // namespace

torch::Tensor masked_ce_sum(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& mask) {
  const int64_t V = logits.size(-1);
  auto rows = counted_rows(mask);
  if (rows.numel() == 0) return (logits.sum() * 0).to(torch::kFloat32);
  auto lg = logits.reshape({-1, V}).index_select(0, rows).to(torch::kFloat32);
  auto tg = targets.reshape({-1}).index_select(0, rows);
  namespace F = torch::nn::functional;
  return F::cross_entropy(lg, tg, F::CrossEntropyFuncOptions().reduction(torch::kSum));
}

int64_t masked_correct(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& mask) {
  auto rows = counted_rows(mask);
  if (rows.numel() == 0) return 0;
  auto pred = logits.reshape({-1, logits.size(-1)}).index_select(0, rows).argmax(-1);
  auto tg = targets.reshape({-1}).index_select(0, rows);
  return pred.eq(tg).sum().item<int64_t>();
}

}  // namespace lol::training
