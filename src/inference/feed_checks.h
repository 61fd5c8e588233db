// Input checks shared by the decoding sessions (DecodeSession for LoL, DenseDecodeSession
// for the dense / Hugging Face models): which rows, how many positions, which token ids.
// Both sessions' feed() and step() reject bad input with the same messages before they
// touch a cache.
#pragma once
#include <cstdint>
#include <vector>

namespace lol::inference {

/// Checks the row of one feed() input: 0 <= row < batch_size = seen.size(), and the row
/// not given earlier in the same call (`seen`, [batch_size] flags, is marked here).
/// Throws lol::InputError ("feed: row r: expected 0 <= row < batch size B", "feed: row r
/// given twice").
void check_feed_row(int64_t row, std::vector<uint8_t>& seen);

/// Checks the new tokens of a valid row: have + tokens.size() <= max_len positions
/// (`have` = positions the row holds) and every token id in [0, vocab_size). Throws
/// lol::InputError ("feed: row r would reach n positions: expected <= max_len M", "feed:
/// token id t outside [0, vocab_size = V)").
void check_feed_tokens(int64_t row, const std::vector<int64_t>& tokens, int64_t have, int64_t max_len,
                       int64_t vocab_size);

/// step() takes one token per row: throws lol::InputError unless n_tokens == batch_size.
void check_step_tokens(int64_t n_tokens, int64_t batch_size);

}  // namespace lol::inference
