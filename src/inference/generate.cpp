#include "inference/generate.h"

#include <algorithm>

#include "inference/batch_scheduler.h"
#include "util/error.h"

namespace lol::inference {

namespace {

void check_prompts(const std::vector<Prompt>& prompts, const GenerateOptions& opt, int64_t max_len) {
  validate_sampling(opt.sampling, "generate");
  if (opt.max_new_tokens < 0) throw InputError("generate: max_new_tokens " + std::to_string(opt.max_new_tokens) + ": expected >= 0");
  if (opt.prefill_chunk < 0) throw InputError("generate: prefill_chunk " + std::to_string(opt.prefill_chunk) + ": expected >= 0");
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    const std::string w = "generate: prompt " + std::to_string(i);
    if (p.tokens.empty()) throw InputError(w + " is empty (expected at least one token)");
    if (!p.router_only.empty() && p.router_only.size() != p.tokens.size())
      throw InputError(w + ": router_only has " + std::to_string(p.router_only.size()) + " flags for " +
                       std::to_string(p.tokens.size()) + " tokens");
    if (p.prompt_len < -1 || p.prompt_len > int64_t(p.tokens.size()))
      throw InputError(w + ": prompt_len " + std::to_string(p.prompt_len) + ": expected -1 <= prompt_len <= " +
                       std::to_string(p.tokens.size()) + " (the prompt's tokens)");
    if (int64_t(p.tokens.size()) + opt.max_new_tokens > max_len)
      throw InputError(w + ": " + std::to_string(p.tokens.size()) + " tokens + max_new_tokens " +
                       std::to_string(opt.max_new_tokens) + " exceed max_len " + std::to_string(max_len));
  }
}

/// run_batched_generation's adapter for a LoL session: prompt windows, router-only
/// flags, forced paths, and the routing trace of each finished row.
struct Rows {
  DecodeSession& session;
  const std::vector<Prompt>& prompts;
  bool trace;
  std::vector<RowInput> queue;

  int64_t prompt_size(int64_t i) const { return int64_t(prompts[i].tokens.size()); }
  const std::vector<int64_t>& prompt_tokens(int64_t i) const { return prompts[i].tokens; }
  void start(int64_t row, int64_t i) {
    const Prompt& p = prompts[i];
    session.reset(row, p.prompt_len < 0 ? int64_t(p.tokens.size()) : p.prompt_len, p.force);
  }
  void queue_prefill(int64_t row, int64_t i, int64_t b, int64_t e) {
    const Prompt& p = prompts[i];
    RowInput ri;
    ri.row = row;
    ri.tokens.assign(p.tokens.begin() + b, p.tokens.begin() + e);
    if (!p.router_only.empty()) ri.router_only.assign(p.router_only.begin() + b, p.router_only.begin() + e);
    queue.push_back(std::move(ri));
  }
  void queue_decode(int64_t row, int64_t token) { queue.push_back({row, {token}, {}}); }
  torch::Tensor feed() {
    auto logits = session.feed(queue);
    queue.clear();
    return logits;
  }
  void finish(int64_t row, Generation& g) {
    if (trace) g.trace = session.trace(row);
  }
};

}  // namespace

std::vector<Generation> generate(DecodeSession& session, const std::vector<Prompt>& prompts,
                                 const GenerateOptions& opt) {
  check_prompts(prompts, opt, session.max_len());
  const int64_t P = int64_t(prompts.size()), B = session.batch_size();
  // Schedule: prompts grouped by forced path, in order of first appearance.
  std::vector<int64_t> order(P);
  for (int64_t i = 0; i < P; ++i) order[i] = i;
  {
    std::vector<const RoutingPath*> first_seen;
    auto rank = [&](const RoutingPath* f) {
      auto it = std::find(first_seen.begin(), first_seen.end(), f);
      if (it != first_seen.end()) return int64_t(it - first_seen.begin());
      first_seen.push_back(f);
      return int64_t(first_seen.size()) - 1;
    };
    std::vector<int64_t> key(P);
    for (int64_t i = 0; i < P; ++i) key[i] = rank(prompts[i].force);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key[a] < key[b]; });
  }
  Rows rows{session, prompts, opt.trace, {}};
  return run_batched_generation(rows, B, order, opt);
}

std::vector<Generation> generate(LoLModel model, const std::vector<Prompt>& prompts, const GenerateOptions& opt) {
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.tokens.size()));
  SessionOptions so;
  so.batch_size = std::max<int64_t>(1, std::min<int64_t>(opt.batch_size, int64_t(prompts.size())));
  if (opt.batch_size < 1) throw InputError("generate: batch_size " + std::to_string(opt.batch_size) + ": expected >= 1");
  so.depth = opt.depth;
  so.depth_rule = opt.depth_rule;
  so.max_len = std::max<int64_t>(1, longest + std::max<int64_t>(opt.max_new_tokens, 0));
  so.record_trace = opt.trace;
  DecodeSession session(model, so);
  return generate(session, prompts, opt);
}

}  // namespace lol::inference
