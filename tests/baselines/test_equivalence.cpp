// Strided-window dense == LoL with L = D and a forced identity path (expert l at routed
// depth l, alpha = 1, FiLM at its identity initialisation) (issue 9); and == the
// benchmark's dense strided-window reference (training/dense_window_model.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../common/tiny_lol.h"
#include "baseline_test_util.h"
#include "baselines/dense_model.h"
#include "lol/model.h"
#include "lol/routing_path.h"
#include "training/dense_window_model.h"

using namespace lol::baselines;

namespace {

lol::LoLConfig lol_config() { return lol_test::tiny_lol_config(29, 4, 2, 3); }

DenseConfig dense_of(const lol::LoLConfig& l) {
  DenseConfig c;
  c.vocab_size = l.vocab_size;
  c.d_model = l.d_model;
  c.n_heads = l.n_heads;
  c.n_kv_heads = l.n_kv_heads;
  c.ffn_hidden = l.ffn_hidden;
  c.max_seq_len = l.max_seq_len;
  c.norm_eps = l.norm_eps;
  c.rope_theta = l.rope_theta;
  c.tie_word_embeddings = l.tie_embeddings;
  c.n_layers = l.n_prelude + l.core_depth + l.n_coda;
  c.attention = "strided";
  c.window = l.window;
  c.stride = l.stride;
  c.n_full_prelude = l.n_prelude;
  c.n_full_coda = l.n_coda;
  return c;
}

/// Dense layer i's LoL counterpart: prelude.i, library.(i - P), coda.(i - P - D).
std::string lol_name(const std::string& dense_name, const lol::LoLConfig& l) {
  if (dense_name.rfind("model.layers.", 0) != 0) return dense_name;
  const size_t dot = dense_name.find('.', 13);
  const int64_t i = std::stoll(dense_name.substr(13, dot - 13));
  std::string block;
  if (i < l.n_prelude) block = "model.prelude." + std::to_string(i);
  else if (i < l.n_prelude + l.core_depth) block = "model.library." + std::to_string(i - l.n_prelude);
  else block = "model.coda." + std::to_string(i - l.n_prelude - l.core_depth);
  return block + dense_name.substr(dot);
}

}  // namespace

TEST(Equivalence, StridedDenseEqualsLoLWithIdentityPath) {
  const auto lc = lol_config();
  lol::LoLModel lol_model(lc);
  lol_model->reset_parameters(4);
  {
    // Perturb everything except FiLM (identity) so that biases/norms matter.
    torch::NoGradGuard ng;
    auto gen = at::detail::createCPUGenerator(5);
    for (auto& p : lol_model->named_parameters())
      if (p.key().find("film") == std::string::npos) p.value().add_(at::normal(0.0, 0.05, p.value().sizes(), gen));
  }
  lol_model->to(torch::kFloat64);
  lol_model->eval();
  DenseModel dense(dense_of(lc));
  dense->to(torch::kFloat64);
  {
    torch::NoGradGuard ng;
    auto src = lol_model->named_parameters();
    for (auto& p : dense->named_parameters()) {
      const std::string n = lol_name(p.key(), lc);
      ASSERT_TRUE(src.contains(n)) << n;
      p.value().copy_(src[n]);
    }
  }
  const int64_t T = 14;
  auto tok = btest::random_tokens(2, T, lc.vocab_size, 6);
  auto doc = torch::tensor({0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, torch::kInt64).unsqueeze(0).repeat({2, 1});
  lol::RoutingPath path;
  path.library_size = lc.library_size;
  for (int64_t d = 0; d < lc.core_depth; ++d)
    for (int64_t k = 0; k < T; ++k) path.set(d, k, d, 1.0);
  lol::LoLBatch batch;
  batch.tokens = tok;
  batch.doc_ids = doc;
  lol::ForwardOptions opt;
  opt.force = &path;
  auto a = lol_model->forward(batch, opt).logits;
  auto b = dense->forward(tok, doc);
  EXPECT_TRUE(torch::allclose(a, b, 1e-11, 1e-11)) << (a - b).abs().max().item<double>();
  // Another path (expert 0 everywhere) gives different logits: the test can fail.
  lol::RoutingPath other = path;
  for (int64_t k = 0; k < T; ++k) other.set(1, k, 0, 1.0);
  opt.force = &other;
  EXPECT_FALSE(torch::allclose(lol_model->forward(batch, opt).logits, b, 1e-6, 1e-6));
}

TEST(Equivalence, StridedDenseEqualsBenchmarkDenseWindowModel) {
  const auto lc = lol_config();
  lol::training::DenseWindowModel ref(lc, 3);
  ref->to(torch::kFloat64);
  DenseModel dense(dense_of(lc));
  dense->to(torch::kFloat64);
  {
    torch::NoGradGuard ng;
    auto src = ref->named_parameters();
    for (auto& p : dense->named_parameters()) {
      std::string n = lol_name(p.key(), lc);
      for (const char* part : {"prelude", "coda"})
        if (n.rfind(std::string("model.") + part, 0) == 0) n = n.substr(6);
      if (n.rfind("model.library.", 0) == 0) n = "core." + n.substr(14);
      if (n.rfind("model.", 0) == 0) n = n.substr(6);
      ASSERT_TRUE(src.contains(n)) << n;
      p.value().copy_(src[n]);
    }
  }
  auto tok = btest::random_tokens(3, 13, lc.vocab_size, 8);
  auto a = ref->forward(tok), b = dense->forward(tok);
  EXPECT_TRUE(torch::allclose(a, b, 1e-11, 1e-11)) << (a - b).abs().max().item<double>();
}
