// Ridge regression in closed form (paper 4.1.2: linear probes on router probabilities):
// minimise sum_i (y_i - b - w.x_i)^2 + lambda |w|^2 with the intercept b not
// penalised, i.e. solve (Xc^T Xc + lambda I) w = Xc^T yc on centred data by Cholesky
// and set b = mean(y) - mean(x).w. Plain C++, O(n p^2 + p^3) for n items and p
// features; meant for p up to a few thousand.
#pragma once
#include <cstdint>
#include <vector>

#include "stats/matrix.h"

namespace lol::stats {

/// Solves A x = b for a symmetric positive definite A [n, n] (row-major; only the
/// lower triangle is read) by Cholesky factorisation. Throws std::domain_error when a
/// pivot is not positive or below 1e-13 times its diagonal entry (A singular to working
/// precision, or not positive definite).
std::vector<double> cholesky_solve(std::vector<double> a, int64_t n, std::vector<double> b);

/// A fitted linear model: prediction = intercept + weights . x.
struct RidgeModel {
  std::vector<double> weights;  ///< [p]
  double intercept = 0;
  double lambda = 0;            ///< absolute penalty used
  double predict(const double* x) const;
  /// Predictions for every row of X [n, p] -> [n].
  std::vector<double> predict(const Matrix& x) const;
};

/// Sufficient statistics of a ridge problem over a set of items: count, sums of x and
/// y, Gram matrix sum x x^T and sum x y. Sums of disjoint sets add up, so CV folds can
/// be combined without touching the items again. Features should be roughly centred
/// (e.g. by the mean over all items) to keep the centring x x^T - n mean mean^T exact.
struct RidgeSums {
  int64_t p = 0;
  double n = 0, sum_y = 0;
  std::vector<double> sum_x, xx, xy;  ///< [p], [p, p] row-major (lower triangle filled), [p]

  explicit RidgeSums(int64_t features = 0);
  /// Adds one item (x [p], target y): add_gram(x) + add_target(x, y).
  void add(const double* x, double y);
  /// Adds the y-independent part of one item: n, sum_x, x x^T.
  void add_gram(const double* x);
  /// Adds the y-dependent part of one item: sum_y, x y.
  void add_target(const double* x, double y);
  RidgeSums& operator+=(const RidgeSums& o);
  RidgeSums& operator-=(const RidgeSums& o);
  /// Trace of the centred Gram matrix (sum of the per-feature sums of squares about the mean).
  double centred_trace() const;
  /// Ridge solution with absolute penalty lambda >= 0 (0 = least squares). Throws
  /// lol::InputError for lambda < 0 or no items, std::domain_error when the system is singular.
  RidgeModel solve(double lambda) const;
};

/// Fits ridge on X [n, p] and targets y [n] with absolute penalty lambda >= 0.
/// Throws lol::InputError on mismatched sizes or lambda < 0, std::domain_error when
/// lambda = 0 and X (centred) has rank < p.
RidgeModel fit_ridge(const Matrix& x, const std::vector<double>& y, double lambda);

/// Default grid of *relative* penalties c: the absolute penalty is
/// c * trace(Xc^T Xc) / p (the mean eigenvalue of the centred Gram matrix), which makes
/// the grid independent of the number of items and the feature scale.
std::vector<double> default_relative_lambdas();

}  // namespace lol::stats
