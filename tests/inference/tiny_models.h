// Tiny random LoL models for the inference tests: weights large enough that the
// routers make varied decisions, in double precision for 1e-5 comparisons.
#pragma once
#include <torch/torch.h>

#include "lol/model.h"

namespace lol::test {

inline LoLConfig tiny_config() {
  LoLConfig c;
  c.vocab_size = 37;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.ffn_hidden = 24;
  c.n_prelude = 1;
  c.n_coda = 1;
  c.library_size = 3;
  c.core_depth = 3;
  c.window = 8;
  c.stride = 3;
  c.max_seq_len = 512;
  return c;
}

/// Random weights: matrices N(0, 0.25), FiLM gamma ~ 1 + N(0, 0.2), beta, e^(l) and the
/// balancing bias random too, so that every part of the routing is exercised.
inline LoLModel tiny_model(const LoLConfig& c, uint64_t seed, torch::ScalarType dtype = torch::kFloat64) {
  LoLModel m(c);
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : m->named_parameters()) {
    auto& t = p.value();
    const std::string& n = p.key();
    auto noise = at::normal(0.0, 1.0, t.sizes(), gen);
    if (n.find("gamma") != std::string::npos || n.find("layernorm") != std::string::npos || n == "model.norm.weight")
      t.copy_(1.0 + 0.2 * noise);
    else
      t.copy_(0.25 * noise);
  }
  m->model->balance_bias.copy_(0.05 * at::normal(0.0, 1.0, {c.library_size}, gen));
  m->to(dtype);
  m->eval();
  return m;
}

}  // namespace lol::test
