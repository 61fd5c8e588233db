// The paper's 3:2 comparison with a sparse MoE (LoL paper 4.3.2): "LoL uses MoE
// prelude and coda layers, and the MoE baseline uses strided attention at the same
// depths as LoL". Both arms: MoE prelude/coda with 1 expert, top-1 equal the dense
// prelude/coda; token routing, padding, load counting and the balancing update
// (also summed over data-parallel ranks); checkpoint names and round trip; parameter
// and FLOPs accounting.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "baseline_test_util.h"
#include "../common/tiny_lol.h"
#include "baselines/dense_model.h"
#include "baselines/flops.h"
#include "baselines/moe_model.h"
#include "baselines/moe_trainable.h"
#include "lol/model.h"
#include "training/lol_trainable.h"
#include "training/trainable.h"
#include "util/error.h"

using namespace lol::baselines;

namespace {

lol::LoLConfig tiny_lol(int64_t E, int64_t k) {
  auto c = lol_test::tiny_lol_config(/*vocab_size=*/29, /*n_heads=*/4, /*n_kv_heads=*/2, /*stride=*/3);
  c.n_coda = 2;
  c.core_depth = 2;
  c.router_noise_std = 0;
  c.prelude_coda_experts = E;
  c.prelude_coda_top_k = k;
  return c;
}

MoEConfig tiny_moe_all(int64_t E, int64_t k) { return btest::tiny_moe(E, k, /*moe_prelude_coda=*/true); }

/// Two rows of 8 tokens, the last 2 of each padding.
lol::training::TrainBatch padded_train_batch(int64_t vocab) {
  lol::training::TrainBatch b;
  b.tokens = btest::random_tokens(2, 8, vocab, 7);
  b.doc_ids = torch::tensor({0, 0, 0, 0, 0, 0, -1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  return b;
}

/// One training step on `b` under a fake two-rank reducer that doubles every count;
/// returns the step's metrics and sets `calls` to the number of reducer calls. `check`
/// sees each tensor handed to the reducer.
nlohmann::json doubled_counts_step(lol::training::TrainableModel& model, const lol::training::TrainBatch& b,
                                   int& calls, const std::function<void(const torch::Tensor&)>& check = {}) {
  calls = 0;
  model.set_statistics_reducer([&calls, check](const torch::Tensor& t) {
    ++calls;
    if (check) check(t);
    return t * 2;
  });
  model.module().train();
  model.forward(b);
  return model.after_optimizer_step();
}

/// Copies `src` into `dst`, mapping dst's dense FFN names ".mlp.X" to src's
/// ".mlp.experts.0.X" where src has an MoE FFN.
void copy_one_expert(torch::nn::Module& dst, torch::nn::Module& src) {
  torch::NoGradGuard ng;
  auto from = src.named_parameters();
  for (auto& p : dst.named_parameters()) {
    const std::string n = p.key();
    if (from.contains(n)) {
      p.value().copy_(from[n]);
      continue;
    }
    const auto pos = n.find(".mlp.");
    ASSERT_NE(pos, std::string::npos) << n;
    const std::string alt = n.substr(0, pos) + ".mlp.experts.0." + n.substr(pos + 5);
    ASSERT_TRUE(from.contains(alt)) << alt;
    p.value().copy_(from[alt]);
  }
}

lol::LoLBatch padded_batch(int64_t vocab, uint64_t seed) {
  lol::LoLBatch b;
  b.tokens = btest::random_tokens(2, 13, vocab, seed);
  b.doc_ids = torch::tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  return b;
}

}  // namespace

TEST(LoLMoEPreludeCoda, OneExpertTopOneEqualsDensePreludeCoda) {
  auto c = tiny_lol(1, 1);
  lol::LoLModel moe(c);
  btest::perturb(*moe, 2);
  auto dc = c;
  dc.prelude_coda_experts = 0;
  lol::LoLModel dense(dc);
  copy_one_expert(*dense, *moe);
  moe->to(torch::kFloat64);
  dense->to(torch::kFloat64);
  auto b = padded_batch(c.vocab_size, 3);
  for (bool train : {false, true}) {
    moe->train(train);
    dense->train(train);
    // Padding rows (the last two) get no FFN in an MoE block: compare the tokens.
    auto x = moe->forward(b).logits.slice(1, 0, 11), y = dense->forward(b).logits.slice(1, 0, 11);
    EXPECT_TRUE(torch::allclose(x, y, 1e-12, 1e-12)) << (x - y).abs().max().item<double>();
  }
}

TEST(LoLMoEPreludeCoda, NamesGradientsLoadAndBalancing) {
  auto c = tiny_lol(3, 2);
  c.balance_update_rate = 0.01;
  lol::LoLModel m(c);
  auto params = m->named_parameters();
  EXPECT_TRUE(params.contains("model.prelude.0.mlp.gate.weight"));
  EXPECT_EQ(params["model.prelude.0.mlp.gate.weight"].sizes(), (std::vector<int64_t>{3, 16}));
  EXPECT_TRUE(params.contains("model.coda.1.mlp.experts.2.down_proj.weight"));
  EXPECT_FALSE(params.contains("model.prelude.0.mlp.up_proj.weight"));
  EXPECT_TRUE(params.contains("model.library.2.mlp.up_proj.weight"));  // the library stays dense
  EXPECT_TRUE(m->named_buffers().contains("model.coda.0.mlp.balance_bias"));

  m->train();
  auto b = padded_batch(c.vocab_size, 4);
  auto out = m->forward(b);
  out.logits.logsumexp(-1).sum().backward();
  EXPECT_GT(params["model.prelude.0.mlp.gate.weight"].grad().abs().sum().item<double>(), 0.0);
  // 22 tokens (no padding) x top-2 in each of the 3 MoE blocks.
  auto load = m->ffn_pending_load();
  ASSERT_EQ(load.sizes(), (std::vector<int64_t>{3, 3}));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(load[i].sum().item<int64_t>(), 22 * 2) << i;
  const int64_t most = load[0].argmax().item<int64_t>();
  auto used = m->update_ffn_balance();
  EXPECT_TRUE(torch::equal(used, load));
  auto bias = m->named_buffers()["model.prelude.0.mlp.balance_bias"];
  EXPECT_LT(bias[most].item<double>(), 0.0) << "the most loaded expert's bias goes down";
  EXPECT_EQ(m->ffn_pending_load().sum().item<int64_t>(), 0);
  // Eval forwards are not counted; a wrong shape is refused.
  m->eval();
  m->forward(b);
  EXPECT_EQ(m->ffn_pending_load().sum().item<int64_t>(), 0);
  EXPECT_THROW(m->set_ffn_pending_load(torch::zeros({2, 3}, torch::kInt64)), lol::InputError);
  // A dense prelude/coda has no such loads.
  lol::LoLModel d(tiny_lol(0, 2));
  EXPECT_EQ(d->ffn_pending_load().numel(), 0);
}

TEST(LoLMoEPreludeCoda, TrainableSumsLoadsOverRanksSavesAndLoads) {
  btest::TempDir dir("lol-moe-pc");
  auto c = tiny_lol(3, 2);
  auto model = lol::training::make_model(c.to_json(), "test", c.vocab_size, 64, 5);
  ASSERT_EQ(model->architecture(), "lol");
  // A fake two-rank reducer: every count doubles, through one call per step.
  int calls = 0;
  const auto b = padded_train_batch(c.vocab_size);
  auto metrics = doubled_counts_step(*model, b, calls);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(metrics["prelude_coda_expert_load"].size(), 3u);
  for (const auto& row : metrics["prelude_coda_expert_load"]) {
    int64_t total = 0;
    for (auto v : row) total += v.get<int64_t>();
    EXPECT_EQ(total, 2 * (2 * 6 * 2));  // two ranks x 12 tokens x top-2; padding is not routed
  }
  int64_t windows = 0;
  for (auto v : metrics["expert_load"]) windows += v.get<int64_t>();
  EXPECT_GT(windows, 0);
  EXPECT_EQ(windows % 2, 0);
  for (const auto& g : model->grouped_parameters())
    if (g.name.find(".mlp.gate.weight") != std::string::npos)
      EXPECT_EQ(g.group, lol::training::ParamGroup::AdamWDecay) << g.name;
  // discard_step drops the counts of a skipped step.
  model->forward(b);
  model->discard_step();
  auto& lm = dynamic_cast<lol::training::LoLTrainable&>(*model).model();
  EXPECT_EQ(lm->ffn_pending_load().sum().item<int64_t>(), 0);

  model->save(dir.path(), nullptr);
  auto loaded = lol::training::load_model(dir.path());
  EXPECT_EQ(loaded->config_json(), model->config_json());
  EXPECT_EQ(loaded->config_json()["prelude_coda_experts"], 3);
  model->module().eval();
  loaded->module().eval();
  EXPECT_TRUE(torch::equal(model->forward(b), loaded->forward(b)));

  auto bad = c.to_json();
  bad["prelude_coda_top_k"] = 4;
  try {
    lol::LoLConfig::from_json(bad, "cfg.json");
    FAIL() << "top_k > experts accepted";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("prelude_coda_top_k"), std::string::npos) << e.what();
  }
  // A dense prelude/coda writes no prelude_coda_* fields (configs of earlier versions stay equal).
  EXPECT_FALSE(tiny_lol(0, 2).to_json().contains("prelude_coda_experts"));
}

TEST(LoLMoEPreludeCoda, ParameterAndFlopsAccounting) {
  for (int64_t Fe : {0, 10}) {
    auto c = tiny_lol(3, 2);
    c.prelude_coda_expert_ffn = Fe;
    lol::LoLModel m(c);
    const auto cm = cost_model(c, c.core_depth);
    EXPECT_EQ(cm.parameters, m->num_parameters()) << Fe;
    EXPECT_EQ(cm.active_parameters, m->active_parameters_per_token()) << Fe;
    // Against the dense prelude/coda: attention is the same; the FFN of each of the 3
    // prelude/coda blocks costs the gate plus k experts instead of one dense FFN.
    auto dc = c;
    dc.prelude_coda_experts = 0;
    const double F = double(Fe > 0 ? Fe : c.ffn_hidden), d = double(c.d_model);
    const double diff = flops_report(cm, 32).linear_flops - flops_report(cost_model(dc, dc.core_depth), 32).linear_flops;
    EXPECT_DOUBLE_EQ(diff, 3 * 2 * (d * 3 + 2 * 3 * d * F - 3 * d * double(c.ffn_hidden))) << Fe;
  }
}

TEST(MoEPreludeCoda, BaselineOneExpertEqualsDenseAndEveryLayerRoutes) {
  auto c = tiny_moe_all(1, 1);
  MoEModel moe(c);
  btest::perturb(*moe, 2);
  DenseModel dense(btest::dense_twin(c));
  copy_one_expert(*dense, *moe);
  moe->to(torch::kFloat64);
  dense->to(torch::kFloat64);
  auto tok = btest::random_tokens(2, 13, 29, 3);
  auto doc = torch::tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  for (bool train : {false, true}) {
    moe->train(train);
    auto a = moe->forward(tok, doc).slice(1, 0, 11), b = dense->forward(tok, doc).slice(1, 0, 11);
    EXPECT_TRUE(torch::allclose(a, b, 1e-12, 1e-12)) << (a - b).abs().max().item<double>();
  }
  auto c3 = tiny_moe_all(3, 2);
  MoEModel m(c3);
  EXPECT_TRUE(m->named_parameters().contains("model.layers.0.mlp.gate.weight"));
  EXPECT_TRUE(m->named_parameters().contains("model.layers.3.mlp.experts.1.up_proj.weight"));
  EXPECT_EQ(c3.n_moe_layers(), 4);
  // Attention stays full in the prelude/coda, strided in the core.
  EXPECT_EQ(c3.layer_attention(0).kind, AttentionKind::Full);
  EXPECT_EQ(c3.layer_attention(1).kind, AttentionKind::Strided);
  EXPECT_EQ(c3.layer_attention(3).kind, AttentionKind::Full);
  int64_t n_params = 0;
  for (const auto& p : m->parameters()) n_params += p.numel();
  EXPECT_EQ(cost_model(c3).parameters, n_params);
  EXPECT_TRUE(MoEConfig::from_json(c3.to_json(), "x").moe_prelude_coda);
}

TEST(MoEPreludeCoda, BaselineTrainableSumsLoadsOverRanks) {
  auto c = tiny_moe_all(3, 2);
  auto model = lol::training::make_model(c.to_json(), "test", c.vocab_size, 16, 5);
  ASSERT_EQ(model->architecture(), "moe");
  int calls = 0;
  auto metrics = doubled_counts_step(*model, padded_train_batch(c.vocab_size), calls, [](const torch::Tensor& t) {
    EXPECT_EQ(t.sizes(), (std::vector<int64_t>{4, 3}));
  });
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(metrics["expert_load"].size(), 4u);
  for (const auto& row : metrics["expert_load"]) {
    int64_t total = 0;
    for (auto v : row) total += v.get<int64_t>();
    EXPECT_EQ(total, 2 * (2 * 6 * 2));
  }
}
