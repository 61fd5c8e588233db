#include "training/schedule.h"

#include <algorithm>
#include <cmath>

namespace lol::training {

double lr_factor(const ScheduleConfig& s, int64_t step, int64_t total) {
  const int64_t w = s.warmup_steps;
  if (step < w) return double(step + 1) / double(w);
  const double m = s.min_lr_ratio;
  if (s.type == "constant") return 1.0;
  if (s.type == "cosine") {
    const int64_t span = std::max<int64_t>(1, total - w);
    const double p = std::min(1.0, double(step - w) / double(span));
    return m + (1.0 - m) * 0.5 * (1.0 + std::cos(M_PI * p));
  }
  // wsd
  const int64_t decay = std::min(total - w, int64_t(std::llround(s.decay_fraction * double(total))));
  const int64_t decay_start = total - decay;
  if (decay <= 0 || step < decay_start) return 1.0;
  const double q = std::min(1.0, double(step - decay_start) / double(decay));
  if (s.decay_shape == "linear") return m + (1.0 - m) * (1.0 - q);
  return m + (1.0 - m) * (1.0 - std::sqrt(q));
}

int64_t grown_depth(const GrowConfig& g, int64_t depth, int64_t step, int64_t total) {
  const int64_t start = std::clamp<int64_t>(g.start, 0, depth);
  const int64_t G = int64_t(std::ceil(g.fraction * double(total) - 1e-9));
  if (G <= 0 || step >= G) return depth;
  const double x = double(step) / double(G);
  const double f = g.shape == "sqrt" ? std::sqrt(x) : g.shape == "linear" ? x : 1.0 - std::sqrt(1.0 - x);
  // Small epsilon so that exact share boundaries are not lost to rounding.
  const int64_t add = int64_t(std::floor(double(depth - start + 1) * f + 1e-9));
  return std::min(depth, start + add);
}

}  // namespace lol::training
