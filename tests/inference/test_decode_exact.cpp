// Cached decoding reproduces the full forward pass (issue 6): logits at every
// position agree to 1e-5 for sequences crossing many window boundaries, W and S not
// dividing the length, prompt windows, router-only tokens, forced paths, untied
// routers, GQA, chunked prefill and batches of rows.
#include <gtest/gtest.h>

#include <random>

#include "core/runtime.h"
#include "inference/block_step.h"
#include "inference/decode_session.h"
#include "tiny_models.h"
#include "util/error.h"

using namespace lol;
using namespace lol::inference;

namespace {

struct Seq {
  std::vector<int64_t> tokens;
  std::vector<uint8_t> router_only;  // empty = none
  int64_t prompt_len = 0;
  const RoutingPath* force = nullptr;
};

Seq random_seq(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Seq s;
  for (int64_t i = 0; i < n; ++i) s.tokens.push_back(int64_t(rng() % uint64_t(vocab)));
  return s;
}

/// Full forward logits [n, V] of one sequence.
torch::Tensor full_logits(LoLModel& m, const Seq& s, std::vector<DepthTrace>* trace = nullptr) {
  torch::NoGradGuard ng;
  const int64_t n = int64_t(s.tokens.size());
  LoLBatch b;
  b.tokens = torch::tensor(s.tokens, torch::kInt64).view({1, n});
  b.prompt_len = torch::tensor({s.prompt_len}, torch::kInt64);
  if (!s.router_only.empty()) {
    std::vector<int64_t> ro(s.router_only.begin(), s.router_only.end());
    b.router_only = torch::tensor(ro, torch::kInt64).view({1, n}).to(torch::kBool);
  }
  ForwardOptions o;
  o.force = s.force;
  o.trace = trace != nullptr;
  auto out = m->forward(b, o);
  if (trace) *trace = out.trace;
  return out.logits[0];
}

RowInput slice(const Seq& s, int64_t row, int64_t begin, int64_t end) {
  RowInput in;
  in.row = row;
  in.tokens.assign(s.tokens.begin() + begin, s.tokens.begin() + end);
  if (!s.router_only.empty()) in.router_only.assign(s.router_only.begin() + begin, s.router_only.begin() + end);
  return in;
}

/// Session logits [n, V]: prefill in chunks of `chunk` (0 = one chunk) for the first
/// `prefill` tokens, then one token per call.
torch::Tensor cached_logits(DecodeSession& sess, const Seq& s, int64_t prefill, int64_t chunk, int64_t row = 0) {
  sess.reset(row, s.prompt_len, s.force);
  std::vector<torch::Tensor> parts;
  const int64_t n = int64_t(s.tokens.size());
  for (int64_t i = 0; i < prefill;) {
    const int64_t e = chunk > 0 ? std::min(prefill, i + chunk) : prefill;
    parts.push_back(sess.feed({slice(s, row, i, e)}, /*all_logits=*/true).clone());
    i = e;
  }
  for (int64_t i = prefill; i < n; ++i) parts.push_back(sess.feed({slice(s, row, i, i + 1)}).clone());
  return torch::cat(parts, 0);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

RoutingPath make_path(const LoLConfig& c, bool with_alpha, uint64_t seed) {
  std::mt19937_64 rng(seed);
  RoutingPath p;
  p.library_size = c.library_size;
  for (int64_t d = 0; d < c.core_depth; ++d)
    for (int64_t k = 0; k < 9; ++k) {
      if (rng() % 4 == 0) continue;  // leave some entries to the router
      std::optional<double> a;
      if (with_alpha && rng() % 2) a = 0.25 + 0.5 * double(rng() % 100) / 100.0;
      p.set(d, k, int64_t(rng() % uint64_t(c.library_size)), a);
    }
  return p;
}

struct Case {
  const char* name;
  LoLConfig cfg;
  int64_t n, prompt_len;
  bool router_only, force, force_alpha;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  auto c = test::tiny_config();
  v.push_back({"plain", c, 53, 0, false, false, false});
  v.push_back({"prompt_window", c, 61, 11, false, false, false});
  v.push_back({"router_only", c, 47, 9, true, false, false});
  v.push_back({"forced_router_alpha", c, 50, 0, false, true, false});
  v.push_back({"forced_fixed_alpha", c, 50, 5, true, true, true});
  auto u = c;
  u.untied_router = true;
  u.tie_embeddings = false;
  u.window = 7;
  u.stride = 5;
  v.push_back({"untied", u, 45, 0, true, false, false});
  auto g = c;
  g.n_kv_heads = 2;
  g.library_size = 4;
  g.core_depth = 5;
  g.window = 6;
  g.stride = 4;
  g.n_prelude = 2;
  g.n_coda = 0;
  v.push_back({"gqa_deep", g, 58, 13, true, true, false});
  auto s0 = c;
  s0.stride = 0;
  s0.window = 5;
  v.push_back({"stride0", s0, 33, 0, false, false, false});
  return v;
}

Seq make_seq(const Case& cs, const RoutingPath* path, uint64_t seed) {
  Seq s = random_seq(cs.n, cs.cfg.vocab_size, seed);
  s.prompt_len = cs.prompt_len;
  if (cs.router_only) {
    s.router_only.assign(cs.n, 0);
    // a label at the end of the prompt, a leading token, and scattered later ones
    for (int64_t i : {int64_t(0), cs.prompt_len > 0 ? cs.prompt_len - 1 : int64_t(3), int64_t(17), int64_t(18), int64_t(30)})
      if (i < cs.n) s.router_only[i] = 1;
  }
  s.force = path;
  return s;
}

}  // namespace

TEST(DecodeExact, TokenByTokenEqualsFullForward) {
  uint64_t seed = 11;
  for (const auto& cs : cases()) {
    SCOPED_TRACE(cs.name);
    auto m = test::tiny_model(cs.cfg, seed++);
    RoutingPath path = make_path(cs.cfg, cs.force_alpha, seed++);
    Seq s = make_seq(cs, cs.force ? &path : nullptr, seed++);
    auto ref = full_logits(m, s);
    SessionOptions so;
    DecodeSession sess(m, so);
    auto got = cached_logits(sess, s, 0, 0);
    EXPECT_LT(max_diff(got, ref), 1e-5);
    // and after a prefill of the prompt
    auto got2 = cached_logits(sess, s, std::max<int64_t>(cs.prompt_len, 1), 0);
    EXPECT_LT(max_diff(got2, ref), 1e-5);
  }
}

TEST(DecodeExact, RoutingDecisionsMatchFullForwardTrace) {
  auto cs = cases()[4];  // forced path with fixed alphas, prompt window, router-only
  auto m = test::tiny_model(cs.cfg, 5);
  RoutingPath path = make_path(cs.cfg, true, 6);
  Seq s = make_seq(cs, &path, 7);
  std::vector<DepthTrace> tr;
  full_logits(m, s, &tr);
  DecodeSession sess(m);
  cached_logits(sess, s, 0, 0);
  const auto& dec = sess.trace(0);
  size_t expected = 0;
  for (const auto& t : tr) expected += t.k.size();
  ASSERT_EQ(dec.size(), expected);
  for (const auto& w : dec) {
    const auto& t = tr.at(w.depth);
    auto it = std::find(t.k.begin(), t.k.end(), w.k);
    ASSERT_NE(it, t.k.end());
    const size_t g = size_t(it - t.k.begin());
    EXPECT_EQ(w.begin, t.begin[g]);
    EXPECT_EQ(w.expert, t.expert[g].item<int64_t>());
    EXPECT_NEAR(w.alpha, t.alpha[g].item<double>(), 1e-6);
    EXPECT_EQ(w.forced, t.forced[g].item<bool>());
  }
}

TEST(DecodeExact, ChunkedPrefillEqualsSinglePrefill) {
  auto cs = cases()[6];  // GQA, deep core, prompt window, router-only, forced path
  auto m = test::tiny_model(cs.cfg, 21);
  RoutingPath path = make_path(cs.cfg, false, 22);
  Seq s = make_seq(cs, &path, 23);
  auto ref = full_logits(m, s);
  DecodeSession sess(m);
  const int64_t prefill = 41;
  auto single = cached_logits(sess, s, prefill, 0);
  EXPECT_LT(max_diff(single, ref), 1e-5);
  for (int64_t chunk : {1, 3, 7}) {
    SCOPED_TRACE(chunk);
    auto got = cached_logits(sess, s, prefill, chunk);
    EXPECT_LT(max_diff(got, single), 1e-5);
  }
}

namespace {

/// A batch of four rows (prompts in one feed, then decoding together until each row
/// runs out) against each row decoded alone and the full forward pass.
void check_batch_of_different_lengths() {
  auto c = test::tiny_config();
  c.n_kv_heads = 2;
  auto m = test::tiny_model(c, 31);
  RoutingPath path = make_path(c, true, 32);
  std::vector<Seq> seqs;
  const int64_t lens[] = {30, 45, 38, 52};
  const int64_t prompts[] = {12, 0, 21, 5};
  const int64_t prefill[] = {12, 7, 21, 1};
  for (int i = 0; i < 4; ++i) {
    Seq s = random_seq(lens[i], c.vocab_size, 100 + i);
    s.prompt_len = prompts[i];
    if (i == 2) {
      s.router_only.assign(lens[i], 0);
      s.router_only[20] = 1;
      s.router_only[25] = 1;
    }
    if (i == 1) s.force = &path;
    seqs.push_back(s);
  }
  SessionOptions so;
  so.batch_size = 4;
  DecodeSession batch(m, so);
  // rows take their prompts in one feed, then decode together; rows run out at
  // different times.
  std::vector<std::vector<torch::Tensor>> got(4);
  std::vector<RowInput> pre;
  for (int i = 0; i < 4; ++i) {
    batch.reset(i, seqs[i].prompt_len, seqs[i].force);
    pre.push_back(slice(seqs[i], i, 0, prefill[i]));
  }
  auto lp = batch.feed(pre, true);
  int64_t off = 0;
  for (int i = 0; i < 4; ++i) {
    got[i].push_back(lp.narrow(0, off, prefill[i]).clone());
    off += prefill[i];
  }
  for (int64_t t = 1;; ++t) {
    std::vector<RowInput> in;
    std::vector<int> who;
    for (int i = 0; i < 4; ++i) {
      const int64_t p = prefill[i] + t - 1;
      if (p < lens[i]) {
        in.push_back(slice(seqs[i], i, p, p + 1));
        who.push_back(i);
      }
    }
    if (in.empty()) break;
    auto lg = batch.feed(in);
    for (size_t j = 0; j < who.size(); ++j) got[who[j]].push_back(lg[j].unsqueeze(0).clone());
  }
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    auto b = torch::cat(got[i], 0);
    DecodeSession one(m);
    auto single = cached_logits(one, seqs[i], prefill[i], 0);
    EXPECT_LT(max_diff(b, single), 1e-5);
    EXPECT_LT(max_diff(b, full_logits(m, seqs[i])), 1e-5);
  }
}

}  // namespace

