// The training benchmark (issue 12): presets, FLOP counting, the dense strided-window
// reference model, and short runs of bench_train / bench_matmul.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "lol/model.h"
#include "training/dense_window_model.h"
#include "training/train_benchmark.h"
#include "util/error.h"

using namespace lol::training;

TEST(TrainBenchmark, PresetsMatchTheReferenceParameterCounts) {
  auto tiny = train_bench_preset("tiny");
  auto small = train_bench_preset("small");
  EXPECT_EQ(tiny.seq_len, 128);
  EXPECT_EQ(small.seq_len, 512);
  EXPECT_EQ(small.model.n_kv_heads, 4);
  const double n_tiny = double(lol::LoLModel(tiny.model)->num_parameters());
  const double n_small = double(lol::LoLModel(small.model)->num_parameters());
  EXPECT_NEAR(n_tiny / 1e6, 0.33, 0.01);
  EXPECT_NEAR(n_small / 1e6, 9.2, 0.1);
  EXPECT_THROW(train_bench_preset("huge"), lol::InputError);
}

TEST(TrainBenchmark, CountsFlopsFromWindowShapes) {
  lol::LoLConfig c;
  c.vocab_size = 10;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.ffn_hidden = 16;
  c.n_prelude = 1;
  c.n_coda = 0;
  c.library_size = 2;
  c.core_depth = 1;
  c.window = 4;
  c.stride = 2;
  // B = 1, T = 6: prelude segment of 6; depth 1 (shift 0) windows [0,4) and [4,6);
  // causal (query, key) pairs: 21 + 10 + 3.
  auto f = count_model_flops(c, 1, 6, 1, /*dense_core=*/false);
  EXPECT_DOUBLE_EQ(f.attention, 3.0 * 4 * 2 * 4 * (21 + 10 + 3));
  const double block = 2.0 * 6 * (8 * 4 * 8 + 3 * 8 * 16);
  const double head = 2.0 * 6 * 8 * 10, router = 2.0 * 2 * 8 * 2;
  EXPECT_DOUBLE_EQ(f.linear, 3.0 * (2 * block + head + router));
  auto dense = count_model_flops(c, 1, 6, 1, /*dense_core=*/true);
  EXPECT_DOUBLE_EQ(dense.attention, f.attention);
  EXPECT_DOUBLE_EQ(f.linear - dense.linear, 3.0 * router);
  // Depth 0: no core at all.
  auto none = count_model_flops(c, 1, 6, 0, false);
  EXPECT_DOUBLE_EQ(none.attention, 3.0 * 4 * 2 * 4 * 21);
  // Batch scales everything linearly.
  auto f3 = count_model_flops(c, 3, 6, 1, false);
  EXPECT_DOUBLE_EQ(f3.total(), 3 * f.total());
}

TEST(TrainBenchmark, CountsMuonFlopsOfUpdatedMatricesOnly) {
  auto a = torch::zeros({2, 3}, torch::requires_grad());
  auto b = torch::zeros({4, 4}, torch::requires_grad());
  auto n = torch::zeros({3}, torch::requires_grad());
  a.mutable_grad() = torch::ones({2, 3});
  n.mutable_grad() = torch::ones({3});
  std::vector<GroupedParam> ps{{"a", a, ParamGroup::Muon}, {"b", b, ParamGroup::Muon}, {"n", n, ParamGroup::AdamWNoDecay}};
  EXPECT_DOUBLE_EQ(count_muon_flops(ps, 5), 5.0 * (4 * 4 * 3 + 2 * 8));
  b.mutable_grad() = torch::ones({4, 4});
  EXPECT_DOUBLE_EQ(count_muon_flops(ps, 1), (4 * 4 * 3 + 2 * 8) + (4 * 16 * 4 + 2 * 64));
}

TEST(TrainBenchmark, DenseWindowModelIsCausalAndWindowed) {
  auto p = train_bench_preset("tiny");
  p.model.n_prelude = 0;
  p.model.n_coda = 0;
  DenseWindowModel m(p.model, 3);
  m->eval();
  torch::NoGradGuard ng;
  auto tok = torch::randint(p.model.vocab_size, {2, 40}, torch::kInt64);
  auto a = m->forward(tok);
  ASSERT_EQ(a.sizes(), (std::vector<int64_t>{2, 40, p.model.vocab_size}));
  auto tok2 = tok.clone();
  tok2[0][30] = (tok[0][30].item<int64_t>() + 1) % p.model.vocab_size;
  auto b = m->forward(tok2);
  // Earlier positions never see position 30.
  EXPECT_TRUE(torch::allclose(a.slice(1, 0, 30), b.slice(1, 0, 30)));
  EXPECT_FALSE(torch::allclose(a[0][30], b[0][30]));
  // Rows are independent.
  EXPECT_TRUE(torch::allclose(a[1], b[1]));
}

