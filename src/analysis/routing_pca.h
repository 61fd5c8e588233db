// The multilingual routing experiment (paper 4.1.1, Figure 3): each window's routing
// path as concatenated one-hot experts over the routed depths, its PCA projection
// (for the 2-D scatter coloured by label), and how well the label can be read from
// the path (nearest-centroid accuracy on held-out documents vs a shuffled-label
// control, src/stats/centroid.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "analysis/routing_features.h"

namespace lol::analysis {

/// Window routing paths as one-hot features: [n_windows, D * L] float64, column
/// d * L + m is 1 when expert m won at routed depth d + 1.
torch::Tensor path_one_hot(const RoutingFeatures& f);

/// Principal component analysis of the rows of x [n, F] (float64).
struct Pca {
  torch::Tensor mean;             ///< [F] column means
  torch::Tensor components;       ///< [k, F] orthonormal principal directions, by decreasing variance
  torch::Tensor explained_ratio;  ///< [k] share of the total variance along each component
  /// (x - mean) @ components^T: [n, F] -> [n, k].
  torch::Tensor project(const torch::Tensor& x) const;
};

/// Fits the first k components by SVD of the centred data (LibTorch linear algebra).
/// Throws lol::InputError when x is not 2-D, has fewer than 2 rows, or k is outside
/// 1..min(n, F).
Pca fit_pca(const torch::Tensor& x, int64_t k);

struct SeparationOptions {
  int folds = 5;            ///< document-level cross-validation folds
  int shuffles = 20;        ///< shuffled-label repeats
  uint64_t seed = 0;
  int64_t max_scatter = 4000;  ///< points drawn in the scatter plot (a deterministic subsample)
};

/// Label separation of window routing paths: nearest-centroid cross-validated accuracy
/// (one-hot features, groups = documents) vs its shuffled control, per-label recall and
/// confusion, the label-centroid distance matrix (for "clusters by script"), and a
/// 2-component PCA. label_names: name of each label id (window_label values index it);
/// the tables hold only the labels with windows, in id order ("labels" names them).
/// Writes the PNGs pca_paths.png (scatter), separation_confusion.png and
/// centroid_distances.png into out_dir when `plots` is true. Returns the JSON section
/// "separation" of routing.json. Throws lol::InputError when fewer than 2 labels occur.
nlohmann::json label_separation(const RoutingFeatures& f, const std::vector<std::string>& label_names,
                                const SeparationOptions& opt, const std::string& out_dir, bool plots);

}  // namespace lol::analysis
