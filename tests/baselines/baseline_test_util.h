// Shared helpers of the baseline tests: tiny configurations, temp dirs, random tokens.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "baselines/dense_config.h"
#include "baselines/moe_config.h"
#include "../common/test_files.h"

namespace btest {

using ::lol_test::TempDir;

/// V=29, d=16, 4 heads over 2 kv heads (GQA), F=24, 3 layers.
inline lol::baselines::DenseConfig tiny_dense(const std::string& attention = "full") {
  lol::baselines::DenseConfig c;
  c.vocab_size = 29;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 24;
  c.n_layers = 3;
  c.max_seq_len = 64;
  c.attention = attention;
  if (attention != "full") c.window = 4;
  if (attention == "strided") c.stride = 3;
  return c;
}

/// tiny_dense's shape as an MoE model: 1 prelude + 2 core MoE blocks (strided, W=4, S=3)
/// + 1 coda, E experts with k active; with moe_prelude_coda the prelude and coda too.
inline lol::baselines::MoEConfig tiny_moe(int64_t E = 3, int64_t k = 2, bool moe_prelude_coda = false) {
  lol::baselines::MoEConfig c;
  static_cast<lol::baselines::TransformerShape&>(c) = tiny_dense();
  c.n_prelude = 1;
  c.core_depth = 2;
  c.n_coda = 1;
  c.n_experts = E;
  c.top_k = k;
  c.window = 4;
  c.stride = 3;
  c.moe_prelude_coda = moe_prelude_coda;
  return c;
}

/// The dense model an MoE model with 1 expert, top-1 equals: the same layers and
/// attention (strided core, full-attention prelude and coda).
inline lol::baselines::DenseConfig dense_twin(const lol::baselines::MoEConfig& m) {
  lol::baselines::DenseConfig dc = tiny_dense("strided");
  dc.n_layers = m.n_layers();
  dc.window = m.window;
  dc.stride = m.stride;
  dc.n_full_prelude = m.n_prelude;
  dc.n_full_coda = m.n_coda;
  return dc;
}

inline torch::Tensor random_tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {B, T}, gen, torch::TensorOptions(torch::kInt64));
}

/// Adds N(0, s^2) noise to every parameter (norm weights and biases included) so that
/// tests do not depend on the initial values (e.g. zero biases).
inline void perturb(torch::nn::Module& m, uint64_t seed, double s = 0.05) {
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : m.parameters()) p.add_(at::normal(0.0, s, p.sizes(), gen).to(p.dtype()));
}

}  // namespace btest
