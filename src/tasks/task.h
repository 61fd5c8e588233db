// Common types of the synthetic reasoning tasks (paper Appendix C.3 sudoku, C.4 maze).
//
// Every example is one whitespace-tokenized sequence
//   Q : <question> [ <label> ] R : <trace> A : <answer> <eos>
// The question plus the bracketed label form the prompt (window 0 of the routed
// core); the label tokens are router-only (visible to the router, masked from
// attention); the loss covers the trace and the answer (paper C.3, C.4).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lol::tasks {

/// One (puzzle, strategy) sequence, split into its parts. Every part is a
/// space-separated token string exactly as in the paper's examples.
struct Example {
  std::string question;  ///< "Q : ... " up to (not including) the "[" of the label
  std::string label;     ///< "[ S1 ]" (sudoku) or "[ r1c1 r1c2 ... ]" (maze), brackets included
  std::string trace;     ///< "R : ..." (marker included)
  std::string answer;    ///< "A : ... <eos>" (marker and <eos> included)
  int strategy = 0;      ///< 1..5
  uint64_t puzzle_id = 0;  ///< hash of the puzzle; all strategies of a puzzle share it

  /// question + " " + label + " " + trace + " " + answer.
  std::string text() const;
};

/// Per-token roles of a tokenized example.
struct TokenizedExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> loss_mask;    ///< 1 on trace and answer tokens (incl. "R", ":", "A", <eos>)
  std::vector<uint8_t> router_only;  ///< 1 on the label tokens between and including "[" and "]"
  int32_t prompt_len = 0;            ///< question + label tokens (= window 0)
  int strategy = 0;
  uint64_t puzzle_id = 0;
};

/// What a verifier says about a generated "R : ... A : ... <eos>" continuation
/// (paper Figure 14 / C.3 metrics).
struct Verdict {
  int followed_strategy = 0;   ///< 1..5 whose exact trace this is, 0 if none
  bool strategy_as_requested = false;  ///< the trace uses the requested strategy's syntax/order
  bool trace_legal = false;    ///< every step legal and the trace ends at the true solution
  bool rule_faithful = false;  ///< legal and every claimed deduction valid
  bool answer_correct = false; ///< the answer equals the true solution
  double padding = 0.0;        ///< share of tokens before <eos> that are <pad>
  std::string error;           ///< first problem found, empty when all is well
};

/// Counts of verdicts (docs/tasks.md "Verdict fields"). `trajectory` counts the paper's
/// correct trajectories (4.1.3: "every step is legal, follows the requested strategy's
/// syntax and rules, and leads to the correct solution"): as requested, legal,
/// rule-faithful and the answer correct.
struct VerdictTally {
  int64_t n = 0;
  int64_t as_requested = 0, legal = 0, faithful = 0, correct = 0, trajectory = 0;
  double padding_sum = 0.0;
  void add(const Verdict& v);
};

/// Splits on ASCII whitespace.
std::vector<std::string> split_tokens(const std::string& s);

}  // namespace lol::tasks
