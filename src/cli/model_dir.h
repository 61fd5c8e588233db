// Helpers shared by CLI commands that take a model.
#pragma once
#include <string>

#include "analysis/strategy_eval.h"

namespace lol::cli {

/// A checkpoint directory (has config.json), or a training run directory whose
/// `latest` file names the newest checkpoint. Throws InputError otherwise.
std::string resolve_model_dir(const std::string& dir);

/// The generator used for evaluations: cached batched decoding (src/inference) or,
/// with `full_recompute`, the slow reference.
analysis::GenerateFn default_generator(bool full_recompute);

}  // namespace lol::cli
