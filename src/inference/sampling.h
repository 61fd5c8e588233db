// Next-token selection from logits: greedy, temperature, top-k and top-p (nucleus)
// sampling with an explicit random engine (reproducible for a given seed).
#pragma once
#include <cstdint>
#include <random>
#include <string>

namespace lol::inference {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0: greedy (argmax, lowest id on ties); > 0: softmax(logits / T)
  int64_t top_k = 0;         ///< keep the k most likely tokens (0: all)
  double top_p = 1.0;        ///< keep the smallest set of most likely tokens with mass >= top_p (1: all)
};

/// Throws InputError naming `where` for temperature < 0, top_k < 0 or top_p outside (0, 1].
void validate_sampling(const SamplingOptions& o, const std::string& where);

/// Picks a token from logits [V] (contiguous float32). Sampling order: temperature,
/// top-k, then top-p over the renormalised remainder; ties in probability keep the
/// lower id first. Uses one draw of `rng` when sampling, none when greedy.
/// NaN logits are never chosen; all-NaN logits give token 0.
int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng);

/// A per-sequence engine for sequence `index` of a run seeded with `seed` (splitmix64
/// mixing), so that a sequence samples the same tokens alone or in any batch.
std::mt19937_64 sequence_rng(uint64_t seed, uint64_t index);

}  // namespace lol::inference
