// Grouped execution (src/lol/model.cpp: windows batched per expert) against the
// per-window reference of tests/model/ref_lol.cpp, in float64: logits, routing
// decisions and the gradient of every parameter must agree (issue requirement:
// 1e-5; float64 lets us demand far less).
#include <functional>

#include "model/model_test_util.h"

using namespace reftest;

namespace {

struct Case {
  std::string name;
  std::function<void(lol::LoLConfig&)> cfg;  // empty: tiny_config() as is
  std::function<std::vector<RefRow>(const lol::LoLConfig&)> rows;
  std::function<lol::RoutingPath(const lol::LoLConfig&)> force;  // empty: router decides
  int64_t active_depth = -1;
};

std::vector<RefRow> plain_rows(const lol::LoLConfig& c, int64_t B, int64_t T, uint64_t seed) {
  std::vector<RefRow> rows(B);
  for (int64_t r = 0; r < B; ++r) rows[r].tokens = random_tokens(T, c.vocab_size, seed + r);
  return rows;
}

constexpr double kTol = 1e-9;  // float64; the issue asks for 1e-5

void check_case(const Case& cs) {
  SCOPED_TRACE(cs.name);
  lol::LoLConfig c = tiny_config();
  if (cs.cfg) cs.cfg(c);
  auto model = make_model(c, 11);
  if (cs.active_depth >= 0) model->set_active_depth(cs.active_depth);
  auto rows = cs.rows(c);
  auto batch = make_batch(rows);
  lol::RoutingPath path;
  lol::ForwardOptions fo;
  fo.trace = true;
  RefOptions ro;
  ro.active_depth = cs.active_depth;
  if (cs.force) {
    path = cs.force(c);
    fo.force = &path;
    ro.force = &path;
  }
  const int64_t B = int64_t(rows.size()), T = int64_t(rows[0].tokens.size());

  // Random loss weights, zero at padding positions (their logits are meaningless).
  auto R = torch::randn({B, T, c.vocab_size}, torch::TensorOptions().dtype(torch::kFloat64));
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t)
      if (!rows[r].doc_ids.empty() && rows[r].doc_ids[t] < 0) R[r][t].zero_();

  zero_grads(model);
  auto out = model->forward(batch, fo);
  ASSERT_EQ(out.logits.sizes(), (std::vector<int64_t>{B, T, c.vocab_size}));
  (out.logits * R).sum().backward();
  auto g_model = grads_of(model);

  zero_grads(model);
  auto w = weights_of(model);
  std::vector<std::vector<RefDecision>> traces(B);
  std::vector<torch::Tensor> ref_rows;
  for (int64_t r = 0; r < B; ++r) ref_rows.push_back(ref_forward_row(w, c, rows[r], ro, &traces[r]));
  auto ref = torch::stack(ref_rows, 0);
  (ref * R).sum().backward();
  auto g_ref = grads_of(model);

  // Logits at non-padding positions.
  auto mask = (R.abs().sum(-1, true) > 0).to(torch::kFloat64);
  const double scale = std::max(1.0, max_abs(ref));
  EXPECT_LT(max_diff(out.logits * mask, ref * mask), kTol * scale) << "logits differ";

  // Gradients of every parameter.
  int64_t nonzero = 0;
  for (const auto& [name, gr] : g_ref) {
    const auto& gm = g_model.at(name);
    const double s = std::max(1.0, max_abs(gr));
    EXPECT_LT(max_diff(gm, gr), kTol * s) << "gradient of " << name;
    nonzero += max_abs(gr) > 0;
  }
  EXPECT_GT(nonzero, 1);

