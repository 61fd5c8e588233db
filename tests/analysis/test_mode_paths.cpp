// RoutingStats::mode_path rules (paper 4.1.3): highest mean router probability vs the
// expert selected most often; alpha = the chosen expert's mean probability.
#include <gtest/gtest.h>

#include "analysis/mode_paths.h"
#include "analysis/strategy_eval.h"
#include "tasks/task.h"

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

// The neutral filler under forcing keeps the label's token count, so the trace
// tokens keep the positions they had in training (router-only label tokens still
// take positions; a shorter filler moved them and halved forced control, results.md 1c).
TEST(NeutralLabel, KeepsTheLabelsTokenCountAndEveryTracePosition) {
  for (auto spec : {lol::data::task_spec("maze", 4), lol::data::task_spec("maze", 8), lol::data::task_spec("sudoku")}) {
    for (int s = 1; s <= 5; ++s) {
      const std::string filler = lol::analysis::neutral_label(spec, s);
      const auto f = lol::tasks::split_tokens(filler);
      ASSERT_EQ(f.size(), lol::tasks::split_tokens(spec.label(s)).size()) << spec.name << " S" << s;
      EXPECT_EQ(f.front(), "[");
      EXPECT_EQ(f.back(), "]");
      for (size_t i = 1; i + 1 < f.size(); ++i) EXPECT_EQ(f[i], "...");
      lol::tasks::Example e;
      e.question = "Q : r1c1 E start r1c1 goal r1c2";
      if (spec.name == "sudoku") {
        std::string q = "Q :";
        for (int c = 0; c < 81; ++c) q += " .";
        e.question = q;
      }
      e.trace = "R :";
      e.answer = "A : <eos>";
      e.label = spec.label(s);
      const auto with_label = spec.tokenize(e);
      e.label = filler;
      const auto with_filler = spec.tokenize(e);
      EXPECT_EQ(with_filler.prompt_len, with_label.prompt_len) << spec.name << " S" << s;
      EXPECT_EQ(with_filler.ids.size(), with_label.ids.size());
      EXPECT_EQ(with_filler.router_only, with_label.router_only);
    }
  }
  EXPECT_EQ(lol::analysis::neutral_label(lol::data::task_spec("sudoku"), 3), "[ ... ]");  // the paper's filler
  EXPECT_EQ(lol::analysis::neutral_label(lol::data::task_spec("maze", 4), 1), "[ ... ... ... ... ... ... ]");
}
