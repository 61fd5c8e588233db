#include "stats/centroid.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "stats/group_split.h"
#include "stats/summary.h"
#include "util/error.h"

namespace lol::stats {

namespace {

void check_labels(const std::vector<int>& labels, int64_t rows, int n_classes) {
  if (int64_t(labels.size()) != rows)
    throw InputError("nearest centroid: " + std::to_string(labels.size()) + " labels for " + std::to_string(rows) +
                     " rows");
  if (n_classes < 1) throw InputError("nearest centroid: n_classes must be >= 1");
  for (int l : labels)
    if (l < -1 || l >= n_classes)
      throw InputError("nearest centroid: label " + std::to_string(l) + " outside -1.." + std::to_string(n_classes - 1));
}

// Accuracy-type summary of predictions against the truth over rows with a label.
double accuracy_of(const std::vector<int>& truth, const std::vector<int>& pred) {
  int64_t n = 0, ok = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] < 0) continue;
    ++n;
    ok += truth[i] == pred[i];
  }
  return n ? double(ok) / double(n) : std::nan("");
}

// Held-out predictions for every labelled row: fit centroids on the other folds.
std::vector<int> cv_predict(const Matrix& x, const std::vector<int>& labels, const std::vector<int>& fold, int folds,
                            int n_classes) {
  std::vector<int> pred(labels.size(), -1);
  for (int f = 0; f < folds; ++f) {
    std::vector<int> train_labels(labels.size(), -1);
    std::vector<int64_t> test_rows;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < 0 || fold[i] < 0) continue;
      if (fold[i] == f) test_rows.push_back(int64_t(i));
      else train_labels[i] = labels[i];
    }
    if (test_rows.empty()) continue;
    const Matrix c = class_centroids(x, train_labels, n_classes);
    Matrix test(int64_t(test_rows.size()), x.cols);
    for (std::size_t r = 0; r < test_rows.size(); ++r)
      std::copy(x.row(test_rows[r]), x.row(test_rows[r]) + x.cols, test.row(int64_t(r)));
    const auto p = nearest_centroid(c, test);
    for (std::size_t r = 0; r < test_rows.size(); ++r) pred[std::size_t(test_rows[r])] = p[r];
  }
  return pred;
}

}  // namespace

Matrix class_centroids(const Matrix& x, const std::vector<int>& labels, int n_classes) {
  check_labels(labels, x.rows, n_classes);
  Matrix c(n_classes, x.cols, 0.0);
  std::vector<int64_t> count(std::size_t(n_classes), 0);
  for (int64_t r = 0; r < x.rows; ++r) {
    const int l = labels[std::size_t(r)];
    if (l < 0) continue;
    ++count[std::size_t(l)];
    for (int64_t j = 0; j < x.cols; ++j) c(l, j) += x(r, j);
  }
  for (int l = 0; l < n_classes; ++l)
    for (int64_t j = 0; j < x.cols; ++j)
      c(l, j) = count[std::size_t(l)] ? c(l, j) / double(count[std::size_t(l)]) : std::nan("");
  return c;
}

std::vector<int> nearest_centroid(const Matrix& centroids, const Matrix& x) {
  if (centroids.cols != x.cols)
    throw InputError("nearest centroid: centroids have " + std::to_string(centroids.cols) + " columns, rows have " +
                     std::to_string(x.cols));
  std::vector<int> out(std::size_t(x.rows), -1);
  for (int64_t r = 0; r < x.rows; ++r) {
    double best = std::numeric_limits<double>::infinity();
    for (int64_t l = 0; l < centroids.rows; ++l) {
      if (std::isnan(centroids(l, 0))) continue;
      double d = 0;
      for (int64_t j = 0; j < x.cols; ++j) {
        const double e = x(r, j) - centroids(l, j);
        d += e * e;
      }
      if (d < best) {
        best = d;
        out[std::size_t(r)] = int(l);
      }
    }
  }
  return out;
}

std::vector<std::vector<double>> centroid_distances(const Matrix& c) {
  std::vector<std::vector<double>> d(std::size_t(c.rows), std::vector<double>(std::size_t(c.rows), 0.0));
  for (int64_t a = 0; a < c.rows; ++a)
    for (int64_t b = 0; b < c.rows; ++b) {
      double s = 0;
      for (int64_t j = 0; j < c.cols; ++j) {
        const double e = c(a, j) - c(b, j);
        s += e * e;
      }
      d[std::size_t(a)][std::size_t(b)] = std::sqrt(s);  // NaN propagates
    }
  return d;
}

CentroidCv nearest_centroid_cv(const Matrix& x, const std::vector<int>& labels, const std::vector<int64_t>& groups,
                               int n_classes, int folds, int shuffles, uint64_t seed) {
  check_labels(labels, x.rows, n_classes);
  if (int64_t(groups.size()) != x.rows)
    throw InputError("nearest centroid: " + std::to_string(groups.size()) + " groups for " + std::to_string(x.rows) +
                     " rows");
  if (folds < 2) throw InputError("nearest centroid: folds must be >= 2, got " + std::to_string(folds));
  std::set<int64_t> labelled_groups;
  std::vector<int64_t> fold_groups(groups.size()), strata(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    fold_groups[i] = labels[i] < 0 ? -1 : groups[i];
    strata[i] = labels[i];
    if (labels[i] >= 0) labelled_groups.insert(groups[i]);
  }
  if (int64_t(labelled_groups.size()) < folds)
    throw InputError("nearest centroid: " + std::to_string(labelled_groups.size()) + " labelled documents for " +
                     std::to_string(folds) + " folds");
  const std::vector<int> fold = group_kfold(fold_groups, folds, seed, strata);

  CentroidCv out;
  out.n_classes = n_classes;
  const auto pred = cv_predict(x, labels, fold, folds, n_classes);
  out.confusion.assign(std::size_t(n_classes), std::vector<int64_t>(std::size_t(n_classes), 0));
  std::vector<int64_t> class_n(std::size_t(n_classes), 0);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) continue;
    ++out.n_items;
    ++class_n[std::size_t(labels[i])];
    if (pred[i] >= 0) ++out.confusion[std::size_t(labels[i])][std::size_t(pred[i])];
  }
  out.accuracy = accuracy_of(labels, pred);
  out.recall.assign(std::size_t(n_classes), std::nan(""));
  double recall_sum = 0;
  int present = 0;
  int64_t majority = 0;
  for (int c = 0; c < n_classes; ++c) {
    majority = std::max(majority, class_n[std::size_t(c)]);
    if (!class_n[std::size_t(c)]) continue;
    out.recall[std::size_t(c)] = double(out.confusion[std::size_t(c)][std::size_t(c)]) / double(class_n[std::size_t(c)]);
    recall_sum += out.recall[std::size_t(c)];
    ++present;
  }
  out.balanced_accuracy = present ? recall_sum / present : std::nan("");
  out.chance = out.n_items ? double(majority) / double(out.n_items) : std::nan("");

  for (int r = 0; r < shuffles; ++r) {
    const auto perm = permute_group_labels(labels, fold_groups, seed + 1000003ull * uint64_t(r + 1));
    out.shuffled_accuracy.push_back(accuracy_of(perm, cv_predict(x, perm, fold, folds, n_classes)));
  }
  if (shuffles > 0) {
    double sd = 0;
    mean_sd(out.shuffled_accuracy, out.shuffled_mean, sd);
    out.shuffled_sd = shuffles > 1 ? sd : 0.0;
  }
  return out;
}

}  // namespace lol::stats