  // Routing decisions: every model window has the reference's expert, alpha, probs.
  const int64_t D = cs.active_depth < 0 ? c.core_depth : cs.active_depth;
  ASSERT_EQ(int64_t(out.trace.size()), D);
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, RefDecision> by_key;  // row, doc_begin, depth, k
  size_t n_ref = 0;
  for (int64_t r = 0; r < B; ++r)
    for (const auto& d : traces[r]) {
      by_key[{r, d.doc_begin, d.depth, d.k}] = d;
      ++n_ref;
    }
  size_t n_model = 0;
  for (int64_t d = 0; d < D; ++d) {
    const auto& tr = out.trace[d];
    for (size_t g = 0; g < tr.k.size(); ++g, ++n_model) {
      auto it = by_key.find({tr.row[g], tr.doc_begin[g], d + 1, tr.k[g]});
      ASSERT_TRUE(it != by_key.end()) << "depth " << d + 1 << " window " << tr.k[g] << " not in reference";
      const auto& rd = it->second;
      EXPECT_EQ(tr.begin[g], rd.begin);
      EXPECT_EQ(tr.len[g], rd.len);
      EXPECT_EQ(tr.expert[int64_t(g)].item<int64_t>(), rd.expert) << "depth " << d + 1 << " k " << tr.k[g];
      EXPECT_EQ(tr.forced[int64_t(g)].item<bool>(), rd.forced);
      EXPECT_NEAR(tr.alpha[int64_t(g)].item<double>(), rd.alpha, 1e-6);  // trace is float32
      for (int64_t m = 0; m < c.library_size; ++m) EXPECT_NEAR(tr.probs[int64_t(g)][m].item<double>(), rd.probs[m], 1e-6);
      if (!rd.forced) EXPECT_GT(rd.margin, 1e-9) << "argmax too close to a tie to compare";
    }
  }
  EXPECT_EQ(n_model, n_ref);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"base: GQA, tied, shared router", {}, [](auto& c) { return plain_rows(c, 2, 19, 1); }, {}});
  v.push_back({"MQA, untied embeddings, untied router",
               [](auto& c) {
                 c.n_kv_heads = 1;
                 c.tie_embeddings = false;
                 c.untied_router = true;
               },
               [](auto& c) { return plain_rows(c, 2, 17, 2); },
               {}});
  v.push_back({"no GQA (kv heads = heads), 2 prelude, 0 coda, W=5 S=3, L=4 D=5",
               [](auto& c) {
                 c.n_kv_heads = 4;
                 c.n_prelude = 2;
                 c.n_coda = 0;
                 c.window = 5;
                 c.stride = 3;
                 c.library_size = 4;
                 c.core_depth = 5;
               },
               [](auto& c) { return plain_rows(c, 1, 23, 3); },
               {}});
  v.push_back({"prompt windows longer than W mixed with short windows",
               [](auto& c) { c.stride = 1; },
               [](auto& c) {
                 auto rows = plain_rows(c, 3, 21, 4);
                 rows[0].prompt_len = 9;   // long prompt window (> W)
                 rows[1].prompt_len = 3;   // short prompt window
                 rows[2].prompt_len = 0;   // none
                 return rows;
               },
               {}});
  v.push_back({"router-only tokens (at a document start, window starts, inside windows)", {},
               [](auto& c) {
                 auto rows = plain_rows(c, 2, 18, 5);
                 rows[0].router_only.assign(18, 0);
                 rows[1].router_only.assign(18, 0);
                 for (int t : {0, 4, 5, 11, 17}) rows[0].router_only[t] = 1;
                 for (int t : {2, 3, 8, 9, 10}) rows[1].router_only[t] = 1;
                 rows[1].prompt_len = 6;
                 return rows;
               },
               {}});
  v.push_back({"document ids with padding (-1), prompt on the first document",
               [](auto& c) { c.untied_router = true; },
               [](auto& c) {
                 auto rows = plain_rows(c, 3, 16, 6);
                 rows[0].doc_ids = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1};
                 rows[0].prompt_len = 4;
                 rows[1].doc_ids = {-1, -1, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 5, 5, 5, 5};
                 rows[2].doc_ids = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 8};
                 rows[2].router_only.assign(16, 0);
                 rows[2].router_only[3] = rows[2].router_only[14] = 1;
                 return rows;
               },
               {}});
  v.push_back({"forced path: experts with and without alpha, missing entries left to the router", {},
               [](auto& c) {
                 auto rows = plain_rows(c, 2, 15, 7);
                 rows[1].prompt_len = 5;
                 return rows;
               },
               [](const lol::LoLConfig& c) {
                 lol::RoutingPath p;
                 p.library_size = c.library_size;
                 p.set(0, 0, 2, std::nullopt);
                 p.set(0, 2, 1, 0.3);
                 p.set(1, 1, 0, 1.0);
                 p.set(1, 3, 2, std::nullopt);  // entries 1.0, 1.2 missing -> router
                 p.set(2, 0, 1, 0.0);
                 p.set(2, 1, 1, 0.75);
                 p.set(2, 9, 0, 0.5);  // window that does not exist: ignored
                 return p;
               }});
  v.push_back({"growing: active depth 2 of 4", [](auto& c) { c.core_depth = 4; },
               [](auto& c) { return plain_rows(c, 2, 14, 8); }, {}, 2});
  v.push_back({"L = 1", [](auto& c) { c.library_size = 1; }, [](auto& c) { return plain_rows(c, 2, 13, 9); }, {}});
  v.push_back({"W >= sequence length", [](auto& c) { c.window = 32; c.stride = 7; },
               [](auto& c) { return plain_rows(c, 2, 20, 10); }, {}});
  v.push_back({"S = 0", [](auto& c) { c.stride = 0; }, [](auto& c) { return plain_rows(c, 2, 13, 11); }, {}});
  v.push_back({"W = 1", [](auto& c) { c.window = 1; c.stride = 0; },
               [](auto& c) { return plain_rows(c, 1, 7, 12); }, {}});
  v.push_back({"no prelude, no coda, core depth 0", [](auto& c) { c.n_prelude = 0; c.n_coda = 0; c.core_depth = 0; },
               [](auto& c) { return plain_rows(c, 2, 9, 13); }, {}});
  v.push_back({"everything at once",
               [](auto& c) {
                 c.untied_router = true;
                 c.tie_embeddings = false;
                 c.n_kv_heads = 1;
                 c.stride = 3;
               },
               [](auto& c) {
                 auto rows = plain_rows(c, 2, 24, 14);
                 rows[0].prompt_len = 7;
                 rows[0].doc_ids.assign(24, 0);
                 for (int t = 15; t < 22; ++t) rows[0].doc_ids[t] = 1;
                 rows[0].doc_ids[22] = rows[0].doc_ids[23] = -1;
                 rows[0].router_only.assign(24, 0);
                 for (int t : {2, 6, 9, 15, 20}) rows[0].router_only[t] = 1;
                 rows[1].prompt_len = 24;  // whole row is the prompt window
                 return rows;
               },
               [](const lol::LoLConfig& c) {
                 lol::RoutingPath p;
                 p.library_size = c.library_size;
                 p.set(0, 1, 2, 0.4);
                 p.set(2, 2, 0, std::nullopt);
                 return p;
               }});
  return v;
}

}  // namespace

TEST(ReferenceEquivalence, GroupedEqualsPerWindowReferenceInOutputsAndGradients) {
  for (const auto& cs : cases()) check_case(cs);
}

TEST(ReferenceEquivalence, Float32AgreesToIssueTolerance) {
  // The issue's bar (1e-5) in the model's training dtype, on the mixed case.
  lol::LoLConfig c = tiny_config();
  auto model = make_model(c, 5, torch::kFloat32);
  std::vector<RefRow> rows(2);
  rows[0].tokens = random_tokens(20, c.vocab_size, 77);
  rows[0].prompt_len = 6;
  rows[1].tokens = random_tokens(20, c.vocab_size, 78);
  rows[1].doc_ids.assign(20, 0);
  for (int t = 9; t < 20; ++t) rows[1].doc_ids[t] = 1;
  torch::NoGradGuard ng;
  auto out = model->forward(make_batch(rows));
  auto w = weights_of(model);
  for (int r = 0; r < 2; ++r) {
    auto ref = ref_forward_row(w, c, rows[r]);
    EXPECT_LT(max_diff(out.logits[r], ref), 1e-5);
  }
}
