// Token dispatch of one routed depth (LoL paper Algorithm 1, lines 15-17): the depth's
// tokens are gathered in expert order for the grouped expert call, and each expert's
// residual update E(s) - s comes back scaled by its window's router probability:
//   s <- s + alpha_w (E(s) - s).
// A depth's windows partition the valid tokens, so every row is gathered at most once:
// the gather's gradient is a plain row scatter (no zero-filled accumulation buffer when
// the rows cover the whole batch) and the update's gradient with respect to s is the
// incoming gradient itself.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace lol {

/// s [rows, d] -> [n, d] with row i = s[idx[i]]; idx: n distinct flat rows. Differentiable
/// in s (one autograd node on the CPU). Throws lol::InputError when an index is out of
/// range or repeated. idx_t: optionally the same indices as an int64 tensor on s's device
/// (the GPU path then uploads nothing).
torch::Tensor gather_rows(const torch::Tensor& s, const std::vector<int64_t>& idx,
                          const torch::Tensor& idx_t = torch::Tensor());

/// s + alpha (E(s) - s) on the dispatched rows: out = s, then out[idx[i]] += alpha[window[i]]
/// * delta[i]. s [rows, d], delta [n, d], alpha [G] (router probability of each window,
/// same dtype), idx and window: n entries (distinct rows; windows < G). Differentiable in
/// s, alpha and delta. Throws lol::InputError on mismatched lengths or out-of-range
/// indices. idx_t, window_t: optionally idx and window as int64 tensors on s's device
/// (the GPU path then uploads nothing).
torch::Tensor routed_residual(const torch::Tensor& s, const std::vector<int64_t>& idx,
                              const std::vector<int64_t>& window, const torch::Tensor& alpha,
                              const torch::Tensor& delta, const torch::Tensor& idx_t = torch::Tensor(),
                              const torch::Tensor& window_t = torch::Tensor());

}  // namespace lol
