// Configuration of the looped (depth-recurrent, Huginn-style; Geiping et al.) baseline
// (paper 4.3.1): a prelude, a recurrent block of n_recur layers applied R times with
// input injection, and a coda.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "baselines/shape.h"

namespace lol::baselines {

/// config.json of a looped model ("architecture": "looped"). Attention is full causal
/// per document in every layer.
struct LoopedConfig : TransformerShape {
  int64_t n_prelude = 1;      ///< blocks before the recurrent block
  int64_t n_recur = 1;        ///< k: blocks of the recurrent block
  int64_t n_coda = 1;         ///< blocks after it
  int64_t recurrence = 4;     ///< R: mean iterations in training, default iterations at inference
  /// "fixed": R iterations in every training step; "poisson_lognormal" (Huginn): per
  /// step tau ~ N(log(R-1) - sigma^2/2, sigma), R' = 1 + Poisson(exp(tau)), capped at
  /// max_recurrence (E[R'] = R before the cap).
  std::string recurrence_sampling = "fixed";
  double recurrence_sigma = 0.5;
  int64_t max_recurrence = 0;  ///< cap of sampled R' (0 = 4 R)
  /// Iterations that receive gradients (Huginn's truncated backpropagation: the last
  /// backprop_depth iterations); 0 = all.
  int64_t backprop_depth = 0;
  /// Initial recurrent state s_0: "random" (N(0, state_init_std^2) per token, Huginn)
  /// or "zero".
  std::string state_init = "random";
  double state_init_std = 0;   ///< 0 = sqrt(2 / (5 d_model))

  int64_t effective_max_recurrence() const { return max_recurrence > 0 ? max_recurrence : 4 * recurrence; }
  double effective_state_std() const;
  /// Strict parse (unknown keys, invalid values -> InputError naming `where` and the field).
  static LoopedConfig from_json(const nlohmann::json& j, const std::string& where);
  nlohmann::json to_json() const;
  void validate(const std::string& where) const;

  /// Expected iterations of a training step under recurrence_sampling: {E[R'], E[R_g]}
  /// with R' = min(1 + Poisson(exp(tau)), effective_max_recurrence()),
  /// tau ~ N(log(R - 1) - sigma^2 / 2, sigma) (Huginn), and R_g = min(backprop_depth, R')
  /// the iterations that receive gradients (R' when backprop_depth = 0). "fixed" (or
  /// R = 1): exactly {R, R_g}. Computed by quadrature over tau (2001 points on
  /// +-8 sigma) with the Poisson probabilities in log space; the cap makes E[R'] < R.
  /// lol compare plans a sampled model's steps with these (its FLOPs meet the budget in
  /// expectation; the steps' own FLOPs are counted from the iterations they ran).
  std::pair<double, double> expected_iterations() const;
};

}  // namespace lol::baselines
