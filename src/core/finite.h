// Checks that what a model computed is finite (NaN/Inf -> lol::NonFiniteError, exit 3).
//
// Weights can be finite and still overflow float32 in the forward pass (values near
// FLT_MAX); training stops on a non-finite loss (training/trainer.h), and every inference
// path checks its outputs with these before it reports, samples or decides anything.
#pragma once
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "util/error.h"

namespace lol {

/// The message of a NonFiniteError for `what` (e.g. "forward: the logits"), computed in
/// `dtype` (e.g. "Float").
inline std::string non_finite_message(const std::string& what, const std::string& dtype) {
  return what + ": NaN or Inf values (the model's activations overflowed " + dtype +
         ": its weights are finite but too large, or the checkpoint is damaged)";
}

/// Throws NonFiniteError(non_finite_message(what, the name of `dtype`)).
[[noreturn]] inline void throw_non_finite(const std::string& what, c10::ScalarType dtype) {
  throw NonFiniteError(non_finite_message(what, std::string(c10::toString(dtype))));
}

/// Throws NonFiniteError(non_finite_message(what, ...)) unless every element of `t` is
/// finite. `t`: any shape, floating point, any device (one reduction and one host sync).
inline void require_finite(const torch::Tensor& t, const std::string& what) {
  if (t.defined() && t.numel() > 0 && !torch::isfinite(t).all().item<bool>()) throw_non_finite(what, t.scalar_type());
}

/// True when all n values at v (host memory, float or double) are finite, e.g. one
/// sequence's logits before sampling.
template <typename T>
bool all_finite(const T* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

/// Host-side form for a scalar (e.g. a summed loss).
inline void require_finite(double v, const std::string& what) {
  if (!std::isfinite(v)) throw NonFiniteError(non_finite_message(what, "the compute dtype"));
}

}  // namespace lol
