// The five sudoku solving strategies of the LoL paper (Appendix C.3, Table 3; the
// exact rules are inferred from the C.3.1 examples and written down in
// docs/tasks.md, section "Sudoku"). Each solver returns the exact step list of the
// trace ("R : <step> ; <step> ; ... "), bit for bit what the dataset contains.
//
//   S1 naked singles   "r1c6 = { 5 }"             sweeps r1c1..r9c9, fills at once
//   S2 hidden singles  "row6 1 -> r6c1"           sweeps rows, columns, boxes x digits
//   S3 crosshatching   "1 box4 -> r6c1"           sweeps digits x boxes
//   S4 propagation     "set r1c6 = 5 : r3c6 -> { 9 } r8c6 -> { 1 }"   FIFO queue
//   S5 backtracking    "r1c1 = 5 x", "r1c1 = 6", "r7c4 back"  row-major DFS with a check
//
// Candidates are always the plain ones: digits not present among a cell's 20 peers.
// Every solver reports solved = false (and no step) for an inconsistent puzzle, one
// holding a digit twice in a row, column or box.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "tasks/sudoku_grid.h"

namespace lol::tasks {

constexpr int kNumSudokuStrategies = 5;

/// Result of running one strategy on a puzzle.
struct SudokuTrace {
  bool solved = false;             ///< the strategy filled every cell
  std::vector<std::string> steps;  ///< step texts, tokens separated by single spaces
  SudokuGrid grid{};               ///< final grid (the solution when solved)
};

/// "naked singles", "hidden singles", "crosshatching", "propagation", "backtracking"
/// for 1..5; throws lol::InputError otherwise.
const std::string& sudoku_strategy_name(int strategy);

/// S1 naked singles. Rounds; each round visits the blank cells r1c1..r9c9 in
/// row-major order and fills a cell as soon as it has exactly one candidate (later
/// cells of the same round see it). Stops when the grid is full; fails (solved =
/// false) when a whole round fills nothing.
SudokuTrace solve_naked_singles(const SudokuGrid& puzzle);

/// S2 hidden singles. Rounds; each round visits units row1..row9, col1..col9,
/// box1..box9 and, in each, digits 1..9 missing from the unit; when exactly one
/// blank cell of the unit has the digit as a candidate it is filled at once.
SudokuTrace solve_hidden_singles(const SudokuGrid& puzzle);

/// S3 crosshatching (box-digit hidden singles, "d boxN -> cell"). Rounds; each round
/// visits digits 1..9 and, for each, box1..box9; a digit missing from the box with
/// exactly one possible blank cell there is filled at once.
SudokuTrace solve_crosshatching(const SudokuGrid& puzzle);

/// S4 propagation. Queue starts with the cells having one candidate, row-major.
/// Popping a cell sets its digit, removes it from its blank peers' candidates and
/// appends (row-major) the peers left with exactly one candidate that are not
/// queued yet; the step lists exactly those peers. Fails when the queue empties early.
SudokuTrace solve_propagation(const SudokuGrid& puzzle);

/// S5 backtracking. Depth-first over the blank cells of the puzzle in row-major
/// order; a cell tries its candidates (plain, at the time it is entered) in ascending
/// order. A try is rejected ("= d x") when sudoku_forward_check fails after the
/// placement; an accepted try ("= d") recurses into the next blank cell; a cell whose
/// tries are exhausted emits "rXcY back" and returns to the previous cell. Stops at
/// the first solution. `max_steps` > 0 abandons (solved = false) longer traces.
SudokuTrace solve_backtracking(const SudokuGrid& puzzle, size_t max_steps = 0);

/// Dispatch on strategy 1..5; throws lol::InputError on another number.
SudokuTrace solve_sudoku_strategy(const SudokuGrid& puzzle, int strategy, size_t max_steps = 0);

/// The S5 check on a grid right after a placement (false for an inconsistent grid):
/// every blank cell keeps at least
/// one candidate, and every digit missing from a row, column or box still has at
/// least one blank cell there that allows it.
bool sudoku_forward_check(const SudokuGrid& g);

/// "R : s1 ; s2 ; ... ; sn" (just "R :" for no step).
std::string sudoku_trace_text(const std::vector<std::string>& steps);

/// Fast tests used while blanking cells: true when naked singles (S1, and so S4) /
/// crosshatching (S3) / hidden singles (S2) fill the whole grid; same answer as
/// `solve_*(p).solved`, without text.
bool solvable_by_naked_singles(const SudokuGrid& puzzle);
bool solvable_by_crosshatching(const SudokuGrid& puzzle);
bool solvable_by_hidden_singles(const SudokuGrid& puzzle);

}  // namespace lol::tasks
