// Probe readouts over items (windows or documents) and their evaluation by
// cross-validated AUROC, held-out AUROC and a label-shuffling control (paper 4.1.2
// and Appendix C.2, Table 2):
//   - RidgeReadout: ridge regression with the penalty chosen by inner cross-validation
//     on the training folds (router probabilities, top-1 probabilities, ...);
//   - BestColumnReadout: one feature (e.g. the winning-expert probability at one
//     depth) chosen, with its sign, by AUROC on the training folds;
//   - CategoricalLLRReadout: log-likelihood ratio of categorical features (the expert
//     chosen at each depth) under class-conditional frequencies from the training folds.
//
// Items are assigned to *parts*: 0..folds-1 are the development CV folds, `folds` is
// the held-out test part, -1 excludes an item. Labels are 0/1 per item.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/auroc.h"
#include "stats/matrix.h"
#include "stats/ridge.h"

namespace lol::stats {

/// A readout fitted on some parts and scoring another.
class Readout {
 public:
  virtual ~Readout() = default;
  /// Fits on the items whose part is in `train` with labels y [n] (0/1; entries of
  /// other items are ignored) and returns the scores of the items whose part == eval,
  /// in item order (higher = more positive). Throws lol::InputError when the training
  /// items lack a class.
  virtual std::vector<double> fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) = 0;
  /// What the last fit chose (penalty, column, ...), for the JSON report.
  virtual nlohmann::json last_fit() const = 0;
  /// Part of each item [n].
  virtual const std::vector<int>& parts() const = 0;
};

/// Ridge on features X [n, p] (targets 0/1). The penalty is chosen among
/// `relative_lambdas` (see default_relative_lambdas()) by the mean AUROC of
/// leave-one-part-out CV over the training parts (ties: the larger penalty); the model
/// is then refitted on all training parts. Per-part Gram matrices are computed once,
/// so a fit costs O(|train| |lambdas| p^3) plus O(n p) for the targets. A feature whose
/// standard deviation over the included items is at most kConstantFeature times its
/// root mean square is constant to working precision and is left out (set to its mean).
class RidgeReadout : public Readout {
 public:
  static constexpr double kConstantFeature = 1e-5;
  RidgeReadout(Matrix x, std::vector<int> part, std::vector<double> relative_lambdas = default_relative_lambdas());
  std::vector<double> fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) override;
  nlohmann::json last_fit() const override { return last_; }
  const std::vector<int>& parts() const override { return part_; }

 private:
  RidgeSums combine(const std::vector<int>& parts, const std::vector<RidgeSums>& targets) const;
  std::vector<double> score_part(const RidgeModel& m, int part) const;
  Matrix x_;  ///< features shifted by their mean over included items
  std::vector<int> part_;
  std::vector<double> rel_;
  std::vector<RidgeSums> gram_;  ///< per part: n, sum_x, x x^T
  nlohmann::json last_;
};

/// Scores items by one column of X [n, p] times a sign: the column (and, with
/// `sign` 0, the sign) with the highest AUROC on the training items (ties: lowest
/// column). `sign` -1 fixes the orientation as the paper's "negative winning-expert
/// probability at a depth selected on the training folds" (Appendix C.2): the column
/// is then chosen by the AUROC of -x alone. Throws InputError (exit 2) when `part`
/// and X differ in rows, X has no columns, or `sign` is not -1, 0 or +1. Columns
/// constant to working precision (as in RidgeReadout) score every item alike.
class BestColumnReadout : public Readout {
 public:
  BestColumnReadout(Matrix x, std::vector<int> part, int sign = 0);
  std::vector<double> fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) override;
  nlohmann::json last_fit() const override { return last_; }
  const std::vector<int>& parts() const override { return part_; }

 private:
  Matrix x_;
  std::vector<int> part_;
  int sign_;
  nlohmann::json last_;
};

/// Naive-Bayes log-likelihood ratio of categorical features: codes [n, columns] with
/// values in [0, n_values); score = sum_c log P(code_c | 1) - log P(code_c | 0), the
/// class-conditional frequencies estimated on the training items with additive
/// smoothing `smoothing` (Laplace = 1).
class CategoricalLLRReadout : public Readout {
 public:
  CategoricalLLRReadout(std::vector<int32_t> codes, int64_t columns, int64_t n_values, std::vector<int> part,
                        double smoothing = 1.0);
  std::vector<double> fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) override;
  nlohmann::json last_fit() const override { return last_; }
  const std::vector<int>& parts() const override { return part_; }

 private:
  std::vector<int32_t> codes_;
  int64_t columns_, n_values_;
  std::vector<int> part_;
  double smoothing_;
  nlohmann::json last_;
};

/// Evaluation of one readout.
struct ProbeResult {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> fold_auroc;       ///< per dev fold (NaN where the fold lacks a class)
  double cv_mean = kNaN, cv_sd = kNaN;  ///< over the defined folds (sd: sample, n-1)
  double test_auroc = kNaN;             ///< fitted on all dev folds, scored on the test part
  std::vector<RocPoint> test_roc;
  int64_t n_dev = 0, n_test = 0;        ///< items
  std::vector<double> shuffled_fold_auroc;
  double shuffled_mean = kNaN;          ///< CV AUROC with group-permuted dev labels
  nlohmann::json fits;                  ///< readout.last_fit() per CV fold and for the test fit
  /// AUROCs as numbers (NaN -> null); `roc` adds the test ROC points.
  nlohmann::json to_json(bool roc = true) const;
};

struct ProbeEvalOptions {
  int folds = 5;             ///< dev parts are 0..folds-1; the test part is `folds`
  bool shuffle = true;       ///< run the label-shuffling control
  uint64_t shuffle_seed = 1;
};

/// Cross-validates `r` over the dev folds, fits on all dev folds and scores the test
/// part, and (optionally) repeats the CV with labels permuted among the dev groups
/// (permute_group_labels). y [n] 0/1, groups [n] (documents). Throws lol::InputError on
/// mismatched sizes.
ProbeResult evaluate_readout(Readout& r, const std::vector<int>& y, const std::vector<int64_t>& groups,
                             const ProbeEvalOptions& opt = {});

}  // namespace lol::stats
