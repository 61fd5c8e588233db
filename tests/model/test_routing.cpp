// Router behaviour: gradient through alpha, loss-free load balancing, ties, noise,
// growing (active depth), traces, degenerate shapes (paper 3.2.2, 3.3, Appendix A).
#include "model/model_test_util.h"
#include "util/error.h"

using namespace reftest;

namespace {

double loss_of(lol::LoLModel& m, const lol::LoLBatch& b, const torch::Tensor& R) {
  torch::NoGradGuard ng;
  return (m->forward(b).logits * R).sum().item<double>();
}

}  // namespace

TEST(Router, ReceivesGradientThroughAlpha) {
  // d loss / d router weight exists only through alpha = a[rho] (the argmax is not
  // differentiable); it must match central finite differences.
  lol::LoLConfig c = tiny_config();
  c.untied_router = true;
  auto model = make_model(c, 31);
  RefRow row;
  row.tokens = random_tokens(18, c.vocab_size, 1);
  auto batch = make_batch({row});
  auto R = torch::randn({1, 18, c.vocab_size}, torch::kFloat64);
  zero_grads(model);
  (model->forward(batch).logits * R).sum().backward();
  for (int64_t d = 0; d < c.core_depth; ++d) {
    auto& W = model->model->routers[d]->as<torch::nn::Linear>()->weight;
    ASSERT_TRUE(W.grad().defined());
    auto g = W.grad().clone();
    EXPECT_GT(max_abs(g), 1e-6) << "router " << d << " got no gradient";
    for (auto [i, j] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 5}, {2, 15}}) {
      const double h = 1e-6;
      double w0;
      {
        torch::NoGradGuard ng;
        w0 = W[i][j].item<double>();
        W[i][j] = w0 + h;
      }
      double lp = loss_of(model, batch, R);
      {
        torch::NoGradGuard ng;
        W[i][j] = w0 - h;
      }
      double lm = loss_of(model, batch, R);
      {
        torch::NoGradGuard ng;
        W[i][j] = w0;
      }
      EXPECT_NEAR((lp - lm) / (2 * h), g[i][j].item<double>(), 1e-6 * std::max(1.0, std::abs(g[i][j].item<double>())))
          << "router " << d << " entry " << i << "," << j;
    }
  }
  EXPECT_GT(max_abs(model->model->depth_embed.grad()), 0) << "depth vectors e^(l) get gradient through window 0";
}

TEST(Router, TiesGoToLowestExpertIndex) {
  lol::LoLConfig c = tiny_config();
  c.library_size = 4;
  auto model = make_model(c, 32);
  {
    torch::NoGradGuard ng;
    model->model->router->weight.zero_();  // uniform probabilities
    model->model->balance_bias.zero_();
  }
  RefRow row;
  row.tokens = random_tokens(15, c.vocab_size, 2);
  lol::ForwardOptions fo;
  fo.trace = true;
  torch::NoGradGuard ng;
  auto out = model->forward(make_batch({row}), fo);
  for (const auto& tr : out.trace) {
    EXPECT_TRUE((tr.expert == 0).all().item<bool>());
    EXPECT_NEAR(tr.alpha[0].item<double>(), 0.25, 1e-7);
  }
  model->model->balance_bias.copy_(torch::tensor({0.0, 0.1, 0.1, 0.05}, torch::kFloat64));
  out = model->forward(make_batch({row}), fo);
  for (const auto& tr : out.trace) EXPECT_TRUE((tr.expert == 1).all().item<bool>());
}

TEST(Router, BalanceBiasIsABufferAndSelectsOnly) {
  lol::LoLConfig c = tiny_config();
  auto model = make_model(c, 33);
  for (const auto& p : model->named_parameters(true)) EXPECT_EQ(p.key().find("balance_bias"), std::string::npos);
  bool found = false;
  for (const auto& b : model->named_buffers(true)) found |= b.key() == "model.balance_bias";
  EXPECT_TRUE(found);
  // A large bias toward expert 2 changes the selection but alpha stays the router's a[2].
  RefRow row;
  row.tokens = random_tokens(12, c.vocab_size, 3);
  torch::NoGradGuard ng;
  model->model->balance_bias.copy_(torch::tensor({0.0, 0.0, 5.0}, torch::kFloat64));
  lol::ForwardOptions fo;
  fo.trace = true;
  auto out = model->forward(make_batch({row}), fo);
  for (const auto& tr : out.trace) {
    EXPECT_TRUE((tr.expert == 2).all().item<bool>());
    EXPECT_LT(max_diff(tr.alpha, tr.probs.select(1, 2)), 1e-7);
  }
}

