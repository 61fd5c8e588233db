#include "stats/readouts.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "stats/group_split.h"
#include "stats/summary.h"
#include "util/error.h"

namespace lol::stats {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

/// Labels of the items of part `eval`, in item order.
std::vector<int> labels_of(const std::vector<int>& y, const std::vector<int>& part, int eval) {
  std::vector<int> out;
  for (size_t i = 0; i < part.size(); ++i)
    if (part[i] == eval) out.push_back(y[i]);
  return out;
}

bool both_classes(const std::vector<int>& y) {
  bool pos = false, neg = false;
  for (int v : y) (v ? pos : neg) = true;
  return pos && neg;
}

void require_training_classes(const std::vector<int>& y, const std::vector<int>& part, const std::vector<int>& train,
                              const char* who) {
  bool pos = false, neg = false;
  for (size_t i = 0; i < part.size(); ++i)
    if (part[i] >= 0 && contains(train, part[i])) (y[i] ? pos : neg) = true;
  require(pos && neg, std::string("stats::") + who,
          std::string("training items have ") + (pos ? "no negatives" : "no positives") + ": expected both classes");
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

namespace {
/// Sets every column of `x` that is constant to working precision over the rows with
/// part >= 0 (standard deviation at most `rel` times the root mean square, e.g. router
/// probabilities of identical inputs that differ only by the float rounding of batched
/// matmuls) to its mean: it carries no signal, and no readout should fit its noise.
void flatten_constant_columns(Matrix& x, const std::vector<int>& part, double rel) {
  for (int64_t c = 0; c < x.cols; ++c) {
    double n = 0, sum = 0;
    for (int64_t r = 0; r < x.rows; ++r)
      if (part[r] >= 0) n += 1, sum += x(r, c);
    if (n == 0) continue;
    const double mean = sum / n;
    double var = 0;
    for (int64_t r = 0; r < x.rows; ++r)
      if (part[r] >= 0) var += (x(r, c) - mean) * (x(r, c) - mean);
    var /= n;
    if (var <= rel * rel * (mean * mean + var))
      for (int64_t r = 0; r < x.rows; ++r) x(r, c) = mean;
  }
}
}  // namespace

// ------------------------------------------------------------------ RidgeReadout

RidgeReadout::RidgeReadout(Matrix x, std::vector<int> part, std::vector<double> relative_lambdas)
    : x_(std::move(x)), part_(std::move(part)), rel_(std::move(relative_lambdas)) {
  require(int64_t(part_.size()) == x_.rows, "stats::RidgeReadout",
          std::to_string(part_.size()) + " parts for " + std::to_string(x_.rows) + " rows: expected equal");
  require(!rel_.empty(), "stats::RidgeReadout", "empty penalty grid");
  for (double c : rel_) require(c > 0 && std::isfinite(c), "stats::RidgeReadout", "relative penalties must be > 0");
  flatten_constant_columns(x_, part_, kConstantFeature);
  const int64_t p = x_.cols;
  std::vector<double> mean(p, 0.0);
  int64_t n = 0, parts = 0;
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] >= 0) {
      ++n;
      parts = std::max<int64_t>(parts, part_[r] + 1);
      for (int64_t c = 0; c < p; ++c) mean[c] += x_(r, c);
    }
  for (auto& m : mean) m /= std::max<int64_t>(n, 1);
  for (int64_t r = 0; r < x_.rows; ++r)
    for (int64_t c = 0; c < p; ++c) x_(r, c) -= mean[c];
  gram_.assign(size_t(parts), RidgeSums(p));
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] >= 0) gram_[part_[r]].add_gram(x_.row(r));
}

RidgeSums RidgeReadout::combine(const std::vector<int>& parts, const std::vector<RidgeSums>& targets) const {
  RidgeSums s(x_.cols);
  for (int q : parts)
    if (q >= 0 && q < int(gram_.size())) {
      s += gram_[q];
      s += targets[q];
    }
  return s;
}

