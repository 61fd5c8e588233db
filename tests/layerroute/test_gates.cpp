// Gates (paper 3.1-3.4): straight-through estimator, biased band initialisation and
// its scaling, the skipping forward (closed gates run nothing) and the bias-only ablation.
#include "core/module_io.h"
#include "layerroute/decode.h"
#include "layerroute/eval.h"
#include "layerroute/gates.h"
#include "layerroute_test_util.h"

namespace lol::layerroute::test {
namespace {

TEST(LayerRouteGates, SteForwardIsHardBackwardFlowsThroughSigma) {
  auto s = torch::tensor({-2.0f, -0.1f, 0.1f, 3.0f}, torch::requires_grad());
  auto sigma = torch::sigmoid(s);
  auto g = ste_gate(sigma);
  EXPECT_TRUE(torch::equal(g.detach(), torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})));
  auto up = torch::tensor({2.0f, -3.0f, 5.0f, 7.0f});
  (g * up).sum().backward();
  // d/ds = up * sigma (1 - sigma): the gradient of the soft gate, also where g = 0.
  auto sd = sigma.detach();
  auto expect = up * sd * (1 - sd);
  EXPECT_TRUE(torch::allclose(s.grad(), expect, 1e-6, 1e-7));
  EXPECT_GT(s.grad()[0].abs().item<float>(), 0.0f);
}

TEST(LayerRouteGates, BandInitialisationScalesWithDepth) {
  GateConfig c;
  EXPECT_EQ(c.band(24), std::make_pair(int64_t(8), int64_t(16)));
  EXPECT_EQ(c.band(12), std::make_pair(int64_t(4), int64_t(8)));
  EXPECT_EQ(c.band(6), std::make_pair(int64_t(2), int64_t(4)));
  Gates g(24, 16, c, 0);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(g->bias[i].item<float>(), (i >= 8 && i <= 16) ? -1.0f : 1.0f) << i;
  c.band_first = 20;
  c.band_last = 3;
  EXPECT_THROW(c.validate("gates"), InputError);
}

TEST(LayerRouteGates, MeanPoolIgnoresPadding) {
  auto h = torch::arange(12, torch::kFloat32).view({2, 3, 2});
  auto valid = torch::tensor({1, 1, 1, 1, 0, 0}, torch::kBool).view({2, 3});
  auto m = mean_pool(h, valid);
  EXPECT_TRUE(torch::allclose(m[0], torch::tensor({2.0f, 3.0f})));
  EXPECT_TRUE(torch::allclose(m[1], torch::tensor({6.0f, 7.0f})));
  // States near the top of the float32 range: their sum overflows, their mean does not.
  auto big = torch::full({1, 300, 2}, 3e36f);
  auto mb = mean_pool(big, torch::ones({1, 300}, torch::kBool));
  EXPECT_TRUE(torch::isfinite(mb).all().item<bool>()) << mb;
  EXPECT_NEAR(mb[0][0].item<float>() / 3e36f, 1.0f, 1e-4);
}

TEST(LayerRouteGatedModel, SteGradientReachesClosedGate) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 1);
  m->train();
  torch::Tensor tok, docs;
  random_batch({9, 12}, 61, 5, tok, docs);
  GatedOptions o;
  o.ste = true;
  auto out = m->forward(tok, docs, o);
  auto [first, last] = GateConfig{}.band(6);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(out.open[r][i].item<bool>(), !(i >= first && i <= last)) << i;
  EXPECT_EQ(out.executed_blocks, 2 * 6);  // STE: every block runs
  auto valid = (docs >= 0).unsqueeze(-1).to(torch::kFloat32);
  (out.logits * valid).pow(2).mean().backward();
  for (int64_t i = 0; i < 6; ++i) EXPECT_NE(m->gates->bias.grad()[i].item<float>(), 0.0f) << "layer " << i;
  EXPECT_FALSE(m->base->embed_tokens->weight.requires_grad());
  // The STE forward computes the same function as the skipping forward.
  m->eval();
  torch::NoGradGuard ng;
  auto skip = m->forward(tok, docs, GatedOptions{});
  EXPECT_TRUE(torch::allclose((skip.logits * valid), (out.logits.detach() * valid), 1e-5, 1e-5));
  EXPECT_EQ(skip.executed_blocks, out.open.sum().item<int64_t>());
}

