// Text generation with the dense Llama/Qwen2 transformer (issue 10): KV-cached,
// batched decoding of many prompts with continuous batching, using the sampling
// and result types of the LoL generator (inference/generate.h).
#pragma once
#include <cstdint>
#include <vector>

#include "baselines/dense_model.h"
#include "inference/dense_session.h"
#include "inference/generate.h"

namespace lol::inference {

/// Generates a continuation of every prompt (token ids, each non-empty) with
/// `session`'s rows. GenerateOptions fields used: max_new_tokens, sampling, seed
/// (prompt i samples with sequence_rng(seed, i)), stop_tokens, prefill_chunk, refill,
/// on_token (called as each token is chosen); depth, depth_rule and trace are
/// LoL-only and ignored. Results are in prompt order and do not depend on the batch
/// size or the schedule (up to floating-point rounding of batched products).
/// Throws InputError for an empty prompt, bad sampling options, or a prompt +
/// max_new_tokens longer than session.max_len().
std::vector<Generation> generate_dense(DenseDecodeSession& session, const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt);

/// Same with a new session of min(opt.batch_size, prompts) rows sized for the longest
/// prompt plus max_new_tokens.
std::vector<Generation> generate_dense(baselines::DenseModel model, const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt);

}  // namespace lol::inference
