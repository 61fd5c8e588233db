// LoL checkpoint directories: config.json (LoLConfig) + model.safetensors
// (names in lol/model.h). Writes go to a temporary directory renamed into place.
#pragma once
#include <string>

#include "lol/model.h"

namespace lol {

/// Writes `dir`/config.json and `dir`/model.safetensors. `extra_config` keys are
/// merged into config.json under "extra" (e.g. the task vocabulary).
void save_lol(const LoLModel& model, const std::string& dir, const nlohmann::json& extra = nullptr);

/// Loads a checkpoint directory (strict: see load_module). Throws InputError naming
/// the file and field/tensor. The model is put on `device`.
LoLModel load_lol(const std::string& dir, const torch::Device& device = torch::kCPU,
                  nlohmann::json* extra = nullptr);

}  // namespace lol
