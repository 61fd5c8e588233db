// JSON numbers that may be NaN or infinite: JSON has no such values, so they are
// written as null (what nlohmann's dump would print for them anyway, made explicit so
// that readers of the json object see null too).
#pragma once
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::util {

/// `v`, or null when it is NaN or infinite.
inline nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// An array of finite_or_null(v[i]).
inline nlohmann::json finite_or_null(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(finite_or_null(x));
  return a;
}

}  // namespace lol::util
