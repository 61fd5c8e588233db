// Generation: greedy decoding equals argmax over full forward passes; batched
// generation with continuous batching equals one prompt at a time; sampling
// options, stop tokens, streaming and routing traces.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "inference/generate.h"
#include "inference/sampling.h"
#include "tiny_models.h"
#include "util/error.h"

using namespace lol;
using namespace lol::inference;

namespace {

Prompt random_prompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Prompt p;
  for (int64_t i = 0; i < n; ++i) p.tokens.push_back(int64_t(rng() % uint64_t(vocab)));
  return p;
}

/// Greedy continuation computed with one full forward pass per token; with a
/// repetition penalty != 1, transformers' RepetitionPenaltyLogitsProcessor written with
/// tensor ops (gather, where, scatter over every id of the sequence so far) first.
std::vector<int64_t> greedy_by_full_forward(LoLModel& m, const Prompt& p, int64_t new_tokens, double penalty = 1.0) {
  torch::NoGradGuard ng;
  std::vector<int64_t> seq = p.tokens, out;
  std::vector<int64_t> ro(p.router_only.begin(), p.router_only.end());
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t n = int64_t(seq.size());
    LoLBatch b;
    b.tokens = torch::tensor(seq, torch::kInt64).view({1, n});
    b.prompt_len = torch::tensor({p.prompt_len < 0 ? int64_t(p.tokens.size()) : p.prompt_len}, torch::kInt64);
    if (!ro.empty()) {
      ro.resize(n, 0);
      b.router_only = torch::tensor(ro, torch::kInt64).view({1, n}).to(torch::kBool);
    }
    ForwardOptions o;
    o.force = p.force;
    auto logits = m->forward(b, o).logits[0][n - 1];
    if (penalty != 1.0) {
      auto ids = torch::tensor(seq, torch::kInt64);
      auto score = logits.gather(0, ids);
      score = torch::where(score < 0, score * penalty, score / penalty);
      logits = logits.scatter(0, ids, score);
    }
    const int64_t t = logits.argmax().item<int64_t>();
    out.push_back(t);
    seq.push_back(t);
  }
  return out;
}

}  // namespace

TEST(Generate, GreedyEqualsFullForwardArgmax) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 7);
  RoutingPath path;
  path.library_size = c.library_size;
  for (int64_t d = 0; d < c.core_depth; ++d)
    for (int64_t k = 0; k < 8; ++k) path.set(d, k, (d + k) % c.library_size, k % 2 ? std::optional<double>(0.6) : std::nullopt);
  std::vector<Prompt> prompts;
  prompts.push_back(random_prompt(9, c.vocab_size, 1));
  Prompt q = random_prompt(14, c.vocab_size, 2);
  q.prompt_len = -1;
  q.router_only.assign(14, 0);
  q.router_only[13] = 1;  // a strategy label closing the prompt window
  prompts.push_back(q);
  Prompt f = random_prompt(5, c.vocab_size, 3);
  f.force = &path;
  f.prompt_len = 3;
  prompts.push_back(f);
  GenerateOptions o;
  o.max_new_tokens = 30;
  auto gens = generate(m, prompts, o);
  ASSERT_EQ(gens.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(gens[i].tokens, greedy_by_full_forward(m, prompts[i], 30));
    EXPECT_FALSE(gens[i].stopped);
  }
}

