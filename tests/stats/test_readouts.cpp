// Probe readouts and their evaluation on synthetic documents whose windows carry an
// informative signal: high CV and test AUROC, the shuffle control near chance.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "stats/group_split.h"
#include "stats/readouts.h"
#include "util/error.h"

using namespace lol::stats;

namespace {

/// n_docs documents with 3..8 windows each; label = doc % 3 == 0. Window features:
/// p probabilities-like columns; column 2 is raised by `signal` for positive docs.
struct Synthetic {
  Matrix x;
  std::vector<int> y, part;
  std::vector<int64_t> groups;
  std::vector<int32_t> codes;  ///< [n, 2]: code 0 informative, code 1 noise (values 0..3)
};

Synthetic make(int n_docs, double signal, uint64_t seed, int p = 6) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> len(3, 8), code(0, 3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Synthetic s;
  std::vector<std::vector<double>> rows;
  for (int d = 0; d < n_docs; ++d) {
    const int lab = d % 3 == 0;
    for (int w = len(rng); w > 0; --w) {
      std::vector<double> r(p);
      for (auto& v : r) v = g(rng);
      r[2] += signal * lab;
      rows.push_back(r);
      s.y.push_back(lab);
      s.groups.push_back(d);
      s.codes.push_back(u(rng) < (lab ? 0.8 : 0.3) ? 1 : code(rng));
      s.codes.push_back(code(rng));
    }
  }
  s.x = Matrix(int64_t(rows.size()), p);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int c = 0; c < p; ++c) s.x(int64_t(r), c) = rows[r][c];
  // 5 dev folds + test part 5, at the document level, stratified by label.
  std::vector<int64_t> strata(s.y.begin(), s.y.end());
  s.part = group_split(s.groups, {0.16, 0.16, 0.16, 0.16, 0.16, 0.2}, seed, strata);
  return s;
}

}  // namespace

TEST(Readouts, RidgeFindsSignalAndShuffleControlIsChance) {
  auto s = make(240, 1.5, 1);
  RidgeReadout r(s.x, s.part);
  auto res = evaluate_readout(r, s.y, s.groups);
  ASSERT_EQ(res.fold_auroc.size(), 5u);
  EXPECT_GT(res.cv_mean, 0.8);
  EXPECT_GT(res.test_auroc, 0.8);
  EXPECT_NEAR(res.shuffled_mean, 0.5, 0.1);
  EXPECT_GT(res.n_test, 0);
  EXPECT_EQ(res.n_dev + res.n_test, s.x.rows);
  EXPECT_NEAR(roc_area(res.test_roc), res.test_auroc, 1e-12);
  ASSERT_TRUE(res.fits["test"].contains("relative_lambda"));
  auto j = res.to_json();
  EXPECT_TRUE(j["cv_auroc_mean"].is_number());
}

TEST(Readouts, UninformativeFeaturesStayNearChance) {
  auto s = make(240, 0.0, 2);
  RidgeReadout r(s.x, s.part);
  auto res = evaluate_readout(r, s.y, s.groups);
  EXPECT_NEAR(res.cv_mean, 0.5, 0.1);
}

// Features equal up to float rounding (identical inputs through batched matmuls) carry
// no signal: ridge leaves them out instead of fitting the noise with a tiny penalty, so
// every score ties (AUROC 0.5) whatever the labels.
TEST(Readouts, RidgeIgnoresFeaturesConstantToWorkingPrecision) {
  auto s = make(120, 0.0, 4);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> ulp(-1.0, 1.0);
  for (int64_t r = 0; r < s.x.rows; ++r)
    for (int64_t c = 0; c < s.x.cols; ++c) s.x(r, c) = (0.25 + 0.1 * double(c)) * (1.0 + 3e-7 * ulp(rng));
  RidgeReadout r(s.x, s.part);
  auto scores = r.fit_score(s.y, {0, 1, 2, 3, 4}, 5);
  ASSERT_FALSE(scores.empty());
  for (double v : scores) EXPECT_EQ(v, scores[0]);
  for (int sign : {-1, 0, 1}) {
    BestColumnReadout b(s.x, s.part, sign);
    auto bs = b.fit_score(s.y, {0, 1, 2, 3, 4}, 5);
    for (double v : bs) EXPECT_EQ(v, bs[0]) << "sign " << sign;
  }
  // A real (small) spread is kept: column 0, 1e-3 higher for positives, separates them.
  for (int64_t r = 0; r < s.x.rows; ++r) s.x(r, 0) = 0.25 * (1.0 + 1e-3 * (s.y[size_t(r)] + 0.3 * ulp(rng)));
  RidgeReadout k(s.x, s.part);
  auto res = evaluate_readout(k, s.y, s.groups);
  EXPECT_GT(res.test_auroc, 0.9);
}

