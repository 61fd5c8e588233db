// Area under the ROC curve and ROC curve points for binary labels (paper 4.1.2 and
// Appendix C.2: probes on router outputs are scored by AUROC).
#pragma once
#include <cstdint>
#include <vector>

namespace lol::stats {

/// Exact AUROC with ties: the Mann-Whitney U statistic divided by n_pos * n_neg, with
/// tied scores given their average rank, i.e. P(score_pos > score_neg) + 0.5 P(equal).
/// scores [n] (finite), labels [n] in {0, 1} (1 = positive).
/// Throws lol::InputError when the sizes differ, a label is not 0/1, a score is not
/// finite, or all items are of one class (AUROC undefined; the message gives the counts).
double auroc(const std::vector<double>& scores, const std::vector<int>& labels);

/// One point of an ROC curve: predicting positive for score >= threshold.
struct RocPoint {
  double threshold;  ///< +inf for the first point (nothing predicted positive)
  double fpr, tpr;   ///< false / true positive rates in [0, 1]
};

/// ROC curve from (0, 0) to (1, 1), one point per distinct score in decreasing order
/// (ties move both rates at once, so the trapezoidal area equals auroc()).
/// Same inputs and errors as auroc().
std::vector<RocPoint> roc_curve(const std::vector<double>& scores, const std::vector<int>& labels);

/// Trapezoidal area under ROC points (fpr ascending).
double roc_area(const std::vector<RocPoint>& curve);

}  // namespace lol::stats
