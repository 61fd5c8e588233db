#include "analysis/routing_probes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "stats/group_split.h"
#include "util/error.h"

namespace lol::analysis {

stats::Matrix to_matrix(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() == 2, "to_matrix: expected a 2-D tensor");
  auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  stats::Matrix m(c.size(0), c.size(1));
  std::copy(c.data_ptr<double>(), c.data_ptr<double>() + c.numel(), m.data.begin());
  return m;
}

namespace {

std::string fmt(double v, int prec = 3) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

}  // namespace

ProbeReport run_routing_probes(const RoutingFeatures& f, const std::vector<int>& positive, const ProbeOptions& opt) {
  const std::string where = "routing probes";
  require(int64_t(positive.size()) == f.n_sequences(), where,
          std::to_string(positive.size()) + " labels for " + std::to_string(f.n_sequences()) + " sequences");
  require(opt.folds >= 2, where, "folds = " + std::to_string(opt.folds) + ": expected >= 2");
  require(opt.test_fraction > 0 && opt.test_fraction < 1, where,
          "test fraction = " + std::to_string(opt.test_fraction) + ": expected 0 < value < 1");
  // Binary label per window item via its sequence.
  std::map<int64_t, size_t> seq_pos;
  for (size_t s = 0; s < f.seq_index.size(); ++s) seq_pos[f.seq_index[s]] = s;
  int64_t pos_docs = 0, neg_docs = 0;
  for (int v : positive) {
    pos_docs += v == 1;
    neg_docs += v == 0;
  }
  require(pos_docs >= 2 * opt.folds && neg_docs >= 2 * opt.folds, where,
          std::to_string(pos_docs) + " positive and " + std::to_string(neg_docs) +
              " negative labelled sequences: expected at least " + std::to_string(2 * opt.folds) +
              " of each (2 x folds) for a held-out test split and cross-validation");
  const int64_t N = f.n_windows();
  std::vector<int> wy(N, 0);
  std::vector<int64_t> wgroup(N, -1), wstrata(N, 0);
  for (int64_t i = 0; i < N; ++i) {
    const int lab = positive[seq_pos.at(f.window_seq[i])];
    if (lab < 0) continue;
    wy[i] = lab;
    wgroup[i] = f.window_seq[i];
    wstrata[i] = lab;
  }
  // Document-level test split, then k folds of the development documents.
  auto test_part = stats::group_split(wgroup, {1.0 - opt.test_fraction, opt.test_fraction}, opt.seed, wstrata);
  std::vector<int64_t> dev_group(wgroup);
  for (int64_t i = 0; i < N; ++i)
    if (test_part[i] != 0) dev_group[i] = -1;
  auto fold = stats::group_kfold(dev_group, opt.folds, opt.seed, wstrata);
  std::vector<int> wpart(N, -1);
  for (int64_t i = 0; i < N; ++i) wpart[i] = test_part[i] == 1 ? opt.folds : fold[i];
  {
    // Every development fold and the test part need documents of both classes: a large
    // test share leaves too few development documents (folds without a class, then a
    // singular ridge system).
    std::set<int64_t> seen;
    int64_t dev[2] = {0, 0}, test[2] = {0, 0};
    for (int64_t i = 0; i < N; ++i)
      if (wgroup[i] >= 0 && seen.insert(wgroup[i]).second) (wpart[i] == opt.folds ? test : dev)[wy[i]]++;
    require(dev[0] >= opt.folds && dev[1] >= opt.folds && test[0] >= 1 && test[1] >= 1, "--test-fraction",
            std::to_string(opt.test_fraction) + " leaves " + std::to_string(dev[1]) + " positive and " +
                std::to_string(dev[0]) + " negative development documents (" + std::to_string(test[1]) + " and " +
                std::to_string(test[0]) + " held out): expected at least --folds " + std::to_string(opt.folds) +
                " of each for cross-validation and one of each held out; lower --test-fraction or --folds");
  }
  // Sequence parts from their windows (every labelled sequence has >= 1 window item).
  const int64_t S = f.n_sequences();
  std::vector<int> spart(S, -1), sy(S, 0);
  std::vector<int64_t> sgroup(S, -1);
  for (int64_t i = 0; i < N; ++i) spart[seq_pos.at(f.window_seq[i])] = wpart[i];
  ProbeReport rep;
  rep.options = opt;
  for (int64_t s = 0; s < S; ++s) {
    if (positive[s] < 0) spart[s] = -1;
    sy[s] = std::max(positive[s], 0);
    if (spart[s] >= 0) sgroup[s] = s;
    if (spart[s] >= 0 && spart[s] < opt.folds) {
      rep.docs_dev++;
      rep.pos_docs_dev += positive[s] == 1;
    } else if (spart[s] == opt.folds) {
      rep.docs_test++;
      rep.pos_docs_test += positive[s] == 1;
    }
  }
  for (int p : wpart) {
    rep.windows_dev += p >= 0 && p < opt.folds;
    rep.windows_test += p == opt.folds;
  }
  stats::ProbeEvalOptions eo;
  eo.folds = opt.folds;
  eo.shuffle = opt.shuffle;
  eo.shuffle_seed = opt.seed + 1;
  const int64_t D = f.depth, L = f.library_size;
  auto add = [&](const std::string& name, const std::string& level, int64_t nf, stats::Readout& r) {
    const bool window = level == "window";
    rep.rows.push_back({name, level, nf, stats::evaluate_readout(r, window ? wy : sy, window ? wgroup : sgroup, eo)});
  };
  {
    stats::RidgeReadout r(to_matrix(f.window_probs), wpart);
    add("ridge: router probabilities", "window", D * L, r);
  }
  {
    stats::RidgeReadout r(to_matrix(f.seq_probs), spart);
    add("ridge: mean router probabilities", "sequence", D * L, r);
  }
  {
    stats::RidgeReadout r(to_matrix(f.window_top1), wpart);
    add("ridge: top-1 probability per depth", "window", D, r);
  }
  {
    // Paper Appendix C.2: windows ranked by the negative winning-expert probability
    // at the depth with the best training-fold AUROC.
    stats::BestColumnReadout r(to_matrix(f.window_top1), wpart, -1);
    add("negative winning-expert probability, best depth", "window", 1, r);
  }
  {
    // The same with the sign chosen on the training folds too (a label whose positive
    // class routes more confidently, e.g. one maze strategy against the others).
    stats::BestColumnReadout r(to_matrix(f.window_top1), wpart);
    add("winning-expert probability, best depth and sign", "window", 1, r);
  }
  {
    auto ex = f.window_expert.contiguous();
    std::vector<int32_t> codes(ex.data_ptr<int64_t>(), ex.data_ptr<int64_t>() + ex.numel());
    stats::CategoricalLLRReadout r(std::move(codes), D, L, wpart);
    add("expert-frequency LLR", "window", D, r);
  }
  return rep;
}