TEST(DecodeExact, BatchOfDifferentLengthsEqualsOneByOne) { check_batch_of_different_lengths(); }

namespace {

struct KernelsOff {  // the GPU's code path on the CPU
  const bool was = lol::cpu_kernels_enabled();
  KernelsOff() { lol::set_cpu_kernels_enabled(false); }
  ~KernelsOff() { lol::set_cpu_kernels_enabled(was); }
};

}  // namespace

// The GPU's path (fused CPU kernels off): rows of one step routed to different experts
// run as padded equal groups with the library's stacked weights (block_delta).
TEST(DecodeExact, BatchOnTheGpuPathEqualsOneByOne) {
  KernelsOff off;
  const int64_t padded = padded_block_delta_calls();
  check_batch_of_different_lengths();
  EXPECT_GT(padded_block_delta_calls(), padded) << "no step ran padded expert groups";
}

// Both forms of the padded groups, forced: every expert of the library in order (the
// stacked weights as they are) and a subset out of order (the used experts' rows
// gathered), each row decoding its own forced expert, against the full forward pass.
TEST(DecodeExact, PaddedExpertGroupsEqualTheFullForward) {
  KernelsOff off;
  auto c = test::tiny_config();  // library_size 3
  auto m = test::tiny_model(c, 61);
  for (const std::vector<int64_t>& experts : {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{2, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(experts));
    const int64_t B = int64_t(experts.size()), n = 29;
    std::vector<RoutingPath> paths(static_cast<size_t>(B));
    std::vector<Seq> seqs;
    for (int64_t r = 0; r < B; ++r) {
      paths[size_t(r)].library_size = c.library_size;
      for (int64_t d = 0; d < c.core_depth; ++d)
        for (int64_t k = 0; k <= n / c.window + 1; ++k) paths[size_t(r)].set(d, k, experts[size_t(r)], std::nullopt);
      seqs.push_back(random_seq(n, c.vocab_size, 70 + uint64_t(r)));
      seqs.back().force = &paths[size_t(r)];
    }
    SessionOptions so;
    so.batch_size = B;
    DecodeSession sess(m, so);
    std::vector<std::vector<torch::Tensor>> got(static_cast<size_t>(B));
    for (int64_t r = 0; r < B; ++r) sess.reset(r, 0, &paths[size_t(r)]);
    const int64_t padded = padded_block_delta_calls();
    for (int64_t t = 0; t < n; ++t) {
      std::vector<RowInput> in;
      for (int64_t r = 0; r < B; ++r) in.push_back(slice(seqs[size_t(r)], r, t, t + 1));
      auto lg = sess.feed(in);
      for (int64_t r = 0; r < B; ++r) got[size_t(r)].push_back(lg[r].unsqueeze(0).clone());
    }
    EXPECT_EQ(padded_block_delta_calls() - padded, n * c.core_depth) << "every routed depth of every step";
    for (int64_t r = 0; r < B; ++r)
      EXPECT_LT(max_diff(torch::cat(got[size_t(r)], 0), full_logits(m, seqs[size_t(r)])), 1e-5) << "row " << r;
  }
}

TEST(DecodeExact, FloatModelWithinRelativeTolerance) {
  auto c = test::tiny_config();
  c.d_model = 32;
  c.n_heads = 4;
  c.n_kv_heads = 1;
  auto m = test::tiny_model(c, 41, torch::kFloat32);
  Seq s = random_seq(70, c.vocab_size, 42);
  s.prompt_len = 9;
  auto ref = full_logits(m, s);
  DecodeSession sess(m);
  auto got = cached_logits(sess, s, 20, 6);
  EXPECT_LT(max_diff(got, ref) / ref.abs().max().item<double>(), 1e-5);
}

TEST(DecodeExact, FusedCpuKernelsEqualTensorPath) {
  auto cs = cases()[6];  // GQA, prompt window, router-only, forced path
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    auto m = test::tiny_model(cs.cfg, 45, dtype);
    RoutingPath path = make_path(cs.cfg, true, 46);
    Seq s = make_seq(cs, &path, 47);
    SessionOptions fused, plain;
    plain.cpu_kernels = false;
    DecodeSession a(m, fused), b(m, plain);
    auto la = cached_logits(a, s, 3, 0), lb = cached_logits(b, s, 3, 0);
    EXPECT_LT(max_diff(la, lb) / lb.abs().max().item<double>(), 1e-5);
  }
}

