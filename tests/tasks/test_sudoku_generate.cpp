// Sudoku grid, puzzle and dataset generation (paper C.3): validity, givens range,
// solvability by all five strategies, determinism, deduplication, throughput.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>

#include "tasks/sudoku_generate.h"
#include "tasks/sudoku_strategies.h"
#include "util/error.h"

using namespace lol::tasks;

TEST(SudokuGenerate, GridsAreCompleteValidAndSeeded) {
  std::mt19937_64 a(11), b(11), c(12);
  std::set<std::string> distinct;
  for (int k = 0; k < 200; ++k) {
    const SudokuGrid g = generate_sudoku_grid(a);
    ASSERT_TRUE(sudoku_complete(g));
    EXPECT_EQ(g, generate_sudoku_grid(b));
    distinct.insert(sudoku_compact(g));
  }
  EXPECT_EQ(distinct.size(), 200u);
  // The first row is a uniform permutation: over many grids every digit opens a row.
  std::set<int> first;
  for (int k = 0; k < 100; ++k) first.insert(generate_sudoku_grid(c)[0]);
  EXPECT_EQ(first.size(), 9u);
}

TEST(SudokuGenerate, PuzzlesKeepTheTargetGivensAndTheSolution) {
  std::mt19937_64 rng(21);
  for (int target = 30; target <= 36; ++target) {
    const SudokuGrid sol = generate_sudoku_grid(rng);
    std::optional<SudokuGrid> p;
    for (int a = 0; a < 10 && !p; ++a) p = blank_sudoku_cells(rng, sol, target);
    ASSERT_TRUE(p.has_value()) << target;
    EXPECT_EQ(sudoku_givens(*p), target);
    for (int i = 0; i < 81; ++i) if ((*p)[i]) EXPECT_EQ((*p)[i], sol[i]);
    EXPECT_TRUE(solvable_by_naked_singles(*p));
    EXPECT_TRUE(solvable_by_crosshatching(*p));
    EXPECT_EQ(solve_naked_singles(*p).grid, sol);
  }
  SudokuGrid incomplete = generate_sudoku_grid(rng);
  incomplete[40] = 0;
  EXPECT_THROW(blank_sudoku_cells(rng, incomplete, 32), lol::InputError);
  EXPECT_THROW(blank_sudoku_cells(rng, generate_sudoku_grid(rng), 10), lol::InputError);
  const auto p = make_sudoku_puzzle(rng, generate_sudoku_grid(rng));
  ASSERT_TRUE(p.has_value());
  EXPECT_GE(sudoku_givens(*p), 30);
  EXPECT_LE(sudoku_givens(*p), 36);
}

TEST(SudokuGenerate, DatasetRecordsAreWellFormed) {
  const auto ds = generate_sudoku_dataset(300, 5);
  ASSERT_EQ(ds.size(), 1500u);
  std::set<std::string> puzzles;
  std::vector<int> givens_seen(82, 0);
  for (size_t k = 0; k < ds.size(); k += 5) {
    const SudokuGrid p = parse_sudoku_question(ds[k].question);
    puzzles.insert(sudoku_compact(p));
    ++givens_seen[sudoku_givens(p)];
    SudokuGrid sol{};
    ASSERT_EQ(count_sudoku_solutions(p, 2, &sol), 1);
    for (int s = 1; s <= 5; ++s) {
      const Example& e = ds[k + s - 1];
      EXPECT_EQ(e.strategy, s);
      EXPECT_EQ(e.question, ds[k].question);
      EXPECT_EQ(e.label, "[ S" + std::to_string(s) + " ]");
      EXPECT_EQ(e.puzzle_id, sudoku_hash(p));
      EXPECT_EQ(e.trace.rfind("R : ", 0), 0u);
      EXPECT_EQ(e.answer, sudoku_answer(sol));
      EXPECT_EQ(e.trace, sudoku_trace_text(solve_sudoku_strategy(p, s).steps));
    }
  }
  EXPECT_EQ(puzzles.size(), 300u);  // deduplicated by puzzle
  for (int g = 0; g < 82; ++g) {
    if (g >= 30 && g <= 36) EXPECT_GT(givens_seen[g], 15) << g;  // ~43 expected each
    else EXPECT_EQ(givens_seen[g], 0) << g;
  }
}

TEST(SudokuGenerate, DatasetIsDeterministicForASeedAndThreadCount) {
  SudokuDatasetOptions one, four;
  four.threads = 4;
  const auto a = generate_sudoku_dataset(40, 99, one);
  const auto b = generate_sudoku_dataset(40, 99, four);
  const auto c = generate_sudoku_dataset(40, 100, one);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].text(), b[k].text());
  EXPECT_NE(a[0].text(), c[0].text());
  // A prefix of a larger dataset is the smaller dataset.
  const auto d = generate_sudoku_dataset(10, 99, one);
  for (size_t k = 0; k < d.size(); ++k) EXPECT_EQ(d[k].text(), a[k].text());
}

TEST(SudokuGenerate, MaxSequenceTokensAndOptionChecks) {
  SudokuDatasetOptions opt;
  opt.max_sequence_tokens = 900;
  const auto ds = generate_sudoku_dataset(100, 8, opt);
  ASSERT_EQ(ds.size(), 500u);
  for (const auto& e : ds) EXPECT_LE(split_tokens(e.text()).size(), 900u);
  opt.max_sequence_tokens = 200;  // below any S1 sequence: nothing fits
  EXPECT_THROW(generate_sudoku_dataset(2, 8, opt), lol::InputError);
  SudokuDatasetOptions bad;
  bad.min_givens = 40;
  bad.max_givens = 35;
  EXPECT_THROW(generate_sudoku_dataset(2, 8, bad), lol::InputError);
  bad = {};
  bad.threads = 0;
  EXPECT_THROW(generate_sudoku_dataset(2, 8, bad), lol::InputError);
  EXPECT_TRUE(generate_sudoku_dataset(0, 8).empty());
}

TEST(SudokuGenerate, Throughput) {
  const size_t n = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  const auto ds = generate_sudoku_dataset(n, 1234);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(ds.size(), 5 * n);
  const double per_s = double(n) / s;
  std::cout << "[ sudoku ] " << n << " puzzles (" << ds.size() << " sequences) in " << s << " s: " << per_s
            << " puzzles/s, " << 5 * per_s << " sequences/s, 1 thread\n";
  RecordProperty("puzzles_per_second", std::to_string(per_s));
  EXPECT_GT(per_s, 20.0);  // loose floor; ~2000/s on one core of the dev machine
}