nlohmann::json ProbeReport::to_json() const {
  nlohmann::json rows_j = nlohmann::json::array();
  for (const auto& r : rows) {
    auto j = r.result.to_json();
    j["readout"] = r.name;
    j["level"] = r.level;
    j["features"] = r.n_features;
    rows_j.push_back(j);
  }
  return {{"split",
           {{"folds", options.folds},
            {"test_fraction", options.test_fraction},
            {"seed", options.seed},
            {"documents_dev", docs_dev},
            {"documents_test", docs_test},
            {"positive_documents_dev", pos_docs_dev},
            {"positive_documents_test", pos_docs_test},
            {"windows_dev", windows_dev},
            {"windows_test", windows_test}}},
          {"readouts", rows_j}};
}

std::string ProbeReport::format_table() const {
  std::ostringstream o;
  char line[512];
  int name_w = 7;  // "readout"
  for (const auto& r : rows) name_w = std::max(name_w, int(r.name.size()));
  std::snprintf(line, sizeof line, "%-*s %-8s %8s  %-18s %10s %12s\n", name_w, "readout", "level", "features",
                ("CV AUROC (" + std::to_string(options.folds) + "-fold)").c_str(), "test AUROC", "shuffled CV");
  o << line;
  for (const auto& r : rows) {
    const auto& x = r.result;
    std::string cv = fmt(x.cv_mean) + " +- " + fmt(x.cv_sd);
    std::snprintf(line, sizeof line, "%-*s %-8s %8lld  %-18s %10s %12s\n", name_w, r.name.c_str(), r.level.c_str(),
                  static_cast<long long>(r.n_features), cv.c_str(), fmt(x.test_auroc).c_str(),
                  fmt(x.shuffled_mean).c_str());
    o << line;
  }
  std::snprintf(line, sizeof line, "documents: %lld dev (%lld positive), %lld test (%lld positive); windows: %lld dev, %lld test\n",
                static_cast<long long>(docs_dev), static_cast<long long>(pos_docs_dev),
                static_cast<long long>(docs_test), static_cast<long long>(pos_docs_test),
                static_cast<long long>(windows_dev), static_cast<long long>(windows_test));
  o << line;
  return o.str();
}

}  // namespace lol::analysis
