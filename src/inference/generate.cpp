#include "inference/generate.h"

#include <algorithm>

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
    if (p.prompt_len < -1) throw InputError(w + ": prompt_len " + std::to_string(p.prompt_len) + ": expected >= -1");
    if (int64_t(p.tokens.size()) + opt.max_new_tokens > max_len)
      throw InputError(w + ": " + std::to_string(p.tokens.size()) + " tokens + max_new_tokens " +
                       std::to_string(opt.max_new_tokens) + " exceed max_len " + std::to_string(max_len));
  }
}

}  // namespace

std::vector<Generation> generate(DecodeSession& session, const std::vector<Prompt>& prompts,
                                 const GenerateOptions& opt) {
  check_prompts(prompts, opt, session.max_len());
  const int64_t P = int64_t(prompts.size()), B = session.batch_size();
  std::vector<Generation> out(P);
  if (opt.max_new_tokens == 0 || P == 0) return out;
  std::vector<std::mt19937_64> rng(P);
  for (int64_t i = 0; i < P; ++i) rng[i] = sequence_rng(opt.seed, uint64_t(i));
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
  std::vector<int64_t> owner(B, -1);  // prompt index held by each row
  std::vector<int64_t> fed(B, 0);     // prompt tokens fed so far (prefill progress)
  std::vector<int64_t> pending(B, -1);// last chosen token, to be fed next
  int64_t next = 0;
  std::vector<float> buf;

  // Chooses a token for each input row from its logits; finishes rows that stop.
  auto choose = [&](const std::vector<int64_t>& rows, const torch::Tensor& logits) {
    auto lf = logits.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t V = lf.size(1);
    const float* base = lf.data_ptr<float>();
    for (size_t j = 0; j < rows.size(); ++j) {
      const int64_t row = rows[j], i = owner[row];
      const int64_t tok = sample_token(base + int64_t(j) * V, V, opt.sampling, rng[i]);
      Generation& g = out[i];
      g.tokens.push_back(tok);
      if (opt.on_token) opt.on_token(i, tok);
      const bool stop = std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end();
      if (stop || int64_t(g.tokens.size()) >= opt.max_new_tokens) {
        g.stopped = stop;
        if (opt.trace) g.trace = session.trace(row);
        owner[row] = -1;
      } else {
        pending[row] = tok;
      }
    }
  };

  while (true) {
    // Free rows take the next prompts (with waves, only once every row is free).
    const bool may_fill = opt.refill || std::all_of(owner.begin(), owner.end(), [](int64_t o) { return o < 0; });
    for (int64_t r = 0; r < B && next < P && may_fill; ++r) {
      if (owner[r] >= 0) continue;
      const Prompt& p = prompts[order[next]];
      session.reset(r, p.prompt_len < 0 ? int64_t(p.tokens.size()) : p.prompt_len, p.force);
      owner[r] = order[next++];
      fed[r] = 0;
      pending[r] = -1;
    }
    // Prefill rows whose prompt is not fully fed (all of them together, chunk by chunk).
    std::vector<RowInput> in;
    std::vector<int64_t> done_rows;
    for (int64_t r = 0; r < B; ++r) {
      if (owner[r] < 0) continue;
      const Prompt& p = prompts[owner[r]];
      const int64_t n = int64_t(p.tokens.size());
      if (fed[r] >= n) continue;
      const int64_t e = opt.prefill_chunk > 0 ? std::min(n, fed[r] + opt.prefill_chunk) : n;
      RowInput ri;
      ri.row = r;
      ri.tokens.assign(p.tokens.begin() + fed[r], p.tokens.begin() + e);
      if (!p.router_only.empty()) ri.router_only.assign(p.router_only.begin() + fed[r], p.router_only.begin() + e);
      fed[r] = e;
      if (e == n) done_rows.push_back(int64_t(in.size()));
      in.push_back(std::move(ri));
    }
    if (!in.empty()) {
      auto logits = session.feed(in);
      std::vector<int64_t> rows;
      std::vector<int64_t> keep;
      for (int64_t j : done_rows) {
        rows.push_back(in[j].row);
        keep.push_back(j);
      }
      if (!rows.empty()) choose(rows, logits.index_select(0, torch::tensor(keep, torch::kInt64).to(logits.device())));
      continue;
    }
    // Decode: one token for every row that has one pending.
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < B; ++r)
      if (owner[r] >= 0 && pending[r] >= 0) {
        in.push_back({r, {pending[r]}, {}});
        rows.push_back(r);
      }
    if (in.empty()) break;
    choose(rows, session.feed(in));
  }
  return out;
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
