// Test-time depth (issue 6): running the routed core with more or fewer routed
// depths than the model was trained with (paper section 3.3 grows D during
// training; this extends the same idea to inference).
//
// Rule for a run with R routed depths on a model trained with T (all 1-based l):
//  - window offsets: run-time depth l uses delta_l = ((l-1) S) mod W (section 3.2.1),
//    i.e. the strided layout simply continues past the trained depths;
//  - routing paths are indexed by the run-time depth (entries past the path's depth
//    leave the router to decide);
//  - depth-specific parameters (FiLM gamma/beta, the window-0 router vector e^(l) and,
//    with untied routers, the router itself) come from trained depth param[l-1]:
//      stretch (default): param[i] = round(i (T-1) / (R-1)) (0-based i; 0 when R == 1):
//                         the first and last run-time depths keep the first and last
//                         trained parameters and the others are spread evenly;
//      cycle:             param[i] = i mod T (looped-transformer style repetition).
//    With R == T both rules are the identity, so the run equals the trained model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lol::inference {

enum class DepthRule { kStretch, kCycle };

/// "stretch" or "cycle". Throws InputError naming `where` otherwise.
DepthRule parse_depth_rule(const std::string& name, const std::string& where = "--depth-rule");
std::string depth_rule_name(DepthRule rule);

/// Maps each run-time routed depth to the trained depth whose parameters it uses.
struct DepthPlan {
  std::vector<int64_t> param;  ///< [R] 0-based trained depth index per 0-based run-time depth
  int64_t size() const { return int64_t(param.size()); }
};

/// Builds the plan for `run` routed depths over `trained` trained depths (see above).
/// Throws InputError when run < 0, or run > 0 while trained == 0.
DepthPlan make_depth_plan(int64_t trained, int64_t run, DepthRule rule);

}  // namespace lol::inference