TEST(DecodeExact, GrowingModelRunsItsActiveDepth) {
  auto c = test::tiny_config();
  c.core_depth = 4;
  auto m = test::tiny_model(c, 51);
  m->set_active_depth(2);
  Seq s = random_seq(40, c.vocab_size, 52);
  auto ref = full_logits(m, s);
  DecodeSession sess(m);
  EXPECT_EQ(sess.depth_plan().size(), 2);
  EXPECT_LT(max_diff(cached_logits(sess, s, 10, 0), ref), 1e-5);
}

TEST(DecodeCache, CoreCacheDoesNotGrowWithSequenceLength) {
  auto c = test::tiny_config();
  c.max_seq_len = 4096;
  auto m = test::tiny_model(c, 61);
  DecodeSession sess(m);
  sess.reset(0);
  const int64_t core0 = sess.core_cache_bytes();
  // d_model-sized running sums plus one window of keys/values per routed depth.
  const int64_t elem = 8;  // double
  EXPECT_EQ(core0, c.core_depth * (2 * c.d_model + 2 * c.n_kv_heads * c.window * c.head_dim()) * elem);
  std::mt19937_64 rng(3);
  int64_t full_prev = sess.full_cache_bytes();
  for (int64_t i = 0; i < 1500; ++i) {
    sess.feed({{0, {int64_t(rng() % uint64_t(c.vocab_size))}, {}}});
    ASSERT_EQ(sess.core_cache_bytes(), core0) << "at length " << i + 1;
    for (int64_t d = 0; d < c.core_depth; ++d) ASSERT_LE(sess.window_keys(0, d), c.window);
    ASSERT_GE(sess.full_cache_bytes(), full_prev);
    full_prev = sess.full_cache_bytes();
  }
  EXPECT_GE(sess.full_cache_bytes(), 2 * (c.n_prelude + c.n_coda) * c.n_kv_heads * 1500 * c.head_dim() * elem);
}

