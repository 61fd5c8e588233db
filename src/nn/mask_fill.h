// The fill value of masked attention scores, the score softmax and soft-capping, shared
// by the training attention (nn/attention.cpp) and the cached decoder
// (inference/kv_cache.cpp); soft-capping also caps a dense model's logits.
#pragma once
#include <limits>

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <ATen/ATen.h>

namespace lol::nn {

/// The most negative finite value of dtype `t` (scores of a blocked key before the
/// softmax). float's lowest() is outside the range of bfloat16 and float16, where
/// masked_fill_ with it throws "value cannot be converted ... without overflow".
inline double lowest_finite(c10::ScalarType t) {
  switch (t) {
    case c10::kDouble: return std::numeric_limits<double>::lowest();
    case c10::kBFloat16: return double(std::numeric_limits<c10::BFloat16>::lowest());
    case c10::kHalf: return double(std::numeric_limits<c10::Half>::lowest());
    default: return std::numeric_limits<float>::lowest();
  }
}

/// Softmax of attention scores [..., n_keys] over the last dimension (n_keys), same
/// shape and dtype out. Reduced-precision scores
/// (bfloat16, float16) are normalised in float32 and cast back, as Hugging Face's
/// eager attention does (`softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)`);
/// float32/float64 scores stay in their dtype.
inline at::Tensor score_softmax(const at::Tensor& scores) {
  const auto t = scores.scalar_type();
  if (t == c10::kBFloat16 || t == c10::kHalf) return at::softmax(scores, -1, c10::kFloat).to(t);
  return at::softmax(scores, -1);
}

/// Soft-capping (Gemma 2): cap * tanh(x / cap) elementwise for cap > 0 (x of any shape,
/// same shape out; attention scores after scaling, or logits [..., vocab]); x itself for
/// cap = 0.
inline at::Tensor soft_cap(const at::Tensor& x, double cap) { return cap > 0 ? at::tanh(x / cap) * cap : x; }

}  // namespace lol::nn
