#include "analysis/routing_features.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "util/error.h"
#include "util/progress.h"

namespace lol::analysis {

RoutingFeatures features_from_trace(const std::vector<DepthTrace>& trace, const std::vector<int64_t>& seq_index,
                                    const std::vector<int64_t>& labels) {
  if (trace.empty()) throw std::invalid_argument("features_from_trace: empty trace (no routed depth was run)");
  if (labels.size() != seq_index.size())
    throw std::invalid_argument("features_from_trace: labels and sequence indices differ in number");
  const int64_t D = int64_t(trace.size()), L = trace[0].probs.size(1), B = int64_t(seq_index.size());
  RoutingFeatures f;
  f.depth = D;
  f.library_size = L;
  // win[d][b][k] = position of window k of row b in trace[d].
  std::vector<std::vector<std::vector<int64_t>>> win(D, std::vector<std::vector<int64_t>>(B));
  std::vector<torch::Tensor> probs(D);
  for (int64_t d = 0; d < D; ++d) {
    const auto& tr = trace[d];
    if (tr.probs.size(1) != L) throw std::invalid_argument("features_from_trace: library size differs across depths");
    probs[d] = tr.probs.to(torch::kFloat64).contiguous();
    for (size_t w = 0; w < tr.row.size(); ++w) {
      const int64_t b = tr.row[w], k = tr.k[w];
      if (b < 0 || b >= B) throw std::invalid_argument("features_from_trace: trace row outside the batch");
      if (tr.doc_begin[w] != 0)
        throw std::invalid_argument("features_from_trace: row " + std::to_string(b) +
                                    " holds more than one document (expected the layout of make_batch)");
      auto& v = win[d][b];
      if (int64_t(v.size()) <= k) v.resize(k + 1, -1);
      v[k] = int64_t(w);
    }
  }
  std::vector<double> wprobs, wtop1, sprobs;
  std::vector<int64_t> wexpert;
  for (int64_t b = 0; b < B; ++b) {
    int64_t K = 0;
    for (int64_t d = 0; d < D; ++d) K = std::max<int64_t>(K, int64_t(win[d][b].size()));
    if (K == 0) continue;  // empty sequence
    for (int64_t d = 0; d < D; ++d)
      if (win[d][b].empty() || std::count(win[d][b].begin(), win[d][b].end(), -1) > 0)
        throw std::invalid_argument("features_from_trace: row " + std::to_string(b) + " lacks windows at depth " +
                                    std::to_string(d + 1));
    for (int64_t k = 0; k < K; ++k) {
      f.window_seq.push_back(seq_index[b]);
      f.window_k.push_back(k);
      f.window_label.push_back(labels[b]);
      for (int64_t d = 0; d < D; ++d) {
        const auto& v = win[d][b];
        const int64_t w = v[std::min<int64_t>(k, int64_t(v.size()) - 1)];
        const double* p = probs[d].data_ptr<double>() + w * L;
        const int64_t e = trace[d].expert.data_ptr<int64_t>()[w];
        wprobs.insert(wprobs.end(), p, p + L);
        wtop1.push_back(p[e]);
        wexpert.push_back(e);
      }
    }
    f.seq_index.push_back(seq_index[b]);
    f.seq_label.push_back(labels[b]);
    auto& counts = f.expert_count[labels[b]];
    if (counts.empty()) counts.assign(D, std::vector<int64_t>(L, 0));
    for (int64_t d = 0; d < D; ++d) {
      std::vector<double> mean(L, 0.0);
      for (int64_t w : win[d][b]) {
        const double* p = probs[d].data_ptr<double>() + w * L;
        for (int64_t m = 0; m < L; ++m) mean[m] += p[m];
        counts[d][trace[d].expert.data_ptr<int64_t>()[w]]++;
      }
      for (auto& m : mean) sprobs.push_back(m / double(win[d][b].size()));
    }
  }
  const int64_t N = f.n_windows(), S = f.n_sequences();
  auto f64 = torch::TensorOptions(torch::kFloat64);
  f.window_probs = torch::from_blob(wprobs.data(), {N, D * L}, f64).clone();
  f.window_top1 = torch::from_blob(wtop1.data(), {N, D}, f64).clone();
  f.window_expert = torch::from_blob(wexpert.data(), {N, D}, torch::TensorOptions(torch::kInt64)).clone();
  f.seq_probs = torch::from_blob(sprobs.data(), {S, D * L}, f64).clone();
  return f;
}

RoutingFeatures merge_features(const std::vector<RoutingFeatures>& parts) {
  RoutingFeatures all;
  if (parts.empty()) return all;
  all.depth = parts[0].depth;
  all.library_size = parts[0].library_size;
  std::vector<torch::Tensor> wp, wt, we, sp;
  auto cat = [](std::vector<int64_t>& x, const std::vector<int64_t>& y) { x.insert(x.end(), y.begin(), y.end()); };
  for (const auto& p : parts) {
    require(p.depth == all.depth && p.library_size == all.library_size, "routing features",
            "merging features of D=" + std::to_string(p.depth) + ", L=" + std::to_string(p.library_size) +
                " with D=" + std::to_string(all.depth) + ", L=" + std::to_string(all.library_size));
    cat(all.window_seq, p.window_seq);
    cat(all.window_k, p.window_k);
    cat(all.window_label, p.window_label);
    cat(all.seq_index, p.seq_index);
    cat(all.seq_label, p.seq_label);
    wp.push_back(p.window_probs);
    wt.push_back(p.window_top1);
    we.push_back(p.window_expert);
    sp.push_back(p.seq_probs);
    for (const auto& [label, counts] : p.expert_count) {
      auto& c = all.expert_count[label];
      if (c.empty()) {
        c = counts;
        continue;
      }
      for (size_t d = 0; d < c.size(); ++d)
        for (size_t m = 0; m < c[d].size(); ++m) c[d][m] += counts[d][m];
    }
  }
  all.window_probs = torch::cat(wp);
  all.window_top1 = torch::cat(wt);
  all.window_expert = torch::cat(we);
  all.seq_probs = torch::cat(sp);
  return all;
}

RoutingFeatures collect_routing_features(LoLModel& model, const data::SplitData& split, const CollectOptions& opt,
                                         int64_t max_tokens) {
  const int64_t max_len = model->config().max_seq_len;
  require(max_tokens >= 0 && max_tokens <= max_len, "routing features",
          "max tokens = " + std::to_string(max_tokens) + ": expected 0 <= value <= max_seq_len = " +
              std::to_string(max_len));
  const int64_t cap = max_tokens > 0 ? max_tokens : max_len;
  torch::NoGradGuard ng;
  model->eval();
  const int64_t n = opt.max_sequences > 0 ? std::min(opt.max_sequences, split.size()) : split.size();
  require(opt.batch_size > 0, "routing features", "batch size must be > 0");
  const auto dev = model->model->embed_tokens->weight.device();
  ProgressBar bar("routing features", n, opt.progress);
  ForwardOptions fo;
  fo.trace = true;
  std::vector<RoutingFeatures> parts;
  for (int64_t i = 0; i < n; i += opt.batch_size) {
    std::vector<int64_t> labels;
    const auto idx = nonempty_sequences(split, i, std::min(n, i + opt.batch_size), labels);
    if (idx.empty()) {  // a batch of empty sequences only: nothing to forward
      bar.update(std::min(n, i + opt.batch_size));
      continue;
    }
    bool longer = false;
    for (auto j : idx) longer |= split.get(j).length > cap;
    auto batch = make_batch(split, idx, dev, longer ? cap : 0);
    fo.logits_at = torch::zeros({int64_t(idx.size()), 1}, torch::kInt64);  // logits are not needed
    auto out = model->forward(batch, fo);
    require_finite_routing(out.trace, "routing features");
    parts.push_back(features_from_trace(out.trace, idx, labels));
    bar.update(std::min(n, i + opt.batch_size));
  }
  bar.finish();
  if (parts.empty()) {
    RoutingFeatures f;
    f.depth = model->active_depth();
    f.library_size = model->config().library_size;
    return f;
  }
  return merge_features(parts);
}

std::vector<std::vector<double>> Utilization::share() const {
  std::vector<std::vector<double>> s(depth, std::vector<double>(library_size, 0.0));
  for (int64_t d = 0; d < depth; ++d) {
    int64_t tot = 0;
    for (auto c : count[d]) tot += c;
    for (int64_t m = 0; m < library_size; ++m) s[d][m] = tot ? double(count[d][m]) / double(tot) : 0.0;
  }
  return s;
}

std::vector<std::vector<double>> Utilization::depth_profile() const {
  std::vector<std::vector<double>> p(library_size, std::vector<double>(depth, 0.0));
  for (int64_t m = 0; m < library_size; ++m) {
    int64_t tot = 0;
    for (int64_t d = 0; d < depth; ++d) tot += count[d][m];
    for (int64_t d = 0; d < depth; ++d) p[m][d] = tot ? double(count[d][m]) / double(tot) : 0.0;
  }
  return p;
}

nlohmann::json Utilization::to_json() const {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [path, c] : top_paths)
    top.push_back({{"path", path}, {"count", c}, {"share", n_items ? double(c) / double(n_items) : 0.0}});
  return {{"routed_depths", depth},
          {"library_size", library_size},
          {"windows_per_depth_expert", count},
          {"share", share()},
          {"expert_depth_profile", depth_profile()},
          {"window_items", n_items},
          {"distinct_paths", n_distinct_paths},
          {"path_entropy_bits", path_entropy_bits},
          {"max_path_entropy_bits", max_path_entropy_bits},
          {"top_paths", top}};
}

