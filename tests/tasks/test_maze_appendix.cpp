// The five maze sequences of LoL Appendix C.4.1 are regenerated from their
// question alone, token for token, and pass the verifier.
#include <gtest/gtest.h>

#include "tasks/maze_generate.h"
#include "tasks/maze_verify.h"
#include "test_maze_helpers.h"

using namespace lol::tasks;
using lol::tasks::maze_test::maze_appendix_lines;
using lol::tasks::maze_test::normalized;

namespace {

// Splits a paper line into (question, label, continuation).
void split_line(const std::string& line, std::string& question, std::string& label, std::string& rest) {
  const size_t lb = line.find(" [ "), rb = line.find(" ] R : ");
  ASSERT_NE(lb, std::string::npos);
  ASSERT_NE(rb, std::string::npos);
  question = line.substr(0, lb);
  label = line.substr(lb + 1, rb + 2 - (lb + 1));
  rest = line.substr(rb + 3);
}

}  // namespace

TEST(MazeAppendix, FixtureHoldsFiveSequencesOfOneMaze) {
  const auto lines = maze_appendix_lines();
  ASSERT_EQ(lines.size(), 5u);
  std::string q0, q, label, rest;
  split_line(lines[0], q0, label, rest);
  for (const auto& l : lines) {
    split_line(l, q, label, rest);
    EXPECT_EQ(q, q0);
  }
}

TEST(MazeAppendix, QuestionRoundTrips) {
  std::string q, label, rest;
  split_line(maze_appendix_lines()[0], q, label, rest);
  const Maze m = Maze::from_question(q);
  EXPECT_EQ(m.size, 8);
  EXPECT_EQ(maze_cell_name(m.start, 8), "r3c6");
  EXPECT_EQ(maze_cell_name(m.goal, 8), "r8c2");
  EXPECT_TRUE(m.is_perfect());
  EXPECT_EQ(m.to_question(), normalized(q));
}

TEST(MazeAppendix, EveryStrategyIsRegeneratedTokenForToken) {
  const auto lines = maze_appendix_lines();
  ASSERT_EQ(lines.size(), 5u);
  std::string q, label, rest;
  split_line(lines[0], q, label, rest);
  const Maze m = Maze::from_question(q);
  const MazeSolutions sol = solve_maze_strategies(m);
  EXPECT_TRUE(sol.accepted()) << sol.rejection;  // the paper's maze meets the paper's acceptance rules
  const std::vector<Example> ex = make_maze_examples(m);
  ASSERT_EQ(ex.size(), 5u);
  for (int s = 1; s <= 5; ++s) {
    SCOPED_TRACE(maze_strategy_name(s));
    const Example& e = ex[s - 1];
    EXPECT_EQ(e.strategy, s);
    EXPECT_EQ(split_tokens(e.text()), split_tokens(lines[s - 1]));
    split_line(lines[s - 1], q, label, rest);
    EXPECT_EQ(e.label, normalized(label));
    EXPECT_EQ(maze_strategy_label(s, 8), normalized(label));
  }
}

TEST(MazeAppendix, PaperContinuationsVerifyAsTheirStrategy) {
  const auto lines = maze_appendix_lines();
  for (int s = 1; s <= 5; ++s) {
    std::string q, label, rest;
    split_line(lines[s - 1], q, label, rest);
    for (const std::string& prompt : {q + " " + label, q + " [ ... ]", q}) {
      const Verdict v = verify_maze(prompt, s, rest);
      EXPECT_EQ(v.followed_strategy, s);
      EXPECT_TRUE(v.strategy_as_requested);
      EXPECT_TRUE(v.trace_legal);
      EXPECT_TRUE(v.rule_faithful);
      EXPECT_TRUE(v.answer_correct);
      EXPECT_EQ(v.padding, 0.0);
      EXPECT_EQ(v.error, "") << maze_strategy_name(s);
    }
    // Under any other label the trace is recognised as strategy s.
    const int other = s % 5 + 1;
    const Verdict w = verify_maze(q, other, rest);
    EXPECT_EQ(w.followed_strategy, s);
    EXPECT_FALSE(w.strategy_as_requested);
    EXPECT_TRUE(w.trace_legal);
    EXPECT_TRUE(w.rule_faithful);
    EXPECT_TRUE(w.answer_correct);
    EXPECT_NE(w.error, "");
  }
}

TEST(MazeAppendix, AStarTieBreakIsFixedByTheExample) {
  // The example pops r2c6 (g=1), r4c7 (g=2), r5c5 (g=5) at equal f=11: smaller g
  // (equivalently: first discovered) first. "Smaller h first" would pop r5c5 first.
  std::string q, label, rest;
  split_line(maze_appendix_lines()[2], q, label, rest);
  const Maze m = Maze::from_question(q);
  const MazeRun a = maze_astar(m);
  ASSERT_TRUE(a.ok) << a.reason;
  const std::string t = maze_cells_text(a.trace, 8);
  EXPECT_LT(t.find("r2c6"), t.find("r4c7"));
  EXPECT_LT(t.find("r4c7"), t.find("r5c5"));
}
