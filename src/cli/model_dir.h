// Helpers shared by CLI commands that take a model.
#pragma once
#include <string>

#include "analysis/strategy_eval.h"

namespace lol::cli {

/// A checkpoint directory (has config.json), or a training run directory whose
/// `latest` file names the newest checkpoint. Throws InputError otherwise.
std::string resolve_model_dir(const std::string& dir);

/// The generator used for evaluations: the exact full-recompute reference, or with
/// `cached` the KV-cached batched decoder of src/inference (experimental, issue 6).
analysis::GenerateFn default_generator(bool cached);

}  // namespace lol::cli
