// Muon (Newton-Schulz), AdamW, the optimizer's state and the parameter grouping
// (paper Appendix A).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <torch/torch.h>

#include "lol/model.h"
#include "training/lol_trainable.h"
#include "training/optimizer.h"
#include "util/error.h"

using namespace lol::training;

TEST(NewtonSchulz, SingularValuesNearOne) {
  torch::manual_seed(0);
  for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {32, 96}, {96, 32}, {128, 16}}) {
    // An ill-conditioned input: singular values spread over one order of magnitude.
    auto a = torch::randn({shape.first, shape.second});
    auto svd = at::linalg_svd(a, /*full_matrices=*/false);
    auto u = std::get<0>(svd), v = std::get<2>(svd);
    const int64_t k = std::min(shape.first, shape.second);
    auto s = torch::logspace(0, -1, k);
    auto g = torch::mm(u * s.unsqueeze(0), v);
    auto o = newton_schulz(g, 5);
    ASSERT_EQ(o.sizes(), g.sizes());
    auto sv = at::linalg_svdvals(o);
    const double mn = sv.min().item<double>(), mx = sv.max().item<double>();
    EXPECT_GT(mn, 0.5) << shape.first << "x" << shape.second;
    EXPECT_LT(mx, 1.5) << shape.first << "x" << shape.second;
    // The input spread (10x) is gone.
    EXPECT_LT(mx / mn, 2.0);
    // Singular vectors are kept: o ~ U V^T up to the singular values, so o^T g has
    // a positive diagonal in V's basis.
    auto proj = torch::mm(torch::mm(u.t(), o), v.t()).diagonal();
    EXPECT_GT(proj.min().item<double>(), 0.5);
  }
}

TEST(NewtonSchulz, RejectsNon2D) { EXPECT_THROW(newton_schulz(torch::ones({3})), std::invalid_argument); }

// The batched iteration (one bmm per product for a whole group of matrices) against the
// iteration written out for each matrix with 2-D products, in float64: each matrix is
// normalised by its own norm and a tall batch is transposed as a whole.
TEST(NewtonSchulz, BatchedEqualsTheIterationWrittenOutPerMatrix) {
  torch::manual_seed(3);
  for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{6, 10}, {10, 6}, {7, 7}}) {
    auto g = torch::randn({3, shape.first, shape.second}, torch::kFloat64);
    g[1].mul_(40.0);  // a different scale per matrix
    g[2].mul_(1e-3);
    auto o = newton_schulz_batched(g, 5, torch::kFloat64);
    ASSERT_EQ(o.sizes(), g.sizes());
    for (int64_t i = 0; i < 3; ++i) {
      auto x = g[i];
      const bool tall = x.size(0) > x.size(1);
      if (tall) x = x.t();
      x = x / x.norm();
      for (int s = 0; s < 5; ++s) {
        auto a = torch::mm(x, x.t());
        auto b = kNsB * a + kNsC * torch::mm(a, a);
        x = kNsA * x + torch::mm(b, x);
      }
      if (tall) x = x.t();
      EXPECT_LT((o[i] - x).abs().max().item<double>(), 1e-12) << shape.first << "x" << shape.second << " #" << i;
      EXPECT_LT((newton_schulz(g[i], 5, torch::kFloat64) - x).abs().max().item<double>(), 1e-12);
    }
  }
  EXPECT_THROW(newton_schulz_batched(torch::ones({3, 3})), std::invalid_argument);
}

TEST(Muon, AdjustedLearningRateMatchesAdamWRms) {
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.01, 1024, 4096), 0.01 * 0.2 * 64.0);
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.01, 4096, 1024), 0.01 * 0.2 * 64.0);
}

