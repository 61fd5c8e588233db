#include "inference/decode_benchmark.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "inference/decode_session.h"
#include "util/clock.h"
#include "util/error.h"

namespace lol::inference {

namespace {

std::vector<int64_t> greedy(const torch::Tensor& logits) {
  auto a = logits.argmax(-1).to(torch::kCPU).contiguous();
  return std::vector<int64_t>(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + a.numel());
}

}  // namespace

DecodeBenchResult time_decoding(const DecodeBenchOptions& o, int64_t vocab_size, const DecodeBenchHooks& h) {
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int64_t>> prompts(size_t(o.batch));
  for (auto& p : prompts)
    for (int64_t i = 0; i < o.context; ++i) p.push_back(int64_t(rng() % uint64_t(vocab_size)));
  DecodeBenchResult r;
  greedy(h.prefill(prompts));  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  auto next = greedy(h.prefill(prompts));
  r.prefill_s = util::seconds_since(t0);
  next = greedy(h.step(next));  // warm-up
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.new_tokens; ++i) next = greedy(h.step(next));
  r.decode_s = util::seconds_since(t0);
  r.prefill_tok_s = double(o.batch * o.context) / r.prefill_s;
  r.decode_tok_s = double(o.batch * o.new_tokens) / r.decode_s;
  if (o.full_steps == 0) return r;

  auto seqs = prompts;
  auto full_step = [&]() {
    const int64_t n = int64_t(seqs[0].size());
    auto tok = torch::empty({o.batch, n}, torch::kInt64);
    for (int64_t b = 0; b < o.batch; ++b) std::copy(seqs[b].begin(), seqs[b].end(), tok[b].data_ptr<int64_t>());
    auto nxt = greedy(h.full(tok));
    for (int64_t b = 0; b < o.batch; ++b) seqs[b].push_back(nxt[b]);
  };
  full_step();  // warm-up
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.full_steps; ++i) full_step();
  r.full_s = util::seconds_since(t0);
  r.full_decode_tok_s = double(o.batch * o.full_steps) / r.full_s;
  return r;
}

void check_decode_bench_options(const DecodeBenchOptions& o, int64_t max_seq_len, int64_t min_full_steps,
                                const std::string& limit_name) {
  auto at_least = [](const char* flag, int64_t v, int64_t lo) {
    if (v < lo) throw InputError(std::string(flag) + " " + std::to_string(v) + ": expected >= " + std::to_string(lo));
  };
  at_least("--context", o.context, 1);
  at_least("--new", o.new_tokens, 1);
  at_least("--full-steps", o.full_steps, min_full_steps);
  at_least("--batch", o.batch, 1);
  const int64_t longest = o.context + std::max(o.new_tokens, o.full_steps) + 1;
  if (longest > max_seq_len)
    throw InputError("--context " + std::to_string(o.context) + " with --new " + std::to_string(o.new_tokens) +
                     " / --full-steps " + std::to_string(o.full_steps) + " needs " + std::to_string(longest) +
                     " positions: expected --context + max(--new, --full-steps) + 1 <= " + limit_name + " " +
                     std::to_string(max_seq_len));
}

DecodeBenchResult bench_decode(LoLModel model, const DecodeBenchOptions& o) {
  const auto& c = model->config();
  check_decode_bench_options(o, c.max_seq_len, 1);
  model->eval();
  c10::InferenceMode guard;
  SessionOptions so;
  so.batch_size = o.batch;
  so.max_len = o.context + o.new_tokens + 1;
  so.record_trace = false;
  DecodeSession sess(model, so);
  DecodeBenchHooks h;
  h.prefill = [&](const std::vector<std::vector<int64_t>>& prompts) {
    std::vector<RowInput> in(size_t(o.batch));
    for (int64_t b = 0; b < o.batch; ++b) {
      sess.reset(b);
      in[size_t(b)] = {b, prompts[size_t(b)], {}};
    }
    return sess.feed(in);
  };
  h.step = [&](const std::vector<int64_t>& next) { return sess.step(next); };
  h.full = [&](const torch::Tensor& tok) {
    LoLBatch batch;
    batch.tokens = tok.to(model->model->embed_tokens->weight.device());
    ForwardOptions fo;
    fo.logits_at = torch::full({o.batch, 1}, tok.size(1) - 1, torch::kInt64);
    return model->forward(batch, fo).logits.select(1, 0);
  };
  return time_decoding(o, c.vocab_size, h);
}

}  // namespace lol::inference
