// Window-path one-hot features and PCA (analysis/routing_pca.h): the one-hot layout,
// PCA against a hand-made data set with a known dominant direction.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "analysis/routing_pca.h"
#include "util/error.h"

namespace lol::analysis {
namespace {

TEST(RoutingPca, PathOneHotLayout) {
  RoutingFeatures f;
  f.depth = 2;
  f.library_size = 3;
  f.window_seq = {0, 0, 1};
  f.window_k = {0, 1, 0};
  f.window_label = {0, 0, 1};
  f.window_expert = torch::tensor({2, 0, 1, 1, 0, 2}, torch::kInt64).view({3, 2});
  auto x = path_one_hot(f);
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{3, 6}));
  auto expect = torch::tensor({0., 0., 1., 1., 0., 0.,  //
                               0., 1., 0., 0., 1., 0.,  //
                               1., 0., 0., 0., 0., 1.},
                              torch::kFloat64)
                    .view({3, 6});
  EXPECT_TRUE(torch::equal(x, expect));
}

TEST(RoutingPca, RecoversTheDominantDirection) {
  torch::manual_seed(0);
  // Points along (1, 2, 0)/sqrt(5) with spread 10, small noise elsewhere, offset mean.
  auto t = torch::randn({500, 1}, torch::kFloat64) * 10;
  auto dir = torch::tensor({1., 2., 0.}, torch::kFloat64) / std::sqrt(5.0);
  auto x = t * dir.unsqueeze(0) + torch::randn({500, 3}, torch::kFloat64) * 0.1 +
           torch::tensor({5., -3., 1.}, torch::kFloat64);
  auto p = fit_pca(x, 2);
  EXPECT_NEAR(std::abs(p.components[0].dot(dir).item<double>()), 1.0, 1e-3);
  EXPECT_GT(p.components[0][1].item<double>(), 0.0) << "largest loading positive";
  EXPECT_NEAR(p.components[0].dot(p.components[1]).item<double>(), 0.0, 1e-9);
  EXPECT_GT(p.explained_ratio[0].item<double>(), 0.99);
  EXPECT_LT(p.explained_ratio[0].item<double>() + p.explained_ratio[1].item<double>(), 1.0 + 1e-12);
  // Projections are centred and PC1 carries the spread of t.
  auto z = p.project(x);
  EXPECT_NEAR(z.mean(0)[0].item<double>(), 0.0, 1e-9);
  EXPECT_NEAR(z.select(1, 0).std().item<double>(), t.std().item<double>(), 0.1);
  EXPECT_THROW(fit_pca(x, 4), InputError);
  EXPECT_THROW(fit_pca(x.slice(0, 0, 1), 1), InputError);
}

}  // namespace
}  // namespace lol::analysis
