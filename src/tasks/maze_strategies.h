// The five maze-solving strategies of the LoL paper (Appendix C.4, Table 4,
// examples in C.4.1): S1 BFS, S2 DFS walk, S3 A*, S4 bidirectional BFS,
// S5 dead-end filling. All share one trace syntax (a list of cell names) and
// differ in the order in which they visit cells. The exact rules, inferred from
// the appendix examples, are written down in docs/tasks.md ("Maze"):
//   - neighbours are tried in the question's listing order N, E, S, W;
//   - S1 lists cells in dequeue order and stops after dequeuing the goal;
//   - S2 lists every cell the walker enters (forward moves and backtracking
//     moves) and stops on entering the goal;
//   - S3 pops the open cell with the smallest f = g + Manhattan distance to the
//     goal, ties by smaller g; stops after popping the goal;
//   - S4 alternates one dequeue from the start side and one from the goal side
//     (start side first); when an expanded cell has a neighbour already seen by
//     the other side, that neighbour is listed last and the search stops;
//   - S5 sweeps the grid in row-major order, filling every non-start, non-goal
//     cell with at most one unfilled open neighbour at the moment it is
//     scanned, and repeats sweeps until one fills nothing.
// Every solver assumes a perfect maze (Maze::is_perfect()).
#pragma once
#include <array>
#include <string>
#include <vector>

#include "tasks/maze.h"

namespace lol::tasks {

/// Strategy numbers (the paper's S1..S5).
enum MazeStrategy : int { kMazeBfs = 1, kMazeDfs = 2, kMazeAStar = 3, kMazeBidirectional = 4, kMazeDeadEnd = 5 };
inline constexpr int kMazeStrategyCount = 5;

/// The neutral label that replaces the strategy description at evaluation time
/// when the routing path is forced (paper section 4.1.3).
inline constexpr const char* kMazeFillerLabel = "[ ... ]";

/// "BFS", "DFS walk", "A*", "Bidirectional BFS", "Dead-end filling".
/// Throws lol::InputError for a strategy outside 1..5.
const char* maze_strategy_name(int strategy);

/// The strategy description in brackets (C.4.1), e.g. "[ r1c1 r1c2 r2c1 r1c3 r2c2 r3c1 ]"
/// for BFS. Each is a fixed six-cell icon of how the strategy moves across an open
/// grid; for a size-N grid the paper's 8x8 labels are rewritten with row/column 8
/// replaced by N (only bidirectional BFS and dead-end filling use it):
///   S1 [ r1c1 r1c2 r2c1 r1c3 r2c2 r3c1 ]   S2 [ r1c1 r1c2 r1c3 r1c4 r1c3 r1c2 ]
///   S3 [ r1c1 r1c2 r2c2 r2c3 r3c3 r3c4 ]   S4 [ r1c1 rNcN r1c2 rNc(N-1) r1c3 rNc(N-2) ]
///   S5 [ rNc1 rNc2 rNc3 r1cN r2cN r3cN ]
/// Throws lol::InputError for a strategy outside 1..5 or a size outside 4..16.
std::string maze_strategy_label(int strategy, int size);

/// The result of running one strategy on one maze.
struct MazeRun {
  bool ok = false;         ///< false: the maze is rejected for this strategy (see reason)
  std::string reason;      ///< why it was rejected; empty when ok
  std::vector<int> trace;  ///< visited cells (cell indices) in trace order
  std::vector<int> path;   ///< the answer: start-to-goal path recovered by this strategy
};

/// Neighbour order used by the uninformed searches. The paper's is
/// kMazeDirOrder (N E S W); other orders exist for tests of the verifier.
using MazeDirOrder = std::array<MazeDir, 4>;

/// How A* treats open cells of equal priority.
enum class AStarTies {
  /// Reject the maze when the rules do not fix the pop order: when two open
  /// cells share the smallest (f, g), or when the smallest-(f, g) cell is not also
  /// the earliest-discovered cell of smallest f (the appendix example is
  /// consistent with both "smaller g first" and "first discovered first", so a
  /// trace must not depend on which one is meant).
  kReject,
  /// Never reject: order by (f, g, discovery order). Used to name the
  /// canonical A* trace of a maze that kReject would reject.
  kBreak,
};

/// S1 BFS: FIFO queue from the start; lists cells as they are dequeued,
/// stopping after the goal. Never rejects a perfect maze.
MazeRun maze_bfs(const Maze& maze, const MazeDirOrder& order = kMazeDirOrder);

/// S2 DFS walk: recursive depth-first search from the start. Lists every cell
/// entered, both when advancing to an unvisited neighbour (first in `order`)
/// and when stepping back to the previous cell from a cell without unvisited
/// neighbours; stops on entering the goal.
MazeRun maze_dfs(const Maze& maze, const MazeDirOrder& order = kMazeDirOrder);

/// S3 A*: g = steps from the start, h = Manhattan distance to the goal; pops
/// the open cell with the smallest f = g + h, ties by smaller g (see AStarTies),
/// discovering neighbours in N E S W order; lists popped cells, stopping after
/// the goal.
MazeRun maze_astar(const Maze& maze, AStarTies ties = AStarTies::kReject);

/// S4 bidirectional BFS: two FIFO searches, from the start (side 0) and from the
/// goal (side 1). Steps alternate sides, side 0 first; a step dequeues one cell
/// of its side, lists it, and scans its neighbours in `order`: a neighbour
/// already seen by the other side is listed and ends the search (the meeting
/// cell); an unseen one is marked seen by this side and queued.
MazeRun maze_bidirectional(const Maze& maze, const MazeDirOrder& order = kMazeDirOrder);

/// S5 dead-end filling: row-major sweeps over the grid; a scanned cell that is
/// not the start or the goal, not yet filled, and has at most one unfilled open
/// neighbour is filled and listed at once (so it can make later cells of the same
/// sweep dead ends). Sweeps repeat until one fills nothing; the unfilled cells
/// are then the solution path.
MazeRun maze_dead_end_filling(const Maze& maze);

/// Dispatches to the solver of `strategy` (1..5) with the paper's neighbour
/// order. Throws lol::InputError for a strategy outside 1..5.
MazeRun maze_run(const Maze& maze, int strategy, AStarTies ties = AStarTies::kReject);

}  // namespace lol::tasks
