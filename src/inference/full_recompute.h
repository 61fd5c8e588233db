// Generation for models without a decoding cache: the dense, looped and MoE baselines
// (docs/baselines.md, docs/generation.md "Baselines").
#pragma once
#include <cstdint>
#include <vector>

#include "inference/generate.h"
#include "training/trainable.h"

namespace lol::inference {

/// Generates up to opt.max_new_tokens tokens after `prompt` with any trainable model by
/// full recomputation: each new token runs model.forward over the prompt and the tokens
/// generated so far (one document, positions 0..n-1) and is chosen from the last
/// position's logits [vocab] (TokenChooser: opt.sampling, opt.seed, opt.stop_tokens);
/// opt.on_token(0, token) streams each choice. So every token is what `lol forward` of
/// the sequence so far predicts; a step costs a whole forward pass over n tokens (no
/// cache). Puts the model in eval mode and runs without gradients. Uses only
/// max_new_tokens, sampling, seed, stop_tokens and on_token of `opt`.
/// Throws InputError for an empty prompt, ids outside [0, vocab_size), invalid sampling
/// options, or prompt + max_new_tokens > max_seq_len (config_json()'s fields);
/// NonFiniteError for NaN/Inf logits (before a token is chosen from them).
Generation generate_full_recompute(training::TrainableModel& model, const std::vector<int64_t>& prompt,
                                   const GenerateOptions& opt);

}  // namespace lol::inference
