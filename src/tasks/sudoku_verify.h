// Verifier of generated sudoku traces (paper Appendix C.3 metrics, Figure 14).
//
// A continuation "R : <steps> A : <81 digits> <eos>" is judged against the puzzle of
// its question. The rules behind each flag (docs/tasks.md, "Sudoku"):
//   * every step is classified by its syntax; the five strategies' step syntaxes are
//     disjoint, so a trace has the syntax of strategy s when all its steps do;
//   * followed_strategy      the trace equals, token for token, the trace strategy s
//                            produces for this puzzle (0 when no strategy does);
//   * strategy_as_requested  the trace is non-empty and all steps use the requested
//                            strategy's syntax;
//   * trace_legal            the trace has one strategy's syntax, every placement
//                            goes into a non-given cell (blank for S1-S4) without
//                            clashing with a digit of its row, column or box, and the
//                            grid after the last step is the solution;
//   * rule_faithful          legal, and every claimed deduction holds in the grid of
//                            its step (single candidate, hidden single, peer reduced
//                            to the listed digit, S5 check failed / passed, dead end);
//   * answer_correct         exactly 81 digits after "A :" equal to the solution;
//   * padding                share of "<pad>" among the tokens before the first
//                            "<eos>" (all tokens when there is none).
// "<pad>" tokens are dropped before parsing; anything after the first "<eos>" is
// ignored. Garbage never throws: it just fails the checks.
#pragma once
#include <string>
#include <vector>

#include "tasks/sudoku_grid.h"
#include "tasks/task.h"

namespace lol::tasks {

/// Strategy 1..5 whose syntax a single step's tokens have, 0 when none.
int sudoku_step_syntax(const std::vector<std::string>& step_tokens);

/// Strategy 1..5 whose exact trace `trace` is for `puzzle`, 0 when none. `trace` is
/// "R : ..." (the "R :" marker, "<pad>" tokens and anything from "A" on are ignored).
int identify_sudoku_strategy(const SudokuGrid& puzzle, const std::string& trace);

/// Judges `generated` (the continuation after the question and label, starting at
/// "R :") for `question` ("Q : <81 cells> [ Sx ]" or "... [ ... ]"; the label is
/// not read) and `requested_strategy` (1..5). Throws lol::InputError when the
/// question is malformed, its puzzle does not have exactly one solution, or the
/// strategy is not 1..5.
Verdict verify_sudoku(const std::string& question, int requested_strategy, const std::string& generated);

/// Same with the puzzle and its (unique) solution already known.
Verdict verify_sudoku(const SudokuGrid& puzzle, const SudokuGrid& solution, int requested_strategy,
                      const std::string& generated);

}  // namespace lol::tasks
