#include "analysis/mode_paths.h"

#include "util/progress.h"

namespace lol::analysis {

std::vector<int64_t> nonempty_sequences(const data::SplitData& split, int64_t begin, int64_t end,
                                        std::vector<int64_t>& labels) {
  std::vector<int64_t> idx;
  for (int64_t j = begin; j < end; ++j)
    if (split.get(j).length > 0) {
      idx.push_back(j);
      labels.push_back(split.get(j).label);
    }
  return idx;
}

LoLBatch make_batch(const data::SplitData& split, const std::vector<int64_t>& indices, const torch::Device& dev,
                    int64_t max_tokens) {
  auto length = [&](const data::SequenceView& s) { return max_tokens > 0 ? std::min(max_tokens, s.length) : s.length; };
  int64_t T = 0;
  for (auto i : indices) T = std::max(T, length(split.get(i)));
  const int64_t B = int64_t(indices.size());
  auto tokens = torch::zeros({B, T}, torch::kInt64);
  auto doc = torch::full({B, T}, -1, torch::kInt64);
  auto ro = torch::zeros({B, T}, torch::kBool);
  auto pl = torch::zeros({B}, torch::kInt64);
  for (int64_t b = 0; b < B; ++b) {
    auto s = split.get(indices[b]);
    auto* tp = tokens.data_ptr<int64_t>() + b * T;
    auto* dp = doc.data_ptr<int64_t>() + b * T;
    auto* rp = ro.data_ptr<bool>() + b * T;
    const int64_t n = length(s);
    for (int64_t t = 0; t < n; ++t) {
      tp[t] = s.tokens[t];
      dp[t] = 0;
      rp[t] = s.router_only ? s.router_only[t] != 0 : false;
    }
    pl.data_ptr<int64_t>()[b] = std::min<int64_t>(s.prompt_len, n);
  }
  LoLBatch batch;
  batch.tokens = tokens.to(dev);
  batch.doc_ids = doc.to(dev);
  batch.router_only = ro.to(dev);
  batch.prompt_len = pl.to(dev);
  return batch;
}

void RoutingStats::add(const std::vector<DepthTrace>& trace, const std::vector<int64_t>& labels) {
  for (size_t d = 0; d < trace.size(); ++d) {
    const auto& tr = trace[d];
    const int64_t L = tr.probs.size(1);
    library_size = L;
    depth = std::max<int64_t>(depth, int64_t(d) + 1);
    auto probs = tr.probs.to(torch::kFloat64).contiguous();
    const double* pp = probs.data_ptr<double>();
    const int64_t* ep = tr.expert.data_ptr<int64_t>();
    for (size_t w = 0; w < tr.row.size(); ++w) {
      int64_t label = labels[tr.row[w]];
      auto& grid = cells[label];
      if (grid.size() <= d) grid.resize(d + 1);
      auto& row = grid[d];
      int64_t k = tr.k[w];
      if (int64_t(row.size()) <= k) row.resize(k + 1);
      auto& c = row[k];
      if (c.prob_sum.empty()) {
        c.prob_sum.assign(L, 0.0);
        c.chosen.assign(L, 0);
      }
      c.n++;
      for (int64_t m = 0; m < L; ++m) c.prob_sum[m] += pp[w * L + m];
      c.chosen[ep[w]]++;
    }
  }
}

RoutingPath RoutingStats::mode_path(int64_t label, int64_t extend_to, ModeRule rule) const {
  RoutingPath p;
  p.library_size = library_size;
  auto it = cells.find(label);
  if (it == cells.end()) return p;
  const auto& grid = it->second;
  for (size_t d = 0; d < grid.size(); ++d) {
    int64_t last = -1;
    for (size_t k = 0; k < grid[d].size(); ++k) {
      const auto& c = grid[d][k];
      if (c.n == 0) continue;
      int64_t best = 0;
      for (int64_t m = 1; m < library_size; ++m) {
        const bool better = rule == ModeRule::kMeanProbability ? c.prob_sum[m] > c.prob_sum[best]
                                                               : c.chosen[m] > c.chosen[best];
        if (better) best = m;
      }
      p.set(int64_t(d), int64_t(k), best, c.prob_sum[best] / double(c.n));
      last = int64_t(k);
    }
    if (last >= 0) {
      for (int64_t k = last + 1; k < extend_to; ++k) {
        auto fc = p.at(int64_t(d), last);
        p.set(int64_t(d), k, fc->expert, fc->alpha);
      }
    } else if (int64_t(p.expert.size()) <= int64_t(d)) {
      p.expert.resize(d + 1);
      p.alpha.resize(d + 1);
    }
  }
  return p;
}

std::vector<std::vector<double>> RoutingStats::agreement(int64_t label, ModeRule rule) const {
  std::vector<std::vector<double>> out;
  auto it = cells.find(label);
  if (it == cells.end()) return out;
  auto mode = mode_path(label, 0, rule);
  for (size_t d = 0; d < it->second.size(); ++d) {
    std::vector<double> row;
    for (size_t k = 0; k < it->second[d].size(); ++k) {
      const auto& c = it->second[d][k];
      auto fc = mode.at(int64_t(d), int64_t(k));
      row.push_back(c.n == 0 || !fc ? -1.0 : double(c.chosen[fc->expert]) / double(c.n));
    }
    out.push_back(row);
  }
  return out;
}

nlohmann::json RoutingStats::to_json(ModeRule rule) const {
  nlohmann::json j = {{"library_size", library_size}, {"core_depth", depth}, {"labels", nlohmann::json::object()}};
  for (const auto& [label, grid] : cells) {
    nlohmann::json counts = nlohmann::json::array();
    for (const auto& row : grid) {
      nlohmann::json r = nlohmann::json::array();
      for (const auto& c : row) r.push_back(c.n);
      counts.push_back(r);
    }
    j["labels"][std::to_string(label)] = {{"observations", counts}, {"agreement", agreement(label, rule)}};
  }
  return j;
}

RoutingStats collect_routing_stats(LoLModel& model, const data::SplitData& split, const CollectOptions& opt) {
  torch::NoGradGuard ng;
  model->eval();
  RoutingStats st;
  const int64_t n = opt.max_sequences > 0 ? std::min(opt.max_sequences, split.size()) : split.size();
  const auto dev = model->model->embed_tokens->weight.device();
  ProgressBar bar("routing stats", n, opt.progress);
  ForwardOptions fo;
  fo.trace = true;
  fo.logits_at = torch::zeros({1, 1}, torch::kInt64);  // logits are not needed
  for (int64_t i = 0; i < n; i += opt.batch_size) {
    std::vector<int64_t> labels;
    const auto idx = nonempty_sequences(split, i, std::min(n, i + opt.batch_size), labels);
    if (idx.empty()) {  // a batch of empty sequences only: nothing to forward
      bar.update(std::min(n, i + opt.batch_size));
      continue;
    }
    auto batch = make_batch(split, idx, dev);
    fo.logits_at = torch::zeros({int64_t(idx.size()), 1}, torch::kInt64);
    auto out = model->forward(batch, fo);
    require_finite_routing(out.trace, "routing statistics");
    st.add(out.trace, labels);
    bar.update(std::min(n, i + opt.batch_size));
  }
  bar.finish();
  return st;
}

}  // namespace lol::analysis
