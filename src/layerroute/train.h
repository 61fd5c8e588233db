// Training loop of LayerRoute (paper 3.3 and 4): only gates + LoRA are updated with
// the project's AdamW (training/optimizer.h, optim.type "adamw"), its cosine schedule
// (training/schedule.h) and global-norm clipping (training/train_step.h), on
//   L = L_LM + lambda * mean_i sigma_i
// with L_LM the mean cross entropy over the assistant tokens of the step (all
// micro-batches together) and the gate term averaged over the step's samples.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layerroute/data.h"
#include "layerroute/trainable.h"
#include "training/optimizer.h"
#include "training/train_checkpoint.h"

namespace lol::layerroute {

struct TrainOptions {
  int64_t steps = 3000;
  int64_t batch_size = 4;   ///< samples per micro-batch
  int64_t grad_accum = 4;   ///< micro-batches per optimizer step
  double lr = 2e-4;
  double beta1 = 0.9, beta2 = 0.999, weight_decay = 0.01;
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;  ///< cosine to lr * min_lr_ratio
  double clip = 1.0;
  double lambda = 1.0;        ///< gate regularisation weight
  uint64_t seed = 0;          ///< batch order (the model's init seeds are set at construction)
  int64_t log_every = 10;
  bool progress = true;       ///< progress bar on stderr

  /// Throws InputError naming `where` for out-of-range values.
  void validate(const std::string& where) const;
};

struct TrainLog {
  int64_t step = 0;           ///< optimizer steps completed
  bool interrupted = false;   ///< stopped by SIGINT/SIGTERM after `step` steps (a checkpoint was saved)
  double lm_loss = 0, gate_mean = 0, lr = 0, grad_norm = 0;
  std::vector<double> layer_sigma;  ///< [n_layers] mean sigma over the step's samples
};

/// Mid-run checkpoints of a training (docs/layerroute.md "Checkpoints and --resume").
/// The run is a function of the options, the data and the state after a step: the
/// batch order follows from the step (rows consumed = step * batch_size * grad_accum),
/// the schedule from the step, the rest is in the adapters and the optimizer moments,
/// so a resumed run is bit-identical to an uninterrupted one.
struct TrainCheckpoints {
  int64_t save_every = 0;  ///< save after every N-th step (0: only when stopped by a signal)
  /// Writes a checkpoint: the model's adapters, `opt`'s moments and `state`.
  std::function<void(const training::Optimizer& opt, const training::TrainerState& state)> save;
  /// Set to continue a run: restores the adapters into the model and the moments into
  /// `opt`, and returns the state of the checkpoint (its step < steps).
  std::function<training::TrainerState(training::Optimizer& opt)> resume;
};

/// Trains `model` on `train` (samples drawn without replacement, reshuffled each epoch
/// from `seed`). `on_log` is called every log_every steps and at the last step. With
/// `checkpoints`, SIGINT/SIGTERM stop the loop at the end of the step after saving a
/// checkpoint (the returned log has `interrupted` set; a second signal exits at once).
/// Returns the log of the last step. Throws InputError for empty data, bad options or a
/// checkpoint at or beyond `steps`; NonFiniteError for a non-finite loss or gradient.
TrainLog train_layerroute(LayerRouteTrainable& model, const std::vector<Example>& train, const TrainOptions& opt,
                          const std::function<void(const TrainLog&)>& on_log = {},
                          const TrainCheckpoints* checkpoints = nullptr);

nlohmann::json to_json(const TrainLog& l);
nlohmann::json to_json(const TrainOptions& o);

}  // namespace lol::layerroute
