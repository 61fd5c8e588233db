// One sequence's next-token choice from its logits, as every single-sequence generator
// makes it (LayerRoute's gated decoding, the baselines' full-recompute generation).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

#include "inference/sampling.h"

namespace lol::inference {

/// Applies the repetition penalty over the ids seen so far (the prompt's, then each
/// chosen one), samples with the sequence's engine sequence_rng(seed, 0) (docs/generation.md
/// "Sampling") and tracks the stop tokens.
class TokenChooser {
 public:
  /// prompt ids must lie in [0, vocab_size) (checked by the caller).
  TokenChooser(const std::vector<int64_t>& prompt, int64_t vocab_size, const SamplingOptions& sampling, uint64_t seed,
               std::vector<int64_t> stop_tokens);
  /// The next token from logits [V] (any shape of V elements, any device and floating
  /// dtype). Throws NonFiniteError naming `what` for NaN/Inf logits (nothing is chosen).
  int64_t choose(const torch::Tensor& logits, const std::string& what);
  /// True once a stop token was chosen.
  bool stopped() const { return stopped_; }

 private:
  SamplingOptions sampling_;
  std::mt19937_64 rng_;
  std::vector<int64_t> stop_, seen_;
  std::vector<uint8_t> in_seen_;  ///< empty without a repetition penalty
  bool stopped_ = false;
};

}  // namespace lol::inference
