// AUROC (Mann-Whitney with average ranks) and ROC curves against hand-computed cases.
#include <random>

#include <gtest/gtest.h>

#include "stats/auroc.h"
#include "util/error.h"

using lol::stats::auroc;
using lol::stats::roc_area;
using lol::stats::roc_curve;

TEST(Auroc, HandComputedWithoutTies) {
  // Pairs (pos, neg): 0.35>0.1, 0.35<0.4, 0.8>0.1, 0.8>0.4 -> 3 of 4.
  EXPECT_DOUBLE_EQ(auroc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(auroc({1, 2, 3, 4}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auroc({1, 2, 3, 4}, {1, 1, 0, 0}), 0.0);
}

TEST(Auroc, TiesCountHalf) {
  // pos {1, 2} vs neg {1, 2}: tie 0.5 + loss 0 + win 1 + tie 0.5 = 2 of 4.
  EXPECT_DOUBLE_EQ(auroc({1, 1, 2, 2}, {0, 1, 0, 1}), 0.5);
  // pos {0.5, 0.9} vs neg {0.5, 0.5}: 0.5 + 0.5 + 1 + 1 = 3 of 4.
  EXPECT_DOUBLE_EQ(auroc({0.5, 0.5, 0.5, 0.9}, {0, 1, 0, 1}), 0.75);
  // pos {3} vs neg {3, 3, 1}: 0.5 + 0.5 + 1 = 2 of 3.
  EXPECT_DOUBLE_EQ(auroc({3, 3, 3, 1}, {1, 0, 0, 0}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(auroc({7, 7, 7, 7, 7}, {0, 1, 1, 0, 1}), 0.5);
}

TEST(Auroc, EqualsPairCountingOnRandomTiedData) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> score(0, 6), lab(0, 1);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<double> s;
    std::vector<int> y;
    for (int i = 0; i < 57; ++i) {
      s.push_back(score(rng));
      y.push_back(lab(rng));
    }
    y[0] = 0;
    y[1] = 1;
    double wins = 0, pairs = 0;
    for (size_t i = 0; i < s.size(); ++i)
      for (size_t j = 0; j < s.size(); ++j)
        if (y[i] == 1 && y[j] == 0) {
          pairs += 1;
          wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
        }
    EXPECT_NEAR(auroc(s, y), wins / pairs, 1e-12);
    EXPECT_NEAR(roc_area(roc_curve(s, y)), wins / pairs, 1e-12);
  }
}

TEST(Auroc, DegenerateAndBadInputThrow) {
  try {
    auroc({0.1, 0.2, 0.3}, {1, 1, 1});
    FAIL() << "expected InputError";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("3 positive and 0 negative"), std::string::npos) << e.what();
  }
  EXPECT_THROW(auroc({0.1, 0.2}, {0, 0}), lol::InputError);
  EXPECT_THROW(auroc({}, {}), lol::InputError);
  EXPECT_THROW(auroc({0.1, 0.2}, {0, 2}), lol::InputError);
  EXPECT_THROW(auroc({0.1, NAN}, {0, 1}), lol::InputError);
  EXPECT_THROW(auroc({0.1, 0.2, 0.3}, {0, 1}), lol::InputError);
  EXPECT_THROW(roc_curve({0.1}, {1}), lol::InputError);
}

TEST(RocCurve, PointsMergeTies) {
  auto c = roc_curve({0.5, 0.5, 0.5, 0.9}, {0, 1, 0, 1});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(std::isinf(c[0].threshold));
  EXPECT_DOUBLE_EQ(c[0].fpr, 0.0);
  EXPECT_DOUBLE_EQ(c[0].tpr, 0.0);
  EXPECT_DOUBLE_EQ(c[1].threshold, 0.9);
  EXPECT_DOUBLE_EQ(c[1].fpr, 0.0);
  EXPECT_DOUBLE_EQ(c[1].tpr, 0.5);
  EXPECT_DOUBLE_EQ(c[2].threshold, 0.5);
  EXPECT_DOUBLE_EQ(c[2].fpr, 1.0);
  EXPECT_DOUBLE_EQ(c[2].tpr, 1.0);
  EXPECT_DOUBLE_EQ(roc_area(c), 0.75);
}
