// Direct BLAS calls for the CPU decoding kernels (no dispatcher per call): the
// products of a decoding step are small, so per-call overhead matters.
#pragma once
#include <cstdint>

namespace lol::inference::blas {

/// y[n, out] = x[n, in] * w[out, in]^T (+ b[out] when b != nullptr), all row-major
/// and contiguous. Up to 3 rows use BLAS gemv per row (streams w at full memory
/// bandwidth), more rows gemm.
void rows_times_wt(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y, const float* b = nullptr);
void rows_times_wt(const double* x, int64_t n, int64_t in, const double* w, int64_t out, double* y,
                   const double* b = nullptr);

/// Column-major gemm C[m, n] = alpha op(A) op(B) + beta C (BLAS convention).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace lol::inference::blas
