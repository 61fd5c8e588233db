// KV-cached generation with real layer skipping (paper 3.2 and 5.2): greedy for the
// paper's timing protocol, or sampled (`lol layerroute generate`).
//
// Gate decisions are made once, at prefill, from the prompt's states: gate i sees the
// mean over the prompt tokens of the states entering block i (on the gated path). The
// decisions are then held for every generated token. A closed layer is not computed
// at prefill nor at any decoding step and keeps no KV cache; an open layer runs as a
// normal cached decoder block. (The training and perplexity forwards decide from the
// whole sequence instead; for generation only the prompt exists when deciding.)
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "inference/sampling.h"
#include "layerroute/gated_model.h"

namespace lol::layerroute {

struct Generation {
  std::vector<int64_t> tokens;  ///< the generated ids (a stop token, when one ended it, included)
  std::vector<uint8_t> open;    ///< [n_layers] decisions held for the generation
  int64_t executed_layers = 0;  ///< open layers (= layers run per token, = layers with a KV cache)
  int64_t cache_bytes = 0;      ///< bytes of the KV caches allocated
  bool stopped = false;         ///< true when a stop token ended it before max_new_tokens
  double prefill_seconds = 0;   ///< wall clock until the first new token was chosen
  double seconds = 0;           ///< wall clock of prefill + decoding
};

struct GatedGenerateOptions {
  int64_t max_new_tokens = 1;
  GateMode mode = GateMode::Learned;
  bool use_lora = true;  ///< false: base weights only (after merging the adapters into them)
  /// Token choice (inference/sampling.h: greedy by default; temperature, top-k, top-p,
  /// repetition penalty), one engine seeded by inference::sequence_rng(seed, 0).
  inference::SamplingOptions sampling;
  uint64_t seed = 0;
  /// Generation ends after emitting one of these (empty: exactly max_new_tokens).
  std::vector<int64_t> stop_tokens;
  /// Called with each new token id as soon as it is chosen (streaming).
  std::function<void(int64_t)> on_token;
};

/// Generates up to `o.max_new_tokens` tokens after `prompt` with the gates of
/// `o.mode` decided at prefill (see above); 0 runs the prefill only (gate decisions,
/// KV caches of the open layers, no token chosen). Throws InputError for an empty prompt,
/// token ids outside the vocabulary, prompt + max_new_tokens > max_seq_len or invalid
/// sampling options; NonFiniteError for NaN/Inf logits (before a token is chosen).
Generation generate_gated(GatedModelImpl& m, const std::vector<int64_t>& prompt, const GatedGenerateOptions& o);

/// Exactly `new_tokens` greedy tokens (no stop tokens, so that runs with different gates
/// do the same amount of work: the wall-clock measurement of paper 5.2).
Generation generate_gated(GatedModelImpl& m, const std::vector<int64_t>& prompt, int64_t new_tokens, GateMode mode,
                          bool use_lora);

}  // namespace lol::layerroute
