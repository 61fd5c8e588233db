// The probe table on synthetic routing features: informative routing gives high AUROC
// for every readout, the shuffle control stays near chance, splits are by document.
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "analysis/routing_probes.h"
#include "util/error.h"

using lol::analysis::RoutingFeatures;

namespace {

/// n_seq documents with 2..6 windows, D=3, L=4. Positive documents (label 1) route
/// their windows to expert 2 at depth 2 with probability 0.8, negatives with 0.2.
RoutingFeatures synthetic(int n_seq, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int64_t D = 3, L = 4;
  RoutingFeatures f;
  f.depth = D;
  f.library_size = L;
  std::vector<double> wp, wt, sp;
  std::vector<int64_t> we;
  for (int s = 0; s < n_seq; ++s) {
    const int64_t label = s % 2;
    const int K = 2 + int(rng() % 5);
    std::vector<double> mean(D * L, 0.0);
    for (int k = 0; k < K; ++k) {
      f.window_seq.push_back(s);
      f.window_k.push_back(k);
      f.window_label.push_back(label);
      for (int64_t d = 0; d < D; ++d) {
        std::vector<double> p(L);
        double tot = 0;
        for (auto& v : p) tot += (v = u(rng));
        if (d == 1 && u(rng) < (label ? 0.8 : 0.2)) {
          p[2] += tot;
          tot *= 2;
        }
        int64_t e = 0;
        for (int64_t m = 0; m < L; ++m) {
          p[m] /= tot;
          if (p[m] > p[e]) e = m;
          wp.push_back(p[m]);
          mean[d * L + m] += p[m] / K;
        }
        wt.push_back(p[e]);
        we.push_back(e);
      }
    }
    f.seq_index.push_back(s);
    f.seq_label.push_back(label);
    sp.insert(sp.end(), mean.begin(), mean.end());
  }
  const int64_t N = f.n_windows();
  auto f64 = torch::TensorOptions(torch::kFloat64);
  f.window_probs = torch::from_blob(wp.data(), {N, D * L}, f64).clone();
  f.window_top1 = torch::from_blob(wt.data(), {N, D}, f64).clone();
  f.window_expert = torch::from_blob(we.data(), {N, D}, torch::TensorOptions(torch::kInt64)).clone();
  f.seq_probs = torch::from_blob(sp.data(), {n_seq, D * L}, f64).clone();
  return f;
}

}  // namespace

TEST(RoutingProbes, InformativeRoutingGivesHighAurocAndChanceShuffle) {
  auto f = synthetic(200, 1);
  std::vector<int> y(f.seq_label.begin(), f.seq_label.end());
  y[7] = -1;  // an unlabelled document is left out
  auto rep = lol::analysis::run_routing_probes(f, y);
  ASSERT_EQ(rep.rows.size(), 6u);
  EXPECT_EQ(rep.docs_dev + rep.docs_test, 199);
  EXPECT_NEAR(double(rep.docs_test) / 199.0, 0.2, 0.05);
  EXPECT_NEAR(double(rep.pos_docs_test) / double(rep.docs_test), 0.5, 0.1) << "test split is stratified";
  // Positives route more confidently here, so the paper's negative winning-expert
  // probability (row 3, sign fixed) cannot use the informative depth (it would rank
  // them low) and stays near chance on a noise depth; every other readout reads them.
  EXPECT_EQ(rep.rows[3].name, "negative winning-expert probability, best depth");
  EXPECT_NE(rep.rows[3].result.fits["test"]["column"], 1);
  EXPECT_NEAR(rep.rows[3].result.cv_mean, 0.5, 0.1);
  EXPECT_EQ(rep.rows[3].result.fits["test"]["sign"], -1.0);
  for (const auto& r : rep.rows) {
    SCOPED_TRACE(r.name);
    EXPECT_NEAR(r.result.shuffled_mean, 0.5, 0.12);
    if (&r == &rep.rows[3]) continue;
    EXPECT_GT(r.result.cv_mean, 0.6);
    EXPECT_GT(r.result.test_auroc, 0.6);
    EXPECT_EQ(r.result.fold_auroc.size(), 5u);
  }
  // The sequence-level ridge averages 2..6 windows: it must beat the window-level one.
  EXPECT_GT(rep.rows[1].result.cv_mean, rep.rows[0].result.cv_mean);
  EXPECT_EQ(rep.rows[4].result.fits["test"]["column"], 1) << "the informative depth is depth 2";
  EXPECT_EQ(rep.rows[4].result.fits["test"]["sign"], 1.0);
  auto j = rep.to_json();
  EXPECT_EQ(j["readouts"].size(), 6u);
  EXPECT_EQ(j["split"]["documents_test"], rep.docs_test);
  auto table = rep.format_table();
  EXPECT_NE(table.find("expert-frequency LLR"), std::string::npos);
  EXPECT_NE(table.find("shuffled CV"), std::string::npos);
}

TEST(RoutingProbes, NegativeWinningExpertProbabilityReadsLessConfidentPositives) {
  // Labels swapped: the positives now route less confidently at depth 2, the case the
  // paper's readout (Appendix C.2) is oriented for.
  auto f = synthetic(200, 1);
  std::vector<int> y;
  for (auto l : f.seq_label) y.push_back(1 - int(l));
  auto rep = lol::analysis::run_routing_probes(f, y);
  ASSERT_EQ(rep.rows.size(), 6u);
  const auto& r = rep.rows[3].result;
  EXPECT_GT(r.cv_mean, 0.6);
  EXPECT_GT(r.test_auroc, 0.6);
  EXPECT_EQ(r.fits["test"]["column"], 1) << "the informative depth is depth 2";
  EXPECT_EQ(r.fits["test"]["sign"], -1.0);
  // The free-sign readout finds the same depth and sign.
  EXPECT_EQ(rep.rows[4].result.fits["test"]["column"], 1);
  EXPECT_EQ(rep.rows[4].result.fits["test"]["sign"], -1.0);
  EXPECT_NEAR(rep.rows[4].result.cv_mean, r.cv_mean, 1e-12);
}

TEST(RoutingProbes, TooFewDocumentsOrBadOptions) {
  auto f = synthetic(14, 2);  // 7 per class < 2 x 5 folds
  std::vector<int> y(f.seq_label.begin(), f.seq_label.end());
  EXPECT_THROW(lol::analysis::run_routing_probes(f, y), lol::InputError);
  lol::analysis::ProbeOptions o;
  o.folds = 3;
  EXPECT_NO_THROW(lol::analysis::run_routing_probes(f, y, o));
  o.test_fraction = 1.0;
  EXPECT_THROW(lol::analysis::run_routing_probes(f, y, o), lol::InputError);
  y.pop_back();
  EXPECT_THROW(lol::analysis::run_routing_probes(f, y), lol::InputError);
}
