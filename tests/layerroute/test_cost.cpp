// Shape-counted generation cost (layerroute/cost.h): the FLOP-based ideal speedup.
#include <gtest/gtest.h>

#include "baselines/flops.h"
#include "layerroute/cost.h"
#include "layerroute_test_util.h"
#include "nn/block.h"
#include "util/error.h"

namespace lol::layerroute {
namespace {

TEST(LayerRouteCost, PrefillOnlyMatchesPerTokenFlopsReport) {
  // One generated token: the whole sequence is a causal prefill of T tokens, which is
  // what flops_report counts per token for T-token documents (plus one LM head call).
  const auto c = test::tiny_config(6);
  const auto cm = baselines::cost_model(c);
  for (int64_t T : {1, 7, 40}) {
    const auto g = generation_cost(c, T, 1, std::vector<uint8_t>(6, 1), false);
    const auto rep = baselines::flops_report(cm, T);
    const double head = 2.0 * double(c.d_model) * double(c.vocab_size);
    EXPECT_NEAR(g.layer_flops, double(T) * (rep.forward_flops - head), 1e-6 * g.layer_flops) << "T " << T;
    EXPECT_DOUBLE_EQ(g.fixed_flops, head);
  }
}

TEST(LayerRouteCost, DecodingSeesTheSameTokensAndPairsAsPrefill) {
  // P-token prompt + N generated tokens feeds P + N - 1 tokens through each open layer,
  // with the same causal (query, key) pairs as a prefill of P + N - 1 tokens.
  const auto c = test::tiny_config(4);
  const std::vector<uint8_t> open{1, 0, 1, 1};
  const auto dec = generation_cost(c, 9, 12, open, false);
  const auto pre = generation_cost(c, 20, 1, open, false);
  EXPECT_DOUBLE_EQ(dec.layer_flops, pre.layer_flops);
  EXPECT_DOUBLE_EQ(dec.fixed_flops, 12 * pre.fixed_flops);
}

TEST(LayerRouteCost, ClosedLayersCostNothingGatesCostTheirDotProducts) {
  const auto c = test::tiny_config(6);
  const auto all = generation_cost(c, 10, 5, std::vector<uint8_t>(6, 1), false);
  const auto two = generation_cost(c, 10, 5, {0, 1, 0, 0, 1, 0}, false);
  const auto none = generation_cost(c, 10, 5, std::vector<uint8_t>(6, 0), true);
  EXPECT_NEAR(two.layer_flops * 3, all.layer_flops, 1e-9 * all.layer_flops);
  EXPECT_EQ(none.layer_flops, 0.0);
  EXPECT_DOUBLE_EQ(none.fixed_flops - all.fixed_flops, 2.0 * double(c.d_model) * 6);
  EXPECT_THROW(generation_cost(c, 0, 5, std::vector<uint8_t>(6, 1), false), InputError);
  EXPECT_THROW(generation_cost(c, 3, 5, std::vector<uint8_t>(5, 1), false), InputError);
}

TEST(LayerRouteCost, MatmulWeightsAreTheBlocksProjectionWeights) {
  // The counted matmul weights per block equal the weight elements of the model's
  // q/k/v/o and SwiGLU projections (biases are additions, not multiplications).
  auto base = test::tiny_base(1, 3);
  auto& blk = *base->layers[0]->as<nn::Block>();
  int64_t weights = 0;
  for (const auto& p : blk.named_parameters(true))
    if (p.key().find("proj.weight") != std::string::npos) weights += p.value().numel();
  const auto c = test::tiny_config(3);
  const auto one = generation_cost(c, 1, 1, {1, 0, 0}, false);
  // One token, one (query, key) pair: 2 x weights + 4 x (H head_dim).
  EXPECT_DOUBLE_EQ(one.layer_flops, 2.0 * double(weights) + 4.0 * double(c.n_heads * (c.d_model / c.n_heads)));
}

}  // namespace
}  // namespace lol::layerroute
