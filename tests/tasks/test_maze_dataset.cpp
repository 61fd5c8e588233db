// The maze dataset (paper C.4): acceptance rules, determinism, deduplication,
// record format and generation throughput.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>

#include "tasks/maze_generate.h"
#include "tasks/maze_verify.h"
#include "test_maze_helpers.h"
#include "util/error.h"

using namespace lol::tasks;

TEST(MazeDataset, MinimumPathScalesWithTheSide) {
  EXPECT_EQ(maze_min_solution_cells(8), 12);  // the paper's value
  EXPECT_EQ(maze_min_solution_cells(4), 6);
  EXPECT_EQ(maze_min_solution_cells(5), 8);
  EXPECT_EQ(maze_min_solution_cells(16), 24);
}

TEST(MazeDataset, RecordsFollowTheAcceptanceRulesAndFormat) {
  for (int size : {4, 8, 16}) {
    MazeDatasetStats st;
    const int n = size == 16 ? 10 : 100;
    const auto ex = generate_maze_dataset(n, size, 99, &st);
    ASSERT_EQ(ex.size(), size_t(5 * n));
    EXPECT_EQ(st.accepted, n);
    int64_t rejected = 0;
    for (const auto& [rule, count] : st.rejected) rejected += count;
    EXPECT_EQ(st.draws, st.accepted + st.duplicates + rejected);
    for (size_t i = 0; i < ex.size(); i += 5) {
      const Maze m = Maze::from_question(ex[i].question);
      EXPECT_EQ(m.size, size);
      const std::vector<int> path = maze_solution_path(m);
      EXPECT_GE(int(path.size()), maze_min_solution_cells(size));
      std::set<std::string> traces;
      for (int s = 1; s <= 5; ++s) {
        const Example& e = ex[i + s - 1];
        EXPECT_EQ(e.strategy, s);
        EXPECT_EQ(e.question, ex[i].question);
        EXPECT_EQ(e.puzzle_id, maze_fnv1a(e.question));
        EXPECT_EQ(e.label, maze_strategy_label(s, size));
        EXPECT_EQ(e.trace.rfind("R : ", 0), 0u);
        EXPECT_EQ(e.answer, "A : " + maze_cells_text(path, size) + " <eos>");
        traces.insert(e.trace);
      }
      EXPECT_EQ(traces.size(), 5u);  // the traces name their strategy
      // DFS backtracks at least once: its walk is longer than the path.
      EXPECT_GT(split_tokens(ex[i + 1].trace).size(), path.size() + 2);
      // BFS dequeues at least three cells off the path.
      std::set<std::string> on_path;
      for (int c : path) on_path.insert(maze_cell_name(c, size));
      int off = 0;
      for (const auto& t : split_tokens(ex[i].trace)) off += t != "R" && t != ":" && !on_path.count(t);
      EXPECT_GE(off, 3);
    }
  }
}

TEST(MazeDataset, DeterministicForASeedAndDeduplicated) {
  const auto a = generate_maze_dataset(200, 6, 7), b = generate_maze_dataset(200, 6, 7);
  const auto c = generate_maze_dataset(200, 6, 8);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].text(), b[i].text());
  EXPECT_NE(a[0].question, c[0].question);
  std::set<std::string> questions;
  for (size_t i = 0; i < a.size(); i += 5) questions.insert(a[i].question);
  EXPECT_EQ(questions.size(), 200u);
}

TEST(MazeDataset, SmallGridsProduceDuplicatesThatAreDropped) {
  // 4x4 has few enough distinct accepted mazes that a few thousand draws repeat some.
  MazeDatasetStats st;
  const auto ex = generate_maze_dataset(3000, 4, 1, &st);
  EXPECT_GT(st.duplicates, 0);
  std::set<std::string> questions;
  for (size_t i = 0; i < ex.size(); i += 5) questions.insert(ex[i].question);
  EXPECT_EQ(questions.size(), 3000u);
}

// max_sequence_tokens rejects whole mazes, never single sequences: every maze keeps
// its five strategies (paper C.4, "one per strategy for each maze"), all within the cap.
TEST(MazeDataset, MaxSequenceTokensKeepsWholeMazes) {
  const int64_t cap = 300;  // below the longest sequence of most 8x8 mazes (the DFS walk)
  MazeDatasetStats st;
  const auto ex = generate_maze_dataset(40, 8, 9, &st, cap);
  ASSERT_EQ(ex.size(), 200u);
  EXPECT_GT(st.rejected["max_tokens"], 0);
  for (size_t i = 0; i < ex.size(); i += 5)
    for (int s = 1; s <= 5; ++s) {
      EXPECT_EQ(ex[i + s - 1].strategy, s);
      EXPECT_EQ(ex[i + s - 1].question, ex[i].question);
      EXPECT_LE(int64_t(split_tokens(ex[i + s - 1].text()).size()), cap);
    }
  // The accepted mazes are those of the unlimited stream whose sequences fit, in order.
  const auto all = generate_maze_dataset(40 + st.rejected["max_tokens"], 8, 9);
  std::vector<std::string> fitting;
  for (size_t i = 0; i < all.size(); i += 5) {
    int64_t longest = 0;
    for (int s = 0; s < 5; ++s) longest = std::max<int64_t>(longest, int64_t(split_tokens(all[i + s].text()).size()));
    if (longest <= cap && fitting.size() < 40) fitting.push_back(all[i].question);
  }
  ASSERT_EQ(fitting.size(), 40u);
  for (size_t k = 0; k < 40; ++k) EXPECT_EQ(ex[5 * k].question, fitting[k]) << k;
  // A cap no maze meets: refused after 1000 mazes, naming the shortest it saw.
  try {
    generate_maze_dataset(5, 8, 9, nullptr, 20);
    ADD_FAILURE() << "expected lol::InputError";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("none of the first 1000 distinct mazes of size 8 has all five sequences within "
                                         "max_sequence_tokens = 20 (the fewest: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(generate_maze_dataset(5, 8, 9, nullptr, -1), lol::InputError);
}

TEST(MazeDataset, RejectsBadArguments) {
  EXPECT_THROW(generate_maze_dataset(-1, 8, 0), lol::InputError);
  EXPECT_THROW(generate_maze_dataset(10, 3, 0), lol::InputError);
  EXPECT_THROW(generate_maze_dataset(10, 17, 0), lol::InputError);
  EXPECT_TRUE(generate_maze_dataset(0, 8, 0).empty());
}

TEST(MazeDataset, ThroughputIsReported) {
  const auto t0 = std::chrono::steady_clock::now();
  MazeDatasetStats st;
  const auto ex = generate_maze_dataset(1000, 8, 2024, &st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(ex.size(), 5000u);
  const double per_s = double(ex.size()) / s;
  std::cout << "[ maze ] 1000 8x8 mazes (5000 samples) in " << s << " s: " << per_s << " samples/s, " << st.draws
            << " draws\n";
  RecordProperty("samples_per_second", std::to_string(per_s));  // a figure, not a timed assertion
}
