// Causality (no position sees later tokens, through attention or the router),
// packing invariance with document ids, and router-only tokens acting only through
// routing (paper 3.2: "the router may only use information that will also be
// available during generation").
#include "model/model_test_util.h"

using namespace reftest;

namespace {

struct Variant {
  std::string name;
  bool force = false;
  int64_t prompt = 0;
  bool router_only = false;
  bool docs = false;
};

lol::LoLOutput run(lol::LoLModel& m, const RefRow& row, const lol::RoutingPath* force = nullptr) {
  torch::NoGradGuard ng;
  lol::ForwardOptions fo;
  fo.trace = true;
  fo.force = force;
  return m->forward(make_batch({row}), fo);
}

/// Experts per (depth, window begin) of a trace of row 0.
std::map<std::pair<int64_t, int64_t>, int64_t> experts(const std::vector<lol::DepthTrace>& tr) {
  std::map<std::pair<int64_t, int64_t>, int64_t> e;
  for (size_t d = 0; d < tr.size(); ++d)
    for (size_t g = 0; g < tr[d].k.size(); ++g) e[{int64_t(d), tr[d].begin[g]}] = tr[d].expert[int64_t(g)].item<int64_t>();
  return e;
}

}  // namespace

TEST(Causality, LaterTokensNeverChangeEarlierLogits) {
  const std::vector<Variant> variants = {
      {"router free"},
      {"path forced", true},
      {"prompt window", false, 7},
      {"router-only tokens", false, 0, true},
      {"document ids", false, 0, false, true},
      {"all together, forced", true, 5, true, true},
  };
  lol::LoLConfig c = tiny_config();
  c.stride = 1;
  c.library_size = 4;
  auto model = make_model(c, 21);
  const int64_t T = 26;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    RefRow row;
    row.tokens = random_tokens(T, c.vocab_size, 5);
    row.prompt_len = v.prompt;
    if (v.router_only) {
      row.router_only.assign(T, 0);
      for (int t : {0, 3, 8, 13, 14, 20}) row.router_only[t] = 1;
    }
    if (v.docs) {
      row.doc_ids.assign(T, 0);
      for (int t = 10; t < 19; ++t) row.doc_ids[t] = 1;
      for (int t = 19; t < T; ++t) row.doc_ids[t] = 2;
    }
    lol::RoutingPath path;
    if (v.force) {
      path.library_size = c.library_size;
      for (int64_t d = 0; d < c.core_depth; ++d)
        for (int64_t k = 0; k < 10; ++k) path.set(d, k, (d + 3 * k) % c.library_size, k % 2 ? std::optional<double>(0.6) : std::nullopt);
    }
    auto base = run(model, row, v.force ? &path : nullptr);
    int64_t routing_changed = 0;
    for (int64_t i = 0; i + 1 < T; ++i) {
      for (uint64_t trial = 0; trial < 2; ++trial) {
        RefRow alt = row;
        auto suffix = random_tokens(T, c.vocab_size, 1000 + 31 * i + trial);
        for (int64_t t = i + 1; t < T; ++t) alt.tokens[t] = suffix[t];
        auto o = run(model, alt, v.force ? &path : nullptr);
        EXPECT_LT(max_diff(o.logits[0].slice(0, 0, i + 1), base.logits[0].slice(0, 0, i + 1)), 1e-12)
            << "position <= " << i << " changed when tokens after it changed";
        auto eb = experts(base.trace), eo = experts(o.trace);
        for (const auto& [key, e] : eb) {
          if (key.second <= i) EXPECT_EQ(eo.at(key), e) << "routing of a window starting at " << key.second << " changed";
          else routing_changed += eo.at(key) != e;
        }
      }
    }
    // The test must exercise routing: later windows do change expert when later tokens change.
    if (!v.force) EXPECT_GT(routing_changed, 0);
  }
}

TEST(Packing, DocumentPackedAfterOthersYieldsItsLogitsAlone) {
  lol::LoLConfig c = tiny_config();
  c.untied_router = true;
  auto model = make_model(c, 22);
  auto a = random_tokens(11, c.vocab_size, 1), b = random_tokens(6, c.vocab_size, 2), z = random_tokens(5, c.vocab_size, 3);

  RefRow alone;
  alone.tokens = a;
  auto ref = run(model, alone);

  for (int64_t pad_front : {0, 2}) {
    // [padding?] B A C (ids) in one row, A also with router-only flags on other documents.
    RefRow packed;
    for (int64_t t = 0; t < pad_front; ++t) {
      packed.tokens.push_back(0);
      packed.doc_ids.push_back(-1);
    }
    for (auto t : b) packed.tokens.push_back(t), packed.doc_ids.push_back(4);
    const int64_t off = int64_t(packed.tokens.size());
    for (auto t : a) packed.tokens.push_back(t), packed.doc_ids.push_back(9);
    for (auto t : z) packed.tokens.push_back(t), packed.doc_ids.push_back(2);
    auto o = run(model, packed);
    EXPECT_LT(max_diff(o.logits[0].slice(0, off, off + int64_t(a.size())), ref.logits[0]), 1e-12);
    // Same windows and routing for A.
    for (size_t d = 0; d < ref.trace.size(); ++d) {
      std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> wa, wp;
      for (size_t g = 0; g < ref.trace[d].k.size(); ++g)
        wa.emplace_back(ref.trace[d].k[g], ref.trace[d].begin[g], ref.trace[d].len[g], ref.trace[d].expert[int64_t(g)].item<int64_t>());
      for (size_t g = 0; g < o.trace[d].k.size(); ++g)
        if (o.trace[d].doc_begin[g] == off)
          wp.emplace_back(o.trace[d].k[g], o.trace[d].begin[g] - off, o.trace[d].len[g], o.trace[d].expert[int64_t(g)].item<int64_t>());
      EXPECT_EQ(wa, wp) << "depth " << d + 1;
    }
  }

  // Batch invariance: A in a batch with other rows gives the same logits.
  RefRow other;
  other.tokens = random_tokens(11, c.vocab_size, 9);
  other.prompt_len = 4;
  torch::NoGradGuard ng;
  auto o = model->forward(make_batch({other, alone}));
  EXPECT_LT(max_diff(o.logits[1], ref.logits[0]), 1e-12);
}