TEST(DecodeCache, PromptWindowBoundsTheCoreCache) {
  auto c = test::tiny_config();
  auto m = test::tiny_model(c, 62);
  DecodeSession sess(m);
  sess.reset(0, 20);
  Seq s = random_seq(20, c.vocab_size, 9);
  sess.feed({slice(s, 0, 0, 20)});
  for (int64_t d = 0; d < c.core_depth; ++d) EXPECT_EQ(sess.window_keys(0, d), 20);
  const int64_t core = sess.core_cache_bytes();
  for (int64_t i = 0; i < 100; ++i) sess.feed({{0, {1}, {}}});
  EXPECT_EQ(sess.core_cache_bytes(), core);
  for (int64_t d = 0; d < c.core_depth; ++d) EXPECT_LE(sess.window_keys(0, d), c.window);
}

TEST(DecodeDepth, PlansFollowTheDocumentedRules) {
  EXPECT_EQ(make_depth_plan(4, 4, DepthRule::kStretch).param, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(make_depth_plan(4, 4, DepthRule::kCycle).param, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(make_depth_plan(3, 5, DepthRule::kStretch).param, (std::vector<int64_t>{0, 1, 1, 2, 2}));
  EXPECT_EQ(make_depth_plan(3, 7, DepthRule::kCycle).param, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(make_depth_plan(4, 2, DepthRule::kStretch).param, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(make_depth_plan(4, 1, DepthRule::kStretch).param, (std::vector<int64_t>{0}));
  EXPECT_TRUE(make_depth_plan(4, 0, DepthRule::kStretch).param.empty());
  EXPECT_THROW(make_depth_plan(0, 2, DepthRule::kStretch), InputError);
  EXPECT_THROW(parse_depth_rule("loop"), InputError);
  EXPECT_EQ(parse_depth_rule("cycle"), DepthRule::kCycle);
}

TEST(DecodeDepth, TestTimeDepth) {
  auto c = test::tiny_config();
  auto m = test::tiny_model(c, 71);
  Seq s = random_seq(40, c.vocab_size, 72);
  auto ref = full_logits(m, s);
  SessionOptions same;
  same.depth = c.core_depth;
  DecodeSession sess_same(m, same);
  EXPECT_LT(max_diff(cached_logits(sess_same, s, 5, 0), ref), 1e-5);
  for (auto rule : {DepthRule::kStretch, DepthRule::kCycle}) {
    for (int64_t depth : {c.core_depth + 3, int64_t(1)}) {
      SessionOptions o;
      o.depth = depth;
      o.depth_rule = rule;
      DecodeSession sess(m, o);
      auto got = cached_logits(sess, s, 5, 0);
      EXPECT_TRUE(torch::isfinite(got).all().item<bool>());
      EXPECT_GT(max_diff(got, ref), 1e-6);  // a different network
      int64_t max_depth = -1;
      for (const auto& w : sess.trace(0)) max_depth = std::max(max_depth, w.depth);
      EXPECT_EQ(max_depth, depth - 1);
      // chunked prefill is still exact at the new depth
      EXPECT_LT(max_diff(cached_logits(sess, s, 40, 3), got), 1e-5);
    }
  }
  // Zero routed depths: prelude -> coda.
  SessionOptions zero;
  zero.depth = 0;
  DecodeSession sess0(m, zero);
  auto m0 = test::tiny_model(c, 71);
  m0->set_active_depth(0);
  EXPECT_LT(max_diff(cached_logits(sess0, s, 5, 0), full_logits(m0, s)), 1e-5);
}

TEST(DecodeErrors, BadInputsThrow) {
  auto c = test::tiny_config();
  auto m = test::tiny_model(c, 81);
  SessionOptions o;
  o.batch_size = 2;
  o.max_len = 10;
  DecodeSession sess(m, o);
  EXPECT_THROW(sess.feed({{0, {int64_t(c.vocab_size)}, {}}}), InputError);
  EXPECT_THROW(sess.feed({{2, {1}, {}}}), InputError);
  EXPECT_THROW(sess.feed({{-1, {1}, {1}}}), InputError);  // row checked before its router_only or length
  EXPECT_THROW(sess.feed({{0, {1}, {}}, {0, {2}, {}}}), InputError);
  EXPECT_THROW(sess.feed({{0, {1, 2}, {1}}}), InputError);
  EXPECT_THROW(sess.feed({{1, std::vector<int64_t>(11, 1), {}}}), InputError);
  EXPECT_THROW(sess.reset(0, -1), InputError);
  RoutingPath bad;
  bad.library_size = 9;
  bad.set(0, 0, 7, std::nullopt);
  EXPECT_THROW(sess.reset(0, 0, &bad), InputError);
  EXPECT_THROW(sess.step({1}), InputError);
  SessionOptions deep;
  deep.depth = 2;
  auto c0 = c;
  c0.core_depth = 0;
  auto m0 = test::tiny_model(c0, 82);
  EXPECT_THROW({ DecodeSession bad_depth(m0, deep); }, InputError);
}

// LoL with an MoE prelude/coda (paper 4.3.2): the decoder routes each new token through
// the top-k experts of every prelude/coda block, as the full forward does; the fused CPU
// kernels step aside (CpuDecoder::create), single rows and batches agree.
TEST(DecodeExact, MoEPreludeCodaEqualsFullForward) {
  auto c = test::tiny_config();
  c.n_prelude = 2;
  c.prelude_coda_experts = 4;
  c.prelude_coda_top_k = 2;
  c.prelude_coda_expert_ffn = 12;
  auto m = test::tiny_model(c, 61);
  {
    torch::NoGradGuard ng;
    auto gen = at::detail::createCPUGenerator(62);
    for (auto& b : m->named_buffers())
      if (b.key().find("mlp.balance_bias") != std::string::npos)
        b.value().copy_(0.05 * at::normal(0.0, 1.0, b.value().sizes(), gen));
  }
  Seq a = random_seq(45, c.vocab_size, 63), b = random_seq(33, c.vocab_size, 64);
  a.prompt_len = 10;
  auto ref_a = full_logits(m, a), ref_b = full_logits(m, b);
  DecodeSession one(m);
  EXPECT_LT(max_diff(cached_logits(one, a, 0, 0), ref_a), 1e-5);
  EXPECT_LT(max_diff(cached_logits(one, a, 10, 4), ref_a), 1e-5);
  SessionOptions so;
  so.batch_size = 2;
  DecodeSession two(m, so);
  two.reset(0, a.prompt_len, nullptr);
  two.reset(1, b.prompt_len, nullptr);
  std::vector<torch::Tensor> ga, gb;
  for (int64_t t = 0; t < 45; ++t) {
    std::vector<RowInput> in{slice(a, 0, t, t + 1)};
    if (t < 33) in.push_back(slice(b, 1, t, t + 1));
    auto lg = two.feed(in);
    ga.push_back(lg[0].unsqueeze(0).clone());
    if (t < 33) gb.push_back(lg[1].unsqueeze(0).clone());
  }
  EXPECT_LT(max_diff(torch::cat(ga, 0), ref_a), 1e-5);
  EXPECT_LT(max_diff(torch::cat(gb, 0), ref_b), 1e-5);
}