TEST(LayerRouteGatedModel, ClosedGateRunsNoComputation) {
  auto base = tiny_base();
  GatedModel m(base, LoraConfig{}, GateConfig{}, 2);
  torch::NoGradGuard ng;
  // Layer 2 closed for every input; its weights poisoned: any use would produce NaN.
  m->gates->weight[2].zero_();
  m->gates->bias[2].fill_(-20);
  auto* blk = m->base->layers[2]->as<nn::Block>();
  blk->self_attn->q_proj->weight.fill_(std::numeric_limits<float>::quiet_NaN());
  blk->mlp->down_proj->weight.fill_(std::numeric_limits<float>::quiet_NaN());
  torch::Tensor tok, docs;
  random_batch({7, 10, 4}, 61, 9, tok, docs);
  auto out = m->forward(tok, docs, GatedOptions{});
  EXPECT_TRUE(torch::isfinite(out.logits).all().item<bool>());
  EXPECT_EQ(out.open.select(1, 2).sum().item<int64_t>(), 0);
  EXPECT_EQ(out.executed_blocks, out.open.sum().item<int64_t>());
  EXPECT_LE(out.executed_blocks, 3 * 5);
  // Computing and discarding (the STE path) would touch the poisoned block.
  GatedOptions ste;
  ste.ste = true;
  EXPECT_FALSE(torch::isfinite(m->forward(tok, docs, ste).logits).all().item<bool>());
  // All gates closed: embedding -> norm -> head only.
  GatedOptions closed;
  closed.mode = GateMode::Closed;
  auto c = m->forward(tok, docs, closed);
  EXPECT_EQ(c.executed_blocks, 0);
  auto ref = m->base->logits(m->base->norm(m->base->embed_tokens(tok)));
  EXPECT_TRUE(torch::allclose(c.logits, ref, 1e-6, 1e-6));
}

TEST(LayerRouteGatedModel, PerSampleSkippingMatchesMaskedComputation) {
  GatedModel m(tiny_base(4), LoraConfig{}, GateConfig{}, 3);
  randomize_adapters(*m, 11, 400.0);  // large w: decisions differ between samples
  torch::NoGradGuard ng;
  torch::Tensor tok, docs;
  random_batch({12, 5, 9, 12, 3}, 61, 13, tok, docs);
  auto skip = m->forward(tok, docs, GatedOptions{});
  GatedOptions ste;
  ste.ste = true;
  auto full = m->forward(tok, docs, ste);
  auto open = skip.open.to(torch::kInt64);
  const auto per_layer = open.sum(0);
  bool mixed = false;
  for (int64_t i = 0; i < 6; ++i) mixed = mixed || (per_layer[i].item<int64_t>() > 0 && per_layer[i].item<int64_t>() < 5);
  ASSERT_TRUE(mixed) << "test needs a layer open for some samples only";
  EXPECT_TRUE(torch::equal(skip.open, full.open));
  auto valid = (docs >= 0).unsqueeze(-1).to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(skip.logits * valid, full.logits * valid, 1e-5, 1e-5));
  EXPECT_EQ(skip.executed_blocks, open.sum().item<int64_t>());
  // Each sample alone gives the same logits and decisions (gates are per sample).
  for (int64_t r : {0, 1, 4}) {
    const int64_t n = (docs[r] >= 0).sum().item<int64_t>();
    auto one = m->forward(tok[r].slice(0, 0, n).unsqueeze(0), torch::Tensor(), GatedOptions{});
    EXPECT_TRUE(torch::equal(one.open[0], skip.open[r]));
    EXPECT_TRUE(torch::allclose(one.logits[0], skip.logits[r].slice(0, 0, n), 1e-5, 1e-5));
  }
}

