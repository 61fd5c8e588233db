// Document-level splits: groups are never split, parts are balanced, strata are
// split on their own, results are deterministic per seed; group label permutation.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "stats/group_split.h"
#include "util/error.h"

using lol::stats::group_kfold;
using lol::stats::group_split;
using lol::stats::permute_group_labels;

namespace {

/// Items of `n_groups` groups with random sizes 1..max_size, in shuffled order.
std::vector<int64_t> random_groups(int n_groups, int max_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> size(1, max_size);
  std::vector<int64_t> g;
  for (int i = 0; i < n_groups; ++i)
    for (int k = size(rng); k > 0; --k) g.push_back(i);
  std::shuffle(g.begin(), g.end(), rng);
  return g;
}

}  // namespace

TEST(GroupKFold, NeverSplitsAGroupAndIsBalanced) {
  for (uint64_t seed : {0, 1, 2}) {
    auto groups = random_groups(150, 12, seed);
    auto fold = group_kfold(groups, 5, seed);
    ASSERT_EQ(fold.size(), groups.size());
    std::map<int64_t, std::set<int>> folds_of_group;
    std::vector<int64_t> count(5, 0);
    for (size_t i = 0; i < groups.size(); ++i) {
      ASSERT_GE(fold[i], 0);
      ASSERT_LT(fold[i], 5);
      folds_of_group[groups[i]].insert(fold[i]);
      count[fold[i]]++;
    }
    for (const auto& [g, f] : folds_of_group) EXPECT_EQ(f.size(), 1u) << "group " << g << " split";
    auto [lo, hi] = std::minmax_element(count.begin(), count.end());
    EXPECT_LE(*hi - *lo, 12) << "fold sizes differ by more than the largest group";
  }
}

TEST(GroupKFold, UnitGroupsGiveEqualFolds) {
  std::vector<int64_t> groups(103);
  for (int i = 0; i < 103; ++i) groups[i] = i;
  auto fold = group_kfold(groups, 5, 7);
  std::vector<int> count(5, 0);
  for (int f : fold) count[f]++;
  for (int c : count) EXPECT_TRUE(c == 20 || c == 21) << c;
}

TEST(GroupKFold, StrataAreSplitSeparately) {
  auto groups = random_groups(100, 6, 4);
  std::vector<int64_t> strata(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) strata[i] = groups[i] % 4 == 0;  // ~25% positive groups
  auto fold = group_kfold(groups, 5, 4, strata);
  std::vector<int64_t> pos(5, 0), neg(5, 0);
  int64_t total_pos = 0, total_neg = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    (strata[i] ? pos : neg)[fold[i]]++;
    (strata[i] ? total_pos : total_neg)++;
  }
  for (int f = 0; f < 5; ++f) {
    EXPECT_NEAR(double(pos[f]), total_pos / 5.0, 6.0);
    EXPECT_NEAR(double(neg[f]), total_neg / 5.0, 6.0);
  }
}

TEST(GroupSplit, FractionsAndDeterminism) {
  auto groups = random_groups(300, 5, 11);
  auto a = group_split(groups, {0.8, 0.2}, 3), b = group_split(groups, {0.8, 0.2}, 3);
  auto c = group_split(groups, {0.8, 0.2}, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const double test = std::count(a.begin(), a.end(), 1);
  EXPECT_NEAR(test / double(groups.size()), 0.2, 5.0 / double(groups.size()));
  // Excluded items (group -1) stay out.
  groups[0] = -1;
  EXPECT_EQ(group_split(groups, {1, 1}, 0)[0], -1);
}

TEST(GroupSplit, BadInput) {
  std::vector<int64_t> groups{0, 0, 1, 1};
  EXPECT_THROW(group_kfold(groups, 1, 0), lol::InputError);
  EXPECT_THROW(group_split(groups, {}, 0), lol::InputError);
  EXPECT_THROW(group_split(groups, {1, -1}, 0), lol::InputError);
  EXPECT_THROW(group_split(groups, {1, 1}, 0, {0, 1, 1, 1}), lol::InputError);  // group 0 in two strata
  EXPECT_THROW(group_split(groups, {1, 1}, 0, {0, 0}), lol::InputError);
}

TEST(PermuteGroupLabels, PermutesWholeGroups) {
  auto groups = random_groups(60, 7, 5);
  std::vector<int> y(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) y[i] = groups[i] < 20;  // 20 positive groups
  auto s = permute_group_labels(y, groups, 9);
  std::map<int64_t, std::set<int>> lab;
  for (size_t i = 0; i < groups.size(); ++i) lab[groups[i]].insert(s[i]);
  int pos_groups = 0, changed = 0;
  for (const auto& [g, l] : lab) {
    ASSERT_EQ(l.size(), 1u) << "group " << g << " got two labels";
    pos_groups += *l.begin();
    changed += *l.begin() != (g < 20);
  }
  EXPECT_EQ(pos_groups, 20);
  EXPECT_GT(changed, 0);
  EXPECT_EQ(s, permute_group_labels(y, groups, 9));
  std::vector<int64_t> g2{0, 0};  // one group with two labels
  EXPECT_THROW(permute_group_labels({0, 1}, g2, 0), lol::InputError);
}
