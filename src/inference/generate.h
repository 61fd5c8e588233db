// Text generation with a LoL model (issue 6): batched, KV-cached decoding of many
// prompts with continuous batching (a row that finishes takes the next prompt).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "inference/decode_session.h"
#include "inference/sampling.h"

namespace lol::inference {

struct Prompt {
  std::vector<int64_t> tokens;       ///< non-empty
  std::vector<uint8_t> router_only;  ///< empty, or one flag per token (e.g. a strategy label)
  int64_t prompt_len = 0;            ///< prompt window (window 0 at every depth), <= tokens.size(); -1 = the whole prompt
  const RoutingPath* force = nullptr;///< forced routing path (must outlive the call) or null
};

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 0;                  ///< sequence i samples with sequence_rng(seed, i)
  std::vector<int64_t> stop_tokens;   ///< generation of a sequence ends after one of these
  int64_t batch_size = 32;            ///< rows decoded together (generate(model, ...) only)
  int64_t depth = -1;                 ///< routed depths (-1: as trained; generate(model, ...) only)
  DepthRule depth_rule = DepthRule::kStretch;
  int64_t prefill_chunk = 0;          ///< prompt tokens per prefill call (0: the whole prompt)
  /// true: a row that finishes takes the next prompt at once (continuous batching);
  /// false: rows are refilled together once all have finished ("waves"). Waves keep
  /// rows at equal generated lengths, so with prompt windows their windows line up
  /// and rows sharing a forced path run one expert per depth (one weight read).
  bool refill = true;
  bool trace = false;                 ///< return the routing decisions of every window
  /// Streaming: called with (prompt index, token) as each token is chosen.
  std::function<void(int64_t, int64_t)> on_token;
};

struct Generation {
  std::vector<int64_t> tokens;         ///< generated tokens (ending with the stop token if one was hit)
  bool stopped = false;                ///< ended by a stop token (else by max_new_tokens)
  std::vector<WindowDecision> trace;   ///< with GenerateOptions::trace: every window's decision
};

/// Generates for every prompt using `session`'s rows (its batch size, depth and
/// max_len). Prompts are scheduled grouped by forced path (stable), so that rows
/// decoded together tend to share experts. Results are in prompt order and do not
/// depend on the batch size or the schedule.
/// Throws InputError for an empty prompt, bad sampling options, a prompt or
/// router_only of the wrong length, or prompt + max_new_tokens > session.max_len();
/// NonFiniteError when a row's logits hold NaN/Inf (activations overflowed).
std::vector<Generation> generate(DecodeSession& session, const std::vector<Prompt>& prompts,
                                 const GenerateOptions& opt);

/// Same with a new session of min(batch_size, prompts) rows, opt.depth routed depths
/// and room for the longest prompt plus max_new_tokens.
std::vector<Generation> generate(LoLModel model, const std::vector<Prompt>& prompts, const GenerateOptions& opt);

}  // namespace lol::inference
