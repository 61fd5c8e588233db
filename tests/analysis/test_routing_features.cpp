// Routing features and utilization against the model's own routing trace.
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "analysis/mode_paths.h"
#include "analysis/routing_features.h"
#include "analysis_test_util.h"
#include "util/error.h"

using lol::analysis::RoutingFeatures;

namespace {

/// Single-sequence trace of sequence i of the split.
std::vector<lol::DepthTrace> trace_of(lol::LoLModel& m, const lol::data::SplitData& split, int64_t i) {
  torch::NoGradGuard ng;
  lol::ForwardOptions fo;
  fo.trace = true;
  return m->forward(lol::analysis::make_batch(split, {i}, torch::kCPU), fo).trace;
}

}  // namespace

// A batch holding only empty sequences (batch size 1 at the split's empty sequence 2) is
// skipped, not forwarded (it crashed `lol analyze routing` and `paths extract`): the
// results equal those of batches that mix it with others.
TEST(RoutingFeatures, BatchOfOnlyEmptySequencesIsSkipped) {
  atest::TempDir tmp("features_empty");
  auto split = atest::write_split(tmp.path(), 6, 20, 5, /*with_empty=*/true);
  auto model = atest::tiny_model(3);
  lol::analysis::CollectOptions one, four;
  one.batch_size = 1;
  four.batch_size = 4;
  one.progress = four.progress = false;
  const auto a = lol::analysis::collect_routing_features(model, split, one);
  const auto b = lol::analysis::collect_routing_features(model, split, four);
  EXPECT_EQ(a.n_sequences(), 5);
  EXPECT_EQ(a.seq_index, b.seq_index);
  EXPECT_TRUE(torch::allclose(a.window_probs, b.window_probs, 1e-6, 1e-7));
  EXPECT_TRUE(torch::equal(a.window_expert, b.window_expert));
  const auto sa = lol::analysis::collect_routing_stats(model, split, one);
  const auto sb = lol::analysis::collect_routing_stats(model, split, four);
  EXPECT_EQ(sa.cells.size(), sb.cells.size());
  for (const auto& [label, rows] : sb.cells)
    EXPECT_EQ(sa.mode_path(label).expert, sb.mode_path(label).expert) << "label " << label << ", " << rows.size();
}

TEST(RoutingFeatures, ShapesAndValuesMatchPerSequenceTraces) {
  atest::TempDir tmp("features");
  auto split = atest::write_split(tmp.path(), 11, 30, 5, /*with_empty=*/true);
  auto model = atest::tiny_model(3);
  lol::analysis::CollectOptions co;
  co.batch_size = 4;  // several batches, rows padded to different lengths
  co.progress = false;
  RoutingFeatures f = lol::analysis::collect_routing_features(model, split, co);
  const int64_t D = 3, L = 3;
  ASSERT_EQ(f.depth, D);
  ASSERT_EQ(f.library_size, L);
  ASSERT_EQ(f.n_sequences(), 10) << "the empty sequence is skipped";
  ASSERT_EQ(f.window_probs.sizes(), (std::vector<int64_t>{f.n_windows(), D * L}));
  ASSERT_EQ(f.window_top1.sizes(), (std::vector<int64_t>{f.n_windows(), D}));
  ASSERT_EQ(f.window_expert.sizes(), (std::vector<int64_t>{f.n_windows(), D}));
  ASSERT_EQ(f.seq_probs.sizes(), (std::vector<int64_t>{10, D * L}));

  int64_t item = 0;
  std::vector<std::vector<int64_t>> count(D, std::vector<int64_t>(L, 0));
  bool some_variation = false;
  for (int64_t s = 0; s < f.n_sequences(); ++s) {
    const int64_t i = f.seq_index[s];
    EXPECT_EQ(f.seq_label[s], split.get(i).label);
    auto tr = trace_of(model, split, i);
    ASSERT_EQ(int64_t(tr.size()), D);
    int64_t K = 0;
    for (const auto& t : tr) K = std::max<int64_t>(K, int64_t(t.k.size()));
    for (int64_t k = 0; k < K; ++k, ++item) {
      ASSERT_EQ(f.window_seq[item], i);
      ASSERT_EQ(f.window_k[item], k);
      ASSERT_EQ(f.window_label[item], split.get(i).label);
      for (int64_t d = 0; d < D; ++d) {
        const int64_t w = std::min<int64_t>(k, int64_t(tr[d].k.size()) - 1);  // last window if fewer
        ASSERT_EQ(tr[d].k[w], w);
        const int64_t e = tr[d].expert[w].item<int64_t>();
        EXPECT_EQ(f.window_expert[item][d].item<int64_t>(), e);
        for (int64_t m = 0; m < L; ++m)
          EXPECT_NEAR(f.window_probs[item][d * L + m].item<double>(), tr[d].probs[w][m].item<double>(), 1e-5);
        EXPECT_NEAR(f.window_top1[item][d].item<double>(), tr[d].probs[w][e].item<double>(), 1e-5);
        if (item > 0 && f.window_expert[item][d].item<int64_t>() != f.window_expert[0][d].item<int64_t>())
          some_variation = true;
      }
    }
    for (int64_t d = 0; d < D; ++d) {
      auto mean = tr[d].probs.to(torch::kFloat64).mean(0);
      for (int64_t m = 0; m < L; ++m) EXPECT_NEAR(f.seq_probs[s][d * L + m].item<double>(), mean[m].item<double>(), 1e-5);
      for (size_t w = 0; w < tr[d].k.size(); ++w) count[d][tr[d].expert[w].item<int64_t>()]++;
    }
  }
  EXPECT_EQ(item, f.n_windows());
  EXPECT_TRUE(some_variation) << "the test model routes every window the same way; the test would be weak";
  auto u = lol::analysis::compute_utilization(f);
  EXPECT_EQ(u.count, count);
  for (const auto& row : u.share()) {
    double t = 0;
    for (double v : row) t += v;
    EXPECT_NEAR(t, 1.0, 1e-12);
  }
  for (const auto& row : u.depth_profile()) {
    double t = 0;
    for (double v : row) t += v;
    EXPECT_TRUE(std::abs(t - 1.0) < 1e-12 || t == 0.0);
  }
}