TEST(Muon, UpdateIsNesterovMomentumThenOrthogonalised) {
  torch::manual_seed(1);
  auto p = torch::randn({8, 12});
  auto p0 = p.clone();
  auto buf = torch::zeros_like(p);
  MuonHyper h;
  h.lr = 0.05;
  h.weight_decay = 0.1;
  auto g1 = torch::randn({8, 12}), g2 = torch::randn({8, 12});
  muon_update(p, g1, buf, h);
  muon_update(p, g2, buf, h);
  // Reference, written out.
  auto b = torch::zeros_like(p0);
  auto q = p0.clone();
  for (auto& g : {g1, g2}) {
    b = 0.95 * b + 0.05 * g;
    auto u = g + 0.95 * (b - g);  // lerp(g, b, 0.95)
    q = q * (1 - 0.05 * 0.1) - muon_adjusted_lr(0.05, 8, 12) * newton_schulz(u, 5);
  }
  EXPECT_TRUE(torch::allclose(p, q, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(buf, b, 1e-6, 1e-7));
}

TEST(AdamW, MatchesTorchOptimAdamWFormula) {
  torch::manual_seed(2);
  auto p = torch::randn({5}, torch::kFloat64);
  auto m = torch::zeros_like(p), v = torch::zeros_like(p);
  AdamWHyper h{0.01, 0.9, 0.95, 1e-8, 0.1};
  std::vector<double> ref(p.data_ptr<double>(), p.data_ptr<double>() + 5), rm(5, 0), rv(5, 0);
  for (int step = 1; step <= 4; ++step) {
    auto g = torch::randn({5}, torch::kFloat64);
    adamw_update(p, g, m, v, step, h);
    for (int i = 0; i < 5; ++i) {
      const double gi = g[i].item<double>();
      ref[i] *= 1 - h.lr * h.weight_decay;
      rm[i] = 0.9 * rm[i] + 0.1 * gi;
      rv[i] = 0.95 * rv[i] + 0.05 * gi * gi;
      const double mhat = rm[i] / (1 - std::pow(0.9, step));
      const double denom = std::sqrt(rv[i]) / std::sqrt(1 - std::pow(0.95, step)) + 1e-8;
      ref[i] -= h.lr * mhat / denom;
    }
  }
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(p[i].item<double>(), ref[i], 1e-12);
}

namespace {
lol::LoLConfig tiny_cfg() {
  lol::LoLConfig c;
  c.vocab_size = 16;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.ffn_hidden = 32;
  c.n_prelude = 1;
  c.n_coda = 1;
  c.library_size = 3;
  c.core_depth = 2;
  c.window = 4;
  c.stride = 2;
  c.max_seq_len = 32;
  return c;
}
}  // namespace

TEST(Grouping, EveryParameterExactlyOnceWithTheRightGroup) {
  for (bool untied : {false, true}) {
    auto c = tiny_cfg();
    c.untied_router = untied;
    c.tie_embeddings = !untied;
    LoLTrainable m{lol::LoLModel(c)};
    auto groups = m.grouped_parameters();
    std::set<std::string> names;
    std::set<const void*> storages;
    for (const auto& g : groups) {
      EXPECT_TRUE(names.insert(g.name).second) << "duplicate " << g.name;
      EXPECT_TRUE(storages.insert(g.tensor.data_ptr()).second) << "shared tensor " << g.name;
    }
    EXPECT_EQ(groups.size(), m.module().named_parameters().size());
    for (const auto& p : m.module().named_parameters()) EXPECT_TRUE(names.count(p.key())) << p.key();
    int n_muon = 0;
    for (const auto& g : groups) {
      const std::string& n = g.name;
      const auto ends = [&](const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
      if (ends("_proj.weight")) {
        EXPECT_EQ(g.group, ParamGroup::Muon) << n;
        EXPECT_EQ(g.tensor.dim(), 2) << n;
        ++n_muon;
      } else if (ends("layernorm.weight") || n == "model.norm.weight" || ends("_gamma") || ends("_beta") ||
                 n == "model.depth_embed") {
        EXPECT_EQ(g.group, ParamGroup::AdamWNoDecay) << n;  // norms, FiLM, vectors: no decay
      } else if (n == "model.embed_tokens.weight" || n == "lm_head.weight" || n == "model.router.weight" ||
                 n.rfind("model.routers.", 0) == 0) {
        EXPECT_EQ(g.group, ParamGroup::AdamWDecay) << n;
      } else {
        ADD_FAILURE() << "unclassified parameter " << n;
      }
    }
    // 7 projections per block, blocks = prelude + coda + library.
    EXPECT_EQ(n_muon, 7 * (1 + 1 + 3));
    if (untied) EXPECT_TRUE(names.count("lm_head.weight") && names.count("model.routers.1.weight"));
  }
}

// Optimizer::step updates its parameters in multi-tensor groups (AdamW by dtype and
// device, Muon by shape too): every parameter must end where the one-parameter updates,
// run one at a time, take it, with per-parameter step counts (an expert without a
// gradient in step 1 starts its bias correction a step later) and weight decays.
TEST(Optimizer, GroupedStepEqualsOneParameterAtATime) {
  auto c = tiny_cfg();
  torch::manual_seed(5);
  LoLTrainable m{lol::LoLModel(c)};
  auto params = m.grouped_parameters();
  OptimConfig oc;
  oc.weight_decay = 0.3;
  Optimizer opt(params, oc);
  std::vector<torch::Tensor> ref, buf, m1, m2;
  std::vector<int64_t> steps(params.size(), 0);
  for (auto& p : params) {
    ref.push_back(p.tensor.detach().clone());
    buf.push_back(torch::zeros_like(p.tensor));
    m1.push_back(torch::zeros_like(p.tensor));
    m2.push_back(torch::zeros_like(p.tensor));
  }
  int64_t skipped = 0;
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(50 + step);
    for (size_t i = 0; i < params.size(); ++i) {
      // Library expert 1 has no gradient in the first step.
      const bool none = step == 0 && params[i].name.find("library.1.") != std::string::npos;
      skipped += none;
      params[i].tensor.mutable_grad() = none ? torch::Tensor() : torch::randn_like(params[i].tensor);
    }
    const double lr_scale = 0.5 + 0.25 * step;
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& g = params[i].tensor.grad();
      if (!g.defined()) continue;
      const double wd = params[i].group == ParamGroup::AdamWNoDecay ? 0.0 : oc.weight_decay;
      if (opt.algorithm(i) == "muon") {
        MuonHyper h;
        h.lr = oc.effective_muon_lr() * lr_scale;
        h.momentum = oc.momentum;
        h.nesterov = oc.nesterov;
        h.ns_steps = oc.ns_steps;
        h.weight_decay = wd;
        muon_update(ref[i], g, buf[i], h);
      } else {
        AdamWHyper h{oc.lr * lr_scale, oc.beta1, oc.beta2, oc.eps, wd};
        adamw_update(ref[i], g, m1[i], m2[i], ++steps[i], h);
      }
    }
    opt.step(lr_scale);
  }
  EXPECT_GT(skipped, 0);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_LT((params[i].tensor.detach() - ref[i]).abs().max().item<double>(), 1e-6) << params[i].name;
  int64_t found = 0;
  for (const auto& [n, t] : opt.state())
    if (n == "model.library.1.mlp.down_proj.weight.step" || n == "model.library.0.mlp.down_proj.weight.step") {
      EXPECT_EQ(t.item<int64_t>(), n[14] == '1' ? 2 : 3) << n;
      ++found;
    }
  EXPECT_EQ(found, 2);
  auto a = torch::zeros({2, 3}), b = torch::zeros({3, 2});
  EXPECT_THROW(adamw_update({a}, {}, {a}, {a}, {1}, {0.0}, AdamWHyper{}), std::invalid_argument);
  EXPECT_THROW(muon_update({a, b}, {a, b}, {a, b}, {0.0, 0.0}, MuonHyper{}), std::invalid_argument);
}

