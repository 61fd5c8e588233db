// MoE baseline (issue 9): forward/backward, N = 1, k = 1 equals dense, top-k routing
// and loss-free balancing, padding, save/load.
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "baseline_test_util.h"
#include "baselines/dense_model.h"
#include "baselines/moe_model.h"
#include "baselines/moe_trainable.h"
#include "training/trainable.h"
#include "util/error.h"

using namespace lol::baselines;

using btest::tiny_moe;

TEST(MoEModel, ForwardBackwardAndNames) {
  MoEModel m(tiny_moe());
  m->train();
  auto tok = btest::random_tokens(2, 11, 29, 1);
  auto logits = m->forward(tok);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 11, 29}));
  logits.logsumexp(-1).sum().backward();
  int experts_with_grad = 0;
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    if (p.key().find(".experts.") != std::string::npos) {
      experts_with_grad += p.value().grad().abs().sum().item<double>() > 0;
    } else {
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    }
  }
  EXPECT_GT(experts_with_grad, 0);
  auto params = m->named_parameters();
  EXPECT_TRUE(params.contains("model.layers.1.mlp.gate.weight"));
  EXPECT_TRUE(params.contains("model.layers.2.mlp.experts.2.down_proj.weight"));
  EXPECT_TRUE(params.contains("model.layers.0.mlp.up_proj.weight"));  // dense prelude layer
  EXPECT_TRUE(m->named_buffers().contains("model.layers.1.mlp.balance_bias"));
  // 22 tokens x top-2 per MoE layer were counted.
  EXPECT_EQ(m->moe_layer(0).pending_load().sum().item<int64_t>(), 44);
}

TEST(MoEModel, OneExpertTopOneEqualsDense) {
  auto c = tiny_moe(1, 1);
  MoEModel moe(c);
  btest::perturb(*moe, 2);
  moe->to(torch::kFloat64);
  DenseModel dense(btest::dense_twin(c));
  dense->to(torch::kFloat64);
  {
    torch::NoGradGuard ng;
    auto src = moe->named_parameters();
    for (auto& p : dense->named_parameters()) {
      std::string n = p.key();
      const auto pos = n.find(".mlp.");
      if (src.contains(n)) {
        p.value().copy_(src[n]);
      } else {
        ASSERT_NE(pos, std::string::npos) << n;
        const std::string alt = n.substr(0, pos) + ".mlp.experts.0." + n.substr(pos + 5);
        ASSERT_TRUE(src.contains(alt)) << alt;
        p.value().copy_(src[alt]);
      }
    }
  }
  auto tok = btest::random_tokens(2, 13, 29, 3);
  auto doc = torch::tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  for (bool train : {false, true}) {
    moe->train(train);
    // Padding rows (the last two) get no FFN in the MoE: compare the tokens.
    auto a = moe->forward(tok, doc).slice(1, 0, 11), b = dense->forward(tok, doc).slice(1, 0, 11);
    EXPECT_TRUE(torch::allclose(a, b, 1e-12, 1e-12)) << (a - b).abs().max().item<double>();
  }
}

TEST(MoEModel, TopKSelectionWeightsAndBalancing) {
  auto c = tiny_moe(4, 2);
  c.balance_update_rate = 0.01;
  MoEModel m(c);
  m->train();
  auto& moe = m->moe_layer(0);
  // Force expert 3 to dominate: the bias drives selection away from it after updates.
  {
    torch::NoGradGuard ng;
    moe.gate->weight.zero_();
    moe.gate->weight[3].fill_(1.0);
  }
  auto x = torch::ones({5, c.d_model});
  auto y = moe.forward(x);
  ASSERT_EQ(y.sizes(), x.sizes());
  auto load = moe.pending_load();
  EXPECT_EQ(load[3].item<int64_t>(), 5);
  EXPECT_EQ(load.sum().item<int64_t>(), 10);
  // Output = sum over the selected experts of p_e E_e(x).
  auto p = torch::softmax(moe.gate(x), -1);
  auto top = std::get<1>(p.topk(2, -1));
  auto want = torch::zeros_like(x);
  for (int64_t j = 0; j < 2; ++j) {
    const int64_t e = top[0][j].item<int64_t>();
    want += p.select(1, e).unsqueeze(1) * moe.experts[e]->as<lol::nn::MLP>()->forward(x);
  }
  EXPECT_TRUE(torch::allclose(y, want, 1e-5, 1e-6));
  auto used = moe.update_balance(0.01);
  EXPECT_EQ(used[3].item<int64_t>(), 5);
  EXPECT_LT(moe.balance_bias[3].item<double>(), 0.0);
  EXPECT_EQ(moe.pending_load().sum().item<int64_t>(), 0);
  // Eval mode counts nothing.
  m->eval();
  moe.forward(x);
  EXPECT_EQ(moe.pending_load().sum().item<int64_t>(), 0);
}

