#include "inference/sampling.h"

#include <algorithm>
#include <limits>
#include <charconv>
#include <cmath>
#include <numeric>
#include <vector>

#include "util/error.h"

namespace lol::inference {

namespace {

/// `v` in the shortest form that reads back as v (0.7, 1e+39, 5e-324), not %f.
std::string spelled(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

bool valid_repetition_penalty(double p) {
  const float f = float(p);  // applied in float32, as transformers does
  return p > 0 && std::isfinite(p) && f > 0 && std::isfinite(f);
}

void validate_sampling(const SamplingOptions& o, const std::string& where) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw InputError(where + ": temperature " + spelled(o.temperature) + ": expected a finite value >= 0");
  if (o.top_k < 0) throw InputError(where + ": top_k " + std::to_string(o.top_k) + ": expected >= 0 (0 = off)");
  if (!(o.top_p >= 0 && o.top_p <= 1))
    throw InputError(where + ": top_p " + spelled(o.top_p) + ": expected 0 <= top_p <= 1 (0: the most likely token)");
  if (!valid_repetition_penalty(o.repetition_penalty))
    throw InputError(where + ": repetition_penalty " + spelled(o.repetition_penalty) +
                     ": expected a value > 0 that float32 holds (1 = off)");
}

void apply_repetition_penalty(float* logits, int64_t V, const std::vector<int64_t>& seen, double penalty) {
  const float p = float(penalty);  // transformers multiplies float32 scores by the float penalty
  for (int64_t id : seen) {
    if (id < 0 || id >= V) continue;
    float& z = logits[id];
    // A tiny penalty (1e-44 is a float32) overflowed z / p to +Inf and the softmax to NaN,
    // which sampled the same tokens whatever the seed: the largest finite float instead.
    z = std::clamp(z < 0 ? z * p : z / p, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max());
  }
}

int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng) {
  if (o.temperature == 0) {
    int64_t best = -1;
    for (int64_t i = 0; i < V; ++i)
      if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    return best < 0 ? 0 : best;
  }
  std::vector<int64_t> ids;
  ids.reserve(V);
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(logits[i])) ids.push_back(i);
  if (ids.empty()) return 0;
  // Most likely first, lower id first among equals.
  auto before = [&](int64_t a, int64_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = ids.size();
  if (o.top_k > 0 && size_t(o.top_k) < keep) {
    // transformers' TopKLogitsWarper keeps every token scoring at least the k-th
    // largest score: tokens tied with the k-th all stay.
    const size_t k = size_t(o.top_k);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
    const float kth = logits[ids[k - 1]];
    const auto tied_end = std::partition(ids.begin() + k, ids.end(), [&](int64_t i) { return logits[i] == kth; });
    std::sort(ids.begin() + k, tied_end, before);
    keep = size_t(tied_end - ids.begin());
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), before);
  }
  const double mx = double(logits[ids[0]]);
  std::vector<double> p(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp((double(logits[ids[i]]) - mx) / o.temperature);
  if (o.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < keep) {
      mass += p[n++] / total;
      if (mass >= o.top_p) break;
    }
    keep = n;
    total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  }
  const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0) * total;  // [0, total)
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

std::mt19937_64 sequence_rng(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return std::mt19937_64(z);
}

}  // namespace lol::inference
