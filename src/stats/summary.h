// Mean and sample standard deviation of the finite values of a vector, in two passes
// (the one-pass s2 - s^2/n formula left ~1e-8 for equal values; two passes leave ~1e-16,
// so equal values are given sd 0 exactly). Used for the probes' fold AUROCs and the
// separation's shuffled accuracies (docs/analysis.md).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace lol::stats {

/// mean: NaN when no value is finite; sd: the sample sd (n - 1), NaN when fewer than 2
/// values are finite.
inline void mean_sd(const std::vector<double>& v, double& mean, double& sd) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double s = 0, lo = 0, hi = 0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x)) {
      lo = n ? std::min(lo, x) : x;
      hi = n ? std::max(hi, x) : x;
      s += x;
      ++n;
    }
  mean = n ? s / n : nan;
  double ss = 0;
  for (double x : v)
    if (std::isfinite(x)) ss += (x - mean) * (x - mean);
  sd = n < 2 ? nan : lo == hi ? 0.0 : std::sqrt(ss / (n - 1));
}

}  // namespace lol::stats
