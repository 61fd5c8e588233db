#include "stats/group_split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "util/error.h"
#include "util/random.h"

namespace lol::stats {

namespace {

struct GroupInfo {
  int64_t id;
  int64_t size = 0;
  int64_t stratum = 0;
};

/// Groups in order of first appearance, with size and stratum (checked constant).
std::vector<GroupInfo> collect_groups(const std::vector<int64_t>& groups, const std::vector<int64_t>& strata,
                                      std::map<int64_t, size_t>& index, const char* fn) {
  const std::string where = std::string("stats::") + fn;
  require(strata.empty() || strata.size() == groups.size(), where,
          std::to_string(strata.size()) + " strata for " + std::to_string(groups.size()) + " items: expected equal");
  std::vector<GroupInfo> out;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] < 0) continue;
    const int64_t st = strata.empty() ? 0 : strata[i];
    auto [it, fresh] = index.emplace(groups[i], out.size());
    if (fresh) out.push_back({groups[i], 0, st});
    auto& g = out[it->second];
    require(g.stratum == st, where,
            "group " + std::to_string(g.id) + " has items in strata " + std::to_string(g.stratum) + " and " +
                std::to_string(st) + ": expected one stratum per group");
    g.size++;
  }
  return out;
}

}  // namespace

std::vector<int> group_split(const std::vector<int64_t>& groups, const std::vector<double>& fractions, uint64_t seed,
                             const std::vector<int64_t>& strata) {
  require(!fractions.empty(), "stats::group_split", "no parts: expected at least one fraction");
  for (double f : fractions)
    require(std::isfinite(f) && f > 0, "stats::group_split",
            "fraction " + std::to_string(f) + ": expected a finite value > 0");
  std::map<int64_t, size_t> index;
  auto info = collect_groups(groups, strata, index, "group_split");
  std::map<int64_t, std::vector<size_t>> by_stratum;  // ordered: deterministic
  for (size_t g = 0; g < info.size(); ++g) by_stratum[info[g].stratum].push_back(g);
  std::vector<int> part_of_group(info.size(), 0);
  std::mt19937_64 rng(seed);
  const size_t P = fractions.size();
  for (auto& [stratum, gs] : by_stratum) {
    util::portable_shuffle(gs.begin(), gs.end(), rng);
    std::stable_sort(gs.begin(), gs.end(), [&](size_t a, size_t b) { return info[a].size > info[b].size; });
    // Each group goes to the part that is least filled relative to its target share, so
    // that large and small groups spread over the parts in proportion.
    std::vector<double> filled(P, 0.0);
    for (size_t g : gs) {
      size_t best = 0;
      for (size_t p = 1; p < P; ++p)
        if (filled[p] * fractions[best] < filled[best] * fractions[p]) best = p;
      part_of_group[g] = int(best);
      filled[best] += double(info[g].size);
    }
  }
  std::vector<int> out(groups.size(), -1);
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i] >= 0) out[i] = part_of_group[index.at(groups[i])];
  return out;
}

std::vector<int> group_kfold(const std::vector<int64_t>& groups, int k, uint64_t seed,
                             const std::vector<int64_t>& strata) {
  require(k >= 2, "stats::group_kfold", "k = " + std::to_string(k) + ": expected k >= 2");
  return group_split(groups, std::vector<double>(size_t(k), 1.0), seed, strata);
}

std::vector<int> permute_group_labels(const std::vector<int>& labels, const std::vector<int64_t>& groups,
                                      uint64_t seed) {
  require(labels.size() == groups.size(), "stats::permute_group_labels",
          std::to_string(labels.size()) + " labels for " + std::to_string(groups.size()) + " items: expected equal");
  std::vector<int64_t> as_strata(labels.begin(), labels.end());
  std::map<int64_t, size_t> index;
  auto info = collect_groups(groups, as_strata, index, "permute_group_labels");
  std::vector<int64_t> lab(info.size());
  for (size_t g = 0; g < info.size(); ++g) lab[g] = info[g].stratum;
  std::mt19937_64 rng(seed);
  util::portable_shuffle(lab.begin(), lab.end(), rng);
  std::vector<int> out(labels);
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i] >= 0) out[i] = int(lab[index.at(groups[i])]);
  return out;
}

}  // namespace lol::stats
