// Shared helpers of the maze tests: the paper's appendix examples and a pool of
// accepted random mazes.
#pragma once
#include <fstream>
#include <string>
#include <vector>

#include "tasks/maze_generate.h"
#include "tasks/task.h"

namespace lol::tasks::maze_test {

/// The five sequences of LoL Appendix C.4.1 (S1..S5), one per line, as printed in the paper.
inline std::vector<std::string> maze_appendix_lines() {
  std::ifstream f(std::string(LOL_SOURCE_DIR) + "/tests/tasks/data/maze_appendix_c41.txt");
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

/// Whitespace-normalised text.
inline std::string normalized(const std::string& s) {
  std::string out;
  for (const auto& t : split_tokens(s)) out += (out.empty() ? "" : " ") + t;
  return out;
}

/// n accepted mazes of the given size drawn with generate_maze from `seed`, with their solutions.
struct AcceptedMaze {
  Maze maze;
  MazeSolutions sol;
};
inline std::vector<AcceptedMaze> accepted_mazes(int n, int size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<AcceptedMaze> out;
  while (int(out.size()) < n) {
    Maze m = generate_maze(rng, size);
    MazeSolutions s = solve_maze_strategies(m);
    if (s.accepted()) out.push_back({std::move(m), std::move(s)});
  }
  return out;
}

}  // namespace lol::tasks::maze_test