std::vector<double> RidgeReadout::score_part(const RidgeModel& m, int part) const {
  std::vector<double> out;
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] == part) out.push_back(m.predict(x_.row(r)));
  return out;
}

std::vector<double> RidgeReadout::fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) {
  require(y.size() == part_.size(), "stats::RidgeReadout", "labels and items differ in number");
  require_training_classes(y, part_, train, "RidgeReadout");
  // Target sums per part (targets only: n, sum_x and x x^T stay zero there).
  std::vector<RidgeSums> targets(gram_.size(), RidgeSums(x_.cols));
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] >= 0) targets[part_[r]].add_target(x_.row(r), double(y[r]));
  const RidgeSums all = combine(train, targets);
  const double scale = all.p > 0 ? std::max(all.centred_trace() / double(all.p), 1e-300) : 1.0;
  // Penalty by leave-one-part-out CV over the training parts.
  std::vector<double> cv(rel_.size(), ProbeResult::kNaN);
  size_t best = rel_.size() / 2;
  bool selected = false;
  if (train.size() >= 2) {
    double best_auc = -1;
    for (size_t li = 0; li < rel_.size(); ++li) {
      double sum = 0;
      int defined = 0;
      for (int q : train) {
        auto yq = labels_of(y, part_, q);
        if (!both_classes(yq)) continue;
        RidgeSums s = all;
        s -= gram_[q];
        s -= targets[q];
        if (s.n <= 0) continue;
        const double inner_scale = std::max(s.centred_trace() / double(std::max<int64_t>(s.p, 1)), 1e-300);
        auto m = s.solve(rel_[li] * inner_scale);
        sum += auroc(score_part(m, q), yq);
        ++defined;
      }
      if (defined == 0) continue;
      cv[li] = sum / defined;
      if (cv[li] >= best_auc - 1e-12) {  // ties (and near ties): the larger penalty
        best_auc = std::max(best_auc, cv[li]);
        best = li;
        selected = true;
      }
    }
  }
  auto model = all.solve(rel_[best] * scale);
  nlohmann::json cvj = nlohmann::json::array();
  for (double v : cv) cvj.push_back(num(v));
  last_ = {{"relative_lambda", rel_[best]},
           {"lambda", model.lambda},
           {"lambda_selection", selected ? "inner-cv" : "default (fewer than 2 training folds, or none with both classes)"},
           {"inner_cv_auroc", cvj},
           {"train_items", int64_t(all.n)}};
  return score_part(model, eval);
}

// ------------------------------------------------------------- BestColumnReadout

BestColumnReadout::BestColumnReadout(Matrix x, std::vector<int> part, int sign)
    : x_(std::move(x)), part_(std::move(part)), sign_(sign) {
  require(sign >= -1 && sign <= 1, "stats::BestColumnReadout",
          "sign " + std::to_string(sign) + ": expected -1, 0 (chosen on the training items) or +1");
  require(int64_t(part_.size()) == x_.rows, "stats::BestColumnReadout",
          std::to_string(part_.size()) + " parts for " + std::to_string(x_.rows) + " rows: expected equal");
  require(x_.cols > 0, "stats::BestColumnReadout", "no columns: expected at least one feature");
  flatten_constant_columns(x_, part_, RidgeReadout::kConstantFeature);
}

