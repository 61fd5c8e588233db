#include "inference/blas.h"

#include <dlfcn.h>

#include <torch/torch.h>

namespace lol::inference::blas {

namespace {

// Fortran BLAS of the library LibTorch itself loaded, looked up at run time (no
// extra link dependency; LibTorch does not export its own BLAS wrappers). When a
// symbol is absent the products fall back to torch::mm on the same memory.
template <typename T>
using gemv_fn = void (*)(const char*, const int*, const int*, const T*, const T*, const int*, const T*, const int*,
                         const T*, T*, const int*);
template <typename T>
using gemm_fn = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                         const T*, const int*, const T*, T*, const int*);

template <typename T>
struct Fns {
  gemv_fn<T> gemv;
  gemm_fn<T> gemm;
};

template <typename T>
const Fns<T>& fns() {
  static const Fns<T> f = [] {
    const bool s = std::is_same<T, float>::value;
    return Fns<T>{reinterpret_cast<gemv_fn<T>>(dlsym(RTLD_DEFAULT, s ? "sgemv_" : "dgemv_")),
                  reinterpret_cast<gemm_fn<T>>(dlsym(RTLD_DEFAULT, s ? "sgemm_" : "dgemm_"))};
  }();
  return f;
}

constexpr int64_t kIntMax = (int64_t(1) << 31) - 1;
// Below this many rows, one gemv per row beats gemm (which packs the whole weight
// matrix first); measured with OpenBLAS on the project's 2-core VMs.
constexpr int64_t kGemvRows = 4;

/// Column-major (r x c, leading dimension ld) matrix at p as a tensor view.
template <typename T>
torch::Tensor colmajor(const T* p, int64_t r, int64_t c, int64_t ld) {
  auto dt = std::is_same<T, float>::value ? torch::kFloat32 : torch::kFloat64;
  return torch::from_blob(const_cast<T*>(p), {r, c}, {1, ld}, torch::TensorOptions().dtype(dt));
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const auto& f = fns<T>();
  if (f.gemm && std::max({m, n, k, lda, ldb, ldc}) <= kIntMax) {
    const int m_ = int(m), n_ = int(n), k_ = int(std::max<int64_t>(k, 1)), la = int(lda), lb = int(ldb), lc = int(ldc);
    if (k == 0) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) c[i + j * ldc] = beta == T(0) ? T(0) : beta * c[i + j * ldc];
      return;
    }
    f.gemm(ta ? "T" : "N", tb ? "T" : "N", &m_, &n_, &k_, &alpha, a, &la, b, &lb, &beta, c, &lc);
    return;
  }
  auto A = ta ? colmajor(a, k, m, lda).t() : colmajor(a, m, k, lda);
  auto B = tb ? colmajor(b, n, k, ldb).t() : colmajor(b, k, n, ldb);
  auto C = colmajor(c, m, n, ldc);
  auto r = torch::mm(A, B).mul_(alpha);
  if (beta != T(0)) r.add_(C, beta);
  C.copy_(r);
}

template <typename T>
void rows_times_wt_impl(const T* x, int64_t n, int64_t in, const T* w, int64_t out, T* y, const T* b) {
  const auto& f = fns<T>();
  if (n < kGemvRows && f.gemv && in <= kIntMax && out <= kIntMax) {
    // Row-major w [out, in] is column-major [in, out]: y = (w_cm)^T x, row by row.
    const T one = 1, zero = 0;
    const int m_ = int(in), n_ = int(out), inc = 1;
    for (int64_t r = 0; r < n; ++r) f.gemv("T", &m_, &n_, &one, w, &m_, x + r * in, &inc, &zero, y + r * out, &inc);
  } else {
    // Column-major: y^T [out, n] = (w_cm [in, out])^T x^T [in, n].
    gemm_impl<T>(true, false, out, n, in, T(1), w, in, x, in, T(0), y, out);
  }
  if (b)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) y[r * out + j] += b[j];
}

}  // namespace

void rows_times_wt(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y, const float* b) {
  rows_times_wt_impl(x, n, in, w, out, y, b);
}
void rows_times_wt(const double* x, int64_t n, int64_t in, const double* w, int64_t out, double* y, const double* b) {
  rows_times_wt_impl(x, n, in, w, out, y, b);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace lol::inference::blas