TEST(Generate, BatchedEqualsOneByOne) {
  auto c = lol::test::tiny_config();
  c.n_kv_heads = 2;
  auto m = lol::test::tiny_model(c, 8);
  RoutingPath path;
  path.library_size = c.library_size;
  for (int64_t d = 0; d < c.core_depth; ++d)
    for (int64_t k = 0; k < 6; ++k) path.set(d, k, (2 * d + k) % c.library_size, std::nullopt);
  std::vector<Prompt> prompts;
  for (int i = 0; i < 7; ++i) {
    Prompt p = random_prompt(3 + 4 * i, c.vocab_size, 10 + i);
    p.prompt_len = i % 2 ? -1 : 0;
    if (i == 2 || i == 5) p.force = &path;  // scheduled together, results unchanged
    prompts.push_back(p);
  }
  GenerateOptions o;
  o.max_new_tokens = 25;
  o.sampling.temperature = 0.9;
  o.sampling.top_k = 12;
  o.sampling.top_p = 0.95;
  o.seed = 1234;
  o.stop_tokens = {5};
  o.batch_size = 3;
  o.prefill_chunk = 4;
  o.trace = true;
  auto batched = generate(m, prompts, o);
  GenerateOptions waves = o;
  waves.refill = false;
  waves.batch_size = 4;
  auto batched_waves = generate(m, prompts, waves);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched_waves[i].tokens, batched[i].tokens) << i;
    SCOPED_TRACE(i);
    GenerateOptions one = o;
    one.batch_size = 1;
    one.prefill_chunk = 0;
    // the same sequence index keeps the same random stream
    std::vector<Prompt> alone(prompts.begin(), prompts.begin() + i + 1);
    auto single = generate(m, alone, one);
    EXPECT_EQ(batched[i].tokens, single[i].tokens);
    EXPECT_EQ(batched[i].stopped, single[i].stopped);
    // Same decisions per (depth, window); the order they were made in depends on chunking.
    auto decisions = [](const Generation& g) {
      std::map<std::pair<int64_t, int64_t>, int64_t> m;
      for (const auto& w : g.trace) m[{w.depth, w.k}] = w.expert;
      return m;
    };
    EXPECT_EQ(batched[i].trace.size(), single[i].trace.size());
    EXPECT_EQ(decisions(batched[i]), decisions(single[i]));
  }
}

TEST(Generate, StopTokensMaxNewAndStreaming) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 9);
  std::vector<Prompt> prompts = {random_prompt(6, c.vocab_size, 1), random_prompt(11, c.vocab_size, 2)};
  GenerateOptions o;
  o.max_new_tokens = 40;
  auto free_run = generate(m, prompts, o);
  // Stop at the token greedy decoding produces 5th for prompt 0.
  const int64_t stop = free_run[0].tokens[4];
  o.stop_tokens = {stop};
  std::map<int64_t, std::vector<int64_t>> streamed;
  o.on_token = [&](int64_t i, int64_t t) { streamed[i].push_back(t); };
  auto gens = generate(m, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(streamed[int64_t(i)], gens[i].tokens);
    const auto& full = free_run[i].tokens;
    auto it = std::find(full.begin(), full.end(), stop);
    std::vector<int64_t> expect(full.begin(), it == full.end() ? full.end() : it + 1);
    EXPECT_EQ(gens[i].tokens, expect);
    EXPECT_EQ(gens[i].stopped, it != full.end());
  }
  EXPECT_LE(gens[0].tokens.size(), 5u);
  o.max_new_tokens = 3;
  o.stop_tokens.clear();
  for (const auto& g : generate(m, prompts, o)) EXPECT_EQ(g.tokens.size(), 3u);
}

TEST(Generate, TraceCoversGeneratedWindowsAndTestTimeDepth) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 12);
  Prompt p = random_prompt(10, c.vocab_size, 4);
  p.prompt_len = -1;
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.trace = true;
  o.depth = c.core_depth + 2;
  auto g = generate(m, {p}, o)[0];
  // positions 0..38 fed; with a 10-token prompt window, depth l has windows 0 (the
  // prompt) and 1 + floor((j - 10 + delta_l) / W) for later positions.
  for (int64_t d = 0; d < o.depth; ++d) {
    const int64_t delta = (d * c.stride) % c.window;
    const int64_t windows = 1 + 1 + (38 - 10 + delta) / c.window;
    int64_t seen = 0;
    for (const auto& w : g.trace) seen += w.depth == d;
    EXPECT_EQ(seen, windows) << "depth " << d;
  }
}

