#include "inference/dense_benchmark.h"

#include <chrono>
#include <random>

#include "inference/dense_session.h"
#include "util/clock.h"
#include "util/error.h"

namespace lol::inference {

namespace {

std::vector<int64_t> greedy(const torch::Tensor& logits) {
  auto a = logits.argmax(-1).to(torch::kCPU).contiguous();
  return std::vector<int64_t>(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + a.numel());
}

}  // namespace

DecodeBenchResult bench_dense_decode(baselines::DenseModel model, const DecodeBenchOptions& o) {
  const auto& c = model->config();
  if (o.context < 1 || o.new_tokens < 1 || o.full_steps < 0 || o.batch < 1)
    throw InputError("bench: context, new tokens and batch must be >= 1, full steps >= 0");
  const int64_t longest = o.context + std::max(o.new_tokens, o.full_steps) + 1;
  if (longest > c.max_seq_len)
    throw InputError("bench: context " + std::to_string(o.context) + " + new tokens needs " + std::to_string(longest) +
                     " positions, more than max_seq_len " + std::to_string(c.max_seq_len));
  model->eval();
  c10::InferenceMode guard;
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int64_t>> prompts(o.batch);
  for (auto& p : prompts)
    for (int64_t i = 0; i < o.context; ++i) p.push_back(int64_t(rng() % uint64_t(c.vocab_size)));
  DecodeBenchResult r;
  DenseSessionOptions so;
  so.batch_size = o.batch;
  so.max_len = o.context + o.new_tokens + 1;
  DenseDecodeSession sess(model, so);
  auto prefill = [&]() {
    std::vector<DenseRowInput> in(o.batch);
    for (int64_t b = 0; b < o.batch; ++b) {
      sess.reset(b);
      in[b] = {b, prompts[b]};
    }
    return greedy(sess.feed(in));
  };
  prefill();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  auto next = prefill();
  r.prefill_s = util::seconds_since(t0);
  next = greedy(sess.step(next));  // warm-up
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.new_tokens; ++i) next = greedy(sess.step(next));
  r.decode_s = util::seconds_since(t0);
  r.prefill_tok_s = double(o.batch * o.context) / r.prefill_s;
  r.decode_tok_s = double(o.batch * o.new_tokens) / r.decode_s;
  if (o.full_steps == 0) return r;

  auto seqs = prompts;
  const auto dev = model->embed_tokens->weight.device();
  auto full_step = [&]() {
    const int64_t n = int64_t(seqs[0].size());
    auto tok = torch::empty({o.batch, n}, torch::kInt64);
    for (int64_t b = 0; b < o.batch; ++b) std::copy(seqs[b].begin(), seqs[b].end(), tok[b].data_ptr<int64_t>());
    auto h = model->hidden(tok.to(dev)).select(1, n - 1);
    auto nxt = greedy(model->logits(h));
    for (int64_t b = 0; b < o.batch; ++b) seqs[b].push_back(nxt[b]);
  };
  full_step();  // warm-up
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.full_steps; ++i) full_step();
  r.full_s = util::seconds_since(t0);
  r.full_decode_tok_s = double(o.batch * o.full_steps) / r.full_s;
  return r;
}

}  // namespace lol::inference