TEST(LayerRouteGatedModel, BiasOnlyAblationDropsTheInputTerm) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 4);
  randomize_adapters(*m, 17, 400.0);
  torch::NoGradGuard ng;
  torch::Tensor tok, docs;
  random_batch({8, 11, 6}, 61, 19, tok, docs);
  GatedOptions bo;
  bo.mode = GateMode::BiasOnly;
  auto a = m->forward(tok, docs, bo);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(torch::equal(a.scores[r], m->gates->bias));
    EXPECT_TRUE(torch::equal(a.open[r], m->gates->bias > 0));
  }
  // Same as the learned gates with w = 0.
  auto w = m->gates->weight.clone();
  m->gates->weight.zero_();
  auto b = m->forward(tok, docs, GatedOptions{});
  EXPECT_TRUE(torch::equal(a.open, b.open));
  EXPECT_TRUE(torch::allclose(a.logits, b.logits, 1e-6, 1e-6));
  m->gates->weight.copy_(w);
  auto c = m->forward(tok, docs, GatedOptions{});
  EXPECT_FALSE(torch::equal(c.open, a.open)) << "the input term changes some decision";
}

// One decision rule everywhere: a logit so small that float32 sigmoid rounds it to
// exactly 0.5 closes the gate in the forward, in generation and in the bias-only
// reference of the non-triviality statistic alike (paper eq. 3: 1[sigma > 0.5]).
TEST(LayerRouteGatedModel, GenerationAndForwardDecideAlikeAtTheThreshold) {
  EXPECT_EQ(torch::sigmoid(torch::tensor({1e-9f})).item<float>(), 0.5f) << "the case under test";
  EXPECT_TRUE(torch::equal(gate_open(torch::sigmoid(torch::tensor({-1.0f, 1e-9f, 1e-3f}))),
                           torch::tensor({false, false, true})));
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 4);
  torch::NoGradGuard ng;
  m->gates->weight.zero_();
  for (int64_t i = 0; i < m->gates->n_layers(); ++i) m->gates->bias[i] = i == 0 ? 1e-9f : (i % 2 ? 5.0f : -5.0f);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7};
  auto f = m->forward(torch::tensor(prompt).unsqueeze(0), torch::Tensor(), GatedOptions{});
  auto g = generate_gated(*m, prompt, 2, GateMode::Learned, true);
  for (int64_t i = 0; i < m->gates->n_layers(); ++i)
    EXPECT_EQ(bool(g.open[size_t(i)]), f.open[0][i].item<bool>()) << "layer " << i;
  EXPECT_FALSE(f.open[0][0].item<bool>());
  // With w = 0 no decision differs from the bias-only one: non-triviality 0 everywhere.
  auto data = copy_task(4, 3, 6, 6, 4);
  EvalOptions o;
  o.timing_samples = 1;
  o.repeats = 1;
  o.new_tokens = 2;
  auto r = evaluate_layerroute(*m, data, o);
  for (double x : r.nontrivial) EXPECT_EQ(x, 0.0);
}

TEST(LayerRouteGatedModel, NeighbouringSeedsDrawIndependentInitialValues) {
  // The protocol trains seeds s, s + 1, ...: seed s's gates must not start from the
  // values seed s + 1's adapters draw (they did when the gates used seed + 1).
  torch::NoGradGuard ng;
  GatedModel a(tiny_base(), LoraConfig{}, GateConfig{}, 5), b(tiny_base(), LoraConfig{}, GateConfig{}, 6);
  const auto gates = a->gates->weight.flatten();
  int64_t compared = 0;
  for (const auto& p : b->lora->named_parameters()) {
    const auto v = p.value().flatten();
    const int64_t n = std::min(v.numel(), gates.numel());
    const int64_t equal = v.slice(0, 0, n).eq(gates.slice(0, 0, n)).sum().item<int64_t>();
    EXPECT_LT(equal, 2) << p.key() << ": " << equal << " of " << n << " initial values equal seed 5's gates";
    compared += p.key().rfind("A_", 0) == 0;
  }
  EXPECT_GT(compared, 0);
  // Same seed, same model.
  GatedModel c(tiny_base(), LoraConfig{}, GateConfig{}, 5);
  EXPECT_TRUE(torch::equal(c->gates->weight, a->gates->weight));
}

}  // namespace
}  // namespace lol::layerroute::test
