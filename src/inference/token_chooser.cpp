#include "inference/token_chooser.h"

#include <algorithm>

#include "core/finite.h"

namespace lol::inference {

TokenChooser::TokenChooser(const std::vector<int64_t>& prompt, int64_t vocab_size, const SamplingOptions& sampling,
                           uint64_t seed, std::vector<int64_t> stop_tokens)
    : sampling_(sampling), rng_(sequence_rng(seed, 0)), stop_(std::move(stop_tokens)) {
  if (sampling_.repetition_penalty != 1.0) {
    in_seen_.assign(size_t(vocab_size), 0);
    for (auto t : prompt)
      if (!in_seen_[size_t(t)]++) seen_.push_back(t);
  }
}

int64_t TokenChooser::choose(const torch::Tensor& logits, const std::string& what) {
  require_finite(logits, what);
  auto row = logits.reshape({-1}).to(torch::kCPU, torch::kFloat32).contiguous();
  float* z = row.data_ptr<float>();
  if (!in_seen_.empty()) apply_repetition_penalty(z, row.numel(), seen_, sampling_.repetition_penalty);
  const int64_t id = sample_token(z, row.numel(), sampling_, rng_);
  if (!in_seen_.empty()) {
    if (size_t(id) >= in_seen_.size()) in_seen_.resize(size_t(id) + 1, 0);  // logits wider than vocab_size
    if (!in_seen_[size_t(id)]++) seen_.push_back(id);
  }
  stopped_ = std::find(stop_.begin(), stop_.end(), id) != stop_.end();
  return id;
}

}  // namespace lol::inference
