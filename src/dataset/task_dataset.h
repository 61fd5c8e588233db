// Synthetic task datasets (paper Appendix C.3 sudoku, C.4 maze): one place that
// knows, per task, its vocabulary, tokenizer, verifier and generator, and writes
// `lol data` directories (JSONL records + token shards, see dataset/shards.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/task.h"
#include "tasks/vocab.h"

namespace lol::data {

/// Everything task-specific that training and evaluation need.
struct TaskSpec {
  std::string name;  ///< "maze" | "sudoku"
  int size = 0;      ///< maze side (0 for sudoku)
  tasks::Vocab vocab;
  std::string filler_label = "[ ... ]";  ///< neutral label used under forced routing (paper 4.1.3)
  std::function<tasks::TokenizedExample(const tasks::Example&)> tokenize;
  /// (question with label or filler, requested strategy 1..5, continuation from "R :") -> verdict.
  std::function<tasks::Verdict(const std::string&, int, const std::string&)> verify;
  static constexpr int kStrategies = 5;
  /// Short strategy names ("BFS", "naked singles", ...), index 1..5.
  std::string strategy_name(int s) const;
  /// Label of strategy s ("[ S1 ]" or the maze's cell description).
  std::string label(int s) const;
};

/// Throws InputError for an unknown task or a maze size outside 4..16.
TaskSpec task_spec(const std::string& task, int maze_size = 8);
/// Re-creates the spec of a dataset or checkpoint from its stored JSON
/// ({"task": ..., "size": ..., "vocab": {...}}); the stored vocabulary must equal
/// the built-in one (InputError naming `where` otherwise).
TaskSpec task_spec_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json task_spec_json(const TaskSpec& spec);

struct TaskDatasetOptions {
  std::string task = "maze";
  int64_t n_puzzles = 1000;
  int size = 8;                 ///< maze side
  uint64_t seed = 0;
  double valid_fraction = 0.1;  ///< share of puzzles held out (all strategies of a puzzle together)
  /// New puzzles for the test split, generated after the n_puzzles ones (so train and
  /// valid do not depend on it): the puzzles `lol eval-strategies` forces mode paths on,
  /// none of which the paths were extracted from (paper 4.1.3 "test on new grids").
  /// -1 = n_puzzles / 10 (at least 1); 0 = no test split.
  int64_t n_test = -1;
  int64_t max_tokens = 0;       ///< drop puzzles with a longer sequence (0 = keep all)
  int threads = 1;
  bool progress = true;
};

/// Generates, splits by puzzle, writes `out`/{train,valid,test}.jsonl, shards and
/// dataset.json. Returns the stats object stored in dataset.json.
nlohmann::json build_task_dataset(const TaskDatasetOptions& opt, const std::string& out);

/// One JSONL record.
nlohmann::json example_to_json(const tasks::Example& e, const std::string& task);
/// Inverse; throws InputError naming `where` (file:line) on a malformed record.
tasks::Example example_from_json(const nlohmann::json& j, const std::string& where);

struct VerifyReport {
  int64_t records = 0, passed = 0, failed = 0, malformed = 0;
  int64_t incomplete_puzzles = 0;  ///< puzzles without exactly one record of each strategy 1..5
  std::vector<std::string> messages;  ///< "file:line: problem", first 50
};

/// Checks every record of a JSONL file: the trace and answer must be exactly the
/// record's strategy, legal, rule-faithful and correct; and every puzzle (by
/// puzzle_id, else its question) has exactly one record of each of the five strategies
/// (paper C.3/C.4: "every trace becomes one sequence", "one per strategy for each
/// maze"). Never throws on bad lines.
VerifyReport verify_task_file(const std::string& path);

}  // namespace lol::data