TEST(Balance, UpdateReducesImbalanceOnSkewedRun) {
  lol::LoLConfig c = tiny_config();
  c.library_size = 4;
  c.balance_update_rate = 0.02;
  auto model = make_model(c, 34, torch::kFloat32, /*router_std=*/0.3);
  {
    torch::NoGradGuard ng;
    model->model->balance_bias.copy_(torch::tensor({0.4f, 0.f, 0.f, 0.f}));  // skewed toward expert 0
  }
  model->train();
  auto imbalance = [](const torch::Tensor& load) {
    auto f = load.to(torch::kFloat64);
    return (f.max() / f.mean()).item<double>();  // 1 = perfectly balanced, L = everything on one expert
  };
  std::vector<double> hist;
  torch::Tensor late_load;
  torch::NoGradGuard ng;
  for (int step = 0; step < 60; ++step) {
    std::vector<RefRow> rows(4);
    for (int r = 0; r < 4; ++r) rows[r].tokens = random_tokens(24, c.vocab_size, 100 * step + r);
    model->forward(make_batch(rows));
    const int64_t windows = model->pending_load().sum().item<int64_t>();
    EXPECT_GT(windows, 0);
    auto bias_before = model->model->balance_bias.clone();
    auto load = model->update_balance();
    EXPECT_EQ(load.sum().item<int64_t>(), windows);
    EXPECT_EQ(model->pending_load().sum().item<int64_t>(), 0);
    // b_m += u * sign(mean - load_m)
    auto lf = load.to(torch::kFloat32);
    auto expect = bias_before + c.balance_update_rate * torch::sign(lf.mean() - lf);
    EXPECT_LT(max_diff(model->model->balance_bias, expect), 1e-7);
    hist.push_back(imbalance(load));
    if (step >= 40) late_load = late_load.defined() ? late_load + load : load.clone();
  }
  EXPECT_GT(hist.front(), 2.5) << "the toy run is not skewed";
  // Load summed over the last 20 steps (single steps are noisy: ~80 windows each).
  EXPECT_LT(imbalance(late_load), 1.3) << "imbalance did not go down: first step " << hist.front()
                                       << ", last 20 steps " << imbalance(late_load);
}

TEST(Balance, NoOpWhileForcedAndInEval) {
  lol::LoLConfig c = tiny_config();
  auto model = make_model(c, 35);
  RefRow row;
  row.tokens = random_tokens(16, c.vocab_size, 4);
  auto batch = make_batch({row});
  lol::RoutingPath path;
  path.library_size = c.library_size;
  for (int64_t d = 0; d < c.core_depth; ++d)
    for (int64_t k = 0; k < 8; ++k) path.set(d, k, 1, std::nullopt);
  torch::NoGradGuard ng;
  auto b0 = model->model->balance_bias.clone();
  model->eval();
  model->forward(batch);
  EXPECT_EQ(model->pending_load().sum().item<int64_t>(), 0) << "eval forwards are not counted";
  model->train();
  lol::ForwardOptions fo;
  fo.force = &path;
  model->forward(batch, fo);
  EXPECT_EQ(model->pending_load().sum().item<int64_t>(), 0) << "forced windows are not counted";
  model->update_balance();
  EXPECT_TRUE(torch::equal(model->model->balance_bias, b0));
  model->forward(batch);  // free routing in training: counted
  EXPECT_GT(model->pending_load().sum().item<int64_t>(), 0);
}

TEST(Router, NoiseOnlyInTraining) {
  lol::LoLConfig c = tiny_config();
  c.router_noise_std = 1.0;
  auto model = make_model(c, 36);
  RefRow row;
  row.tokens = random_tokens(16, c.vocab_size, 5);
  auto batch = make_batch({row});
  lol::ForwardOptions fo;
  fo.trace = true;
  torch::NoGradGuard ng;
  auto a = model->forward(batch, fo), b = model->forward(batch, fo);
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  // The eval forward is the noise-free reference.
  auto ref = ref_forward_row(weights_of(model), c, row);
  EXPECT_LT(max_diff(a.logits[0], ref), 1e-9);
  model->train();
  auto t1 = model->forward(batch, fo), t2 = model->forward(batch, fo);
  EXPECT_GT(max_diff(t1.trace[0].probs, t2.trace[0].probs), 1e-4);
}