std::vector<double> BestColumnReadout::fit_score(const std::vector<int>& y, const std::vector<int>& train, int eval) {
  require(y.size() == part_.size(), "stats::BestColumnReadout", "labels and items differ in number");
  require_training_classes(y, part_, train, "BestColumnReadout");
  std::vector<int> yt;
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] >= 0 && contains(train, part_[r])) {
      rows.push_back(r);
      yt.push_back(y[r]);
    }
  int64_t best = 0;
  double best_auc = -1, best_sign = 1;
  nlohmann::json per = nlohmann::json::array();
  std::vector<double> col(rows.size());
  for (int64_t c = 0; c < x_.cols; ++c) {
    for (size_t i = 0; i < rows.size(); ++i) col[i] = x_(rows[i], c);
    const double a = auroc(col, yt);
    per.push_back(a);
    // AUROC(-x) = 1 - AUROC(x) (exact with ties).
    const double s = sign_ != 0 ? double(sign_) : (a >= 0.5 ? 1.0 : -1.0);
    const double oriented = s > 0 ? a : 1.0 - a;
    if (oriented > best_auc + 1e-12) {
      best_auc = oriented;
      best = c;
      best_sign = s;
    }
  }
  last_ = {{"column", best}, {"sign", best_sign}, {"train_auroc", best_auc}, {"train_auroc_per_column", per}};
  std::vector<double> out;
  for (int64_t r = 0; r < x_.rows; ++r)
    if (part_[r] == eval) out.push_back(best_sign * x_(r, best));
  return out;
}

// --------------------------------------------------------- CategoricalLLRReadout

CategoricalLLRReadout::CategoricalLLRReadout(std::vector<int32_t> codes, int64_t columns, int64_t n_values,
                                             std::vector<int> part, double smoothing)
    : codes_(std::move(codes)), columns_(columns), n_values_(n_values), part_(std::move(part)), smoothing_(smoothing) {
  const std::string where = "stats::CategoricalLLRReadout";
  require(columns_ > 0 && n_values_ > 0, where, "expected columns > 0 and n_values > 0");
  require(int64_t(codes_.size()) == int64_t(part_.size()) * columns_, where,
          std::to_string(codes_.size()) + " codes for " + std::to_string(part_.size()) + " items x " +
              std::to_string(columns_) + " columns: expected their product");
  require(smoothing_ > 0 && std::isfinite(smoothing_), where, "smoothing must be > 0");
  for (size_t i = 0; i < codes_.size(); ++i)
    require(codes_[i] >= 0 && codes_[i] < n_values_, where,
            "code[" + std::to_string(i) + "] = " + std::to_string(codes_[i]) + ": expected 0 <= code < " +
                std::to_string(n_values_));
}

std::vector<double> CategoricalLLRReadout::fit_score(const std::vector<int>& y, const std::vector<int>& train,
                                                     int eval) {
  require(y.size() == part_.size(), "stats::CategoricalLLRReadout", "labels and items differ in number");
  require_training_classes(y, part_, train, "CategoricalLLRReadout");
  // counts[cls][c * n_values + v]
  std::vector<std::vector<double>> counts(2, std::vector<double>(size_t(columns_ * n_values_), 0.0));
  double n_cls[2] = {0, 0};
  for (size_t i = 0; i < part_.size(); ++i)
    if (part_[i] >= 0 && contains(train, part_[i])) {
      n_cls[y[i]] += 1;
      for (int64_t c = 0; c < columns_; ++c) counts[y[i]][c * n_values_ + codes_[i * columns_ + c]] += 1;
    }
  std::vector<double> llr(size_t(columns_ * n_values_));
  for (size_t k = 0; k < llr.size(); ++k) {
    const double p1 = (counts[1][k] + smoothing_) / (n_cls[1] + smoothing_ * double(n_values_));
    const double p0 = (counts[0][k] + smoothing_) / (n_cls[0] + smoothing_ * double(n_values_));
    llr[k] = std::log(p1) - std::log(p0);
  }
  last_ = {{"train_items", {{"negative", n_cls[0]}, {"positive", n_cls[1]}}}, {"smoothing", smoothing_}};
  std::vector<double> out;
  for (size_t i = 0; i < part_.size(); ++i)
    if (part_[i] == eval) {
      double s = 0;
      for (int64_t c = 0; c < columns_; ++c) s += llr[c * n_values_ + codes_[i * columns_ + c]];
      out.push_back(s);
    }
  return out;
}

// ------------------------------------------------------------------ evaluation

