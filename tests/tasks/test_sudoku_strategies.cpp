// The five strategies reproduce the paper's Appendix C.3.1 examples token for token
// from the question alone, and behave as documented on other grids.
#include <gtest/gtest.h>

#include <fstream>

#include "tasks/sudoku_generate.h"
#include "tasks/sudoku_strategies.h"
#include "tasks/sudoku_verify.h"
#include "tasks/sudoku_test_util.h"
#include "util/error.h"

using namespace lol::tasks;
using lol_test::from_compact;

namespace {

/// The five sequences of C.3.1 ("S1: Naked singles" .. "S5: Backtracking"), copied
/// verbatim from the paper, one per line.
std::vector<std::string> appendix_lines() {
  std::ifstream f(std::string(LOL_SOURCE_DIR) + "/tests/tasks/data/sudoku_appendix_c31.txt");
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) if (!l.empty()) lines.push_back(l);
  return lines;
}

std::string between(const std::string& s, const std::string& from, const std::string& to) {
  const size_t a = s.find(from);
  const size_t b = s.find(to, a);
  return s.substr(a, b - a - 1);
}

// A well-known hard puzzle (unique solution) on which singles get stuck.
const std::string kHard = std::string("8........") + "..36....." + ".7..9.2.." + ".5...7..." + "....457.." +
                          "...1...3." + "..1....68" + "..85...1." + ".9....4..";


}  // namespace

TEST(SudokuAppendix, FixtureHasTheFiveExamples) {
  const auto lines = appendix_lines();
  ASSERT_EQ(lines.size(), 5u);
  for (int s = 1; s <= 5; ++s)
    EXPECT_NE(lines[s - 1].find("[ S" + std::to_string(s) + " ] R :"), std::string::npos);
}

TEST(SudokuAppendix, EachExampleIsRegeneratedTokenForToken) {
  const auto lines = appendix_lines();
  ASSERT_EQ(lines.size(), 5u);
  for (int s = 1; s <= 5; ++s) {
    const std::string& paper = lines[s - 1];
    const SudokuGrid puzzle = parse_sudoku_question(paper);
    const SudokuTrace t = solve_sudoku_strategy(puzzle, s);
    ASSERT_TRUE(t.solved) << "S" << s;
    EXPECT_EQ(sudoku_trace_text(t.steps), between(paper, "R :", "A :")) << "S" << s;
    EXPECT_EQ(sudoku_answer(t.grid), paper.substr(paper.find("A :"))) << "S" << s;
    // The whole dataset record, question and label included.
    const auto ex = make_sudoku_examples(puzzle);
    ASSERT_EQ(ex.size(), 5u);
    EXPECT_EQ(ex[s - 1].text(), paper) << "S" << s;
    EXPECT_EQ(ex[s - 1].strategy, s);
  }
}

TEST(SudokuAppendix, ExamplesVerifyAndAreIdentified) {
  const auto lines = appendix_lines();
  ASSERT_EQ(lines.size(), 5u);
  for (int s = 1; s <= 5; ++s) {
    const std::string& paper = lines[s - 1];
    const size_t r = paper.find("R :");
    const Verdict v = verify_sudoku(paper.substr(0, r), s, paper.substr(r));
    EXPECT_EQ(v.followed_strategy, s) << v.error;
    EXPECT_TRUE(v.strategy_as_requested && v.trace_legal && v.rule_faithful && v.answer_correct) << v.error;
    EXPECT_EQ(v.padding, 0.0);
    EXPECT_EQ(identify_sudoku_strategy(parse_sudoku_question(paper), paper.substr(r)), s);
  }
}

TEST(SudokuStrategies, StepSyntaxesAreDisjoint) {
  EXPECT_EQ(sudoku_step_syntax(split_tokens("r1c6 = { 5 }")), 1);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("row6 1 -> r6c1")), 2);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("box3 2 -> r2c7")), 2);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("1 box4 -> r6c1")), 3);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("set r3c5 = 2")), 4);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("set r1c6 = 5 : r3c6 -> { 9 } r8c6 -> { 1 }")), 4);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("r1c1 = 5 x")), 5);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("r1c1 = 6")), 5);
  EXPECT_EQ(sudoku_step_syntax(split_tokens("r7c4 back")), 5);
  for (const char* bad : {"", "r1c6 = { 5", "1 row4 -> r6c1", "set r1c6 = 5 :", "set r1c6 = 5 : r3c6 -> 9",
                          "r1c1 = 0", "r1c1 = 5 y", "r1c1 back back", "row6 1 r6c1", "<pad>", "A : 1"})
    EXPECT_EQ(sudoku_step_syntax(split_tokens(bad)), 0) << bad;
}