TEST(RoutingFeatures, PathStatisticsAndLabelFilter) {
  atest::TempDir tmp("paths");
  auto split = atest::write_split(tmp.path(), 9, 25, 8);
  auto model = atest::tiny_model(4);
  lol::analysis::CollectOptions co;
  co.progress = false;
  auto f = lol::analysis::collect_routing_features(model, split, co);
  auto u = lol::analysis::compute_utilization(f, std::nullopt, 1000);
  // Entropy and distinct paths by hand from the window paths.
  std::map<std::vector<int64_t>, int64_t> paths;
  for (int64_t i = 0; i < f.n_windows(); ++i) {
    std::vector<int64_t> p;
    for (int64_t d = 0; d < f.depth; ++d) p.push_back(f.window_expert[i][d].item<int64_t>());
    paths[p]++;
  }
  double h = 0;
  for (const auto& [p, c] : paths) h -= double(c) / f.n_windows() * std::log2(double(c) / f.n_windows());
  EXPECT_EQ(u.n_items, f.n_windows());
  EXPECT_EQ(u.n_distinct_paths, int64_t(paths.size()));
  EXPECT_NEAR(u.path_entropy_bits, h, 1e-12);
  EXPECT_LE(u.path_entropy_bits, u.max_path_entropy_bits + 1e-12);
  ASSERT_EQ(u.top_paths.size(), paths.size());
  for (size_t i = 1; i < u.top_paths.size(); ++i) EXPECT_GE(u.top_paths[i - 1].second, u.top_paths[i].second);
  // Per-label utilization partitions the whole.
  std::vector<std::vector<int64_t>> sum(f.depth, std::vector<int64_t>(f.library_size, 0));
  int64_t items = 0;
  for (int64_t label : {0, 1, 2}) {
    auto ul = lol::analysis::compute_utilization(f, label);
    items += ul.n_items;
    for (int64_t d = 0; d < f.depth; ++d)
      for (int64_t m = 0; m < f.library_size; ++m) sum[d][m] += ul.count[d][m];
  }
  EXPECT_EQ(items, u.n_items);
  EXPECT_EQ(sum, u.count);
  auto j = u.to_json();
  EXPECT_EQ(j["distinct_paths"], u.n_distinct_paths);
  EXPECT_EQ(j["share"].size(), size_t(f.depth));
}

TEST(RoutingFeatures, RejectsPackedRows) {
  auto model = atest::tiny_model(5);
  lol::LoLBatch b;
  b.tokens = torch::arange(12, torch::kInt64).remainder(19).unsqueeze(0);
  b.doc_ids = torch::tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, torch::kInt64).unsqueeze(0);
  lol::ForwardOptions fo;
  fo.trace = true;
  torch::NoGradGuard ng;
  auto tr = model->forward(b, fo).trace;
  EXPECT_THROW(lol::analysis::features_from_trace(tr, {0}, {1}), std::invalid_argument);
  EXPECT_THROW(lol::analysis::features_from_trace({}, {0}, {1}), std::invalid_argument);
}

TEST(RoutingFeatures, LongSequencesAreCutToMaxTokens) {
  atest::TempDir full_dir("cut_full"), cut_dir("cut_ref");
  auto full = atest::write_split(full_dir.path(), 8, 40, 6);
  auto cut = atest::write_split(cut_dir.path(), 8, 40, 6, false, /*cap=*/10);
  auto model = atest::tiny_model(6);
  lol::analysis::CollectOptions co;
  co.progress = false;
  auto a = lol::analysis::collect_routing_features(model, full, co, 10);
  auto b = lol::analysis::collect_routing_features(model, cut, co);
  ASSERT_EQ(a.n_windows(), b.n_windows());
  EXPECT_TRUE(torch::allclose(a.window_probs, b.window_probs, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(a.window_expert, b.window_expert));
  EXPECT_TRUE(torch::allclose(a.seq_probs, b.seq_probs, 1e-6, 1e-6));
  auto c = lol::analysis::collect_routing_features(model, full, co);
  EXPECT_GT(c.n_windows(), a.n_windows()) << "without a cap the long sequences have more windows";
  EXPECT_THROW(lol::analysis::collect_routing_features(model, full, co, 65), lol::InputError);  // > max_seq_len 64
}
