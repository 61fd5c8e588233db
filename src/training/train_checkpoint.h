// Training checkpoints. Layout of a run directory:
//   RUN/run.json                     resolved run configuration
//   RUN/metrics.jsonl                one JSON object per logged step / evaluation
//   RUN/latest                       "checkpoints/step-000100" (replaced atomically)
//   RUN/checkpoints/step-000100/     config.json + model.safetensors (a plain model
//                                    directory: load_lol reads it), optimizer.safetensors,
//                                    trainer_state.json, run.json, and for text data
//                                    the training tokenizer (tokenizer.json,
//                                    tokenizer_config.json)
// A checkpoint is written into "checkpoints/.tmp-step-000100", fsync'ed and renamed,
// so a crash leaves either no checkpoint or a complete one.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/optimizer.h"
#include "training/trainable.h"

namespace lol::training {

/// Everything besides weights and optimizer moments needed to resume bit-exactly.
struct TrainerState {
  int64_t step = 0;               ///< optimizer steps completed
  int64_t tokens = 0;             ///< input tokens consumed (non-padding)
  double flops = 0;               ///< training FLOPs spent (at the depths actually run)
  double elapsed = 0;             ///< wall seconds spent training (all sessions)
  int64_t active_depth = -1;      ///< depth run at the last step (-1: not growable)
  nlohmann::json data_position;   ///< Batcher::position()
  std::string rng_cpu;            ///< default CPU generator state, hex
  std::string rng_device;         ///< default generator state of the training device (CUDA), hex; "" on CPU
  int64_t nonfinite_skipped = 0;  ///< steps skipped for a non-finite loss
  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& j, const std::string& where);
};

/// "step-000100".
std::string checkpoint_name(int64_t step);

/// Writes checkpoint `state.step` into run_dir/checkpoints, points run_dir/latest at
/// it and deletes the oldest checkpoints beyond `keep_last`. `extra` goes into the
/// model's config.json ("extra", e.g. the dataset vocabulary); `files` (name, bytes)
/// are written into the checkpoint too (the training tokenizer's tokenizer.json and
/// tokenizer_config.json, so that a checkpoint names the tokenizer it was trained with).
/// Returns its path.
std::string save_checkpoint(const std::string& run_dir, const TrainableModel& model, const Optimizer& opt,
                            const TrainerState& state, const nlohmann::json& run_config,
                            const nlohmann::json& extra, int64_t keep_last,
                            const std::vector<std::pair<std::string, std::string>>& files = {});

/// A checkpoint directory from either a checkpoint directory or a run directory: the
/// one its `latest` names or, when `latest` is missing (a process killed between
/// installing its first checkpoint and writing `latest`), the newest complete
/// checkpoints/step-*. Throws InputError naming the path when neither.
std::string resolve_checkpoint(const std::string& dir);

/// Loads model weights/buffers, optimizer state and the trainer state. Throws
/// InputError naming the file and field/tensor.
TrainerState load_checkpoint(const std::string& ckpt_dir, TrainableModel& model, Optimizer& opt);

/// Checkpoint directories of a run, oldest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);

/// Default-generator state of `device` as hex, and back (bit-exact resume of router noise).
std::string rng_state_hex(const c10::Device& device);
void set_rng_state_hex(const c10::Device& device, const std::string& hex, const std::string& where);

}  // namespace lol::training