// The GPU's grouping (AdamW by dtype, Muon by shape: batched Newton-Schulz over every
// matrix of a shape) run on the CPU against the CPU's one-parameter groups.
TEST(Optimizer, BatchedGroupingEqualsPerParameterGrouping) {
  auto c = tiny_cfg();
  auto run = [&](Optimizer::Grouping grouping) {
    torch::manual_seed(11);
    LoLTrainable m{lol::LoLModel(c)};
    OptimConfig oc;
    oc.weight_decay = 0.2;
    Optimizer opt(m.grouped_parameters(), oc);
    for (int step = 0; step < 3; ++step) {
      torch::manual_seed(70 + step);
      for (auto& p : m.grouped_parameters())
        p.tensor.mutable_grad() = step == 1 && p.name.find("library.2.") != std::string::npos
                                      ? torch::Tensor()
                                      : torch::randn_like(p.tensor);
      opt.step(1.0, grouping);
    }
    std::vector<torch::Tensor> out;
    for (auto& p : m.grouped_parameters()) out.push_back(p.tensor.detach().clone());
    for (auto& [n, t] : opt.state()) out.push_back(t.to(torch::kFloat64));
    return out;
  };
  auto per = run(Optimizer::Grouping::PerParameter), bat = run(Optimizer::Grouping::Batched);
  ASSERT_EQ(per.size(), bat.size());
  for (size_t i = 0; i < per.size(); ++i) EXPECT_LT((per[i] - bat[i]).abs().max().item<double>(), 1e-6) << i;
}

