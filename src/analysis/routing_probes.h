// Linear probes and simple readouts on router outputs (paper 4.1.2, Appendix C.2
// Table 2): can a binary per-document label be read from the routing?
//
// Data split at the document level: a held-out test share of the documents (stratified
// by label), the rest split into k cross-validation folds (stratified), using
// stats::group_split on window items with the document as group, so that a document's
// windows never straddle two parts. Each readout reports the mean k-fold CV AUROC on the
// development documents, the AUROC on the test documents of a model fitted on all
// development documents, and the CV AUROC with document labels permuted among the
// development documents (label-shuffling control, expected ~0.5).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/routing_features.h"
#include "stats/matrix.h"
#include "stats/readouts.h"

namespace lol::analysis {

struct ProbeOptions {
  int folds = 5;               ///< CV folds on the development documents (>= 2)
  double test_fraction = 0.2;  ///< share of documents held out for testing, in (0, 1)
  uint64_t seed = 0;           ///< split seed; the shuffle control uses seed + 1
  bool shuffle = true;         ///< run the label-shuffling control
};

/// One readout of the probe table.
struct ProbeRow {
  std::string name;      ///< e.g. "ridge: router probabilities"
  std::string level;     ///< "window" | "sequence"
  int64_t n_features = 0;
  stats::ProbeResult result;
};

struct ProbeReport {
  std::vector<ProbeRow> rows;
  int64_t docs_dev = 0, docs_test = 0, pos_docs_dev = 0, pos_docs_test = 0;
  int64_t windows_dev = 0, windows_test = 0;
  ProbeOptions options;
  nlohmann::json to_json() const;
  /// Fixed-width text table: readout, level, features, CV AUROC mean +- sd, test AUROC, shuffled CV AUROC.
  std::string format_table() const;
};

/// Runs the readouts of the paper (4.1.2, Appendix C.2 Table 2) on `f`, in this order:
///   window level  : ridge on router probabilities [D*L]; ridge on the winning-expert
///                   probability per depth [D]; the negative winning-expert probability
///                   at the one depth chosen on the training folds (the paper's readout);
///                   the same with the sign chosen on the training folds too; the
///                   expert-frequency log-likelihood ratio (naive Bayes over depths,
///                   Laplace smoothing);
///   sequence level: ridge on router probabilities averaged over windows [D*L].
/// positive [n_seq]: 1 / 0 per sequence item of `f` (f.seq_index order), -1 = excluded.
/// Throws lol::InputError when fewer than 2 * folds documents of either class remain or
/// the options are out of range.
ProbeReport run_routing_probes(const RoutingFeatures& f, const std::vector<int>& positive, const ProbeOptions& opt = {});

/// Copies a 2-D float64/float32 tensor into a stats::Matrix.
stats::Matrix to_matrix(const torch::Tensor& t);

}  // namespace lol::analysis
