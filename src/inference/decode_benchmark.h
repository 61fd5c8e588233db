// Decoding throughput of cached vs full-recompute generation (issue 6 benchmark:
// "decode at 512 tokens of context is >= 10x faster than full recompute").
#pragma once
#include <cstdint>
#include <string>
#include <functional>
#include <vector>

#include "lol/model.h"

namespace lol::inference {

struct DecodeBenchOptions {
  int64_t context = 512;     ///< prompt tokens before decoding
  int64_t new_tokens = 64;   ///< cached decode steps timed
  int64_t full_steps = 8;    ///< full-recompute decode steps timed
  int64_t batch = 1;         ///< sequences decoded together
  uint64_t seed = 0;         ///< random prompt tokens
};

/// Checks `o` against a model of `max_seq_len` positions: context, new_tokens and batch
/// >= 1, full_steps >= `min_full_steps`, and context + max(new_tokens, full_steps) + 1 <=
/// max_seq_len. Throws InputError naming the option as the benchmark commands spell it
/// (--context, --new, --full-steps, --batch) and the expected range, the limit named
/// `limit_name` (a Hugging Face config's "max_position_embeddings").
void check_decode_bench_options(const DecodeBenchOptions& o, int64_t max_seq_len, int64_t min_full_steps,
                                const std::string& limit_name = "max_seq_len");

struct DecodeBenchResult {
  double prefill_s = 0, decode_s = 0, full_s = 0;  ///< wall seconds of each phase
  double prefill_tok_s = 0;     ///< batch * context / prefill_s
  double decode_tok_s = 0;      ///< batch * new_tokens / decode_s (cached)
  double full_decode_tok_s = 0; ///< batch * full_steps / full_s (whole-sequence forward per token)
};

/// How time_decoding drives one decoder. Each hook returns next-token logits
/// [batch, vocab] (greedy decoding takes their argmax).
struct DecodeBenchHooks {
  /// Resets every row and feeds prompts[b] to row b (cached prefill).
  std::function<torch::Tensor(const std::vector<std::vector<int64_t>>& prompts)> prefill;
  /// One cached decode step: token next[b] appended to row b.
  std::function<torch::Tensor(const std::vector<int64_t>& next)> step;
  /// Full recompute without a cache: tokens [batch, n] int64 (CPU), logits at position n-1.
  std::function<torch::Tensor(const torch::Tensor& tokens)> full;
};

/// The timing protocol shared by the LoL and dense benchmarks (greedy, the caller sets
/// eval and inference mode): random prompts of `context` tokens in [0, vocab_size)
/// from `seed`; a timed prefill, `new_tokens` timed cached steps, then (full_steps > 0)
/// `full_steps` timed full-recompute steps; one untimed warm-up before each phase.
DecodeBenchResult time_decoding(const DecodeBenchOptions& opt, int64_t vocab_size, const DecodeBenchHooks& hooks);

/// Runs (greedy, eval mode, no gradients): a cached prefill of `context` random
/// tokens per row, `new_tokens` cached decode steps, then `full_steps` steps that each
/// run LoLModelImpl::forward on the whole sequence (logits at the last position only).
/// One untimed warm-up step precedes each timed phase. Throws InputError when
/// context + new_tokens exceeds the model's max_seq_len or an option is < 1.
DecodeBenchResult bench_decode(LoLModel model, const DecodeBenchOptions& opt);

}  // namespace lol::inference