// The multi-tensor updates a GPU step uses for whole groups (on the CPU the optimizer
// passes one parameter at a time), on lists of three, against one call per tensor.
TEST(Optimizer, MultiTensorUpdatesEqualOneTensorAtATime) {
  torch::manual_seed(9);
  std::vector<torch::Tensor> p, g, b, p1, b1, m, v, m1, v1;
  for (int i = 0; i < 3; ++i) {
    p.push_back(torch::randn({6, 9}, torch::kFloat64));
    g.push_back(torch::randn({6, 9}, torch::kFloat64) * double(i + 1));
    b.push_back(torch::randn({6, 9}, torch::kFloat64));
    m.push_back(torch::randn({6, 9}, torch::kFloat64));
    v.push_back(torch::rand({6, 9}, torch::kFloat64));
    p1.push_back(p.back().clone());
    b1.push_back(b.back().clone());
    m1.push_back(m.back().clone());
    v1.push_back(v.back().clone());
  }
  MuonHyper mh;
  mh.ns_dtype = torch::kFloat64;
  const std::vector<double> wd{0.0, 0.1, 0.3};
  const std::vector<int64_t> steps{1, 4, 9};
  auto q = p;  // the same tensors: updated by both calls below, once each
  for (auto& t : q) t = t.clone();
  muon_update(p, g, b, wd, mh);
  AdamWHyper ah{0.01, 0.9, 0.95, 1e-8, 0.0};
  adamw_update(q, g, m, v, steps, wd, ah);
  for (int i = 0; i < 3; ++i) {
    MuonHyper h1 = mh;
    h1.weight_decay = wd[size_t(i)];
    auto a = p1[size_t(i)].clone();
    muon_update(p1[size_t(i)], g[size_t(i)], b1[size_t(i)], h1);
    AdamWHyper a1 = ah;
    a1.weight_decay = wd[size_t(i)];
    adamw_update(a, g[size_t(i)], m1[size_t(i)], v1[size_t(i)], steps[size_t(i)], a1);
    EXPECT_LT((p[size_t(i)] - p1[size_t(i)]).abs().max().item<double>(), 1e-12) << i;
    EXPECT_TRUE(torch::equal(b[size_t(i)], b1[size_t(i)])) << i;
    EXPECT_LT((q[size_t(i)] - a).abs().max().item<double>(), 1e-14) << i;
    EXPECT_TRUE(torch::equal(m[size_t(i)], m1[size_t(i)]));
    EXPECT_TRUE(torch::equal(v[size_t(i)], v1[size_t(i)]));
  }
}

TEST(Optimizer, StateRoundTripsAndNoDecayGroupIsNotDecayed) {
  auto c = tiny_cfg();
  LoLTrainable m{lol::LoLModel(c)};
  OptimConfig oc;
  oc.weight_decay = 0.5;
  Optimizer opt(m.grouped_parameters(), oc);
  // Only a norm weight and one projection get a gradient.
  auto params = m.grouped_parameters();
  torch::Tensor norm, proj;
  for (auto& p : params) {
    if (p.name == "model.norm.weight") norm = p.tensor;
    if (p.name == "model.prelude.0.self_attn.q_proj.weight") proj = p.tensor;
  }
  auto norm0 = norm.detach().clone();
  norm.mutable_grad() = torch::zeros_like(norm);  // zero gradient: only decay could move it
  proj.mutable_grad() = torch::randn_like(proj);
  opt.step(1.0);
  EXPECT_TRUE(torch::equal(norm.detach(), norm0));
  auto st = opt.state();
  EXPECT_EQ(st.size(), 2u + 3u);  // norm: exp_avg, exp_avg_sq, step; proj: momentum_buffer, step
  Optimizer opt2(m.grouped_parameters(), oc);
  opt2.load_state(st, "test");
  auto st2 = opt2.state();
  ASSERT_EQ(st.size(), st2.size());
  for (size_t i = 0; i < st.size(); ++i) {
    EXPECT_EQ(st[i].first, st2[i].first);
    EXPECT_TRUE(torch::equal(st[i].second, st2[i].second)) << st[i].first;
  }
  lol::NamedTensors bad = st;
  bad.emplace_back("model.nonexistent.exp_avg", torch::zeros({1}));
  EXPECT_THROW(opt2.load_state(bad, "test"), lol::InputError);
}

// Optimizer::step runs the parameters' updates concurrently over the intra-op threads:
// the result must not depend on the thread count (each update is independent), and a
// tensor listed twice (which concurrent updates would race on) is refused.
TEST(Optimizer, StepDoesNotDependOnTheThreadCount) {
  auto c = tiny_cfg();
  auto run = [&](int threads) {
    torch::manual_seed(7);
    LoLTrainable m{lol::LoLModel(c)};
    Optimizer opt(m.grouped_parameters(), OptimConfig{});
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    for (int step = 0; step < 3; ++step) {
      torch::manual_seed(100 + step);
      for (auto& p : m.grouped_parameters()) p.tensor.mutable_grad() = torch::randn_like(p.tensor);
      opt.step(1.0);
    }
    at::set_num_threads(before);
    std::vector<torch::Tensor> out;
    for (auto& p : m.grouped_parameters()) out.push_back(p.tensor.detach().clone());
    return out;
  };
  auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_LT((one[i] - two[i]).abs().max().item<double>(), 1e-6) << "parameter " << i;

  LoLTrainable m{lol::LoLModel(c)};
  auto params = m.grouped_parameters();
  params.push_back(params.front());
  params.back().name = "alias";
  EXPECT_THROW(Optimizer(params, OptimConfig{}), lol::InputError);
}
