// Properties of the five maze strategies (paper C.4) on random mazes of every size.
#include <gtest/gtest.h>

#include <algorithm>

#include "tasks/maze_generate.h"
#include "tasks/maze_strategies.h"
#include "test_maze_helpers.h"
#include "util/error.h"

using namespace lol::tasks;

namespace {

// Breadth-first distances from `from` in a perfect maze.
std::vector<int> distances(const Maze& m, int from) {
  std::vector<int> d(m.cells(), -1), q = {from};
  d[from] = 0;
  std::array<int, 4> nb;
  for (size_t h = 0; h < q.size(); ++h) {
    int k = m.neighbors(q[h], nb);
    for (int i = 0; i < k; ++i)
      if (d[nb[i]] < 0) {
        d[nb[i]] = d[q[h]] + 1;
        q.push_back(nb[i]);
      }
  }
  return d;
}

int manhattan(const Maze& m, int a, int b) { return std::abs(m.row(a) - m.row(b)) + std::abs(m.col(a) - m.col(b)); }

}  // namespace

TEST(MazeStrategies, TracesHaveEachStrategysShape) {
  std::mt19937_64 rng(8);
  int checked = 0;
  for (int size = kMazeMinSize; size <= kMazeMaxSize; ++size) {
    for (int k = 0; k < 30; ++k, ++checked) {
      const Maze m = generate_maze(rng, size);
      const std::vector<int> path = maze_solution_path(m);
      const std::vector<int> ds = distances(m, m.start), dg = distances(m, m.goal);
      for (int s = 1; s <= 5; ++s) {
        const MazeRun r = maze_run(m, s, AStarTies::kBreak);
        ASSERT_TRUE(r.ok) << r.reason;
        EXPECT_EQ(r.path, path) << maze_strategy_name(s);
      }
      const MazeRun bfs = maze_bfs(m);
      EXPECT_EQ(bfs.trace.front(), m.start);
      EXPECT_EQ(bfs.trace.back(), m.goal);
      for (size_t i = 1; i < bfs.trace.size(); ++i) EXPECT_LE(ds[bfs.trace[i - 1]], ds[bfs.trace[i]]);
      // Every cell closer to the start than the goal is dequeued.
      int closer = 0;
      for (int c = 0; c < m.cells(); ++c) closer += ds[c] < ds[m.goal];
      EXPECT_GT(int(bfs.trace.size()), closer);

      const MazeRun dfs = maze_dfs(m);
      EXPECT_EQ(dfs.trace.front(), m.start);
      EXPECT_EQ(dfs.trace.back(), m.goal);
      for (size_t i = 1; i < dfs.trace.size(); ++i) EXPECT_TRUE(m.adjacent(dfs.trace[i - 1], dfs.trace[i]));
      // Path edges are walked once, other explored edges twice.
      std::vector<int> distinct = dfs.trace;
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      EXPECT_EQ(dfs.trace.size(), 2 * distinct.size() - path.size());
      EXPECT_EQ(std::count(dfs.trace.begin(), dfs.trace.end(), m.goal), 1);

      const MazeRun astar = maze_astar(m, AStarTies::kBreak);
      EXPECT_EQ(astar.trace.back(), m.goal);
      for (size_t i = 1; i < astar.trace.size(); ++i) {  // f never decreases (consistent heuristic)
        const int a = astar.trace[i - 1], b = astar.trace[i];
        const int fa = ds[a] + manhattan(m, a, m.goal), fb = ds[b] + manhattan(m, b, m.goal);
        EXPECT_LE(fa, fb);
        if (fa == fb) EXPECT_LE(ds[a], ds[b]);  // ties: smaller g first
      }
      const MazeRun strict = maze_astar(m, AStarTies::kReject);
      if (strict.ok)
        EXPECT_EQ(strict.trace, astar.trace);
      else
        EXPECT_NE(strict.reason.find("A*"), std::string::npos);

      const MazeRun bi = maze_bidirectional(m);
      ASSERT_GE(bi.trace.size(), 2u);
      EXPECT_EQ(bi.trace[0], m.start);
      const size_t last = bi.trace.size() - 1;
      for (size_t i = 2; i < last; ++i) {  // each side dequeues in distance order
        const std::vector<int>& d = i % 2 ? dg : ds;
        EXPECT_LE(d[bi.trace[i - 2]], d[bi.trace[i]]);
      }
      EXPECT_TRUE(m.adjacent(bi.trace[last - 1], bi.trace[last]));
      // Cells on both sides of the meeting edge lie on the path.
      EXPECT_NE(std::find(path.begin(), path.end(), bi.trace[last]), path.end());
      EXPECT_NE(std::find(path.begin(), path.end(), bi.trace[last - 1]), path.end());

      const MazeRun de = maze_dead_end_filling(m);
      EXPECT_EQ(de.trace.size() + path.size(), size_t(m.cells()));
      for (int c : de.trace) EXPECT_EQ(std::find(path.begin(), path.end(), c), path.end());
    }
  }
  EXPECT_EQ(checked, 13 * 30);
}

TEST(MazeStrategies, NeighbourOrderChangesTracesButNotPaths) {
  const MazeDirOrder nsew = {kMazeNorth, kMazeSouth, kMazeEast, kMazeWest};
  int bfs_differs = 0, dfs_differs = 0, bi_differs = 0;
  for (const auto& a : maze_test::accepted_mazes(100, 8, 31)) {
    const MazeRun b = maze_bfs(a.maze, nsew), d = maze_dfs(a.maze, nsew), bi = maze_bidirectional(a.maze, nsew);
    EXPECT_EQ(b.path, a.sol.path);
    EXPECT_EQ(d.path, a.sol.path);
    EXPECT_EQ(bi.path, a.sol.path);
    bfs_differs += b.trace != a.sol.runs[0].trace;
    dfs_differs += d.trace != a.sol.runs[1].trace;
    bi_differs += bi.trace != a.sol.runs[3].trace;
  }
  EXPECT_GT(bfs_differs, 0);
  EXPECT_GT(dfs_differs, 0);
  EXPECT_GT(bi_differs, 0);
}

TEST(MazeStrategies, StrategyNamesAndDispatch) {
  EXPECT_STREQ(maze_strategy_name(1), "BFS");
  EXPECT_STREQ(maze_strategy_name(5), "Dead-end filling");
  EXPECT_THROW(maze_strategy_name(0), lol::InputError);
  std::mt19937_64 rng(1);
  const Maze m = generate_maze(rng, 5);
  EXPECT_THROW(maze_run(m, 6), lol::InputError);
  EXPECT_EQ(maze_run(m, kMazeDfs).trace, maze_dfs(m).trace);
  EXPECT_EQ(maze_run(m, kMazeDeadEnd).trace, maze_dead_end_filling(m).trace);
}
