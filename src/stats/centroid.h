// Nearest-centroid classification with document-level cross-validation: the
// quantitative "do routing paths separate by label?" score of the multilingual
// routing experiment (paper 4.1.1, Figure 3: paths separate by language and cluster
// by script). Multi-class; LibTorch-free.
#pragma once
#include <cstdint>
#include <vector>

#include "stats/matrix.h"

namespace lol::stats {

/// Class centroids: [n_classes, cols] mean of the rows of x with each label
/// (labels in 0..n_classes-1; -1 = row ignored). A class without rows gets NaN.
/// Throws lol::InputError for size mismatches or labels >= n_classes.
Matrix class_centroids(const Matrix& x, const std::vector<int>& labels, int n_classes);

/// Label of the nearest centroid (squared Euclidean distance; NaN centroids are never
/// chosen; ties go to the lowest class) for every row of x: [x.rows].
std::vector<int> nearest_centroid(const Matrix& centroids, const Matrix& x);

/// [n_classes, n_classes] Euclidean distances between centroids (NaN when either is NaN).
std::vector<std::vector<double>> centroid_distances(const Matrix& centroids);

struct CentroidCv {
  int n_classes = 0;
  int64_t n_items = 0;                         ///< rows with a label
  double accuracy = 0;                         ///< held-out accuracy over all labelled rows (k-fold by group)
  double balanced_accuracy = 0;                ///< mean per-class recall
  double chance = 0;                           ///< share of the most frequent class (majority baseline)
  std::vector<double> recall;                  ///< [n_classes] per-class held-out recall (NaN: class absent)
  std::vector<std::vector<int64_t>> confusion; ///< [n_classes][n_classes] true class x predicted class
  std::vector<double> shuffled_accuracy;       ///< accuracy with labels permuted among groups, one per repeat
  double shuffled_mean = 0, shuffled_sd = 0;   ///< mean and standard deviation of shuffled_accuracy
};

/// Nearest-centroid accuracy of x -> labels under k-fold cross-validation by group
/// (groups [n]: document of each row; a document's rows are never on both sides of a
/// fold; folds stratified by label), plus the control: the same with the labels
/// permuted among the groups (permute_group_labels), `shuffles` times.
/// labels [n] in 0..n_classes-1 (or -1 = row ignored), constant within a group.
/// Throws lol::InputError for mismatched sizes, folds < 2, fewer labelled groups than
/// folds, or labels that vary within a group.
CentroidCv nearest_centroid_cv(const Matrix& x, const std::vector<int>& labels, const std::vector<int64_t>& groups,
                               int n_classes, int folds, int shuffles, uint64_t seed);

}  // namespace lol::stats
