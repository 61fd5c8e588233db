// Mode routing paths (paper 4.1.3, Appendix C.3/C.4 Figures 12-13, 16-17):
// teacher-forced runs on labelled validation sequences; for each strategy, window
// index k and routed depth l the expert with the highest MEAN router probability,
// with alpha fixed to that mean; and the agreement map (share of the router's
// actual decisions that equal the mode expert).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/shards.h"
#include "lol/model.h"

namespace lol::analysis {

/// Sums over observations of one (label, depth, window index) cell.
struct PathCell {
  int64_t n = 0;                  ///< windows observed
  std::vector<double> prob_sum;   ///< [L] sum of router probabilities
  std::vector<int64_t> chosen;    ///< [L] how often each expert was selected
};

/// Routing statistics per label (strategy) over a dataset split.
struct RoutingStats {
  int64_t library_size = 0, depth = 0;
  /// cells[label][d][k]
  std::map<int64_t, std::vector<std::vector<PathCell>>> cells;

  /// Accumulates one forward trace of a batch; `labels[row]` names each row's label.
  void add(const std::vector<DepthTrace>& trace, const std::vector<int64_t>& labels);
  /// How a cell's expert is chosen.
  enum class ModeRule {
    kMeanProbability,  ///< highest mean router probability (paper 4.1.3; the default)
    kMostSelected,     ///< expert selected most often (router probability + balancing
                       ///< bias, i.e. what the model actually ran); ties -> lower index
  };
  /// Mode path of one label; every cell's alpha is the chosen expert's mean router
  /// probability. Window indices never observed after the last observed
  /// one are not filled (left to the router) unless `extend_to` > 0: then windows up
  /// to extend_to-1 reuse the last observed window's entries (the paper's rule for
  /// dead-end filling W3, Figure 17).
  RoutingPath mode_path(int64_t label, int64_t extend_to = 0, ModeRule rule = ModeRule::kMeanProbability) const;
  /// agreement[d][k] in [0, 1], or -1 where nothing was observed.
  std::vector<std::vector<double>> agreement(int64_t label, ModeRule rule = ModeRule::kMeanProbability) const;
  /// Observation counts and agreement maps (against the mode path of `rule`) per label.
  nlohmann::json to_json(ModeRule rule = ModeRule::kMeanProbability) const;
};

struct CollectOptions {
  int64_t batch_size = 16;
  int64_t max_sequences = 0;  ///< 0 = all
  bool progress = true;
};

/// Runs the model (eval mode, no grad, router free) over a split and collects stats
/// keyed by the sequences' labels (sequences without a label use -1). Throws
/// NonFiniteError for NaN/Inf router probabilities.
RoutingStats collect_routing_stats(LoLModel& model, const data::SplitData& split, const CollectOptions& opt = {});

/// Indices of the non-empty sequences among [begin, end) of a split (an empty sequence has
/// no window: routing analyses skip it), their labels appended to `labels`.
std::vector<int64_t> nonempty_sequences(const data::SplitData& split, int64_t begin, int64_t end,
                                        std::vector<int64_t>& labels);

/// Pads the sequences `indices` of a split into a LoLBatch of [batch, longest] tokens
/// (padding: doc id -1), one document per row, on `dev`.
/// `max_tokens` > 0 cuts every sequence to its first max_tokens tokens (prompt window
/// included, clipped to the cut).
LoLBatch make_batch(const data::SplitData& split, const std::vector<int64_t>& indices, const torch::Device& dev,
                    int64_t max_tokens = 0);

}  // namespace lol::analysis
