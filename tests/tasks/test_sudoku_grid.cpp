// Sudoku geometry, text formats and portable random helpers (paper C.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tasks/sudoku_grid.h"
#include "tasks/sudoku_random.h"
#include "tasks/sudoku_test_util.h"
#include "util/error.h"

using namespace lol::tasks;
using lol_test::from_compact;

namespace {
// The puzzle of the appendix C.3.1 examples and its solution (from the "A :" grid).
const char* kAppendixPuzzle =
    "....3.194.1.4.7.3....1..876.5.9183.7.78.46..1...752...2.6.94..8.8......3..1...6.2";
const char* kAppendixSolution =
    "827635194619487235345129876452918367978346521163752489236594718784261953591873642";

}  // namespace

TEST(SudokuGrid, GeometryTables) {
  const auto& geo = sudoku_geometry();
  for (int i = 0; i < 81; ++i) {
    std::set<int> peers(geo.peers[i].begin(), geo.peers[i].end());
    EXPECT_EQ(peers.size(), 20u);
    EXPECT_FALSE(peers.count(i));
    EXPECT_TRUE(std::is_sorted(geo.peers[i].begin(), geo.peers[i].end()));
    for (int p : peers)
      EXPECT_TRUE(geo.row[p] == geo.row[i] || geo.col[p] == geo.col[i] || geo.box[p] == geo.box[i]);
  }
  // Every cell lies in exactly one row, one column and one box unit.
  std::vector<int> hits(81, 0);
  for (const auto& u : geo.units) {
    EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
    for (int c : u) ++hits[c];
  }
  for (int h : hits) EXPECT_EQ(h, 3);
  EXPECT_EQ(geo.box[sudoku_geometry().units[18 + 4][0]], 4);  // box5's first cell is in box5
  EXPECT_EQ(sudoku_cell_name(geo.units[18 + 4][0]), "r4c4");
}

TEST(SudokuGrid, NamesRoundTrip) {
  for (int c = 0; c < 81; ++c) EXPECT_EQ(parse_sudoku_cell(sudoku_cell_name(c)), c);
  for (int u = 0; u < 27; ++u) EXPECT_EQ(parse_sudoku_unit(sudoku_unit_name(u)), u);
  EXPECT_EQ(sudoku_cell_name(0), "r1c1");
  EXPECT_EQ(sudoku_cell_name(80), "r9c9");
  EXPECT_EQ(sudoku_cell_name(14), "r2c6");
  EXPECT_EQ(sudoku_unit_name(9), "col1");
  EXPECT_EQ(sudoku_unit_name(26), "box9");
  for (const char* bad : {"r0c1", "r1c0", "r10c1", "c1r1", "R1C1", "", "r1c1x"}) EXPECT_EQ(parse_sudoku_cell(bad), -1);
  for (const char* bad : {"row0", "box10", "cols", "row", "blk1"}) EXPECT_EQ(parse_sudoku_unit(bad), -1);
  EXPECT_EQ(parse_sudoku_digit("7"), 7);
  EXPECT_EQ(parse_sudoku_digit("0"), 0);
  EXPECT_EQ(parse_sudoku_digit("12"), 0);
}

TEST(SudokuGrid, QuestionAndAnswerFormats) {
  const SudokuGrid p = from_compact(kAppendixPuzzle);
  const std::string q = sudoku_question(p);
  EXPECT_EQ(q.substr(0, 14), "Q : . . . . 3 ");
  EXPECT_EQ(parse_sudoku_question(q), p);
  EXPECT_EQ(parse_sudoku_question(q + " [ S3 ] R : whatever"), p);
  EXPECT_EQ(parse_sudoku_question(q + " [ ... ]"), p);
  EXPECT_EQ(sudoku_compact(p), kAppendixPuzzle);
  const SudokuGrid s = from_compact(kAppendixSolution);
  EXPECT_EQ(sudoku_answer(s).substr(0, 8), "A : 8 2 ");
  EXPECT_EQ(sudoku_answer(s).substr(sudoku_answer(s).size() - 8), " 2 <eos>");
  EXPECT_EQ(sudoku_givens(p), 36);
  EXPECT_NE(sudoku_hash(p), sudoku_hash(s));
}

TEST(SudokuGrid, MalformedQuestionsThrow) {
  EXPECT_THROW(parse_sudoku_question("Q : . . 3"), lol::InputError);
  std::string q = sudoku_question(from_compact(kAppendixPuzzle));
  q[6] = '0';  // second cell becomes "0"
  try {
    parse_sudoku_question(q, "eval.jsonl line 3");
    FAIL() << "no throw";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.jsonl line 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("r1c2"), std::string::npos);
  }
}

TEST(SudokuGrid, CandidatesConsistencyAndSolutions) {
  const SudokuGrid p = from_compact(kAppendixPuzzle);
  const SudokuGrid s = from_compact(kAppendixSolution);
  EXPECT_TRUE(sudoku_consistent(p));
  EXPECT_FALSE(sudoku_complete(p));
  EXPECT_TRUE(sudoku_complete(s));
  // r1c6 has the single candidate 5 (first step of the S1 example).
  EXPECT_EQ(sudoku_candidates(p, 5), DigitMask(1u << 5));
  for (int i = 0; i < 81; ++i)
    if (!p[i]) EXPECT_TRUE(sudoku_candidates(p, i) & (1u << s[i])) << sudoku_cell_name(i);
  SudokuGrid found{};
  EXPECT_EQ(count_sudoku_solutions(p, 2, &found), 1);
  EXPECT_EQ(found, s);
  SudokuGrid bad = p;
  bad[0] = 3;  // row 1 already holds a 3
  EXPECT_FALSE(sudoku_consistent(bad));
  EXPECT_EQ(count_sudoku_solutions(bad), 0);
  SudokuGrid empty{};
  EXPECT_EQ(count_sudoku_solutions(empty, 5), 5);
}

TEST(SudokuRandom, UniformBelowRangeDeterminismAndSpread) {
  std::mt19937_64 a(42), b(42);
  std::vector<int> counts(7, 0);
  for (int k = 0; k < 70000; ++k) {
    const uint64_t x = uniform_below(a, 7);
    ASSERT_LT(x, 7u);
    ASSERT_EQ(x, uniform_below(b, 7));
    ++counts[x];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  EXPECT_EQ(uniform_below(a, 1), 0u);
  EXPECT_EQ(uniform_below(a, 0), 0u);
  // A power of two never rejects: the result is the low bits of one draw.
  std::mt19937_64 c(5), d(5);
  EXPECT_EQ(uniform_below(c, 1ull << 20), d() % (1ull << 20));
}

TEST(SudokuRandom, ShuffleIsAPermutationAndSeeded) {
  std::vector<int> v(50), w;
  for (int i = 0; i < 50; ++i) v[i] = i;
  w = v;
  std::mt19937_64 a(9), b(9);
  portable_shuffle(v.begin(), v.end(), a);
  portable_shuffle(w.begin(), w.end(), b);
  EXPECT_EQ(v, w);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  int fixed = 0;
  for (int i = 0; i < 50; ++i) fixed += v[i] == i;
  EXPECT_LT(fixed, 10);
  EXPECT_NE(splitmix64(1), splitmix64(2));
}
