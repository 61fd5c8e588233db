// Looped (Huginn-style) baseline (issue 9): forward/backward, R = 1 equals the dense
// stack of its layers, R chosen at inference, sampling, truncated backprop, save/load.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "baseline_test_util.h"
#include "baselines/dense_model.h"
#include "baselines/flops.h"
#include "baselines/looped_model.h"
#include "baselines/looped_trainable.h"
#include "training/trainable.h"
#include "util/error.h"

using namespace lol::baselines;

namespace {

LoopedConfig tiny_looped() {
  LoopedConfig c;
  static_cast<TransformerShape&>(c) = btest::tiny_dense();
  c.n_prelude = 1;
  c.n_recur = 2;
  c.n_coda = 1;
  c.recurrence = 3;
  return c;
}

}  // namespace

TEST(LoopedModel, ForwardBackwardReachesEveryParameter) {
  LoopedModel m(tiny_looped());
  m->train();
  auto tok = btest::random_tokens(2, 9, 29, 1);
  auto logits = m->forward(tok);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 9, 29}));
  logits.logsumexp(-1).sum().backward();
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
  EXPECT_EQ(m->last_recurrence(), 3);
  EXPECT_EQ(m->named_parameters()["model.adapter.weight"].sizes(), (std::vector<int64_t>{16, 32}));
}

// state_init "random": training draws a new s_0 each forward; evaluation uses one fixed
// draw per position within the document, so two evaluations agree, a sequence's logits do
// not depend on the other rows of its batch nor on its place in a packed row, and a
// prefix's logits are the longer sequence's first ones.
TEST(LoopedModel, EvalModeInitialStateIsFixedPerPosition) {
  auto c = tiny_looped();
  ASSERT_EQ(c.state_init, "random");
  LoopedModel m(c);
  m->reset_parameters(5);
  auto tok = btest::random_tokens(3, 9, c.vocab_size, 4);
  m->train();
  EXPECT_FALSE(torch::equal(m->forward(tok), m->forward(tok))) << "training draws s_0 afresh";
  m->eval();
  torch::NoGradGuard ng;
  const auto a = m->forward(tok), b = m->forward(tok);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::allclose(m->forward(tok.slice(0, 1, 2)), a.slice(0, 1, 2), 1e-5, 1e-6)) << "batch-independent";
  EXPECT_TRUE(torch::allclose(m->forward(tok.slice(1, 0, 5)), a.slice(1, 0, 5), 1e-5, 1e-6)) << "prefix-consistent";
  // A document packed second in its row (doc ids 0 0 0 0 1 1 1 1 1) sees the draw of its
  // own positions 0..4: its logits are those of the same tokens alone in a row.
  auto docs = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1, 1}, torch::kInt64).unsqueeze(0);
  const auto packed = m->forward(tok.slice(0, 0, 1), docs);
  const auto alone = m->forward(tok.slice(0, 0, 1).slice(1, 4, 9));
  EXPECT_TRUE(torch::allclose(packed.slice(1, 4, 9), alone, 1e-5, 1e-6)) << "position within the document";
  LoopedModel other(c);  // another instance: the same draw
  other->reset_parameters(5);
  other->eval();
  EXPECT_TRUE(torch::equal(other->forward(tok), a));
  // Not the zero state: the draw is used.
  auto z = c;
  z.state_init = "zero";
  LoopedModel zero(z);
  zero->reset_parameters(5);
  zero->eval();
  EXPECT_FALSE(torch::allclose(zero->forward(tok), a));
}

TEST(LoopedModel, OneIterationEqualsDenseStackOfItsLayers) {
  // With the adapter reading only the prelude output (weight [0 | I]), R = 1 runs
  // prelude, the k recurrent blocks and the coda once: a dense model of P + k + C layers.
  auto c = tiny_looped();
  LoopedModel lm(c);
  btest::perturb(*lm, 2);
  lm->to(torch::kFloat64);
  lm->eval();
  DenseConfig dc = btest::tiny_dense();
  dc.n_layers = c.n_prelude + c.n_recur + c.n_coda;
  DenseModel dm(dc);
  dm->to(torch::kFloat64);
  {
    torch::NoGradGuard ng;
    auto eye = torch::eye(c.d_model, torch::kFloat64);
    lm->adapter->weight.copy_(torch::cat({torch::zeros_like(eye), eye}, 1));
    auto src = lm->named_parameters();
    auto dst = dm->named_parameters();
    std::vector<std::string> order;
    for (int64_t i = 0; i < c.n_prelude; ++i) order.push_back("model.prelude." + std::to_string(i));
    for (int64_t i = 0; i < c.n_recur; ++i) order.push_back("model.core." + std::to_string(i));
    for (int64_t i = 0; i < c.n_coda; ++i) order.push_back("model.coda." + std::to_string(i));
    int copied = 0;
    for (auto& p : dst) {
      std::string name = p.key();
      if (name.rfind("model.layers.", 0) == 0) {
        const size_t dot = name.find('.', 13);
        const int64_t i = std::stoll(name.substr(13, dot - 13));
        name = order[i] + name.substr(dot);
      }
      ASSERT_TRUE(src.contains(name)) << name;
      p.value().copy_(src[name]);
      ++copied;
    }
    EXPECT_EQ(copied, int(dst.size()));
  }
  auto tok = btest::random_tokens(2, 10, 29, 3);
  auto doc = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1, 1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  auto a = lm->forward(tok, doc, /*recurrence=*/1);
  auto b = dm->forward(tok, doc);
  EXPECT_TRUE(torch::allclose(a, b, 1e-12, 1e-12)) << (a - b).abs().max().item<double>();
  // A second iteration changes the output (the state now feeds the adapter's input).
  lm->adapter->weight.data().add_(0.1);
  EXPECT_FALSE(torch::allclose(lm->forward(tok, doc, 1), lm->forward(tok, doc, 2), 1e-6, 1e-6));
}

