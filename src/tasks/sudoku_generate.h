// Sudoku puzzle and dataset generation (paper Appendix C.3): complete grids by
// randomized depth-first filling, puzzles keeping 30..36 givens that every
// strategy solves, and one Example per (puzzle, strategy).
//
// Determinism: everything is driven by std::mt19937_64 through the portable
// helpers of sudoku_random.h, so a seed gives the same data on every platform and
// for every thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "tasks/sudoku_grid.h"
#include "tasks/task.h"

namespace lol::tasks {

/// A complete valid grid: cells r1c1..r9c9 filled in row-major order by depth-first
/// search; on entering a cell the digits 1..9 are shuffled uniformly and tried in
/// that order, skipping those its row, column or box already holds.
SudokuGrid generate_sudoku_grid(std::mt19937_64& rng);

/// Blanks cells of a complete `solution` in a uniformly shuffled order, keeping a
/// blank only when the puzzle stays solvable by naked singles (S1, hence S4) and by
/// crosshatching (S3, hence S2); stops as soon as `target_givens` givens remain.
/// Returns nullopt when one pass over the cells cannot get down to the target.
/// Throws lol::InputError when `solution` is not a complete valid grid or
/// target_givens is outside 17..81.
std::optional<SudokuGrid> blank_sudoku_cells(std::mt19937_64& rng, const SudokuGrid& solution,
                                             int target_givens);

/// Draws the number of givens uniformly in [min_givens, max_givens] (paper: 30..36)
/// and tries up to `attempts` blanking passes on `solution`; nullopt when all fail.
std::optional<SudokuGrid> make_sudoku_puzzle(std::mt19937_64& rng, const SudokuGrid& solution,
                                             int min_givens = 30, int max_givens = 36, int attempts = 8);

struct SudokuDatasetOptions {
  int min_givens = 30;   ///< inclusive (paper C.3: 30)
  int max_givens = 36;   ///< inclusive (paper C.3: 36)
  /// Reject puzzles whose longest sequence (prompt + trace + answer tokens) exceeds
  /// this; 0 keeps all. Only S5 traces get long.
  size_t max_sequence_tokens = 0;
  int threads = 1;       ///< worker threads; the output does not depend on it
};

/// One Example per strategy 1..5 for a puzzle every strategy solves: question
/// "Q : ...", label "[ Sx ]", trace "R : ...", answer "A : ... <eos>", puzzle_id =
/// sudoku_hash(puzzle). Throws lol::InputError when some strategy fails on it.
std::vector<Example> make_sudoku_examples(const SudokuGrid& puzzle);

/// A random puzzle (with its solution) every strategy solves, drawn from `rng`:
/// the number of givens is drawn first, then grids are generated until one can be
/// blanked down to it.
SudokuGrid generate_sudoku_puzzle(std::mt19937_64& rng, const SudokuDatasetOptions& opt = {});

/// `n_puzzles` distinct puzzles, 5 examples each (puzzle-major, strategies 1..5).
/// Candidate k is drawn from std::mt19937_64(splitmix64(seed + k)); candidates are
/// taken in k order, skipping puzzles seen before (deduplication by puzzle) and
/// those over max_sequence_tokens. Deterministic in (n_puzzles, seed, givens range,
/// max_sequence_tokens), whatever opt.threads is.
std::vector<Example> generate_sudoku_dataset(size_t n_puzzles, uint64_t seed,
                                             const SudokuDatasetOptions& opt = {});

/// Label text "[ S1 ]".."[ S5 ]"; throws lol::InputError outside 1..5.
std::string sudoku_label(int strategy);
/// The neutral evaluation filler "[ ... ]" (paper 4.1.3).
inline constexpr const char* kSudokuFillerLabel = "[ ... ]";

}  // namespace lol::tasks