// Huge but finite activations (embeddings scaled by 1e20, float32): the cached decoder
// normalises as the forward pass does (sums of squares in double) instead of
// overflowing mean(x^2) to Inf and emitting all-zero states (it generated 0 0 0 ...).
TEST(Generate, HugeActivationsDecodeAsTheForwardPass) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 7, torch::kFloat32);
  {
    torch::NoGradGuard ng;
    m->named_parameters()["model.embed_tokens.weight"].mul_(1e20);
  }
  std::vector<Prompt> prompts = {random_prompt(9, c.vocab_size, 1), random_prompt(5, c.vocab_size, 2)};
  GenerateOptions o;
  o.max_new_tokens = 6;
  const auto gens = generate(m, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(gens[i].tokens, greedy_by_full_forward(m, prompts[i], 6));
  }
}

// The repetition penalty (transformers' semantics) on every id of the prompt and of the
// tokens generated so far, with continuous batching over two rows.
TEST(Generate, RepetitionPenaltyEqualsFullForwardReference) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 7);
  std::vector<Prompt> prompts;
  for (uint64_t seed = 1; seed <= 3; ++seed) prompts.push_back(random_prompt(4 + int64_t(seed) * 3, c.vocab_size, seed));
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.batch_size = 2;
  const auto plain = generate(m, prompts, o);
  o.sampling.repetition_penalty = 1.8;
  const auto penalised = generate(m, prompts, o);
  bool changed = false;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(penalised[i].tokens, greedy_by_full_forward(m, prompts[i], 24, 1.8));
    changed |= penalised[i].tokens != plain[i].tokens;
  }
  EXPECT_TRUE(changed) << "a penalty of 1.8 changes some greedy continuation of this model";
  o.sampling.repetition_penalty = 0;
  EXPECT_THROW(generate(m, prompts, o), InputError);
  for (double bad : {double(NAN), 1e39, 1e-46, -1.0}) {  // 1e39 and 1e-46 leave float32's range
    o.sampling.repetition_penalty = bad;
    EXPECT_THROW(generate(m, prompts, o), InputError) << bad;
  }
}

// A penalty float32 holds but tiny (1e-44) made z / p +Inf and the softmax NaN: every
// seed sampled the same tokens (adversarial pass, session 26). Scores stay finite, and
// sampling among the boosted tokens follows the seed.
TEST(Generate, TinyRepetitionPenaltyKeepsScoresFinite) {
  std::vector<float> z = {2.0f, -3.0f, 1.0f, 0.5f};
  apply_repetition_penalty(z.data(), 4, {0, 1, 2}, 1e-44);
  for (float v : z) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_EQ(z[0], std::numeric_limits<float>::max());
  EXPECT_EQ(z[2], std::numeric_limits<float>::max());
  EXPECT_LT(z[1], 0.0f);  // -3e-44: multiplied, as transformers does for negative scores
  SamplingOptions o;
  o.temperature = 1;
  std::set<int64_t> drawn;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    std::mt19937_64 rng(seed);
    drawn.insert(sample_token(z.data(), 4, o, rng));
  }
  EXPECT_EQ(drawn, (std::set<int64_t>{0, 2})) << "the two boosted tokens, by the seed";
}

TEST(Generate, BadOptionsThrow) {
  auto c = lol::test::tiny_config();
  auto m = lol::test::tiny_model(c, 13);
  GenerateOptions o;
  EXPECT_THROW(generate(m, {Prompt{}}, o), InputError);
  Prompt p = random_prompt(4, c.vocab_size, 1);
  o.sampling.top_p = -0.5;
  EXPECT_THROW(generate(m, {p}, o), InputError);
  o.sampling.top_p = 1.5;
  EXPECT_THROW(generate(m, {p}, o), InputError);
  o.sampling.top_p = 1;
  o.sampling.temperature = -1;
  EXPECT_THROW(generate(m, {p}, o), InputError);
  o.sampling.temperature = 0;
  p.router_only = {1};
  EXPECT_THROW(generate(m, {p}, o), InputError);
}