TEST(SudokuStrategies, DeductionStrategiesGetStuckOnAHardPuzzleAndBacktrackingDoesNot) {
  const SudokuGrid hard = from_compact(kHard);
  ASSERT_EQ(count_sudoku_solutions(hard), 1);
  for (int s = 1; s <= 4; ++s) {
    const SudokuTrace t = solve_sudoku_strategy(hard, s);
    EXPECT_FALSE(t.solved) << "S" << s;
    EXPECT_TRUE(sudoku_consistent(t.grid));
  }
  EXPECT_FALSE(solvable_by_naked_singles(hard));
  EXPECT_FALSE(solvable_by_crosshatching(hard));
  EXPECT_FALSE(solvable_by_hidden_singles(hard));
  const SudokuTrace bt = solve_backtracking(hard);
  ASSERT_TRUE(bt.solved);
  SudokuGrid sol{};
  count_sudoku_solutions(hard, 2, &sol);
  EXPECT_EQ(bt.grid, sol);
  // The step cap abandons the search.
  const SudokuTrace capped = solve_backtracking(hard, 10);
  EXPECT_FALSE(capped.solved);
  EXPECT_LE(capped.steps.size(), 11u);
  EXPECT_THROW(make_sudoku_examples(hard), lol::InputError);
}

TEST(SudokuStrategies, ForwardCheckNeedsBothConditions) {
  // Digit 1 has no place left in row 1 although every blank cell keeps candidates:
  // r2c1 and r3c5 block boxes 1 and 2, r1c7..r1c9 are filled.
  SudokuGrid g{};
  g[9] = 1;                            // r2c1
  g[22] = 1;                           // r3c5
  g[6] = 2; g[7] = 3; g[8] = 4;        // r1c7 r1c8 r1c9
  for (int i = 0; i < 81; ++i) if (!g[i]) ASSERT_NE(sudoku_candidates(g, i), 0) << i;
  EXPECT_FALSE(sudoku_forward_check(g));
  g[22] = 0;
  EXPECT_TRUE(sudoku_forward_check(g));
  // A blank cell without candidates fails too.
  SudokuGrid h{};
  for (int c = 1; c < 9; ++c) h[c] = uint8_t(c);  // r1c2..r1c9 = 1..8
  h[9] = 9;                                      // r2c1 = 9: r1c1 has no candidate
  EXPECT_FALSE(sudoku_forward_check(h));
}

TEST(SudokuStrategies, SolversAgreeOnRandomPuzzles) {
  std::mt19937_64 rng(3);
  for (int k = 0; k < 50; ++k) {
    const SudokuGrid p = generate_sudoku_puzzle(rng);
    SudokuGrid sol{};
    ASSERT_EQ(count_sudoku_solutions(p, 2, &sol), 1);
    for (int s = 1; s <= 5; ++s) {
      const SudokuTrace t = solve_sudoku_strategy(p, s);
      ASSERT_TRUE(t.solved) << "S" << s << " " << sudoku_compact(p);
      EXPECT_EQ(t.grid, sol);
      if (s <= 4) EXPECT_EQ(t.steps.size(), size_t(81 - sudoku_givens(p)));  // one step per blank
    }
  }
  EXPECT_THROW(solve_sudoku_strategy(SudokuGrid{}, 6), lol::InputError);
  EXPECT_THROW(sudoku_strategy_name(0), lol::InputError);
}

TEST(SudokuStrategies, FastPredicatesAgreeWithTheSolvers) {
  // Random blanks of random grids: many partial puzzles the singles solve, many
  // they do not; plus grids with a clash.
  std::mt19937_64 rng(17);
  int solved[3] = {0, 0, 0}, total = 0;
  for (int k = 0; k < 400; ++k) {
    const SudokuGrid sol = generate_sudoku_grid(rng);
    SudokuGrid p = sol;
    const int blanks = 30 + int(k % 30);
    for (int b = 0; b < blanks; ++b) p[size_t(rng() % 81)] = 0;
    if (k % 10 == 9) {  // put a clash in: copy a given digit into a blank peer
      for (int i = 0; i < 81; ++i) {
        if (!p[i]) continue;
        const int peer = sudoku_geometry().peers[i][rng() % 20];
        p[peer] = p[i];
        break;
      }
    }
    const bool s1 = solve_naked_singles(p).solved, s2 = solve_hidden_singles(p).solved,
               s3 = solve_crosshatching(p).solved;
    EXPECT_EQ(solvable_by_naked_singles(p), s1) << sudoku_compact(p);
    EXPECT_EQ(solvable_by_hidden_singles(p), s2) << sudoku_compact(p);
    EXPECT_EQ(solvable_by_crosshatching(p), s3) << sudoku_compact(p);
    EXPECT_EQ(solve_propagation(p).solved, s1) << sudoku_compact(p);
    if (s3) EXPECT_TRUE(s2);  // box hidden singles are a subset of hidden singles
    solved[0] += s1; solved[1] += s2; solved[2] += s3; ++total;
  }
  for (int n : solved) {  // both outcomes are exercised
    EXPECT_GT(n, 20);
    EXPECT_LT(n, total - 20);
  }
}