Utilization compute_utilization(const RoutingFeatures& f, std::optional<int64_t> label_filter, size_t top) {
  Utilization u;
  u.depth = f.depth;
  u.library_size = f.library_size;
  u.count.assign(f.depth, std::vector<int64_t>(f.library_size, 0));
  for (const auto& [label, counts] : f.expert_count) {
    if (label_filter && label != *label_filter) continue;
    for (int64_t d = 0; d < f.depth; ++d)
      for (int64_t m = 0; m < f.library_size; ++m) u.count[d][m] += counts[d][m];
  }
  std::map<std::vector<int64_t>, int64_t> paths;
  auto ex = f.window_expert.contiguous();
  const int64_t* ep = f.n_windows() ? ex.data_ptr<int64_t>() : nullptr;
  for (int64_t i = 0; i < f.n_windows(); ++i) {
    if (label_filter && f.window_label[i] != *label_filter) continue;
    paths[std::vector<int64_t>(ep + i * f.depth, ep + (i + 1) * f.depth)]++;
    u.n_items++;
  }
  u.n_distinct_paths = int64_t(paths.size());
  for (const auto& [p, c] : paths) {
    const double q = double(c) / double(u.n_items);
    u.path_entropy_bits -= q * std::log2(q);
  }
  if (u.n_items > 0)
    u.max_path_entropy_bits =
        std::min(std::log2(double(u.n_items)), double(f.depth) * std::log2(double(std::max<int64_t>(1, f.library_size))));
  std::vector<std::pair<std::vector<int64_t>, int64_t>> sorted(paths.begin(), paths.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (sorted.size() > top) sorted.resize(top);
  u.top_paths = std::move(sorted);
  return u;
}

}  // namespace lol::analysis
