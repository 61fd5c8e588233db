#include "inference/feed_checks.h"

#include <string>

#include "util/error.h"

namespace lol::inference {

void check_feed_row(int64_t row, std::vector<uint8_t>& seen) {
  const int64_t batch_size = int64_t(seen.size());
  if (row < 0 || row >= batch_size)
    throw InputError("feed: row " + std::to_string(row) + ": expected 0 <= row < batch size " +
                     std::to_string(batch_size));
  if (seen[row]++) throw InputError("feed: row " + std::to_string(row) + " given twice");
}

void check_feed_tokens(int64_t row, const std::vector<int64_t>& tokens, int64_t have, int64_t max_len,
                       int64_t vocab_size) {
  const int64_t n = int64_t(tokens.size());
  if (have + n > max_len)
    throw InputError("feed: row " + std::to_string(row) + " would reach " + std::to_string(have + n) +
                     " positions: expected <= max_len " + std::to_string(max_len));
  for (const int64_t t : tokens)
    if (t < 0 || t >= vocab_size)
      throw InputError("feed: token id " + std::to_string(t) + " outside [0, vocab_size = " +
                       std::to_string(vocab_size) + ")");
}

void check_step_tokens(int64_t n_tokens, int64_t batch_size) {
  if (n_tokens != batch_size)
    throw InputError("step: " + std::to_string(n_tokens) + " tokens for a batch of " + std::to_string(batch_size));
}

}  // namespace lol::inference
