// KV-cached greedy generation with real layer skipping (paper 3.2 and 5.2).
//
// Gate decisions are made once, at prefill, from the prompt's states: gate i sees the
// mean over the prompt tokens of the states entering block i (on the gated path). The
// decisions are then held for every generated token. A closed layer is not computed
// at prefill nor at any decoding step and keeps no KV cache; an open layer runs as a
// normal cached decoder block. (The training and perplexity forwards decide from the
// whole sequence instead; for generation only the prompt exists when deciding.)
#pragma once
#include <cstdint>
#include <vector>

#include "layerroute/gated_model.h"

namespace lol::layerroute {

struct Generation {
  std::vector<int64_t> tokens;  ///< the generated ids (greedy)
  std::vector<uint8_t> open;    ///< [n_layers] decisions held for the generation
  int64_t executed_layers = 0;  ///< open layers (= layers run per token, = layers with a KV cache)
  int64_t cache_bytes = 0;      ///< bytes of the KV caches allocated
  double seconds = 0;           ///< wall clock of prefill + decoding
};

/// Generates exactly `new_tokens` tokens greedily after `prompt` (no stop tokens, so
/// that runs with different gates do the same amount of work), gates by `mode`.
/// `use_lora` = false runs the base weights only (use it after merging the adapters
/// into them). Throws InputError for an empty prompt, token ids outside the
/// vocabulary, or prompt + new_tokens > max_seq_len; NonFiniteError for NaN/Inf logits.
Generation generate_gated(GatedModelImpl& m, const std::vector<int64_t>& prompt, int64_t new_tokens, GateMode mode,
                          bool use_lora);

}  // namespace lol::layerroute
