// Maze representation (paper C.4.1 question format), random generation by
// recursive backtracking, and the bounded-integer helper.
#include <gtest/gtest.h>

#include <set>

#include "tasks/maze_generate.h"
#include "test_maze_helpers.h"
#include "util/error.h"

using namespace lol::tasks;

TEST(MazeCore, CellNamesParseOnlyInsideTheGrid) {
  EXPECT_EQ(parse_maze_cell("r1c1", 8), 0);
  EXPECT_EQ(parse_maze_cell("r3c6", 8), 2 * 8 + 5);
  EXPECT_EQ(parse_maze_cell("r8c8", 8), 63);
  EXPECT_EQ(parse_maze_cell("r16c16", 16), 255);
  for (const char* bad :
       {"r9c1", "r1c9", "r0c1", "r01c1", "r1c", "rc1", "x1c1", "r1c1c", "r-1c1", "r1 c1", "", "r16c16"})
    EXPECT_EQ(parse_maze_cell(bad, 8), -1) << bad;
  for (int size : {4, 8, 16})
    for (int c = 0; c < size * size; ++c) EXPECT_EQ(parse_maze_cell(maze_cell_name(c, size), size), c);
}

TEST(MazeCore, GeneratedMazesArePerfectAndRoundTripThroughTheQuestion) {
  std::mt19937_64 rng(5);
  for (int size = kMazeMinSize; size <= kMazeMaxSize; ++size) {
    for (int k = 0; k < 20; ++k) {
      const Maze m = generate_maze(rng, size);
      ASSERT_TRUE(m.is_perfect());
      EXPECT_NE(m.start, m.goal);
      const std::string q = m.to_question();
      EXPECT_EQ(Maze::from_question(q), m);
      // Label, filler and trace after the question are ignored.
      EXPECT_EQ(Maze::from_question(q + " " + maze_strategy_label(1, size) + " R : r1c1"), m);
      EXPECT_EQ(Maze::from_question(q + " [ ... ]"), m);
      const std::vector<int> path = maze_solution_path(m);
      EXPECT_EQ(path.front(), m.start);
      EXPECT_EQ(path.back(), m.goal);
      for (size_t i = 1; i < path.size(); ++i) EXPECT_TRUE(m.adjacent(path[i - 1], path[i]));
    }
  }
}