TEST(TrainBenchmark, RunsTrainingStepsOfBothArchitectures) {
  for (const std::string arch : {"lol", "dense"}) {
    TrainBenchOptions o;
    o.preset = "tiny";
    o.arch = arch;
    o.steps = 2;
    o.warmup = 1;
    auto r = bench_train(o);
    EXPECT_EQ(r.tokens_per_step, 8 * 128);
    EXPECT_GT(r.tokens_per_s, 0);
    EXPECT_GT(r.fwd_bwd_tokens_per_s, r.tokens_per_s);
    EXPECT_NEAR(r.step_s, r.fwd_bwd_s + r.optimizer_s, 0.5 * r.step_s);
    EXPECT_GT(r.flops.optimizer, 0);  // Muon ran on the hidden matrices
    EXPECT_GT(r.flops.attention, 0);
    EXPECT_TRUE(std::isfinite(r.last_loss));
    EXPECT_NEAR(r.first_loss, std::log(512.0), 0.5);  // random tokens, fresh model
    EXPECT_GT(r.peak_rss_bytes, 0);
  }
  // The optimizer's two groupings (per parameter: the CPU's; batched: the GPU's) train alike.
  std::vector<double> last;
  for (const std::string grouping : {"per-parameter", "batched"}) {
    TrainBenchOptions o;
    o.steps = 3;
    o.warmup = 0;
    o.optimizer_grouping = grouping;
    last.push_back(bench_train(o).last_loss);
  }
  EXPECT_NEAR(last[0], last[1], 1e-4);
  TrainBenchOptions bad;
  bad.arch = "moe";
  EXPECT_THROW(bench_train(bad), lol::InputError);
  bad.arch = "lol";
  bad.steps = 0;
  EXPECT_THROW(bench_train(bad), lol::InputError);
  bad.steps = 1;
  bad.optimizer_grouping = "fused";
  EXPECT_THROW(bench_train(bad), lol::InputError);
}

TEST(TrainBenchmark, PairInterleavesLoLAndDense) {
  TrainBenchOptions o;
  o.preset = "tiny";
  o.steps = 3;
  o.warmup = 1;
  auto p = bench_train_pair(o);
  EXPECT_EQ(p.lol.arch, "lol");
  EXPECT_EQ(p.dense.arch, "dense");
  ASSERT_EQ(p.step_ratios.size(), 3u);
  ASSERT_EQ(p.fwd_bwd_ratios.size(), 3u);
  for (auto x : p.step_ratios) EXPECT_GT(x, 0);
  // The median of three is one of them, between the other two.
  auto v = p.step_ratios;
  std::sort(v.begin(), v.end());
  EXPECT_EQ(p.step_ratio, v[1]);
  EXPECT_GT(p.lol.step_s, 0);
  EXPECT_GT(p.dense.step_s, 0);
  EXPECT_EQ(p.lol.steps, 3);
  // Both built as bench_train builds them: same parameter counts, a fresh model's loss.
  TrainBenchOptions one = o;
  one.arch = "dense";
  one.steps = 1;
  one.warmup = 0;
  EXPECT_EQ(p.dense.parameters, bench_train(one).parameters);
  EXPECT_NE(p.lol.parameters, p.dense.parameters);
  EXPECT_NEAR(p.lol.first_loss, std::log(512.0), 0.5);
  EXPECT_NEAR(p.dense.first_loss, std::log(512.0), 0.5);
  // The dense model's first step does not depend on LoL running next to it.
  EXPECT_DOUBLE_EQ(p.dense.first_loss, bench_train(one).first_loss);
  TrainBenchOptions bad = o;
  bad.profile_steps = 1;
  EXPECT_THROW(bench_train_pair(bad), lol::InputError);
  bad.profile_steps = 0;
  bad.steps = 0;
  EXPECT_THROW(bench_train_pair(bad), lol::InputError);
}

TEST(TrainBenchmark, MatmulPeak) {
  auto r = bench_matmul(64, 0.01, torch::kCPU);
  EXPECT_GE(r.repeats, 3);
  EXPECT_GT(r.gflops, 0);
  EXPECT_GE(r.best_gflops, r.gflops);
  EXPECT_THROW(bench_matmul(0, 0.01, torch::kCPU), lol::InputError);
}