TEST(Packing, Float32RouterInputsDoNotDependOnOtherRows) {
  // Regression: the running sum behind r_k = mean(mu_0..mu_{k-1}) spans every window of
  // the batch; in float32 its rounding leaked the other rows' states into a row's router
  // probabilities (~1e-5 here), so routing near a tie depended on batch composition.
  lol::LoLConfig c = tiny_config();
  c.d_model = 32;
  auto m = make_model(c, 25, torch::kFloat32, /*router_std=*/0.002);
  {
    torch::NoGradGuard ng;
    m->model->embed_tokens->weight.add_(200.0);  // a large residual stream, as trained models have
  }
  RefRow alone;
  alone.tokens = random_tokens(40, c.vocab_size, 1);
  std::vector<RefRow> rows;
  for (int r = 0; r < 127; ++r) {
    RefRow x;
    x.tokens = random_tokens(40, c.vocab_size, 100 + r);
    rows.push_back(x);
  }
  rows.push_back(alone);
  torch::NoGradGuard ng;
  lol::ForwardOptions fo;
  fo.trace = true;
  auto a = m->forward(make_batch({alone}), fo), b = m->forward(make_batch(rows), fo);
  for (size_t d = 0; d < a.trace.size(); ++d) {
    const int64_t n = int64_t(a.trace[d].k.size());
    auto pb = b.trace[d].probs.slice(0, b.trace[d].probs.size(0) - n);
    EXPECT_LT(max_diff(pb, a.trace[d].probs), 1e-6) << "depth " << d + 1;
  }
}

TEST(Packing, PromptWindowOfTheFirstDocumentSurvivesPacking) {
  lol::LoLConfig c = tiny_config();
  auto model = make_model(c, 23);
  RefRow alone;
  alone.tokens = random_tokens(13, c.vocab_size, 4);
  alone.prompt_len = 6;
  RefRow packed = alone;
  packed.doc_ids.assign(13, 0);
  for (auto t : random_tokens(7, c.vocab_size, 5)) packed.tokens.push_back(t), packed.doc_ids.push_back(1);
  auto ref = run(model, alone), o = run(model, packed);
  EXPECT_LT(max_diff(o.logits[0].slice(0, 0, 13), ref.logits[0]), 1e-12);
}

TEST(RouterOnly, InfluenceLogitsOnlyThroughRouting) {
  lol::LoLConfig c = tiny_config();
  c.stride = 1;
  auto model = make_model(c, 24);
  const int64_t T = 22;
  RefRow row;
  row.tokens = random_tokens(T, c.vocab_size, 6);
  row.router_only.assign(T, 0);
  const std::vector<int64_t> flagged = {3, 9, 10, 16};
  for (auto t : flagged) row.router_only[t] = 1;
  auto base = run(model, row);
  auto path = path_from_trace(base.trace, c.library_size, /*with_alpha=*/true);
  auto base_forced = run(model, row, &path);

  auto is_flagged = [&](int64_t t) { return std::find(flagged.begin(), flagged.end(), t) != flagged.end(); };
  for (auto f : flagged) {
    SCOPED_TRACE("router-only token at " + std::to_string(f));
    RefRow alt = row;
    alt.tokens[f] = (row.tokens[f] + 5) % c.vocab_size;
    // Free routing: later positions change (through router inputs and alpha).
    auto o = run(model, alt);
    double later = 0;
    for (int64_t t = f + 1; t < T; ++t)
      if (!is_flagged(t)) later = std::max(later, max_diff(o.logits[0][t], base.logits[0][t]));
    EXPECT_GT(later, 1e-6) << "router-only token had no effect at all";
    // Same path (experts and alphas) forced: every non-flagged position is identical.
    auto of = run(model, alt, &path);
    for (int64_t t = 0; t < T; ++t)
      if (!is_flagged(t)) EXPECT_LT(max_diff(of.logits[0][t], base_forced.logits[0][t]), 1e-12) << "position " << t;
  }
}