TEST(Sampling, GreedyTopKTopPAndDistribution) {
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f, 1.0f};
  std::mt19937_64 rng(1);
  SamplingOptions g;
  EXPECT_EQ(sample_token(l.data(), 5, g, rng), 1);  // ties -> lowest id
  SamplingOptions k1;
  k1.temperature = 1.0;
  k1.top_k = 1;
  std::vector<float> unique_top = {0.5f, 2.0f, 1.5f, -1.0f, 1.0f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(unique_top.data(), 5, k1, rng), 1);
  // Tokens tied with the k-th score all stay (transformers' TopKLogitsWarper): top_k 1
  // over two equal maxima samples both, half each.
  {
    int ones = 0, twos = 0;
    for (int i = 0; i < 2000; ++i) {
      const auto id = sample_token(l.data(), 5, k1, rng);
      ASSERT_TRUE(id == 1 || id == 2) << id;
      (id == 1 ? ones : twos)++;
    }
    EXPECT_NEAR(ones / 2000.0, 0.5, 0.06);
    std::vector<float> three_tied = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
    SamplingOptions k2t = k1;
    k2t.top_k = 2;
    std::vector<int> seen(5, 0);
    for (int i = 0; i < 3000; ++i) seen[sample_token(three_tied.data(), 5, k2t, rng)]++;
    EXPECT_EQ(seen[0] + seen[4], 0);
    for (int id : {1, 2, 3}) EXPECT_NEAR(seen[id] / 3000.0, 1.0 / 3, 0.05) << id;
  }
  SamplingOptions p;
  p.temperature = 1.0;
  p.top_p = 0.3;  // the top token alone has mass ~0.38
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(l.data(), 5, p, rng), 1);
  p.top_p = 0;  // transformers' TopPLogitsWarper(0) keeps the most likely token alone
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(l.data(), 5, p, rng), 1);
  SamplingOptions k2;
  k2.temperature = 1.0;
  k2.top_k = 2;
  for (int i = 0; i < 50; ++i) {
    auto t = sample_token(l.data(), 5, k2, rng);
    EXPECT_TRUE(t == 1 || t == 2);
  }
  // Frequencies follow softmax(l / T).
  SamplingOptions t;
  t.temperature = 0.7;
  std::vector<double> expect(5);
  double z = 0;
  for (int i = 0; i < 5; ++i) z += expect[i] = std::exp(l[i] / 0.7);
  std::vector<int> count(5, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) count[sample_token(l.data(), 5, t, rng)]++;
  for (int i = 0; i < 5; ++i) {
    const double pi = expect[i] / z;
    EXPECT_NEAR(double(count[i]) / n, pi, 5 * std::sqrt(pi * (1 - pi) / n) + 1e-3) << i;
  }
  // Reproducible per sequence.
  auto a = sequence_rng(3, 2), b = sequence_rng(3, 2), c = sequence_rng(3, 1);
  EXPECT_EQ(a(), b());
  EXPECT_NE(b(), c());
  // Repetition penalty: positive logits divided, negative multiplied, each id once,
  // ids outside the vocabulary ignored.
  std::vector<float> r = {2.0f, -1.0f, 0.0f, 3.0f};
  apply_repetition_penalty(r.data(), 4, {0, 1, 2, 7, -1}, 2.0);
  EXPECT_EQ(r, (std::vector<float>{1.0f, -2.0f, 0.0f, 3.0f}));
  std::vector<float> nan = {NAN, 0.f, NAN};
  EXPECT_EQ(sample_token(nan.data(), 3, g, rng), 1);
  EXPECT_EQ(sample_token(nan.data(), 3, t, rng), 1);
}
