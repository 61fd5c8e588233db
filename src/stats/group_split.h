// Document-level data splits for probes (paper 4.1.2, Appendix C.2): held-out test
// split, k-fold cross-validation and the label-shuffling control, all at the level of
// *groups* (documents), so that windows of one document never land on both sides.
#pragma once
#include <cstdint>
#include <vector>

namespace lol::stats {

/// Assigns every item to one of fractions.size() parts so that no group is split.
/// groups [n]: group id of each item (any int64; -1 = item excluded, part -1).
/// fractions: target share of items per part (positive, normalised internally).
/// strata [n] (optional, e.g. the binary label): must be constant within a group;
/// each stratum is split on its own so that every part gets its share of each class.
/// One std::mt19937_64(seed) serves the strata in increasing stratum order; within a
/// stratum its groups, in order of first appearance, are shuffled with
/// util::portable_shuffle (util/random.h: a Fisher-Yates shuffle whose draws are fixed,
/// so the split is the same under every standard library), stably sorted by size
/// (largest first), and each goes to the part with the smallest filled share
/// items_in_part / fraction (ties: lowest part), so that large and small groups spread
/// over the parts in proportion. Deterministic for a given seed; with equal fractions the part
/// sizes of a stratum differ by at most the largest group size.
/// Returns the part of each item [n]. Throws lol::InputError on bad fractions, size
/// mismatches, or a group whose items have different strata.
std::vector<int> group_split(const std::vector<int64_t>& groups, const std::vector<double>& fractions, uint64_t seed,
                             const std::vector<int64_t>& strata = {});

/// group_split with k equal parts: the fold (0..k-1) of every item. Throws
/// lol::InputError for k < 2.
std::vector<int> group_kfold(const std::vector<int64_t>& groups, int k, uint64_t seed,
                             const std::vector<int64_t>& strata = {});

/// Label-shuffling control at the group level: the groups' labels are permuted among
/// the groups (their labels in order of first appearance, util::portable_shuffle with
/// std::mt19937_64(seed)), and every item gets its group's new label.
/// Class counts over groups are preserved. Items with group -1 keep their label.
/// Throws lol::InputError when a group's items carry different labels.
std::vector<int> permute_group_labels(const std::vector<int>& labels, const std::vector<int64_t>& groups, uint64_t seed);

}  // namespace lol::stats
