// Decoding throughput of cached vs full-recompute generation (issue 6 benchmark:
// "decode at 512 tokens of context is >= 10x faster than full recompute").
#pragma once
#include <cstdint>

#include "lol/model.h"

namespace lol::inference {

struct DecodeBenchOptions {
  int64_t context = 512;     ///< prompt tokens before decoding
  int64_t new_tokens = 64;   ///< cached decode steps timed
  int64_t full_steps = 8;    ///< full-recompute decode steps timed
  int64_t batch = 1;         ///< sequences decoded together
  uint64_t seed = 0;         ///< random prompt tokens
};

struct DecodeBenchResult {
  double prefill_s = 0, decode_s = 0, full_s = 0;  ///< wall seconds of each phase
  double prefill_tok_s = 0;     ///< batch * context / prefill_s
  double decode_tok_s = 0;      ///< batch * new_tokens / decode_s (cached)
  double full_decode_tok_s = 0; ///< batch * full_steps / full_s (whole-sequence forward per token)
};

/// Runs (greedy, eval mode, no gradients): a cached prefill of `context` random
/// tokens per row, `new_tokens` cached decode steps, then `full_steps` steps that each
/// run LoLModelImpl::forward on the whole sequence (logits at the last position only).
/// One untimed warm-up step precedes each timed phase. Throws InputError when
/// context + new_tokens exceeds the model's max_seq_len or an option is < 1.
DecodeBenchResult bench_decode(LoLModel model, const DecodeBenchOptions& opt);

}  // namespace lol::inference
