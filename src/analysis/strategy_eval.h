// Strategy control under forced routing (paper 4.1.3-4.1.4, Figures 3, 14, 18):
// for each test puzzle and each strategy s, replace the label with the neutral
// filler ("[ ... ]", one "..." per label token so that no position moves, see
// neutral_label), force s's mode path, generate greedily, and verify the trace;
// also generate unforced with the true label. Reports the confusion matrix
// (forced strategy x strategy the trace follows) and the paper's metrics.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/task_dataset.h"
#include "lol/model.h"

namespace lol::analysis {

/// One prompt for generation.
struct PromptSpec {
  std::vector<int64_t> tokens;
  std::vector<uint8_t> router_only;  ///< same length as tokens
  int64_t prompt_len = 0;            ///< prompt window (whole prompt = window 0)
};

/// Greedy batched generation: returns the generated ids per prompt (stopping after
/// `eos` inclusive or `max_new` tokens). `force` may be null.
using GenerateFn = std::function<std::vector<std::vector<int64_t>>(
    LoLModel&, const std::vector<PromptSpec>&, const RoutingPath* force, int64_t max_new, int64_t eos)>;

/// Reference generator: full recompute of the whole sequence per new token (slow; tests).
/// Throws NonFiniteError for NaN/Inf logits.
std::vector<std::vector<int64_t>> generate_full_recompute(LoLModel& model, const std::vector<PromptSpec>& prompts,
                                                          const RoutingPath* force, int64_t max_new, int64_t eos);

/// Counts over generated traces (tasks::VerdictTally), as percentages in JSON.
struct StrategyMetrics : tasks::VerdictTally {
  nlohmann::json to_json() const;
};

struct StrategyEvalResult {
  int n_strategies = 5;
  /// confusion[s][f]: forced strategy s (1..5) whose trace followed strategy f (0 = none, 1..5).
  std::vector<std::vector<int64_t>> confusion;
  std::map<int, StrategyMetrics> forced, unforced;  ///< by strategy
  std::vector<nlohmann::json> samples;              ///< a few generated examples
  std::string filler;                               ///< filler rule used (option or "length-matched")
  double seconds = 0;
  int64_t generated_tokens = 0;
  int64_t max_new_tokens = 0;      ///< the limit asked for (option, or n + n/4 + 8 for the longest reference n)
  /// Generations cut at the model's max_seq_len before their <eos> (judged as they are:
  /// no <eos>).
  int64_t capped_generations = 0;
  nlohmann::json to_json(const data::TaskSpec& spec) const;
  /// Human-readable tables (confusion matrix and metrics).
  std::string format(const data::TaskSpec& spec) const;
};

struct StrategyEvalOptions {
  int64_t n_puzzles = 200;
  int64_t batch_size = 32;
  int64_t max_new_tokens = 0;  ///< 0: n + n/4 + 8, n the longest reference continuation in the data
  bool unforced = true;
  bool progress = true;
  /// Neutral label under forcing, used verbatim; empty: neutral_label() (length-matched).
  std::string filler;
};

/// The neutral filler that replaces strategy s's label under forcing (paper 4.1.3):
/// "[", then the task's filler token ("...") once per token inside the true label,
/// then "]" — "[ ... ]" for sudoku's "[ S1 ]", eight tokens for a maze's
/// "[ r1c1 ... r3c1 ]". Label tokens are router-only but still take positions, so a
/// filler of another length would move every trace token's position relative to the
/// question (measured: on the 4x4 maze model of docs/results.md 1c, the 3-token filler
/// gives 43% strategy-as-requested, the length-matched one 90%).
/// Throws InputError when the task's label is not bracketed.
std::string neutral_label(const data::TaskSpec& spec, int strategy);

/// Evaluates on the puzzles of a JSONL file (records of `lol data`): the first
/// n_puzzles distinct puzzles; paths[s] is strategy s's mode path (1..5). Generation
/// stops at the model's max_seq_len: each generation gets min(max_new, max_seq_len - its own
/// prompt), rows of a batch with equal room generated together (counted in
/// capped_generations when reached without <eos>). Throws InputError
/// naming the file and line for a question outside the task's vocabulary or not a valid
/// puzzle (the task's verifier), and for a prompt (with its label or filler) that fills
/// max_seq_len, before anything is generated.
StrategyEvalResult evaluate_strategies(LoLModel& model, const data::TaskSpec& spec,
                                       const std::map<int, RoutingPath>& paths, const std::string& jsonl,
                                       const StrategyEvalOptions& opt, const GenerateFn& generate);

}  // namespace lol::analysis
