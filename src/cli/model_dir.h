// Helpers shared by CLI commands that take a model.
#pragma once
#include <string>

#include "analysis/strategy_eval.h"

namespace lol::cli {

/// A checkpoint directory (has config.json), or a training run directory whose
/// `latest` file names the newest checkpoint. Throws InputError otherwise.
std::string resolve_model_dir(const std::string& dir);

/// RoutingPath::load(file), checked against the model it will steer: the same
/// library_size, and no more routed depths than the model runs (`active_depth`; 0 skips
/// this check, for commands that choose the depth themselves).
/// Throws InputError naming the file, the field and the model's value.
RoutingPath load_routing_path_for(const std::string& file, int64_t library_size, int64_t active_depth);

/// The generator used for evaluations: the exact full-recompute reference, or with
/// `cached` the KV-cached batched decoder of src/inference (experimental, issue 6).
analysis::GenerateFn default_generator(bool cached);

}  // namespace lol::cli
