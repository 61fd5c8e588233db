// Closed-form ridge regression: hand-solved systems, the least-squares limit, the
// unpenalised intercept, optimality conditions, and sums over parts.
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "stats/ridge.h"
#include "util/error.h"

using lol::stats::Matrix;
using lol::stats::RidgeSums;
using lol::stats::cholesky_solve;
using lol::stats::fit_ridge;

namespace {

Matrix matrix(std::vector<std::vector<double>> rows) {
  Matrix m(int64_t(rows.size()), int64_t(rows[0].size()));
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < rows[r].size(); ++c) m(int64_t(r), int64_t(c)) = rows[r][c];
  return m;
}

Matrix random_matrix(int64_t n, int64_t p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Matrix m(n, p);
  for (auto& v : m.data) v = g(rng) + 0.3;
  return m;
}

}  // namespace

TEST(Cholesky, SolvesHandSystem) {
  // [[4, 2], [2, 3]] x = [2, 1]  ->  x = [0.5, 0].
  auto x = cholesky_solve({4, 2, 2, 3}, 2, {2, 1});
  EXPECT_NEAR(x[0], 0.5, 1e-15);
  EXPECT_NEAR(x[1], 0.0, 1e-15);
  EXPECT_THROW(cholesky_solve({1, 2, 2, 1}, 2, {1, 1}), std::domain_error);  // indefinite
}

TEST(Ridge, ThreeByTwoSolvedByHand) {
  // X = [[1,0],[0,1],[1,1]], y = [1,2,3]. Centred: Xc^T Xc = [[2/3,-1/3],[-1/3,2/3]],
  // Xc^T yc = [0, 1]. lambda = 1/3: w = (9/8) [[1,1/3],[1/3,1]] [0,1] = [3/8, 9/8],
  // b = 2 - (2/3)(3/8 + 9/8) = 1.
  auto x = matrix({{1, 0}, {0, 1}, {1, 1}});
  auto m = fit_ridge(x, {1, 2, 3}, 1.0 / 3.0);
  EXPECT_NEAR(m.weights[0], 0.375, 1e-12);
  EXPECT_NEAR(m.weights[1], 1.125, 1e-12);
  EXPECT_NEAR(m.intercept, 1.0, 1e-12);
  // lambda = 0: least squares, exact fit y = x1 + 2 x2.
  auto ls = fit_ridge(x, {1, 2, 3}, 0.0);
  EXPECT_NEAR(ls.weights[0], 1.0, 1e-12);
  EXPECT_NEAR(ls.weights[1], 2.0, 1e-12);
  EXPECT_NEAR(ls.intercept, 0.0, 1e-12);
  auto pred = ls.predict(x);
  EXPECT_NEAR(pred[2], 3.0, 1e-12);
}

TEST(Ridge, SmallLambdaApproachesLeastSquaresNormalEquations) {
  auto x = random_matrix(40, 3, 1);
  std::vector<double> y(40);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int64_t r = 0; r < 40; ++r) y[r] = 0.7 + 1.5 * x(r, 0) - 2.0 * x(r, 2) + g(rng);
  auto ls = fit_ridge(x, y, 0.0);
  // Normal equations: residuals sum to 0 and are orthogonal to every column.
  double rsum = 0, dots[3] = {0, 0, 0};
  for (int64_t r = 0; r < 40; ++r) {
    const double res = y[r] - ls.predict(x.row(r));
    rsum += res;
    for (int c = 0; c < 3; ++c) dots[c] += res * x(r, c);
  }
  EXPECT_NEAR(rsum, 0.0, 1e-9);
  for (double d : dots) EXPECT_NEAR(d, 0.0, 1e-9);
  auto tiny = fit_ridge(x, y, 1e-9);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(tiny.weights[c], ls.weights[c], 1e-8);
  EXPECT_NEAR(tiny.intercept, ls.intercept, 1e-8);
}

TEST(Ridge, StationarityAndUnpenalisedIntercept) {
  auto x = random_matrix(30, 4, 5);
  std::vector<double> y(30);
  for (int64_t r = 0; r < 30; ++r) y[r] = 3.0 + x(r, 1) + 0.1 * r;
  const double lambda = 2.5;
  auto m = fit_ridge(x, y, lambda);
  // Gradient of sum (y - b - w.x)^2 + lambda |w|^2 vanishes: sum r = 0, X^T r = lambda w.
  double rsum = 0;
  std::vector<double> xr(4, 0.0);
  for (int64_t r = 0; r < 30; ++r) {
    const double res = y[r] - m.predict(x.row(r));
    rsum += res;
    for (int c = 0; c < 4; ++c) xr[c] += x(r, c) * res;
  }
  EXPECT_NEAR(rsum, 0.0, 1e-9);
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(xr[c], lambda * m.weights[c], 1e-9);
  // A huge penalty shrinks w to 0 but the intercept stays the mean of y.
  auto big = fit_ridge(x, y, 1e12);
  double ybar = 0;
  for (double v : y) ybar += v / 30;
  for (double w : big.weights) EXPECT_NEAR(w, 0.0, 1e-9);
  EXPECT_NEAR(big.intercept, ybar, 1e-6);
}

TEST(Ridge, SumsOverPartsAddUp) {
  auto x = random_matrix(25, 3, 9);
  std::vector<double> y(25);
  for (int64_t r = 0; r < 25; ++r) y[r] = x(r, 0) - x(r, 1);
  RidgeSums a(3), b(3), all(3);
  for (int64_t r = 0; r < 25; ++r) {
    (r % 3 ? a : b).add(x.row(r), y[r]);
    all.add(x.row(r), y[r]);
  }
  RidgeSums ab = a;
  ab += b;
  auto m1 = ab.solve(0.5), m2 = all.solve(0.5), ref = fit_ridge(x, y, 0.5);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(m1.weights[c], m2.weights[c], 1e-12);
    EXPECT_NEAR(m1.weights[c], ref.weights[c], 1e-10);
  }
  ab -= b;
  auto ma = a.solve(0.5), mab = ab.solve(0.5);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(ma.weights[c], mab.weights[c], 1e-10);
}

TEST(Ridge, BadInput) {
  auto x = matrix({{1, 2}, {2, 4}, {3, 6}});  // collinear columns
  EXPECT_THROW(fit_ridge(x, {1, 2, 3}, 0.0), std::domain_error);
  EXPECT_NO_THROW(fit_ridge(x, {1, 2, 3}, 0.1));
  EXPECT_THROW(fit_ridge(x, {1, 2}, 0.1), lol::InputError);
  EXPECT_THROW(fit_ridge(x, {1, 2, 3}, -1.0), lol::InputError);
}
