// Maze representation and the question format of the LoL paper's maze task
// (Appendix C.4 / C.4.1, section 4.1.4).
//
// A maze is a size x size grid (4 <= size <= 16). Cells are numbered row-major,
// 0-based: cell = row * size + col; in text they are named "r<row+1>c<col+1>"
// ("r3c6" is row 3, column 6, 1-based as in the paper). Every cell stores a
// bitmask of its open directions (N, E, S, W). The question lists every cell in
// row-major order followed by its open directions in the fixed order N E S W:
//   Q : r1c1 E S r1c2 E W ... r8c8 W start r3c6 goal r8c2
// The exact rules of the five solving strategies are documented in docs/tasks.md.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lol::tasks {

/// Open-direction bits of a maze cell.
enum MazeDir : uint8_t { kMazeNorth = 1, kMazeEast = 2, kMazeSouth = 4, kMazeWest = 8 };

/// The directions in the paper's listing order N, E, S, W. Every strategy
/// tries neighbours in this order (docs/tasks.md, "Neighbour order").
inline constexpr std::array<MazeDir, 4> kMazeDirOrder = {kMazeNorth, kMazeEast, kMazeSouth, kMazeWest};

/// Smallest and largest supported grid side.
inline constexpr int kMazeMinSize = 4;
inline constexpr int kMazeMaxSize = 16;

/// "N", "E", "S" or "W".
const char* maze_dir_token(MazeDir d);
/// The opposite direction (N <-> S, E <-> W).
MazeDir maze_opposite(MazeDir d);

/// A rectangular maze with a start and a goal cell.
struct Maze {
  int size = 0;               ///< grid side N, kMazeMinSize..kMazeMaxSize
  std::vector<uint8_t> open;  ///< [N*N] row-major MazeDir bitmask of open passages
  int start = 0;              ///< start cell index (row * size + col)
  int goal = 0;               ///< goal cell index

  int cells() const { return size * size; }
  int row(int cell) const { return cell / size; }
  int col(int cell) const { return cell % size; }
  /// The cell reached from `cell` through an open passage in direction d, or -1
  /// when the passage is closed.
  int neighbor(int cell, MazeDir d) const;
  /// Open neighbours of `cell` in N, E, S, W order; returns their count (<= 4).
  int neighbors(int cell, std::array<int, 4>& out) const;
  /// Whether cells a and b share an open passage.
  bool adjacent(int a, int b) const;

  /// True when the passages form a spanning tree of the grid (connected and
  /// loop-free: exactly N*N-1 passages), as produced by randomized recursive
  /// backtracking. Every strategy's rules assume this.
  bool is_perfect() const;

  /// The question prefix "Q : r1c1 E S ... start r3c6 goal r8c2" (no label).
  std::string to_question() const;

  /// Parses a question (paper C.4.1 format). Anything from the first "[" on
  /// (a strategy label, the filler "[ ... ]", a trace) is ignored. Checks that
  /// cells come in row-major order of a square grid of side 4..16, that
  /// directions are N/E/S/W, stay inside the grid and agree between the two
  /// cells of a passage, and that start and goal are distinct cells.
  /// Throws lol::InputError naming the token position and expected value.
  static Maze from_question(const std::string& question);

  bool operator==(const Maze& o) const {
    return size == o.size && open == o.open && start == o.start && goal == o.goal;
  }
};

/// "r<row+1>c<col+1>" of a cell index in a size x size grid.
std::string maze_cell_name(int cell, int size);
/// Inverse of maze_cell_name: the cell index, or -1 when `token` is not a cell
/// name of a size x size grid (wrong syntax, leading zeros, out of range).
int parse_maze_cell(const std::string& token, int size);

/// Cell names joined by single spaces.
std::string maze_cells_text(const std::vector<int>& cells, int size);

/// The unique start-to-goal path of a perfect maze, start and goal included.
/// Throws lol::InputError when the goal is unreachable.
std::vector<int> maze_solution_path(const Maze& maze);

/// The puzzle id of a maze: FNV-1a over the bytes of its question text (xor, then
/// multiply by the 64-bit FNV prime 1099511628211), started from 1469598103934665603,
/// which is one digit short of FNV-1a's offset basis 14695981039346656037 (a slip of
/// the first version, kept: dataset splits and recorded results depend on these ids;
/// sudoku_hash uses the standard basis). All strategies of one maze share the id.
uint64_t maze_fnv1a(const std::string& s);

}  // namespace lol::tasks
