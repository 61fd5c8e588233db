// Nearest-centroid classification with document-level CV (stats/centroid.h):
// centroids and predictions by hand, folds never split a document, informative
// labels score far above the shuffled control, uninformative ones do not.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "stats/centroid.h"
#include "util/error.h"

namespace lol::stats {
namespace {

TEST(Centroid, CentroidsAndNearestByHand) {
  Matrix x(4, 2);
  x.data = {0, 0, 2, 0, 10, 10, 10, 12};
  const std::vector<int> y = {0, 0, 1, -1};
  auto c = class_centroids(x, y, 3);
  EXPECT_DOUBLE_EQ(c(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(c(0, 1), 0.0);
  EXPECT_DOUBLE_EQ(c(1, 0), 10.0);
  EXPECT_DOUBLE_EQ(c(1, 1), 10.0);
  EXPECT_TRUE(std::isnan(c(2, 0)));  // class 2 has no rows
  Matrix q(3, 2);
  q.data = {1, 1, 9, 9, 5.5, 5};  // last: distance^2 to (1,0) = 45.25, to (10,10) = 45.25 -> tie -> class 0
  EXPECT_EQ(nearest_centroid(c, q), (std::vector<int>{0, 1, 0}));
  auto d = centroid_distances(c);
  EXPECT_NEAR(d[0][1], std::sqrt(81.0 + 100.0), 1e-12);
  EXPECT_DOUBLE_EQ(d[1][1], 0.0);
  EXPECT_TRUE(std::isnan(d[0][2]));
  EXPECT_THROW(class_centroids(x, {0, 0, 5, 0}, 3), InputError);
}

// Items: 60 documents of 3 classes, 5 windows each; features = one-hot of the class
// with probability p (else a random one-hot).
struct Synthetic {
  Matrix x;
  std::vector<int> y;
  std::vector<int64_t> g;
};

Synthetic make(double p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Synthetic s;
  s.x = Matrix(300, 3, 0.0);
  for (int64_t doc = 0; doc < 60; ++doc)
    for (int w = 0; w < 5; ++w) {
      const int64_t r = doc * 5 + w;
      const int cls = int(doc % 3);
      const int hot = u(rng) < p ? cls : int(rng() % 3);
      s.x(r, hot) = 1.0;
      s.y.push_back(cls);
      s.g.push_back(doc);
    }
  return s;
}

TEST(Centroid, CvAccuracyHighForInformativeFeaturesAndShuffleNearChance) {
  auto s = make(0.9, 1);
  auto r = nearest_centroid_cv(s.x, s.y, s.g, 3, 5, 10, 0);
  EXPECT_EQ(r.n_items, 300);
  EXPECT_GT(r.accuracy, 0.85);
  EXPECT_NEAR(r.chance, 1.0 / 3.0, 1e-12);
  EXPECT_LT(r.shuffled_mean, 0.5);
  EXPECT_EQ(r.shuffled_accuracy.size(), 10u);
  int64_t total = 0;
  for (const auto& row : r.confusion)
    for (auto v : row) total += v;
  EXPECT_EQ(total, 300);
  for (double rec : r.recall) EXPECT_GT(rec, 0.8);

  auto noise = make(0.0, 2);
  auto rn = nearest_centroid_cv(noise.x, noise.y, noise.g, 3, 5, 5, 0);
  EXPECT_LT(rn.accuracy, 0.5);
}

TEST(Centroid, HeldOutDocumentsOnly) {
  // One feature column per document id: a classifier that saw a document's windows
  // in training would be perfect; with document-level folds it must fail completely.
  Matrix x(120, 24, 0.0);
  std::vector<int> y;
  std::vector<int64_t> g;
  for (int64_t r = 0; r < 120; ++r) {
    const int64_t doc = r / 5;
    x(r, doc) = 1.0;
    y.push_back(int(doc % 2));
    g.push_back(doc);
  }
  auto res = nearest_centroid_cv(x, y, g, 2, 4, 0, 3);
  // A held-out document's one-hot column is 0 in every training row: it is equidistant
  // from both centroids up to their norms, never matched by its own column.
  EXPECT_LT(res.accuracy, 0.75);
  EXPECT_THROW(nearest_centroid_cv(x, y, g, 2, 1, 0, 0), InputError);
  std::vector<int> bad = y;
  bad[1] = 1 - bad[0];  // labels vary within document 0
  EXPECT_THROW(nearest_centroid_cv(x, bad, g, 2, 4, 1, 0), InputError);
}

}  // namespace
}  // namespace lol::stats
