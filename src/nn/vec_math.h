// Element-wise math for the CPU kernels of src/nn (attention softmax, SwiGLU) that the
// compiler can vectorise, and the ISA-clone attributes those kernels use. Internal to
// src/nn: include only from kernel .cpp files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

// Float32 kernels marked LOL_KERNEL_CLONES are compiled three times (x86-64-v4 =
// AVX-512, v3 = AVX2 + FMA, baseline SSE2) and the loader picks the widest the CPU has
// (GCC function multi-versioning). Templates they call must be LOL_KERNEL_INLINE (and
// no lambdas in between: a lambda body is a separate function, compiled for the
// baseline only) so that their loops are vectorised for each clone's ISA. Other
// compilers and architectures build the baseline only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOL_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define LOL_KERNEL_INLINE __attribute__((always_inline)) inline
#else
#define LOL_KERNEL_CLONES
#define LOL_KERNEL_INLINE inline
#endif

namespace lol::nn {

/// Rows per at::parallel_for task for a kernel doing a few operations per element: at
/// least 32768 elements (ATen's own GRAIN_SIZE for element-wise ops), so that a call on a
/// small tensor (a tiny model, an expert's few windows) runs on the calling thread
/// instead of waking a worker for less work than the wake-up costs.
inline int64_t rows_per_task(int64_t elements_per_row) {
  return std::max<int64_t>(1, int64_t(32768) / std::max<int64_t>(1, elements_per_row));
}

}  // namespace lol::nn

namespace lol::nn::vec {

/// exp(x), elementwise in a vectorisable loop: float32 through a branch-free
/// Cephes-style polynomial (std::exp is a libm call per element); double through
/// std::exp. Float: x is clamped to [-87, 88] (exp(-inf) gives ~1e-38 and exp(+inf)
/// ~1.7e38; callers that need exact 0 mask it); the relative error is ~1e-7 (a few ulp).
/// Tested through the kernels that use it against the composed LibTorch formulas
/// (tests/model/test_fused_ops.cpp).
template <typename T>
LOL_KERNEL_INLINE T exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    // x = n ln2 + r with n = round(x / ln2) (adding 1.5 * 2^23 rounds to an integer in
    // the float's low mantissa bits), |r| <= ln2 / 2; ln2 in two parts (Cephes).
    const float t = x * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    // 2^n from the exponent bits. Unsigned: for a NaN x (NaN propagates through y) the
    // bits are arbitrary, and a left shift of a negative int is undefined behaviour
    // (found by the sanitized test suite: an overflowing model's NaN scores).
    const uint32_t ni = __builtin_bit_cast(uint32_t, t) - 0x4B400000u;  // n as an integer, -126..127
    return y * __builtin_bit_cast(float, (ni + 127u) << 23);            // * 2^n
  } else {
    return std::exp(x);
  }
}

/// Logistic sigmoid 1 / (1 + exp(-x)) through vec::exp (float: saturates to exactly 1
/// for x > 87 and to ~6e-39 for x < -88).
template <typename T>
LOL_KERNEL_INLINE T sigmoid(T x) {
  return T(1) / (T(1) + exp<T>(-x));
}

}  // namespace lol::nn::vec
