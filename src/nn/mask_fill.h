// The fill value of masked attention scores, shared by the training attention
// (nn/attention.cpp) and the cached decoder (inference/kv_cache.cpp).
#pragma once
#include <limits>

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

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

}  // namespace lol::nn
