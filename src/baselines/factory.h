// Construction and loading of the baseline models for the trainer's model factory
// (training/model_factory.cpp): architectures "dense", "looped", "moe".
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "training/trainable.h"

namespace lol::baselines {

/// Architecture names handled here, comma separated (for error messages).
const char* baseline_architectures();

/// A freshly initialised baseline for a run config's "model" section, or nullptr when
/// `arch` is not a baseline. `vocab_size` / `max_seq_len` fill those fields when absent
/// (max_seq_len: max(1024, the training length)); a config smaller than the dataset's
/// vocabulary or the training length is an InputError naming `where` and the field.
std::unique_ptr<training::TrainableModel> make_baseline(const std::string& arch, const nlohmann::json& section,
                                                        const std::string& where, int64_t vocab_size,
                                                        int64_t max_seq_len, uint64_t seed);

/// Loads a plain model directory written by a baseline's save(), or nullptr when
/// `arch` is not a baseline.
std::unique_ptr<training::TrainableModel> load_baseline(const std::string& arch, const std::string& dir);

}  // namespace lol::baselines
