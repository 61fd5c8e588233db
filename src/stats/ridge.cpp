#include "stats/ridge.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace lol::stats {

std::vector<double> cholesky_solve(std::vector<double> a, int64_t n, std::vector<double> b) {
  require(int64_t(a.size()) == n * n && int64_t(b.size()) == n, "stats::cholesky_solve",
          "expected a [n, n] matrix and a [n] right-hand side");
  // In-place lower Cholesky factor L (A = L L^T), row-major.
  for (int64_t j = 0; j < n; ++j) {
    double* rj = a.data() + j * n;
    const double diag = rj[j];
    double d = diag;
    for (int64_t k = 0; k < j; ++k) d -= rj[k] * rj[k];
    // Relative tolerance: a pivot that lost all but rounding noise means a singular matrix.
    if (!(d > 1e-13 * std::abs(diag)) || !(d > 0))
      throw std::domain_error("stats::cholesky_solve: matrix is not positive definite (pivot " + std::to_string(j) +
                              " = " + std::to_string(d) + ")");
    const double ljj = std::sqrt(d);
    rj[j] = ljj;
    for (int64_t i = j + 1; i < n; ++i) {
      double* ri = a.data() + i * n;
      double s = ri[j];
      for (int64_t k = 0; k < j; ++k) s -= ri[k] * rj[k];
      ri[j] = s / ljj;
    }
  }
  // Forward substitution L z = b, then back substitution L^T x = z.
  for (int64_t i = 0; i < n; ++i) {
    const double* ri = a.data() + i * n;
    double s = b[i];
    for (int64_t k = 0; k < i; ++k) s -= ri[k] * b[k];
    b[i] = s / ri[i];
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int64_t k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  return b;
}

double RidgeModel::predict(const double* x) const {
  double s = intercept;
  for (size_t j = 0; j < weights.size(); ++j) s += weights[j] * x[j];
  return s;
}

std::vector<double> RidgeModel::predict(const Matrix& x) const {
  require(x.cols == int64_t(weights.size()), "stats::RidgeModel::predict",
          "matrix has " + std::to_string(x.cols) + " columns: expected " + std::to_string(weights.size()));
  std::vector<double> out(x.rows);
  for (int64_t r = 0; r < x.rows; ++r) out[r] = predict(x.row(r));
  return out;
}

RidgeSums::RidgeSums(int64_t features) : p(features), sum_x(p, 0.0), xx(p * p, 0.0), xy(p, 0.0) {}

void RidgeSums::add(const double* x, double y) {
  add_gram(x);
  add_target(x, y);
}

void RidgeSums::add_gram(const double* x) {
  n += 1;
  for (int64_t i = 0; i < p; ++i) {
    const double xi = x[i];
    sum_x[i] += xi;
    if (xi == 0) continue;  // exact; router features have many zeros after one-hot coding
    double* row = xx.data() + i * p;
    for (int64_t j = 0; j <= i; ++j) row[j] += xi * x[j];
  }
}

void RidgeSums::add_target(const double* x, double y) {
  sum_y += y;
  for (int64_t i = 0; i < p; ++i) xy[i] += x[i] * y;
}

RidgeSums& RidgeSums::operator+=(const RidgeSums& o) {
  require(o.p == p, "stats::RidgeSums", "adding sums over " + std::to_string(o.p) + " features to " + std::to_string(p));
  n += o.n;
  sum_y += o.sum_y;
  for (int64_t i = 0; i < p; ++i) {
    sum_x[i] += o.sum_x[i];
    xy[i] += o.xy[i];
  }
  for (size_t i = 0; i < xx.size(); ++i) xx[i] += o.xx[i];
  return *this;
}

RidgeSums& RidgeSums::operator-=(const RidgeSums& o) {
  require(o.p == p, "stats::RidgeSums",
          "subtracting sums over " + std::to_string(o.p) + " features from " + std::to_string(p));
  n -= o.n;
  sum_y -= o.sum_y;
  for (int64_t i = 0; i < p; ++i) {
    sum_x[i] -= o.sum_x[i];
    xy[i] -= o.xy[i];
  }
  for (size_t i = 0; i < xx.size(); ++i) xx[i] -= o.xx[i];
  return *this;
}

double RidgeSums::centred_trace() const {
  if (n <= 0) return 0;
  double t = 0;
  for (int64_t i = 0; i < p; ++i) t += xx[i * p + i] - sum_x[i] * sum_x[i] / n;
  return t;
}

RidgeModel RidgeSums::solve(double lambda) const {
  require(lambda >= 0 && std::isfinite(lambda), "stats::RidgeSums::solve",
          "lambda = " + std::to_string(lambda) + ": expected a finite value >= 0");
  require(n > 0, "stats::RidgeSums::solve", "no items: expected at least one");
  std::vector<double> a(p * p, 0.0), b(p);
  const double ybar = sum_y / n;
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j <= i; ++j) a[i * p + j] = xx[i * p + j] - sum_x[i] * sum_x[j] / n;
    a[i * p + i] += lambda;
    b[i] = xy[i] - sum_x[i] * ybar;
  }
  RidgeModel m;
  m.lambda = lambda;
  m.weights = p > 0 ? cholesky_solve(std::move(a), p, std::move(b)) : std::vector<double>{};
  m.intercept = ybar;
  for (int64_t i = 0; i < p; ++i) m.intercept -= m.weights[i] * sum_x[i] / n;
  return m;
}

RidgeModel fit_ridge(const Matrix& x, const std::vector<double>& y, double lambda) {
  require(int64_t(y.size()) == x.rows, "stats::fit_ridge",
          std::to_string(x.rows) + " rows but " + std::to_string(y.size()) + " targets: expected equal");
  // Shift by the column means first (exact for a model with intercept) so that the
  // centring inside RidgeSums does not cancel digits.
  std::vector<double> mean(x.cols, 0.0), shifted(x.cols);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) mean[c] += x(r, c) / double(x.rows);
  RidgeSums s(x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) shifted[c] = x(r, c) - mean[c];
    s.add(shifted.data(), y[r]);
  }
  RidgeModel m = s.solve(lambda);
  for (int64_t c = 0; c < x.cols; ++c) m.intercept -= m.weights[c] * mean[c];
  return m;
}

std::vector<double> default_relative_lambdas() { return {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0}; }

}  // namespace lol::stats
