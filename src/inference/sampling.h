// Next-token selection from logits: greedy, temperature, top-k and top-p (nucleus)
// sampling with an explicit random engine (reproducible for a given seed).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lol::inference {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0: greedy (argmax, lowest id on ties); > 0: softmax(logits / T)
  int64_t top_k = 0;         ///< keep the k most likely tokens and those tied with the k-th (0: all)
  double top_p = 1.0;        ///< keep the smallest set of most likely tokens with mass >= top_p (1: all; 0: the top one)
  /// CTRL's repetition penalty as transformers applies it (RepetitionPenaltyLogitsProcessor):
  /// before any other step, also when greedy, the logit z of every token id already in
  /// the sequence (prompt included) becomes z / p when z > 0 and z * p otherwise. 1: off.
  double repetition_penalty = 1.0;
};

/// Throws InputError naming `where` for temperature < 0, top_k < 0, top_p outside [0, 1]
/// or a repetition penalty that is not valid_repetition_penalty.
void validate_sampling(const SamplingOptions& o, const std::string& where);

/// True when p > 0 and p is finite and nonzero as float32 (the penalty is applied to
/// float32 logits: 1e39 would be Inf, 1e-46 would be 0).
bool valid_repetition_penalty(double p);

/// Picks a token from logits [V] (contiguous float32). Sampling order: temperature,
/// top-k (every token scoring at least the k-th largest, so tokens tied with the k-th
/// all stay, as transformers' TopKLogitsWarper), then top-p over the renormalised
/// remainder; ties in probability keep the lower id first. Uses one draw of `rng` when sampling, none when greedy.
/// NaN logits are never chosen; all-NaN logits give token 0.
int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng);

/// Applies SamplingOptions::repetition_penalty `penalty` in place to logits [V] at the
/// token ids `seen` (each id once; ids outside [0, V) are ignored).
void apply_repetition_penalty(float* logits, int64_t V, const std::vector<int64_t>& seen, double penalty);

/// A per-sequence engine for sequence `index` of a run seeded with `seed` (splitmix64
/// mixing), so that a sequence samples the same tokens alone or in any batch.
std::mt19937_64 sequence_rng(uint64_t seed, uint64_t index);

}  // namespace lol::inference
