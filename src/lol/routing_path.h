// Routing paths: a fixed choice of expert (and residual weight alpha) per
// (routed depth, window index) that replaces the router's decision (paper 4.1.3:
// forcing a strategy's mode path). JSON format: docs/routing-paths.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol {

struct ForcedChoice {
  int64_t expert = -1;
  std::optional<double> alpha;  ///< empty: use the router's probability of `expert`
};

struct RoutingPath {
  int64_t library_size = 0;
  /// expert[d][k]: expert forced at routed depth d+1 for window index k; -1 = router decides.
  std::vector<std::vector<int64_t>> expert;
  /// alpha[d][k]: residual weight; NaN = the router's probability of the forced expert.
  std::vector<std::vector<double>> alpha;
  nlohmann::json meta = nlohmann::json::object();  ///< free-form (strategy name, source, ...)

  int64_t depth() const { return int64_t(expert.size()); }
  /// Forced choice at (depth index d = l-1, window index k), or nullopt.
  std::optional<ForcedChoice> at(int64_t d, int64_t k) const;
  /// Sets one entry (grows the grid as needed).
  void set(int64_t d, int64_t k, int64_t expert, std::optional<double> alpha);

  nlohmann::json to_json() const;
  /// Validates format, version, grid shapes, 0 <= expert < library_size, alpha in [0, 1].
  static RoutingPath from_json(const nlohmann::json& j, const std::string& where);
  static RoutingPath load(const std::string& path);
  void save(const std::string& path) const;
};

}  // namespace lol
