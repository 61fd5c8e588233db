#include "tasks/maze_generate.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <unordered_set>

#include "util/error.h"
#include "util/random.h"

namespace lol::tasks {

uint64_t maze_uniform_below(std::mt19937_64& rng, uint64_t n) { return util::uniform_below(rng, n); }

Maze generate_maze(std::mt19937_64& rng, int size) {
  if (!(size >= kMazeMinSize && size <= kMazeMaxSize))
    throw InputError("maze size: expected 4..16, got " + std::to_string(size));
  Maze m;
  m.size = size;
  const int n = size * size;
  m.open.assign(n, 0);
  std::vector<uint8_t> visited(n, 0);
  std::vector<int> stack;
  stack.reserve(n);
  const int first = int(maze_uniform_below(rng, n));
  stack.push_back(first);
  visited[first] = 1;
  std::array<MazeDir, 4> cand_dir;
  std::array<int, 4> cand_cell;
  while (!stack.empty()) {
    const int c = stack.back(), r = c / size, col = c % size;
    int k = 0;
    auto consider = [&](MazeDir d, bool inside, int nb) {
      if (inside && !visited[nb]) {
        cand_dir[k] = d;
        cand_cell[k++] = nb;
      }
    };
    consider(kMazeNorth, r > 0, c - size);
    consider(kMazeEast, col + 1 < size, c + 1);
    consider(kMazeSouth, r + 1 < size, c + size);
    consider(kMazeWest, col > 0, c - 1);
    if (k == 0) {
      stack.pop_back();
      continue;
    }
    const int pick = int(maze_uniform_below(rng, uint64_t(k)));
    const int nb = cand_cell[pick];
    m.open[c] |= cand_dir[pick];
    m.open[nb] |= maze_opposite(cand_dir[pick]);
    visited[nb] = 1;
    stack.push_back(nb);
  }
  m.start = int(maze_uniform_below(rng, n));
  m.goal = int(maze_uniform_below(rng, n - 1));
  if (m.goal >= m.start) ++m.goal;
  return m;
}

int maze_min_solution_cells(int size) { return (3 * size + 1) / 2; }

namespace {

// generated_perfect: the maze comes from generate_maze, which only builds
// spanning trees, so the O(N^2) is_perfect() check can be skipped.
MazeSolutions solve_all(const Maze& maze, bool generated_perfect) {
  MazeSolutions s;
  auto reject = [&s](const char* rule, std::string why) {
    s.rule = rule;
    s.rejection = std::move(why);
    return s;
  };
  if (!generated_perfect && !maze.is_perfect())
    return reject("not_perfect", "the maze is not a spanning tree of the grid");
  s.path = maze_solution_path(maze);
  const int min_cells = maze_min_solution_cells(maze.size);
  if (int(s.path.size()) < min_cells)
    return reject("short_path",
                  "solution path has " + std::to_string(s.path.size()) + " cells, need " + std::to_string(min_cells));
  // Cheapest and most selective rules first.
  MazeRun& astar = s.runs[kMazeAStar - 1];
  astar = maze_astar(maze, AStarTies::kReject);
  if (!astar.ok) return reject("astar_tie", astar.reason);
  MazeRun& dfs = s.runs[kMazeDfs - 1];
  dfs = maze_dfs(maze);
  if (dfs.ok && dfs.trace.size() <= s.path.size()) return reject("dfs_no_backtrack", "DFS never backtracks");
  MazeRun& bfs = s.runs[kMazeBfs - 1];
  bfs = maze_bfs(maze);
  if (bfs.ok) {
    std::vector<uint8_t> on_path(maze.cells(), 0);
    for (int c : s.path) on_path[c] = 1;
    int off = 0;
    for (int c : bfs.trace) off += !on_path[c];
    if (off < kMazeMinBfsOffPath)
      return reject("bfs_few_off_path", "BFS expands only " + std::to_string(off) + " cells off the path");
  }
  s.runs[kMazeBidirectional - 1] = maze_bidirectional(maze);
  s.runs[kMazeDeadEnd - 1] = maze_dead_end_filling(maze);
  for (int k = 0; k < kMazeStrategyCount; ++k) {
    const MazeRun& r = s.runs[k];
    if (!r.ok) return reject("strategy_rejected", std::string(maze_strategy_name(k + 1)) + ": " + r.reason);
    if (r.path != s.path)  // every solver recovers the path from its own search
      throw std::logic_error(std::string("maze: ") + maze_strategy_name(k + 1) + " found a different path");
  }
  for (int a = 0; a < kMazeStrategyCount; ++a)
    for (int b = a + 1; b < kMazeStrategyCount; ++b)
      if (s.runs[a].trace == s.runs[b].trace)
        return reject("traces_not_distinct", std::string(maze_strategy_name(a + 1)) + " and " +
                                                 maze_strategy_name(b + 1) + " produce the same trace");
  return s;
}

Example build_example(const std::string& question, uint64_t id, const Maze& maze, int strategy, const MazeRun& run,
                      bool filler) {
  Example e;
  e.question = question;
  e.label = filler ? std::string(kMazeFillerLabel) : maze_strategy_label(strategy, maze.size);
  e.trace = "R : " + maze_cells_text(run.trace, maze.size);
  e.answer = "A : " + maze_cells_text(run.path, maze.size) + " <eos>";
  e.strategy = strategy;
  e.puzzle_id = id;
  return e;
}

}  // namespace

MazeSolutions solve_maze_strategies(const Maze& maze) { return solve_all(maze, false); }

Example make_maze_example(const Maze& maze, int strategy, const MazeRun& run, bool filler) {
  const std::string q = maze.to_question();
  return build_example(q, maze_fnv1a(q), maze, strategy, run, filler);
}

std::vector<Example> make_maze_examples(const Maze& maze) {
  MazeSolutions s = solve_maze_strategies(maze);
  if (!s.accepted()) return {};
  const std::string q = maze.to_question();
  const uint64_t id = maze_fnv1a(q);
  std::vector<Example> out;
  out.reserve(kMazeStrategyCount);
  for (int k = 1; k <= kMazeStrategyCount; ++k) out.push_back(build_example(q, id, maze, k, s.runs[k - 1], false));
  return out;
}

std::vector<Example> generate_maze_dataset(int64_t n_puzzles, int size, uint64_t seed, MazeDatasetStats* stats,
                                           int64_t max_sequence_tokens) {
  if (n_puzzles < 0) throw InputError("maze dataset: number of puzzles must be >= 0, got " + std::to_string(n_puzzles));
  if (max_sequence_tokens < 0)
    throw InputError("maze dataset: max_sequence_tokens must be >= 0 (0: no limit), got " +
                     std::to_string(max_sequence_tokens));
  if (!(size >= kMazeMinSize && size <= kMazeMaxSize))
    throw InputError("maze size: expected 4..16, got " + std::to_string(size));
  MazeDatasetStats local;
  MazeDatasetStats& st = stats ? *stats : local;
  st = MazeDatasetStats{};
  std::mt19937_64 rng(seed);
  std::unordered_set<std::string> seen;  // passages bytes + start + goal
  std::vector<Example> out;
  out.reserve(size_t(n_puzzles) * kMazeStrategyCount);
  const int64_t max_draws = 2000 * n_puzzles + 100000;
  int64_t shortest_longest = INT64_MAX;  // over mazes rejected by max_sequence_tokens
  while (st.accepted < n_puzzles) {
    if (st.draws >= max_draws)
      throw InputError("maze dataset: only " + std::to_string(st.accepted) + " of " + std::to_string(n_puzzles) +
                       " mazes of size " + std::to_string(size) + " accepted after " + std::to_string(st.draws) +
                       " draws");
    Maze m = generate_maze(rng, size);
    ++st.draws;
    MazeSolutions s = solve_all(m, true);
    if (!s.accepted()) {
      ++st.rejected[s.rule];
      continue;
    }
    std::string key(m.open.begin(), m.open.end());
    key.push_back(char(m.start));
    key.push_back(char(m.goal));
    if (!seen.insert(std::move(key)).second) {  // a repeat of a too-long maze is too long too
      ++st.duplicates;
      continue;
    }
    const std::string q = m.to_question();
    const uint64_t id = maze_fnv1a(q);
    std::vector<Example> five;
    int64_t longest = 0;
    for (int k = 1; k <= kMazeStrategyCount; ++k) {
      five.push_back(build_example(q, id, m, k, s.runs[k - 1], false));
      if (max_sequence_tokens > 0) longest = std::max<int64_t>(longest, int64_t(split_tokens(five.back().text()).size()));
    }
    if (max_sequence_tokens > 0 && longest > max_sequence_tokens) {
      shortest_longest = std::min(shortest_longest, longest);
      if (++st.rejected["max_tokens"] >= 1000 && st.accepted == 0)
        throw InputError("maze dataset: none of the first 1000 distinct mazes of size " + std::to_string(size) +
                         " has all five sequences within max_sequence_tokens = " + std::to_string(max_sequence_tokens) +
                         " (the fewest: " + std::to_string(shortest_longest) + " tokens); raise it, or 0 for no limit");
      continue;
    }
    ++st.accepted;
    for (auto& e : five) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace lol::tasks