nlohmann::json ProbeResult::to_json(bool roc) const {
  nlohmann::json folds = nlohmann::json::array(), sfolds = nlohmann::json::array();
  for (double v : fold_auroc) folds.push_back(num(v));
  for (double v : shuffled_fold_auroc) sfolds.push_back(num(v));
  nlohmann::json j = {{"cv_auroc_mean", num(cv_mean)},
                      {"cv_auroc_sd", num(cv_sd)},
                      {"cv_auroc_folds", folds},
                      {"test_auroc", num(test_auroc)},
                      {"shuffled_cv_auroc_mean", num(shuffled_mean)},
                      {"shuffled_cv_auroc_folds", sfolds},
                      {"n_dev", n_dev},
                      {"n_test", n_test},
                      {"fits", fits}};
  if (roc) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : test_roc) pts.push_back({p.fpr, p.tpr});
    j["test_roc"] = pts;
  }
  return j;
}

namespace {

/// CV over dev folds 0..folds-1: per-fold AUROC (NaN where undefined), fits appended.
std::vector<double> cross_validate(Readout& r, const std::vector<int>& y, int folds, nlohmann::json* fits) {
  std::vector<double> out;
  for (int o = 0; o < folds; ++o) {
    std::vector<int> train;
    for (int q = 0; q < folds; ++q)
      if (q != o) train.push_back(q);
    auto yo = labels_of(y, r.parts(), o);
    std::vector<int> ytrain;
    for (size_t i = 0; i < y.size(); ++i)
      if (r.parts()[i] >= 0 && r.parts()[i] < folds && r.parts()[i] != o) ytrain.push_back(y[i]);
    if (!both_classes(yo) || !both_classes(ytrain)) {
      out.push_back(ProbeResult::kNaN);
      if (fits) fits->push_back(nullptr);
      continue;
    }
    auto s = r.fit_score(y, train, o);
    out.push_back(auroc(s, yo));
    if (fits) fits->push_back(r.last_fit());
  }
  return out;
}


}  // namespace

ProbeResult evaluate_readout(Readout& r, const std::vector<int>& y, const std::vector<int64_t>& groups,
                             const ProbeEvalOptions& opt) {
  const auto& part = r.parts();
  require(y.size() == part.size() && groups.size() == part.size(), "stats::evaluate_readout",
          "labels, groups and parts must have one entry per item");
  require(opt.folds >= 2, "stats::evaluate_readout", "folds = " + std::to_string(opt.folds) + ": expected >= 2");
  ProbeResult res;
  for (int p : part) {
    if (p >= 0 && p < opt.folds) res.n_dev++;
    if (p == opt.folds) res.n_test++;
  }
  res.fits = {{"cv", nlohmann::json::array()}, {"test", nullptr}};
  res.fold_auroc = cross_validate(r, y, opt.folds, &res.fits["cv"]);
  mean_sd(res.fold_auroc, res.cv_mean, res.cv_sd);
  auto yt = labels_of(y, part, opt.folds);
  if (both_classes(yt)) {
    std::vector<int> dev;
    for (int q = 0; q < opt.folds; ++q) dev.push_back(q);
    auto s = r.fit_score(y, dev, opt.folds);
    res.test_auroc = auroc(s, yt);
    res.test_roc = roc_curve(s, yt);
    res.fits["test"] = r.last_fit();
  }
  if (opt.shuffle) {
    std::vector<int64_t> dev_groups(groups);
    for (size_t i = 0; i < part.size(); ++i)
      if (part[i] < 0 || part[i] >= opt.folds) dev_groups[i] = -1;
    auto ys = permute_group_labels(y, dev_groups, opt.shuffle_seed);
    res.shuffled_fold_auroc = cross_validate(r, ys, opt.folds, nullptr);
    double sd;
    mean_sd(res.shuffled_fold_auroc, res.shuffled_mean, sd);
  }
  return res;
}

}  // namespace lol::stats
