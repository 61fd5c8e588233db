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
  int64_t step = 0;
  double lm_loss = 0, gate_mean = 0, lr = 0, grad_norm = 0;
  std::vector<double> layer_sigma;  ///< [n_layers] mean sigma over the step's samples
};

/// Trains `model` on `train` (samples drawn without replacement, reshuffled each epoch
/// from `seed`). `on_log` is called every log_every steps and at the last step.
/// Returns the log of the last step. Throws InputError for empty data or bad options.
TrainLog train_layerroute(LayerRouteTrainable& model, const std::vector<Example>& train, const TrainOptions& opt,
                          const std::function<void(const TrainLog&)>& on_log = {});

nlohmann::json to_json(const TrainLog& l);
nlohmann::json to_json(const TrainOptions& o);

}  // namespace lol::layerroute
