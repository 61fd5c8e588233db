#include "inference/dense_generate.h"

#include <algorithm>

#include "inference/batch_scheduler.h"
#include "util/error.h"

namespace lol::inference {

namespace {

void check(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& opt, int64_t max_len) {
  validate_sampling(opt.sampling, "generate");
  if (opt.max_new_tokens < 0)
    throw InputError("generate: max_new_tokens " + std::to_string(opt.max_new_tokens) + ": expected >= 0");
  if (opt.prefill_chunk < 0)
    throw InputError("generate: prefill_chunk " + std::to_string(opt.prefill_chunk) + ": expected >= 0");
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string w = "generate: prompt " + std::to_string(i);
    if (prompts[i].empty()) throw InputError(w + " is empty (expected at least one token)");
    if (int64_t(prompts[i].size()) + opt.max_new_tokens > max_len)
      throw InputError(w + ": " + std::to_string(prompts[i].size()) + " tokens + max_new_tokens " +
                       std::to_string(opt.max_new_tokens) + " exceed max_len " + std::to_string(max_len));
  }
}

/// run_batched_generation's adapter for a dense session over token-id prompts.
struct DenseRows {
  DenseDecodeSession& session;
  const std::vector<std::vector<int64_t>>& prompts;
  std::vector<DenseRowInput> queue;

  int64_t prompt_size(int64_t i) const { return int64_t(prompts[i].size()); }
  const std::vector<int64_t>& prompt_tokens(int64_t i) const { return prompts[i]; }
  void start(int64_t row, int64_t) { session.reset(row); }
  void queue_prefill(int64_t row, int64_t i, int64_t b, int64_t e) {
    queue.push_back({row, std::vector<int64_t>(prompts[i].begin() + b, prompts[i].begin() + e)});
  }
  void queue_decode(int64_t row, int64_t token) { queue.push_back({row, {token}}); }
  torch::Tensor feed() {
    auto logits = session.feed(queue);
    queue.clear();
    return logits;
  }
  void finish(int64_t, Generation&) {}
};

}  // namespace

std::vector<Generation> generate_dense(DenseDecodeSession& session, const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt) {
  check(prompts, opt, session.max_len());
  std::vector<int64_t> order(prompts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  DenseRows rows{session, prompts, {}};
  return run_batched_generation(rows, session.batch_size(), order, opt);
}

std::vector<Generation> generate_dense(baselines::DenseModel model, const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt) {
  if (opt.batch_size < 1) throw InputError("generate: batch_size " + std::to_string(opt.batch_size) + ": expected >= 1");
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  DenseSessionOptions so;
  so.batch_size = std::max<int64_t>(1, std::min<int64_t>(opt.batch_size, int64_t(prompts.size())));
  so.max_len = std::max<int64_t>(1, longest + std::max<int64_t>(opt.max_new_tokens, 0));
  DenseDecodeSession session(model, so);
  return generate_dense(session, prompts, opt);
}

}  // namespace lol::inference
