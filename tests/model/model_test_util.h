// Shared helpers of the model tests: tiny configurations, randomised models, batches
// built from reference rows, gradient snapshots.
#pragma once
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lol/config.h"
#include "lol/model.h"
#include "model/ref_lol.h"
#include "../common/tiny_lol.h"

namespace reftest {

/// A tiny LoL: V=23, d=16, 4 heads over 2 kv heads (GQA), 1 prelude + 1 coda block,
/// L=3 experts, D=3 routed depths, W=4, S=2.
inline lol::LoLConfig tiny_config() { return lol_test::tiny_lol_config(23, 4, 2, 2); }

/// Moves every parameter away from its initial value so that routing is not uniform
/// and FiLM, norms, depth vectors and the balancing bias all matter: router weights
/// ~ N(0, router_std^2), FiLM gamma/beta and norm weights perturbed by N(0, 0.2^2),
/// depth vectors ~ N(0, 0.5^2), other weights scaled up to std ~0.15, bias ~ U(-0.05, 0.05).
inline void randomize(lol::LoLModel& m, uint64_t seed, double router_std = 1.5) {
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : m->named_parameters(true)) {
    const std::string& n = p.key();
    auto& t = p.value();
    auto noise = [&](double s) { return at::normal(0.0, s, t.sizes(), gen).to(t.dtype()); };
    auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
    if (has("router")) t.copy_(noise(router_std));
    else if (has("depth_embed")) t.copy_(noise(0.5));
    else if (has("gamma") || has("norm")) t.add_(noise(0.2));
    else if (has("beta")) t.copy_(noise(0.2));
    else t.copy_(noise(0.15));
  }
  auto& b = m->model->balance_bias;
  b.copy_((at::rand(b.sizes(), gen) - 0.5) * 0.1);
}

/// A randomised model in `dtype` (eval mode).
inline lol::LoLModel make_model(const lol::LoLConfig& c, uint64_t seed, torch::ScalarType dtype = torch::kFloat64,
                                double router_std = 1.5) {
  lol::LoLModel m(c);
  m->reset_parameters(seed);
  randomize(m, seed + 1000, router_std);
  m->to(dtype);
  m->eval();
  return m;
}

inline std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> t(n);
  for (auto& x : t) x = int64_t(rng() % uint64_t(vocab));
  return t;
}

/// A batch from rows of equal length. Optional fields are set only when some row uses them.
inline lol::LoLBatch make_batch(const std::vector<RefRow>& rows) {
  const int64_t B = int64_t(rows.size()), T = int64_t(rows.at(0).tokens.size());
  lol::LoLBatch b;
  b.tokens = torch::zeros({B, T}, torch::kInt64);
  bool any_prompt = false, any_ro = false, any_doc = false;
  for (const auto& r : rows) {
    any_prompt |= r.prompt_len != 0;
    any_ro |= !r.router_only.empty();
    any_doc |= !r.doc_ids.empty();
  }
  if (any_prompt) b.prompt_len = torch::zeros({B}, torch::kInt64);
  if (any_ro) b.router_only = torch::zeros({B, T}, torch::kBool);
  if (any_doc) b.doc_ids = torch::zeros({B, T}, torch::kInt64);
  for (int64_t r = 0; r < B; ++r) {
    EXPECT_EQ(int64_t(rows[r].tokens.size()), T);
    for (int64_t t = 0; t < T; ++t) {
      b.tokens[r][t] = rows[r].tokens[t];
      if (any_ro && !rows[r].router_only.empty()) b.router_only[r][t] = bool(rows[r].router_only[t]);
      if (any_doc && !rows[r].doc_ids.empty()) b.doc_ids[r][t] = rows[r].doc_ids[t];
    }
    if (any_prompt) b.prompt_len[r] = rows[r].prompt_len;
  }
  return b;
}

/// Gradients of every parameter (zeros where undefined), cloned.
inline std::map<std::string, torch::Tensor> grads_of(lol::LoLModel& m) {
  std::map<std::string, torch::Tensor> g;
  for (auto& p : m->named_parameters(true))
    g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::zeros_like(p.value());
  return g;
}

inline void zero_grads(lol::LoLModel& m) {
  for (auto& p : m->parameters())
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
}

inline double max_abs(const torch::Tensor& a) { return a.numel() == 0 ? 0.0 : a.abs().max().item<double>(); }
inline double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return max_abs(a - b); }

/// Routing path with every window of the given model trace forced (expert and alpha).
inline lol::RoutingPath path_from_trace(const std::vector<lol::DepthTrace>& tr, int64_t L, bool with_alpha) {
  lol::RoutingPath p;
  p.library_size = L;
  for (size_t d = 0; d < tr.size(); ++d)
    for (size_t g = 0; g < tr[d].k.size(); ++g) {
      std::optional<double> a;
      if (with_alpha) a = tr[d].alpha[int64_t(g)].item<double>();
      p.set(int64_t(d), tr[d].k[g], tr[d].expert[int64_t(g)].item<int64_t>(), a);
    }
  return p;
}

}  // namespace reftest
