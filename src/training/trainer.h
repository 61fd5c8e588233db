// The training loop of `lol train` (issue 4): model-agnostic (trainable.h), Muon +
// AdamW (optimizer.h), lr schedules and depth growing (schedule.h), gradient
// accumulation and clipping, evaluation, checkpoints with exact resume, SIGINT/
// SIGTERM handling, non-finite loss handling, metrics.jsonl and a progress bar.
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "dataset/shards.h"
#include "training/batcher.h"
#include "training/run_config.h"
#include "training/trainable.h"
#include "util/error.h"

namespace lol::training {

/// Training stopped because the loss (or gradient norm) was NaN/Inf. The message
/// names the step and the last good checkpoint. The CLI exits with status 3.
class NonFiniteLossError : public std::runtime_error {
 public:
  explicit NonFiniteLossError(const std::string& what) : std::runtime_error(what) {}
};

struct TrainHooks {
  /// Called before optimizer step `step` (0-based) is computed (tests use it to
  /// inject faults or signals).
  std::function<void(int64_t step, TrainableModel& model)> before_step;
  /// Called after a step completed (and its checkpoint, if any, was written).
  std::function<void(int64_t steps_done, TrainableModel& model)> after_step;
};

struct TrainResult {
  int64_t steps_done = 0;        ///< optimizer steps completed (all sessions)
  bool interrupted = false;      ///< stopped by SIGINT/SIGTERM (checkpoint written)
  bool already_done = false;     ///< resumed at step == train.steps: nothing was trained
  std::string last_checkpoint;   ///< "" if none was written
  double last_loss = 0;          ///< training loss of the last step
  double valid_loss = -1, valid_acc = -1;  ///< last evaluation (-1 = none)
};

/// Trains as configured. When the environment describes a data-parallel job
/// (WORLD_SIZE > 1, distributed/env.h) this process trains as one of its ranks:
/// disjoint data shards, gradients all-reduced before every optimizer step, rank 0
/// writing metrics and checkpoints (docs/distributed.md); a failed peer makes it throw
/// dist::DistributedError. `resume` = "" starts a new run in cfg.train.out (an existing
/// run there is an InputError: pass resume or choose another directory); otherwise a
/// run or checkpoint directory to continue from, so that N steps in one go and k
/// steps + resume + N - k steps give identical weights on CPU.
/// Throws InputError for bad configs/data, NonFiniteLossError (see above).
TrainResult run_training(const RunConfig& cfg, const std::string& resume = "", const TrainHooks& hooks = {});

struct EvalResult {
  double loss = 0;       ///< mean cross entropy per counted target
  double accuracy = 0;   ///< fraction of counted targets predicted by argmax
  int64_t targets = 0;
};

/// Evaluates on a split in eval mode (no router noise, no load counting), in data
/// order, over at most `max_batches` micro-batches (0 = the whole split). With a
/// data-parallel `shard` only that rank's part of the split is read (the caller sums
/// the ranks' results).
EvalResult evaluate(TrainableModel& model, const data::SplitData& split, const BatchLayout& layout,
                    int64_t max_batches, const torch::Device& device, Shard shard = {});

}  // namespace lol::training
