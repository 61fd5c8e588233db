#include "inference/dense_generate.h"

#include <algorithm>

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

}  // namespace

std::vector<Generation> generate_dense(DenseDecodeSession& session, const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt) {
  check(prompts, opt, session.max_len());
  const int64_t P = int64_t(prompts.size()), B = session.batch_size();
  std::vector<Generation> out(P);
  if (opt.max_new_tokens == 0 || P == 0) return out;
  std::vector<std::mt19937_64> rng(P);
  for (int64_t i = 0; i < P; ++i) rng[i] = sequence_rng(opt.seed, uint64_t(i));
  std::vector<int64_t> owner(B, -1), fed(B, 0), pending(B, -1);
  int64_t next = 0;

  // Picks a token for each row from its logits row; finishes rows that stop.
  auto choose = [&](const std::vector<int64_t>& rows, const torch::Tensor& logits) {
    auto lf = logits.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t V = lf.size(1);
    for (size_t j = 0; j < rows.size(); ++j) {
      const int64_t row = rows[j], i = owner[row];
      const int64_t tok = sample_token(lf.data_ptr<float>() + int64_t(j) * V, V, opt.sampling, rng[i]);
      Generation& g = out[i];
      g.tokens.push_back(tok);
      if (opt.on_token) opt.on_token(i, tok);
      const bool stop = std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end();
      if (stop || int64_t(g.tokens.size()) >= opt.max_new_tokens) {
        g.stopped = stop;
        owner[row] = -1;
      } else {
        pending[row] = tok;
      }
    }
  };

  while (true) {
    const bool may_fill = opt.refill || std::all_of(owner.begin(), owner.end(), [](int64_t o) { return o < 0; });
    for (int64_t r = 0; r < B && next < P && may_fill; ++r) {
      if (owner[r] >= 0) continue;
      session.reset(r);
      owner[r] = next++;
      fed[r] = 0;
      pending[r] = -1;
    }
    // Prefill every row whose prompt is not fully fed, together, chunk by chunk.
    std::vector<DenseRowInput> in;
    std::vector<int64_t> done_rows, done_at;
    for (int64_t r = 0; r < B; ++r) {
      if (owner[r] < 0) continue;
      const auto& p = prompts[owner[r]];
      const int64_t n = int64_t(p.size());
      if (fed[r] >= n) continue;
      const int64_t e = opt.prefill_chunk > 0 ? std::min(n, fed[r] + opt.prefill_chunk) : n;
      if (e == n) {
        done_rows.push_back(r);
        done_at.push_back(int64_t(in.size()));
      }
      in.push_back({r, std::vector<int64_t>(p.begin() + fed[r], p.begin() + e)});
      fed[r] = e;
    }
    if (!in.empty()) {
      auto logits = session.feed(in);
      if (!done_rows.empty())
        choose(done_rows, logits.index_select(0, torch::tensor(done_at, torch::kInt64).to(logits.device())));
      continue;
    }
    // Decode: one token for every row with one pending.
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < B; ++r)
      if (owner[r] >= 0 && pending[r] >= 0) {
        in.push_back({r, {pending[r]}});
        rows.push_back(r);
      }
    if (in.empty()) break;
    choose(rows, session.feed(in));
  }
  return out;
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
