// Random maze generation, the paper's acceptance rules and the maze dataset
// (LoL paper Appendix C.4: "loop-free mazes ... using randomized recursive
// backtracking and randomly choose distinct start and goal cells. We ensure all
// mazes have a unique solving trace per strategy and a solution path of at
// least 12 cells. We also require DFS to backtrack at least once and BFS to
// expand at least three cells outside the solution path.").
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tasks/maze.h"
#include "tasks/maze_strategies.h"
#include "tasks/task.h"

namespace lol::tasks {

/// Uniform integer in [0, n), n >= 1, by rejection sampling on full 64-bit
/// draws: a draw r is kept when r < 2^64 - (2^64 mod n) and mapped to r mod n.
/// Used instead of std::uniform_int_distribution, whose output differs between
/// standard libraries, so that a seed gives the same mazes everywhere.
uint64_t maze_uniform_below(std::mt19937_64& rng, uint64_t n);

/// One random perfect maze of side `size` (4..16) by randomized recursive
/// backtracking: start at a uniform random cell; repeatedly, at the cell on top
/// of the stack, carve a passage to a uniform random unvisited grid neighbour
/// (candidates in N E S W order) and push it, or pop when there is none. Then a
/// uniform random start and a uniform random distinct goal. Consumes the rng
/// deterministically. Throws lol::InputError for a size outside 4..16.
Maze generate_maze(std::mt19937_64& rng, int size);

/// Shortest accepted solution path, in cells (start and goal included):
/// ceil(1.5 * size), i.e. the paper's 12 cells at size 8, scaled linearly with
/// the grid side (6 at 4, 24 at 16) because the start-goal distance of random
/// cells grows with the side.
int maze_min_solution_cells(int size);

/// Minimum number of BFS-expanded cells off the solution path (paper: 3, all sizes).
inline constexpr int kMazeMinBfsOffPath = 3;

/// All five strategies on one maze and the acceptance verdict.
struct MazeSolutions {
  std::array<MazeRun, kMazeStrategyCount> runs;  ///< runs[s-1] for strategy s (filled up to the rejection)
  std::vector<int> path;                         ///< the solution path
  std::string rule;                              ///< violated rule id, empty when accepted: not_perfect, short_path,
                                                 ///< astar_tie, dfs_no_backtrack, bfs_few_off_path, strategy_rejected,
                                                 ///< traces_not_distinct
  std::string rejection;                         ///< human-readable reason, empty when accepted
  bool accepted() const { return rule.empty(); }
};

/// Runs the strategies and applies the acceptance rules, stopping at the first
/// violated one: perfect maze; path >= maze_min_solution_cells; A* order fixed
/// by the rules (AStarTies::kReject); DFS backtracks at least once (its walk is
/// longer than the path); BFS dequeues >= kMazeMinBfsOffPath cells off the path;
/// the five traces are pairwise different (so a trace names its strategy).
MazeSolutions solve_maze_strategies(const Maze& maze);

/// The example of one strategy: question = maze.to_question(), label =
/// maze_strategy_label (or kMazeFillerLabel when `filler`), trace "R : ...",
/// answer "A : ... <eos>", puzzle_id = maze_fnv1a(question).
Example make_maze_example(const Maze& maze, int strategy, const MazeRun& run, bool filler = false);

/// The five examples (strategies 1..5 in order) of an accepted maze, or an empty
/// vector when the maze fails an acceptance rule.
std::vector<Example> make_maze_examples(const Maze& maze);

/// Counters of one generate_maze_dataset call.
struct MazeDatasetStats {
  int64_t draws = 0;       ///< mazes drawn
  int64_t duplicates = 0;  ///< drawn mazes equal to an earlier accepted one
  int64_t accepted = 0;
  std::map<std::string, int64_t> rejected;  ///< per MazeSolutions::rule
};

/// n_puzzles distinct accepted mazes of side `size`, five examples each
/// (puzzle-major, strategies 1..5), drawn from std::mt19937_64(seed). Mazes
/// are deduplicated by (passages, start, goal). Deterministic for a seed.
/// max_sequence_tokens > 0 rejects a maze any of whose five sequences has more words
/// (Example::text(); rule "max_tokens"), so every maze keeps all five strategies
/// (paper C.4: "one per strategy for each maze"), as generate_sudoku_dataset does.
/// Throws lol::InputError for n_puzzles < 0, a size outside 4..16, when none of the
/// first 1000 distinct mazes fits max_sequence_tokens, or when fewer than n_puzzles distinct
/// mazes are accepted in 2000 * n_puzzles + 10^5 draws.
std::vector<Example> generate_maze_dataset(int64_t n_puzzles, int size, uint64_t seed,
                                           MazeDatasetStats* stats = nullptr, int64_t max_sequence_tokens = 0);

}  // namespace lol::tasks
