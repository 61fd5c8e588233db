#include "analysis/routing_pca.h"
#include "analysis/routing_probes.h"  // to_matrix

#include <algorithm>
#include <cmath>
#include <random>

#include <ATen/ATen.h>

#include "stats/centroid.h"
#include "util/error.h"
#include "util/random.h"
#include "util/gnuplot.h"
#include "util/json_finite.h"

namespace lol::analysis {

torch::Tensor path_one_hot(const RoutingFeatures& f) {
  const int64_t n = f.n_windows(), D = f.depth, L = f.library_size;
  auto x = torch::zeros({n, D * L}, torch::kFloat64);
  if (n == 0) return x;
  auto idx = f.window_expert.to(torch::kInt64) + torch::arange(D, torch::kInt64).mul(L).unsqueeze(0);  // [n, D]
  x.scatter_(1, idx, 1.0);
  return x;
}

torch::Tensor Pca::project(const torch::Tensor& x) const { return (x - mean).matmul(components.t()); }

Pca fit_pca(const torch::Tensor& x_in, int64_t k) {
  if (x_in.dim() != 2) throw InputError("PCA: expected a 2-D [items, features] matrix");
  const int64_t n = x_in.size(0), F = x_in.size(1);
  if (n < 2) throw InputError("PCA: needs at least 2 rows, got " + std::to_string(n));
  if (k < 1 || k > std::min(n, F))
    throw InputError("PCA: k = " + std::to_string(k) + ": expected 1.." + std::to_string(std::min(n, F)));
  auto x = x_in.to(torch::kFloat64);
  Pca p;
  p.mean = x.mean(0);
  auto xc = x - p.mean;
  auto svd = at::linalg_svd(xc, /*full_matrices=*/false);
  auto s = std::get<1>(svd), vh = std::get<2>(svd);  // s [r], vh [r, F]
  // Sign convention: the largest-magnitude loading of each component is positive (deterministic plots).
  auto vk = vh.slice(0, 0, k).clone();
  auto arg = vk.abs().argmax(1);
  auto sign = vk.gather(1, arg.unsqueeze(1)).sign().clamp_min(0).mul(2).sub(1);  // 0 -> -1 only if loading is 0
  p.components = vk * sign;
  auto var = s.pow(2);
  const double total = var.sum().item<double>();
  p.explained_ratio = total > 0 ? var.slice(0, 0, k) / total : torch::zeros({k}, torch::kFloat64);
  return p;
}

using util::finite_or_null;

nlohmann::json label_separation(const RoutingFeatures& f, const std::vector<std::string>& label_names,
                                const SeparationOptions& opt, const std::string& out_dir, bool plots) {
  // Labels that occur, renumbered 0..C-1 in id order: ids without windows (e.g. 0 of
  // maze strategies 1..5) take no row or column in the tables.
  const int64_t n_ids = int64_t(label_names.size());
  std::vector<int64_t> count_by_id(std::size_t(n_ids), 0);
  for (int64_t i = 0; i < f.n_windows(); ++i) {
    const int64_t l = f.window_label[std::size_t(i)];
    if (l >= 0 && l < n_ids) ++count_by_id[std::size_t(l)];
  }
  std::vector<int> index_of(std::size_t(n_ids), -1);
  std::vector<std::string> names;
  std::vector<int64_t> per_label;
  for (int64_t l = 0; l < n_ids; ++l)
    if (count_by_id[std::size_t(l)] > 0) {
      index_of[std::size_t(l)] = int(names.size());
      names.push_back(label_names[std::size_t(l)]);
      per_label.push_back(count_by_id[std::size_t(l)]);
    }
  const int C = int(names.size());
  if (C < 2) throw InputError("label separation: windows of at least 2 labels are needed, found " + std::to_string(C));
  std::vector<int> labels(std::size_t(f.n_windows()), -1);
  std::vector<int64_t> groups(std::size_t(f.n_windows()), -1);
  for (int64_t i = 0; i < f.n_windows(); ++i) {
    const int64_t l = f.window_label[std::size_t(i)];
    if (l < 0 || l >= n_ids) continue;
    labels[std::size_t(i)] = index_of[std::size_t(l)];
    groups[std::size_t(i)] = f.window_seq[std::size_t(i)];
  }

  const torch::Tensor x = path_one_hot(f);
  const stats::Matrix xm = to_matrix(x);
  const auto cv = stats::nearest_centroid_cv(xm, labels, groups, C, opt.folds, opt.shuffles, opt.seed);
  const auto dist = stats::centroid_distances(stats::class_centroids(xm, labels, C));

  nlohmann::json j;
  j["features"] = "window path one-hot (routed depth x expert)";
  j["classifier"] = "nearest centroid, " + std::to_string(opt.folds) + "-fold CV by document (stratified by label)";
  j["labels"] = names;
  j["windows_per_label"] = per_label;
  j["accuracy"] = cv.accuracy;
  j["balanced_accuracy"] = finite_or_null(cv.balanced_accuracy);
  j["majority_baseline"] = cv.chance;
  j["shuffled_accuracy_mean"] = opt.shuffles > 0 ? nlohmann::json(cv.shuffled_mean) : nlohmann::json(nullptr);
  j["shuffled_accuracy_sd"] = opt.shuffles > 0 ? nlohmann::json(cv.shuffled_sd) : nlohmann::json(nullptr);
  j["shuffled_accuracy"] = cv.shuffled_accuracy;
  std::vector<nlohmann::json> recall;
  for (double r : cv.recall) recall.push_back(finite_or_null(r));
  j["recall"] = recall;
  j["confusion"] = cv.confusion;
  std::vector<std::vector<nlohmann::json>> dj;
  for (const auto& row : dist) {
    dj.emplace_back();
    for (double v : row) dj.back().push_back(finite_or_null(v));
  }
  j["centroid_distances"] = dj;
  // Nearest other label of every label (by centroid distance): "clusters by script" reads off this.
  std::vector<nlohmann::json> nearest;
  for (int a = 0; a < C; ++a) {
    int best = -1;
    for (int b = 0; b < C; ++b)
      if (b != a && std::isfinite(dist[a][b]) && (best < 0 || dist[a][b] < dist[a][best])) best = b;
    nearest.push_back(best < 0 ? nlohmann::json(nullptr) : nlohmann::json(names[std::size_t(best)]));
  }
  j["nearest_label"] = nearest;

  if (f.n_windows() >= 2 && x.size(1) >= 2) {
    const Pca p = fit_pca(x, 2);
    const auto proj = p.project(x).contiguous();
    j["pca_explained_ratio"] = std::vector<double>(p.explained_ratio.data_ptr<double>(),
                                                   p.explained_ratio.data_ptr<double>() + 2);
    if (plots) {
      // Deterministic subsample of the labelled windows for the scatter (all when few).
      std::vector<int64_t> order;
      for (int64_t i = 0; i < f.n_windows(); ++i)
        if (labels[std::size_t(i)] >= 0) order.push_back(i);
      std::mt19937_64 rng(opt.seed);
      util::portable_shuffle(order.begin(), order.end(), rng);
      if (int64_t(order.size()) > opt.max_scatter) order.resize(std::size_t(opt.max_scatter));
      std::vector<util::Series> series(static_cast<std::size_t>(C));
      for (int c = 0; c < C; ++c) series[std::size_t(c)].name = names[std::size_t(c)];
      // Jitter: one-hot paths take few distinct positions; spread coincident points a little.
      auto jitter = [](std::mt19937_64& g) { return 0.02 * util::standard_normal(g); };
      const double* pp = proj.data_ptr<double>();
      for (int64_t i : order) {
        const int l = labels[std::size_t(i)];
        series[std::size_t(l)].x.push_back(pp[i * 2] + jitter(rng));
        series[std::size_t(l)].y.push_back(pp[i * 2 + 1] + jitter(rng));
      }
      char t[160];
      std::snprintf(t, sizeof t, "Window routing paths, PCA (PC1 %.1f%%, PC2 %.1f%% of variance; jittered)",
                    100 * p.explained_ratio[0].item<double>(), 100 * p.explained_ratio[1].item<double>());
      util::plot_scatter(out_dir + "/pca_paths.png", t, series, "PC1", "PC2");
    }
  }
  if (plots) {
    const std::size_t S = std::size_t(C);
    std::vector<std::vector<double>> conf(S, std::vector<double>(S, 0.0)), dsub(S, std::vector<double>(S, 0.0));
    std::vector<std::vector<std::string>> lab(S, std::vector<std::string>(S)), dl(S, std::vector<std::string>(S));
    double vmax = 0;
    for (std::size_t a = 0; a < S; ++a) {
      int64_t row = 0;
      for (int b = 0; b < C; ++b) row += cv.confusion[a][b];
      for (std::size_t b = 0; b < S; ++b) {
        conf[a][b] = row ? 100.0 * double(cv.confusion[a][b]) / double(row) : std::nan("");
        lab[a][b] = row ? std::to_string(int(std::lround(conf[a][b]))) : "";
        dsub[a][b] = dist[a][b];
        if (std::isfinite(dsub[a][b])) vmax = std::max(vmax, dsub[a][b]);
        char buf[16];
        std::snprintf(buf, sizeof buf, "%.2f", dsub[a][b]);
        dl[a][b] = buf;
      }
    }
    char t[160];
    if (opt.shuffles > 0)
      std::snprintf(t, sizeof t, "Label from window paths, nearest centroid (%% of true label)\naccuracy %.3f, shuffled %.3f",
                    cv.accuracy, cv.shuffled_mean);
    else
      std::snprintf(t, sizeof t, "Label from window paths, nearest centroid (%% of true label)\naccuracy %.3f", cv.accuracy);
    util::plot_heatmap(out_dir + "/separation_confusion.png", t, conf, names, names, lab, "predicted label",
                       "true label", 0.0, 100.0);
    util::plot_heatmap(out_dir + "/centroid_distances.png", "Distance between label centroids\nof window paths", dsub,
                       names, names, dl, "label", "label", 0.0, vmax > 0 ? vmax : 1.0);
  }
  return j;
}

}  // namespace lol::analysis