// Tokens routed to different experts (the grouped expert call sorts them by expert and
// scatters back): output and every gradient equal the per-token formula
// y_t = sum over t's top-k experts e of p_te E_e(x_t), in float64.
TEST(MoEModel, MixedRoutingEqualsPerTokenFormulaWithGradients) {
  auto c = tiny_moe(4, 2);
  MoEModel m(c);
  m->to(torch::kFloat64);
  m->eval();
  auto& moe = m->moe_layer(0);
  torch::manual_seed(3);
  auto x = torch::randn({9, c.d_model}, torch::kFloat64).requires_grad_(true);
  auto w = torch::randn({9, c.d_model}, torch::kFloat64);
  auto grads = [&](const torch::Tensor& y) {
    for (auto& p : moe.parameters()) p.mutable_grad() = torch::Tensor();
    x.mutable_grad() = torch::Tensor();
    (y * w).sum().backward();
    std::vector<torch::Tensor> g{y.detach().clone(), x.grad().clone()};
    for (auto& p : moe.parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    return g;
  };
  auto got = grads(moe.forward(x));
  auto p = torch::softmax(moe.gate(x), -1);
  auto top = std::get<1>(p.detach().topk(2, -1));
  std::vector<torch::Tensor> rows;
  std::set<int64_t> chosen;
  for (int64_t t = 0; t < 9; ++t) {
    auto y = torch::zeros({c.d_model}, torch::kFloat64);
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t e = top[t][j].item<int64_t>();
      chosen.insert(e);
      y = y + p[t][e] * moe.experts[e]->as<lol::nn::MLP>()->forward(x[t].unsqueeze(0))[0];
    }
    rows.push_back(y);
  }
  ASSERT_GE(chosen.size(), 3u) << "the test wants tokens on several experts";
  auto want = grads(torch::stack(rows));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT((got[i] - want[i]).abs().max().item<double>(), 1e-12) << "tensor " << i;
}

TEST(MoETrainable, SaveLoadAndBalancingThroughTrainer) {
  btest::TempDir dir("moe-save");
  auto c = tiny_moe();
  auto model = lol::training::make_model(c.to_json(), "test", c.vocab_size, 16, 5);
  ASSERT_EQ(model->architecture(), "moe");
  model->module().train();
  lol::training::TrainBatch b;
  b.tokens = btest::random_tokens(2, 8, c.vocab_size, 7);
  b.doc_ids = torch::tensor({0, 0, 0, 0, 0, 0, -1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  model->forward(b);
  auto metrics = model->after_optimizer_step();
  ASSERT_EQ(metrics["expert_load"].size(), 2u);
  int64_t total = 0;
  for (auto v : metrics["expert_load"][0]) total += v.get<int64_t>();
  EXPECT_EQ(total, 2 * 6 * c.top_k);  // padding is not routed
  model->save(dir.path(), nullptr);
  auto loaded = lol::training::load_model(dir.path());
  EXPECT_EQ(loaded->config_json(), model->config_json());
  model->module().eval();
  loaded->module().eval();
  EXPECT_TRUE(torch::equal(model->forward(b), loaded->forward(b)));
  for (const auto& g : model->grouped_parameters())
    if (g.name.find("mlp.gate.weight") != std::string::npos)
      EXPECT_EQ(g.group, lol::training::ParamGroup::AdamWDecay) << g.name;
  auto bad = c.to_json();
  bad["top_k"] = 4;
  EXPECT_THROW(MoEConfig::from_json(bad, "cfg"), lol::InputError);
}