TEST(Readouts, BestColumnChoosesInformativeColumnAndSign) {
  auto s = make(150, 2.0, 3);
  for (int64_t r = 0; r < s.x.rows; ++r) s.x(r, 2) = -s.x(r, 2);  // positives now lower
  BestColumnReadout b(s.x, s.part);
  auto res = evaluate_readout(b, s.y, s.groups);
  EXPECT_EQ(res.fits["test"]["column"], 2);
  EXPECT_EQ(res.fits["test"]["sign"], -1.0);
  EXPECT_GT(res.test_auroc, 0.85);
}

TEST(Readouts, BestColumnWithFixedSignKeepsItsOrientation) {
  auto s = make(150, 2.0, 3);
  for (int64_t r = 0; r < s.x.rows; ++r) s.x(r, 2) = -s.x(r, 2);  // positives now lower in column 2
  BestColumnReadout neg(s.x, s.part, -1);
  auto res = evaluate_readout(neg, s.y, s.groups);
  EXPECT_EQ(res.fits["test"]["column"], 2);
  EXPECT_EQ(res.fits["test"]["sign"], -1.0);
  EXPECT_GT(res.test_auroc, 0.85);
  // Fixed +1 on the same data: column 2 reads the wrong way, so another column wins and
  // the sign is not flipped.
  BestColumnReadout pos(s.x, s.part, +1);
  auto res_pos = evaluate_readout(pos, s.y, s.groups);
  EXPECT_NE(res_pos.fits["test"]["column"], 2);
  EXPECT_EQ(res_pos.fits["test"]["sign"], 1.0);
  EXPECT_THROW(BestColumnReadout(s.x, s.part, 2), lol::InputError);
}

TEST(Readouts, CategoricalLLRHandComputed) {
  // One column, values {0, 1}; training (part 0): positives codes {1, 1, 0}, negatives {0, 0}.
  // Laplace smoothing: P(1|pos) = 3/5, P(1|neg) = 1/4, P(0|pos) = 2/5, P(0|neg) = 3/4.
  CategoricalLLRReadout r({1, 1, 0, 0, 0, 1, 0}, 1, 2, {0, 0, 0, 0, 0, 1, 1});
  auto sc = r.fit_score({1, 1, 1, 0, 0, 0, 0}, {0}, 1);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_NEAR(sc[0], std::log(0.6 / 0.25), 1e-12);
  EXPECT_NEAR(sc[1], std::log(0.4 / 0.75), 1e-12);
}

TEST(Readouts, CategoricalLLROnSyntheticCodes) {
  auto s = make(240, 0.0, 4);
  CategoricalLLRReadout r(s.codes, 2, 4, s.part);
  auto res = evaluate_readout(r, s.y, s.groups);
  // Code 0 is 1 with probability 0.85 (positives) vs 0.475 (negatives): the best
  // possible AUROC of this binary evidence is (1 + 0.85 - 0.475) / 2 = 0.6875.
  EXPECT_NEAR(res.cv_mean, 0.6875, 0.06);
  EXPECT_NEAR(res.shuffled_mean, 0.5, 0.1);
}

TEST(Readouts, BadInput) {
  EXPECT_THROW(CategoricalLLRReadout({0, 5}, 1, 2, {0, 1}), lol::InputError);
  EXPECT_THROW(RidgeReadout(Matrix(3, 2), {0, 1}), lol::InputError);
  RidgeReadout r(Matrix(4, 2, 1.0), {0, 0, 1, 1});
  EXPECT_THROW(r.fit_score({1, 1, 0, 0}, {0}, 1), lol::InputError);  // training part has one class
}