TEST(LoopedModel, RecurrenceRulesAndTruncatedBackprop) {
  auto c = tiny_looped();
  c.recurrence_sampling = "poisson_lognormal";
  c.recurrence = 4;
  c.max_recurrence = 9;
  c.backprop_depth = 2;
  LoopedModel m(c);
  torch::manual_seed(0);
  // The sampled R' and R_g = min(backprop_depth, R') average to expected_iterations()
  // (quadrature), below the uncapped mean R = 4 and backprop_depth = 2.
  constexpr int kSamples = 40000;
  double sum = 0, sum_g = 0;
  for (int i = 0; i < kSamples; ++i) {
    const int64_t r = m->sample_recurrence();
    ASSERT_GE(r, 1);
    ASSERT_LE(r, 9);
    sum += double(r);
    sum_g += double(std::min<int64_t>(r, 2));
  }
  const auto expected = c.expected_iterations();
  EXPECT_NEAR(sum / kSamples, expected.first, 0.05);
  EXPECT_NEAR(sum_g / kSamples, expected.second, 0.02);
  EXPECT_LT(expected.first, 4.0 - 0.05);
  EXPECT_LT(expected.second, 2.0 - 0.02);
  auto fixed = c;
  fixed.recurrence_sampling = "fixed";
  EXPECT_EQ(fixed.expected_iterations(), std::make_pair(4.0, 2.0));
  m->eval();
  auto tok = btest::random_tokens(1, 6, 29, 4);
  m->forward(tok);
  EXPECT_EQ(m->last_recurrence(), 4);
  m->set_inference_recurrence(7);
  m->forward(tok);
  EXPECT_EQ(m->last_recurrence(), 7);
  EXPECT_THROW(m->set_inference_recurrence(0), lol::InputError);
  m->train();
  m->forward(tok, {}, 5);
  EXPECT_EQ(m->last_recurrence(), 5);
  EXPECT_EQ(m->last_backprop_iterations(), 2);
  // Training FLOPs: outer layers 3x, recurrent block R forwards + 2 x 2 backward.
  LoopedTrainable t(m);
  // Before any forward (as lol compare plans): the expected iterations, backward through
  // at most backprop_depth = 2 of them; with "fixed" exactly R = 4 and 2.
  {
    LoopedModel fresh(c);
    LoopedTrainable planned(fresh);
    const double outer = flops_report(cost_model(c, 0), 6).forward_flops;
    const double per_iter = flops_report(cost_model(c, 1), 6).forward_flops - outer;
    EXPECT_DOUBLE_EQ(planned.train_flops_per_token(6), 3 * outer + (expected.first + 2 * expected.second) * per_iter);
    auto fixed_cfg = c;
    fixed_cfg.recurrence_sampling = "fixed";
    LoopedModel fixed_model(fixed_cfg);
    EXPECT_DOUBLE_EQ(LoopedTrainable(fixed_model).train_flops_per_token(6), 3 * outer + (4 + 2 * 2) * per_iter);
  }
  const double f = t.train_flops_per_token(6);
  m->forward(tok, {}, 5);
  EXPECT_DOUBLE_EQ(t.train_flops_per_token(6), f);
  m->forward(tok, {}, 6);
  EXPECT_GT(t.train_flops_per_token(6), f);
}

TEST(LoopedTrainable, SaveLoadRoundTripThroughFactory) {
  btest::TempDir dir("looped-save");
  auto c = tiny_looped();
  c.state_init = "zero";  // deterministic forward for the comparison
  auto model = lol::training::make_model(c.to_json(), "test", c.vocab_size, 16, 5);
  ASSERT_EQ(model->architecture(), "looped");
  btest::perturb(model->module(), 6);
  model->save(dir.path(), nullptr);
  auto loaded = lol::training::load_model(dir.path());
  ASSERT_EQ(loaded->architecture(), "looped");
  EXPECT_EQ(loaded->config_json(), model->config_json());
  model->module().eval();
  loaded->module().eval();
  lol::training::TrainBatch b;
  b.tokens = btest::random_tokens(2, 8, c.vocab_size, 7);
  EXPECT_TRUE(torch::equal(model->forward(b), loaded->forward(b)));
  auto bad = c.to_json();
  bad["recurrence_sampling"] = "geometric";
  EXPECT_THROW(LoopedConfig::from_json(bad, "cfg"), lol::InputError);
}
