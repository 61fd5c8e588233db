// FLOPs-matched comparison runner (`lol compare`, paper 4.2-4.3): trains several run
// configurations (any architecture) on the same data in the same order to the same
// training-FLOPs budget with the project's trainer, then writes a table (markdown and
// JSON) and a training-loss-vs-FLOPs plot with one curve per model.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/run_config.h"
#include "training/trainable.h"
#include "training/trainer.h"

namespace lol::baselines {

struct CompareOptions {
  std::vector<std::string> configs;     ///< run config JSON files (training/run_config.h); names = file stems
  double flops_budget = 0;              ///< training FLOPs per model (TrainableModel::train_flops_per_token)
  std::string data_dir;                 ///< dataset for every model (overrides data.dir)
  std::string out_dir;                  ///< runs go to out_dir/<name>, tables and plot to out_dir
  std::vector<std::string> overrides;   ///< "section.key=value" applied to every config (before data.dir)
  int64_t max_steps = 1000000;          ///< InputError when a budget needs more steps
  bool progress = true;
  /// Continue the comparison in out_dir (same configs, budget, data, overrides and
  /// max_steps, recorded in out_dir/compare_plan.json): finished models are not trained
  /// again, a stopped one resumes from its latest checkpoint (bit-identical), the rest start.
  bool resume = false;
  training::TrainHooks hooks;  ///< passed to every model's run_training (tests)
};

/// One trained model's row of the comparison table.
struct CompareEntry {
  std::string name, config, architecture;
  int64_t parameters = 0, active_parameters = 0;
  int64_t steps = 0, tokens = 0;
  double flops = 0;            ///< training FLOPs actually spent (metrics.jsonl)
  double planned_flops = 0;    ///< the plan's FLOPs for `steps` steps
  double train_loss = 0;       ///< mean training loss over the last 10% of logged steps
  double last_train_loss = 0;  ///< training loss of the last logged step
  double valid_loss = -1;      ///< final validation loss (-1 = no valid split)
  double wall_s = 0;
  nlohmann::json to_json() const;
};

/// Training FLOPs of the first `steps` optimizer steps of `cfg` (its data order,
/// micro-batches and, for growable models, the growing schedule of a `steps`-step run),
/// from model.train_flops_per_token and the real token counts of the batches.
class FlopsPlanner {
 public:
  /// Opens cfg.data (InputError naming the dataset for a bad one); `model` must be the
  /// configuration's model (its active depth is changed and restored).
  FlopsPlanner(const training::RunConfig& cfg, training::TrainableModel& model);
  /// FLOPs of a run of exactly `steps` steps.
  double run_flops(int64_t steps);
  /// Smallest step count whose run reaches `budget` FLOPs; InputError when that needs
  /// more than max_steps steps.
  int64_t steps_for(double budget, int64_t max_steps);

 private:
  struct StepShape {
    std::vector<std::pair<int64_t, int64_t>> micro;  ///< (row length T, non-padding tokens)
  };
  void extend(int64_t steps);
  double step_flops(int64_t step, int64_t total);
  const training::RunConfig& cfg_;
  training::TrainableModel& model_;
  std::vector<StepShape> steps_;
  std::function<training::TrainBatch()> next_;
  std::shared_ptr<void> state_;  ///< dataset split + batcher kept alive for next_
};

/// What run_compare did: the rows of the models trained so far, in config order.
struct CompareResult {
  std::vector<CompareEntry> entries;
  /// SIGINT/SIGTERM stopped a model's training (its checkpoint is saved; `entries`
  /// holds the models before it): continue with CompareOptions::resume.
  bool interrupted = false;
};

/// Runs the comparison (see CompareOptions). Every config must share the same "data"
/// section (after the overrides and data.dir) and train.seed, so that all models see
/// the same batches in the same order; otherwise InputError naming both configs.
/// Writes out_dir/compare_plan.json before training, then after every model
/// out_dir/compare.json and out_dir/compare.md, and at the end (when gnuplot is
/// available) out_dir/loss_vs_flops.png. Everything is checked before anything is
/// written. InputError for an out_dir holding a comparison or run (without resume),
/// or for resume with another plan (naming the field) or none.
CompareResult run_compare(const CompareOptions& opt);

/// Markdown table of the entries (name, architecture, parameters, active parameters,
/// steps, tokens, training FLOPs, train loss, validation loss, wall time).
std::string compare_markdown(const std::vector<CompareEntry>& entries, double budget);

}  // namespace lol::baselines
