// RoutingStats::mode_path rules (paper 4.1.3): highest mean router probability vs the
// expert selected most often; alpha = the chosen expert's mean probability.
#include <gtest/gtest.h>

#include "analysis/mode_paths.h"

using lol::analysis::PathCell;
using lol::analysis::RoutingStats;

namespace {

/// One label, one depth, two windows, library of 3. In window 1 expert 0 has the higher
/// mean probability but the balancing bias made expert 2 the one selected most often.
RoutingStats stats() {
  RoutingStats st;
  st.library_size = 3;
  st.depth = 1;
  PathCell w0{4, {0.2, 2.8, 1.0}, {0, 4, 0}};
  PathCell w1{4, {2.4, 0.0, 1.6}, {1, 0, 3}};
  st.cells[7] = {{w0, w1}};
  return st;
}

}  // namespace

TEST(ModePath, MeanProbabilityRuleIsThePapers) {
  auto p = stats().mode_path(7);
  ASSERT_EQ(p.depth(), 1);
  EXPECT_EQ(p.at(0, 0)->expert, 1);
  EXPECT_DOUBLE_EQ(*p.at(0, 0)->alpha, 0.7);
  EXPECT_EQ(p.at(0, 1)->expert, 0);
  EXPECT_DOUBLE_EQ(*p.at(0, 1)->alpha, 0.6);
  auto agr = stats().agreement(7);
  EXPECT_DOUBLE_EQ(agr[0][0], 1.0);
  EXPECT_DOUBLE_EQ(agr[0][1], 0.25);
}

TEST(ModePath, MostSelectedRuleFollowsTheDecisions) {
  const auto rule = RoutingStats::ModeRule::kMostSelected;
  auto p = stats().mode_path(7, 0, rule);
  EXPECT_EQ(p.at(0, 0)->expert, 1);
  EXPECT_EQ(p.at(0, 1)->expert, 2);
  EXPECT_DOUBLE_EQ(*p.at(0, 1)->alpha, 0.4);
  auto agr = stats().agreement(7, rule);
  EXPECT_DOUBLE_EQ(agr[0][1], 0.75);
  // extend_to repeats the last observed window.
  auto e = stats().mode_path(7, 4, rule);
  EXPECT_EQ(e.at(0, 3)->expert, 2);
}
