#include "stats/auroc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "util/error.h"

namespace lol::stats {

namespace {

/// Validates inputs; returns (n_pos, n_neg).
std::pair<int64_t, int64_t> check_binary(const std::vector<double>& scores, const std::vector<int>& labels,
                                         const char* fn) {
  const std::string where = std::string("stats::") + fn;
  require(scores.size() == labels.size(), where,
          std::to_string(scores.size()) + " scores but " + std::to_string(labels.size()) + " labels: expected equal sizes");
  int64_t pos = 0, neg = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    require(labels[i] == 0 || labels[i] == 1, where,
            "label[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + ": expected 0 or 1");
    require(std::isfinite(scores[i]), where, "score[" + std::to_string(i) + "] is not finite");
    (labels[i] ? pos : neg)++;
  }
  require(pos > 0 && neg > 0, where,
          "AUROC is undefined with " + std::to_string(pos) + " positive and " + std::to_string(neg) +
              " negative items: expected both classes");
  return {pos, neg};
}

std::vector<size_t> order_by_score(const std::vector<double>& scores) {
  std::vector<size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  return idx;
}

}  // namespace

double auroc(const std::vector<double>& scores, const std::vector<int>& labels) {
  auto [pos, neg] = check_binary(scores, labels, "auroc");
  auto idx = order_by_score(scores);
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  long double rank_sum = 0;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    int64_t pos_in_tie = 0;
    while (j < idx.size() && scores[idx[j]] == scores[idx[i]]) pos_in_tie += labels[idx[j++]];
    const long double avg_rank = (static_cast<long double>(i + 1) + static_cast<long double>(j)) / 2;
    rank_sum += avg_rank * pos_in_tie;
    i = j;
  }
  const long double u = rank_sum - static_cast<long double>(pos) * (pos + 1) / 2;
  return double(u / (static_cast<long double>(pos) * neg));
}

std::vector<RocPoint> roc_curve(const std::vector<double>& scores, const std::vector<int>& labels) {
  auto [pos, neg] = check_binary(scores, labels, "roc_curve");
  auto idx = order_by_score(scores);
  std::reverse(idx.begin(), idx.end());
  std::vector<RocPoint> out{{std::numeric_limits<double>::infinity(), 0.0, 0.0}};
  int64_t tp = 0, fp = 0;
  for (size_t i = 0; i < idx.size();) {
    const double s = scores[idx[i]];
    while (i < idx.size() && scores[idx[i]] == s) (labels[idx[i++]] ? tp : fp)++;
    out.push_back({s, double(fp) / double(neg), double(tp) / double(pos)});
  }
  return out;
}

double roc_area(const std::vector<RocPoint>& curve) {
  double a = 0;
  for (size_t i = 1; i < curve.size(); ++i)
    a += (curve[i].fpr - curve[i - 1].fpr) * (curve[i].tpr + curve[i - 1].tpr) / 2;
  return a;
}

}  // namespace lol::stats
