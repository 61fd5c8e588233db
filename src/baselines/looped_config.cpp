#include "baselines/looped_config.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/json_fields.h"

namespace lol::baselines {

std::pair<double, double> LoopedConfig::expected_iterations() const {
  const int64_t R = recurrence, cap = effective_max_recurrence();
  auto grad = [&](double r) { return backprop_depth > 0 ? std::min(double(backprop_depth), r) : r; };
  if (recurrence_sampling == "fixed" || R <= 1) return {double(R), grad(double(R))};
  const double s = recurrence_sigma, mu = std::log(double(R - 1)) - 0.5 * s * s;
  constexpr int kPoints = 2001;
  double weight_sum = 0, er = 0, eg = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double z = -8.0 + 16.0 * double(i) / double(kPoints - 1);
    const double w = std::exp(-0.5 * z * z);  // normal density up to a constant
    const double lambda = std::exp(mu + s * z), log_lambda = std::log(lambda);
    // R' = 1 + k for k < cap - 1, cap for the rest of the Poisson mass.
    double below = 0, r = 0, g = 0;
    for (int64_t k = 0; k + 1 < cap; ++k) {
      const double p = std::exp(-lambda + double(k) * log_lambda - std::lgamma(double(k) + 1.0));
      below += p;
      r += p * double(1 + k);
      g += p * grad(double(1 + k));
    }
    const double tail = std::max(0.0, 1.0 - below);
    r += tail * double(cap);
    g += tail * grad(double(cap));
    weight_sum += w;
    er += w * r;
    eg += w * g;
  }
  return {er / weight_sum, eg / weight_sum};
}

double LoopedConfig::effective_state_std() const {
  return state_init_std > 0 ? state_init_std : std::sqrt(2.0 / (5.0 * double(d_model)));
}

void LoopedConfig::validate(const std::string& w) const {
  using util::check_range;
  TransformerShape::validate(w);
  check_range(w, "n_prelude", n_prelude, 0, 4096);
  check_range(w, "n_recur", n_recur, 1, 4096);
  check_range(w, "n_coda", n_coda, 0, 4096);
  check_range(w, "recurrence", recurrence, 1, 4096);
  check_range(w, "max_recurrence", max_recurrence, 0, 65536);
  if (max_recurrence > 0) check_range(w, "max_recurrence", max_recurrence, recurrence, 65536);
  check_range(w, "backprop_depth", backprop_depth, 0, 65536);
  check_range(w, "recurrence_sigma", recurrence_sigma, 0.0, 10.0);
  check_range(w, "state_init_std", state_init_std, 0.0, 1e3);
  if (recurrence_sampling != "fixed" && recurrence_sampling != "poisson_lognormal")
    throw InputError(w + ": field 'recurrence_sampling' = \"" + recurrence_sampling +
                     "\": expected one of fixed, poisson_lognormal");
  if (state_init != "random" && state_init != "zero")
    throw InputError(w + ": field 'state_init' = \"" + state_init + "\": expected one of random, zero");
  const double r = double(std::max(recurrence, max_recurrence));
  util::check_parameter_estimate(w, "the blocks applied max(recurrence, max_recurrence) times, and the embeddings",
                                 (double(n_prelude + n_coda) + r * double(n_recur)) * block_parameter_estimate(1, ffn_hidden) +
                                     2.0 * double(vocab_size) * double(d_model) + r * 2.0 * double(d_model) * double(d_model));
}

LoopedConfig LoopedConfig::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  LoopedConfig c;
  f.get("architecture", std::string("looped"), {"looped"});
  c.read(f);
  f.get("n_prelude", c.n_prelude);
  f.get("n_recur", c.n_recur);
  f.get("n_coda", c.n_coda);
  f.get("recurrence", c.recurrence);
  f.get("recurrence_sampling", c.recurrence_sampling);
  f.get("recurrence_sigma", c.recurrence_sigma);
  f.get("max_recurrence", c.max_recurrence);
  f.get("backprop_depth", c.backprop_depth);
  f.get("state_init", c.state_init);
  f.get("state_init_std", c.state_init_std);
  f.reject_unknown();
  c.validate(w);
  return c;
}

nlohmann::json LoopedConfig::to_json() const {
  nlohmann::json j = {{"architecture", "looped"}};
  write(j);
  j["n_prelude"] = n_prelude;
  j["n_recur"] = n_recur;
  j["n_coda"] = n_coda;
  j["recurrence"] = recurrence;
  j["recurrence_sampling"] = recurrence_sampling;
  j["recurrence_sigma"] = recurrence_sigma;
  j["max_recurrence"] = max_recurrence;
  j["backprop_depth"] = backprop_depth;
  j["state_init"] = state_init;
  j["state_init_std"] = state_init_std;
  return j;
}

}  // namespace lol::baselines