TEST(MazeCore, GenerationIsDeterministicForASeedAndVaried) {
  std::mt19937_64 a(17), b(17), c(18);
  std::set<std::string> distinct;
  bool differs = false;
  for (int k = 0; k < 100; ++k) {
    const Maze x = generate_maze(a, 8);
    EXPECT_EQ(x, generate_maze(b, 8));
    differs = differs || !(x == generate_maze(c, 8));
    distinct.insert(x.to_question());
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(distinct.size(), 100u);
}

TEST(MazeCore, StartAndGoalCoverTheGrid) {
  std::mt19937_64 rng(3);
  std::set<int> starts, goals;
  for (int k = 0; k < 2000; ++k) {
    const Maze m = generate_maze(rng, 4);
    starts.insert(m.start);
    goals.insert(m.goal);
  }
  EXPECT_EQ(starts.size(), 16u);
  EXPECT_EQ(goals.size(), 16u);
}

TEST(MazeCore, UniformBelowStaysInRangeAndIsUnbiased) {
  std::mt19937_64 rng(1), raw(1);
  // A power of two needs no rejection: the value is the low bits of one draw.
  for (int k = 0; k < 100; ++k) EXPECT_EQ(maze_uniform_below(rng, 8), raw() % 8);
  EXPECT_EQ(maze_uniform_below(rng, 1), 0u);
  std::vector<int> count(7, 0);
  const int n = 70000;
  for (int k = 0; k < n; ++k) {
    const uint64_t v = maze_uniform_below(rng, 7);
    ASSERT_LT(v, 7u);
    ++count[v];
  }
  for (int c : count) EXPECT_NEAR(c, n / 7, 400);  // ~4.4 standard deviations
  // A bound just above 2^63 rejects about half the draws and still stays in range.
  const uint64_t big = (uint64_t(1) << 63) + 12345;
  for (int k = 0; k < 1000; ++k) EXPECT_LT(maze_uniform_below(rng, big), big);
}

TEST(MazeCore, MalformedQuestionsThrowInputError) {
  std::mt19937_64 rng(2);
  const Maze m = generate_maze(rng, 4);
  const std::string q = m.to_question();
  auto replace_first = [](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  std::vector<std::string> bad = {
      "",
      "r1c1 E",                                                               // no "Q :"
      replace_first(q, "r1c2", "r1c3"),                                       // cells out of row-major order
      replace_first(q, " start ", " X start "),                               // an unknown token is a bad cell
      replace_first(q, "start " + maze_cell_name(m.start, 4), "start r5c1"),  // start outside the grid
      q.substr(0, q.find(" goal ")),                                          // no goal
      replace_first(q, "goal " + maze_cell_name(m.goal, 4), "goal " + maze_cell_name(m.start, 4)),  // start == goal
  };
  // r1c1 opening north leaves the grid; flipping r1c1's east bit alone makes the
  // passage between r1c1 and r1c2 one-sided.
  Maze north = m, one_sided = m;
  north.open[0] |= kMazeNorth;
  one_sided.open[0] ^= kMazeEast;
  bad.push_back(north.to_question());
  bad.push_back(one_sided.to_question());
  // A 3x3 grid is too small.
  bad.push_back("Q : r1c1 E r1c2 E W r1c3 W S r2c1 r2c2 r2c3 N S r3c1 r3c2 r3c3 N start r1c1 goal r3c3");
  for (const auto& b : bad) EXPECT_THROW(Maze::from_question(b), lol::InputError) << b;
}

TEST(MazeCore, PerfectnessDetectsLoopsAndDisconnection) {
  std::mt19937_64 rng(4);
  Maze m = generate_maze(rng, 6);
  ASSERT_TRUE(m.is_perfect());
  // Open one more wall: a loop.
  for (int c = 0; c < m.cells(); ++c)
    if (m.col(c) + 1 < m.size && !(m.open[c] & kMazeEast)) {
      Maze loop = m;
      loop.open[c] |= kMazeEast;
      loop.open[c + 1] |= kMazeWest;
      EXPECT_FALSE(loop.is_perfect());
      break;
    }
  // Close one passage: disconnected.
  for (int c = 0; c < m.cells(); ++c)
    if (m.open[c] & kMazeSouth) {
      Maze cut = m;
      cut.open[c] &= uint8_t(~kMazeSouth);
      cut.open[c + m.size] &= uint8_t(~kMazeNorth);
      EXPECT_FALSE(cut.is_perfect());
      EXPECT_TRUE(solve_maze_strategies(cut).rule == "not_perfect");
      EXPECT_TRUE(make_maze_examples(cut).empty());
      break;
    }
}

TEST(MazeCore, LabelsScaleWithTheGrid) {
  EXPECT_EQ(maze_strategy_label(4, 8), "[ r1c1 r8c8 r1c2 r8c7 r1c3 r8c6 ]");
  EXPECT_EQ(maze_strategy_label(5, 8), "[ r8c1 r8c2 r8c3 r1c8 r2c8 r3c8 ]");
  EXPECT_EQ(maze_strategy_label(4, 4), "[ r1c1 r4c4 r1c2 r4c3 r1c3 r4c2 ]");
  EXPECT_EQ(maze_strategy_label(5, 16), "[ r16c1 r16c2 r16c3 r1c16 r2c16 r3c16 ]");
  for (int size : {4, 16})
    for (int s = 1; s <= 3; ++s) EXPECT_EQ(maze_strategy_label(s, size), maze_strategy_label(s, 8));
  // The BFS label is BFS's first six dequeues from r1c1 on an open grid (N E S W order).
  for (int size : {4, 8, 16}) {
    Maze open;
    open.size = size;
    open.open.assign(size * size, 0);
    for (int c = 0; c < size * size; ++c) {
      if (open.row(c) > 0) open.open[c] |= kMazeNorth;
      if (open.col(c) + 1 < size) open.open[c] |= kMazeEast;
      if (open.row(c) + 1 < size) open.open[c] |= kMazeSouth;
      if (open.col(c) > 0) open.open[c] |= kMazeWest;
    }
    open.start = 0;
    open.goal = size * size - 1;
    const std::vector<int> t = maze_bfs(open).trace;
    EXPECT_EQ("[ " + maze_cells_text({t.begin(), t.begin() + 6}, size) + " ]", maze_strategy_label(kMazeBfs, size));
  }
  EXPECT_THROW(maze_strategy_label(0, 8), lol::InputError);
  EXPECT_THROW(maze_strategy_label(6, 8), lol::InputError);
  EXPECT_THROW(maze_strategy_label(1, 3), lol::InputError);
  EXPECT_THROW(maze_strategy_label(1, 17), lol::InputError);
  std::mt19937_64 rng(1);
  EXPECT_THROW(generate_maze(rng, 17), lol::InputError);
  EXPECT_THROW(generate_maze(rng, 3), lol::InputError);
}