TEST(Router, ActiveDepthForGrowing) {
  lol::LoLConfig c = tiny_config();
  c.core_depth = 4;
  auto model = make_model(c, 37);
  RefRow row;
  row.tokens = random_tokens(14, c.vocab_size, 6);
  auto batch = make_batch({row});
  lol::ForwardOptions fo;
  fo.trace = true;
  torch::NoGradGuard ng;
  for (int64_t d = 0; d <= 4; ++d) {
    model->set_active_depth(d);
    EXPECT_EQ(model->active_depth(), d);
    auto out = model->forward(batch, fo);
    EXPECT_EQ(int64_t(out.trace.size()), d);
    RefOptions ro;
    ro.active_depth = d;
    EXPECT_LT(max_diff(out.logits[0], ref_forward_row(weights_of(model), c, row, ro)), 1e-9);
  }
  EXPECT_THROW(model->set_active_depth(5), lol::InputError);
  EXPECT_THROW(model->set_active_depth(-1), lol::InputError);
}

TEST(Router, DegenerateShapes) {
  struct D {
    const char* name;
    int64_t L, W, S;
  };
  for (auto dc : {D{"L=1", 1, 4, 2}, D{"W>=n", 3, 64, 5}, D{"S=0", 3, 4, 0}}) {
    SCOPED_TRACE(dc.name);
    lol::LoLConfig c = tiny_config();
    c.library_size = dc.L;
    c.window = dc.W;
    c.stride = dc.S;
    auto model = make_model(c, 38);
    RefRow row;
    row.tokens = random_tokens(13, c.vocab_size, 7);
    lol::ForwardOptions fo;
    fo.trace = true;
    torch::NoGradGuard ng;
    auto out = model->forward(make_batch({row}), fo);
    EXPECT_TRUE(torch::isfinite(out.logits).all().item<bool>());
    ASSERT_EQ(int64_t(out.trace.size()), c.core_depth);
    for (int64_t d = 0; d < c.core_depth; ++d) {
      const auto& tr = out.trace[d];
      EXPECT_EQ(tr.probs.size(1), dc.L);
      if (dc.L == 1) {
        EXPECT_TRUE((tr.expert == 0).all().item<bool>());
        EXPECT_TRUE((tr.alpha == 1).all().item<bool>());
      }
      if (dc.W >= 13) EXPECT_EQ(tr.k.size(), 1u);
      if (dc.S == 0) EXPECT_EQ(tr.begin, out.trace[0].begin);
    }
  }
}

TEST(Model, RejectsBadInput) {
  lol::LoLConfig c = tiny_config();
  auto model = make_model(c, 39);
  torch::NoGradGuard ng;
  lol::LoLBatch b;
  b.tokens = torch::full({1, 5}, c.vocab_size, torch::kInt64);
  EXPECT_THROW(model->forward(b), lol::InputError);
  b.tokens = torch::full({1, 5}, -1, torch::kInt64);
  EXPECT_THROW(model->forward(b), lol::InputError);
  b.tokens = torch::zeros({1, c.max_seq_len + 1}, torch::kInt64);
  EXPECT_THROW(model->forward(b), lol::InputError);
  b.tokens = torch::zeros({5}, torch::kInt64);
  EXPECT_THROW(model->forward(b), lol::InputError);
  b.tokens = torch::zeros({1, 5}, torch::kInt64);
  lol::RoutingPath p;
  p.library_size = c.library_size;
  p.set(0, 0, c.library_size, std::nullopt);  // expert out of range
  lol::ForwardOptions fo;
  fo.force = &p;
  EXPECT_THROW(model->forward(b, fo), lol::InputError);
}

TEST(Model, ParameterCounts) {
  lol::LoLConfig c = tiny_config();
  lol::LoLModel m(c);
  const int64_t d = c.d_model, hd = c.head_dim();
  const int64_t block = 2 * d + d * c.n_heads * hd * 2 + 2 * d * c.n_kv_heads * hd + 3 * d * c.ffn_hidden;
  const int64_t expect = c.vocab_size * d + (c.n_prelude + c.n_coda + c.library_size) * block + c.core_depth * 4 * d +
                         d * c.library_size + c.core_depth * d + d;
  EXPECT_EQ(m->num_parameters(), expect);
  EXPECT_EQ(m->active_parameters_per_token(), expect);  // L = D = 3: every expert can be on a token's path
  c.library_size = 7;
  lol::LoLModel m2(c);
  EXPECT_EQ(m2->num_parameters() - m2->active_parameters_per_token(), 4 * block);
}
