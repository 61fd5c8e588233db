#include "inference/depth_plan.h"

#include "util/error.h"

namespace lol::inference {

DepthRule parse_depth_rule(const std::string& name, const std::string& where) {
  if (name == "stretch") return DepthRule::kStretch;
  if (name == "cycle") return DepthRule::kCycle;
  throw InputError(where + ": unknown depth rule '" + name + "' (expected stretch or cycle)");
}

std::string depth_rule_name(DepthRule rule) { return rule == DepthRule::kCycle ? "cycle" : "stretch"; }

DepthPlan make_depth_plan(int64_t trained, int64_t run, DepthRule rule) {
  if (run < 0) throw InputError("routed depth " + std::to_string(run) + ": expected >= 0");
  if (run > 0 && trained <= 0)
    throw InputError("routed depth " + std::to_string(run) + " requested but the model has no trained routed depth");
  DepthPlan p;
  p.param.resize(run);
  for (int64_t i = 0; i < run; ++i) {
    if (rule == DepthRule::kCycle) {
      p.param[i] = i % trained;
    } else {
      // round(i (T-1) / (R-1)), halves rounded up, in exact integer arithmetic.
      p.param[i] = run == 1 ? 0 : (2 * i * (trained - 1) + (run - 1)) / (2 * (run - 1));
    }
  }
  return p;
}

}  // namespace lol::inference
