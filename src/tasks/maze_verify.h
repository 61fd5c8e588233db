// Verifiers for generated maze solutions (LoL paper Figure 14 metrics, applied to
// mazes as in Appendix C.4: "The evaluations reported in the maze experiment are
// the same as those in the sudoku experiment").
//
// Three nested levels of agreement between a trace and a strategy s:
//   legal     every step is a legal move of s's move model and the trace reaches
//             the solution (see check_maze_trace);
//   faithful  legal, and every step obeys s's rules up to choices the rules
//             leave free (neighbour order, A* ties among equal f);
//   exact     the trace equals s's canonical trace token for token
//             (identify_maze_strategy).
#pragma once
#include <string>
#include <vector>

#include "tasks/maze.h"
#include "tasks/maze_strategies.h"
#include "tasks/task.h"

namespace lol::tasks {

/// Legality and rule-faithfulness of one trace under one strategy.
struct MazeTraceCheck {
  bool legal = false;
  bool faithful = false;
  std::string error;  ///< first problem found, empty when faithful
};

/// Checks `trace` (cell indices of a perfect maze) against strategy s (1..5).
/// Move models (legal):
///   S1, S3  starts at the start; every later cell is new and shares a passage with
///           an earlier listed cell; ends at the goal.
///   S2      starts at the start; consecutive cells share a passage; ends at the goal.
///   S4      start, goal, then cells alternating start side / goal side, each new and
///           sharing a passage with an earlier cell of its side; the last cell is
///           the meeting cell: a neighbour of the cell before it, seen by the other
///           side (its root or a neighbour of one of its cells).
///   S5      distinct cells off the solution path, never the start or goal, and
///           every cell off the path is listed (the unfilled cells are the path).
/// Rules (faithful): S1 and each side of S4 dequeue in FIFO order (children of
/// earlier-listed cells first, any order among siblings), S4 stops at the first
/// expansion that sees the other side; S2 advances to an unvisited neighbour while
/// there is one, otherwise steps back, and stops on the first arrival at the goal;
/// S3 always pops a cell of minimal f = g + Manhattan distance; S5 fills only
/// cells with at most one unfilled open neighbour.
/// Throws lol::InputError for a strategy outside 1..5 or a cell index out of range.
MazeTraceCheck check_maze_trace(const Maze& maze, int strategy, const std::vector<int>& trace);

/// Bit s-1 is set for every strategy s whose canonical trace (the paper's rules,
/// A* ties broken by AStarTies::kBreak) equals `trace`.
unsigned maze_matching_strategies(const Maze& maze, const std::vector<int>& trace);

/// The strategy (1..5) whose canonical trace equals `trace`: `preferred` when it
/// matches, otherwise the lowest matching one; 0 when none matches.
int identify_maze_strategy(const Maze& maze, const std::vector<int>& trace, int preferred = 0);

/// A generated continuation split into its parts.
struct MazeContinuation {
  bool has_trace_marker = false;   ///< starts with "R :" (after dropping <pad>)
  bool has_answer_marker = false;  ///< the first "A" is followed by ":"
  bool has_eos = false;
  int tokens_before_eos = 0;        ///< all tokens before the first <eos> (or all tokens)
  int pad_tokens = 0;               ///< <pad> tokens among them
  std::vector<std::string> trace;   ///< tokens after "R :" (or from the start without it) up to the first "A" (<pad> dropped)
  std::vector<std::string> answer;  ///< tokens after that "A :" up to <eos> (<pad> dropped); empty without the marker
};

/// Splits a continuation "R : <trace> A : <answer> <eos> ...". Never throws;
/// tokens after the first <eos> are ignored, <pad> tokens are counted and dropped.
MazeContinuation parse_maze_continuation(const std::string& generated);

/// Converts cell names to indices; false (and `bad` = index of the first bad
/// token) when a token is not a cell of a size x size grid.
bool maze_tokens_to_cells(const std::vector<std::string>& tokens, int size, std::vector<int>& cells, size_t& bad);

/// Scores a generated continuation (text from "R :" on) for a question.
/// `question` is the prompt: "Q : ... start <cell> goal <cell>" optionally followed
/// by the strategy label or the filler "[ ... ]" (ignored). Verdict fields:
///   followed_strategy     identify_maze_strategy of the trace (requested one preferred)
///   strategy_as_requested followed_strategy == requested_strategy
///   trace_legal           legal under some strategy's move model (requested checked first)
///   rule_faithful         legal and faithful under some strategy
///   answer_correct        the answer lists exactly the solution path
///   padding               <pad> tokens / tokens before <eos> (0 when there are none)
///   error                 first problem: malformed markers, a token that is not a
///                         cell, the requested strategy's legality/rule violation, a
///                         wrong answer, a missing <eos>
/// A missing <eos>, <pad> tokens and garbage are reported, never thrown.
/// Throws lol::InputError when the question does not parse or is not a perfect
/// maze, or the requested strategy is outside 1..5.
Verdict verify_maze(const std::string& question, int requested_strategy, const std::string& generated);

}  // namespace lol::tasks
