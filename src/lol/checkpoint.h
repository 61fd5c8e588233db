// LoL checkpoint directories: config.json (LoLConfig) + model.safetensors
// (names in lol/model.h). Writes go to a temporary directory renamed into place.
#pragma once
#include <string>

#include "lol/model.h"

namespace lol {

/// Writes `dir`/config.json and `dir`/model.safetensors. `extra_config` keys are
/// merged into config.json under "extra" (e.g. the task vocabulary).
void save_lol(const LoLModel& model, const std::string& dir, const nlohmann::json& extra = nullptr);

/// The routed depths a checkpoint was trained to run: `active_depth` of
/// `dir`/trainer_state.json when the checkpoint was saved while its core was still
/// growing (paper 3.3: a run whose growing phase had not ended), else `core_depth`
/// (no trainer_state.json, as in exported models; growth finished or off: -1).
/// Throws InputError naming the file and field when the value is outside [0, core_depth].
int64_t saved_active_depth(const std::string& dir, int64_t core_depth);

/// Loads a checkpoint directory (strict: see load_module). Throws InputError naming
/// the file and field/tensor. The model is put on `device` and runs
/// saved_active_depth(dir) routed depths, the depth its last training step ran (and
/// its logged validation loss was measured at); set_active_depth changes that.
LoLModel load_lol(const std::string& dir, const torch::Device& device = torch::kCPU,
                  nlohmann::json* extra = nullptr);

}  // namespace lol
