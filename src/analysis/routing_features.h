// Router outputs of a dataset as features (paper 4.1.2 probes, Appendix C.2) and expert
// utilization statistics (paper Figures 4, 6, 21, 22): which expert each routed depth
// chooses, how often, and which paths (expert sequences over depths) windows follow.
//
// Window items. Windows are shifted per depth (paper 3.2.1), so a "window across all
// depths" is identified by its window index k within its document, as in routing paths
// (docs/routing-paths.md): item (sequence, k) for k = 0 .. max_d K_d - 1, where K_d is the
// number of windows of the sequence at depth d; a depth with fewer windows contributes
// its last window (index K_d - 1).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/mode_paths.h"
#include "dataset/shards.h"
#include "lol/model.h"

namespace lol::analysis {

/// Router features of a set of sequences (all tensors on CPU).
struct RoutingFeatures {
  int64_t depth = 0;         ///< D: routed depths run
  int64_t library_size = 0;  ///< L
  // ---- window items
  std::vector<int64_t> window_seq;  ///< [n_windows] sequence index (in the split) of each item
  std::vector<int64_t> window_k;    ///< [n_windows] window index within its sequence
  std::vector<int64_t> window_label;  ///< [n_windows] label of the item's sequence (-1 = none)
  torch::Tensor window_probs;       ///< [n_windows, D*L] float64: column d*L + m = router softmax p_m at depth d+1
  torch::Tensor window_top1;        ///< [n_windows, D] float64: probability of the winning (applied) expert per depth
  torch::Tensor window_expert;      ///< [n_windows, D] int64: winning expert per depth (the window's path)
  // ---- sequence items
  std::vector<int64_t> seq_index;   ///< [n_seq] sequence index in the split
  std::vector<int64_t> seq_label;   ///< [n_seq] label of the sequence (-1 = none)
  torch::Tensor seq_probs;          ///< [n_seq, D*L] float64: per depth, mean router softmax over that depth's windows
  // ---- utilization: every window of every depth (not window items)
  std::map<int64_t, std::vector<std::vector<int64_t>>> expert_count;  ///< per label: [D][L] windows routed to m at depth d

  int64_t n_windows() const { return int64_t(window_seq.size()); }
  int64_t n_sequences() const { return int64_t(seq_index.size()); }
};

/// Features of one traced batch in which row b holds exactly one document, sequence
/// seq_index[b] with label labels[b] (the layout of make_batch). trace: one DepthTrace
/// per routed depth (ForwardOptions::trace). Throws std::invalid_argument when a row holds
/// more than one document or the sizes disagree.
RoutingFeatures features_from_trace(const std::vector<DepthTrace>& trace, const std::vector<int64_t>& seq_index,
                                    const std::vector<int64_t>& labels);

/// Concatenates features of disjoint sequence sets, in order (same D and L; InputError
/// otherwise). An empty list gives empty features with D = L = 0.
RoutingFeatures merge_features(const std::vector<RoutingFeatures>& parts);

/// Runs the model (eval mode, no grad, free routing) over a split, batches as in
/// collect_routing_stats, and returns the features of all (or opt.max_sequences) sequences.
/// Sequences of length 0 are skipped; longer sequences than `max_tokens` (0 = the model's
/// max_seq_len) are cut to their first max_tokens tokens (the features then describe that
/// prefix). Throws InputError for max_tokens outside 0..max_seq_len, NonFiniteError for
/// NaN/Inf router probabilities.
RoutingFeatures collect_routing_features(LoLModel& model, const data::SplitData& split, const CollectOptions& opt = {},
                                         int64_t max_tokens = 0);

/// Expert utilization and path statistics.
struct Utilization {
  int64_t depth = 0, library_size = 0;
  std::vector<std::vector<int64_t>> count;  ///< [D][L] windows routed to expert m at depth d (all labels)
  /// [D][L] share of depth d's windows routed to expert m (rows sum to 1).
  std::vector<std::vector<double>> share() const;
  /// [L][D] per-expert depth profile: share of expert m's windows that are at depth d (rows sum to 1; 0 if unused).
  std::vector<std::vector<double>> depth_profile() const;
  // Paths over window items: path = (expert at depth 1, ..., expert at depth D).
  int64_t n_items = 0;                ///< window items
  int64_t n_distinct_paths = 0;
  double path_entropy_bits = 0;       ///< Shannon entropy of the empirical path distribution
  double max_path_entropy_bits = 0;   ///< log2(min(n_items, L^D)): the largest possible value
  std::vector<std::pair<std::vector<int64_t>, int64_t>> top_paths;  ///< most frequent paths (count desc, then path asc)
  nlohmann::json to_json() const;
};

/// Utilization of the sequences with label `label_filter`, or of all sequences when
/// label_filter is std::nullopt. top: number of most frequent paths kept.
Utilization compute_utilization(const RoutingFeatures& f, std::optional<int64_t> label_filter = std::nullopt,
                                size_t top = 10);

}  // namespace lol::analysis
