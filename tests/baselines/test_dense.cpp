// Dense baseline (issue 9): names, forward/backward, document blocking, attention
// patterns, config strictness, save/load through the trainer's model factory.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "baseline_test_util.h"
#include "baselines/dense_model.h"
#include "baselines/dense_trainable.h"
#include "baselines/looped_config.h"
#include "util/error.h"

using namespace lol::baselines;

TEST(DenseModel, HuggingFaceTensorNames) {
  auto c = btest::tiny_dense();
  c.qkv_bias = true;
  DenseModel m(c);
  std::set<std::string> names;
  for (const auto& p : m->named_parameters()) names.insert(p.key());
  std::set<std::string> want{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    for (const char* s : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
                          "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
      want.insert(l + s);
  }
  EXPECT_EQ(names, want);
  c.qkv_bias = false;
  c.tie_word_embeddings = true;
  DenseModel t(c);
  for (const auto& p : t->named_parameters()) {
    EXPECT_EQ(p.key().find("bias"), std::string::npos) << p.key();
    EXPECT_NE(p.key(), "lm_head.weight");
  }
  EXPECT_FALSE(t->lm_head);
}

TEST(DenseModel, ForwardBackwardEveryAttention) {
  for (const std::string att : {"full", "sliding", "strided"}) {
    auto c = btest::tiny_dense(att);
    c.qkv_bias = true;
    DenseModel m(c);
    auto tok = btest::random_tokens(2, 11, c.vocab_size, 1);
    auto logits = m->forward(tok);
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 11, c.vocab_size})) << att;
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << att;
    logits.logsumexp(-1).sum().backward();
    for (const auto& p : m->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << att << " " << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << att << " " << p.key();
    }
    EXPECT_EQ(m->hidden(tok).sizes(), (std::vector<int64_t>{2, 11, c.d_model}));
  }
}

TEST(DenseModel, WindowAsLongAsTheSequenceIsFullAttentionBitForBit) {
  // A sliding window of at least the sequence's length never binds: the same logits as
  // full attention, bit for bit (it runs the full path), so that an export that drops the
  // window (hf::from_dense_config) reloads to the same numbers; a shorter window differs.
  auto full = btest::tiny_dense();
  auto sliding = full;
  sliding.attention = "sliding";
  sliding.window = 11;
  DenseModel a(full), b(sliding);
  torch::NoGradGuard ng;
  for (auto& [n, t] : b->named_parameters().pairs()) t.copy_(a->named_parameters()[n]);
  auto tok = btest::random_tokens(2, 11, full.vocab_size, 3);
  EXPECT_TRUE(torch::equal(a->forward(tok), b->forward(tok)));
  auto shorter = btest::random_tokens(2, 12, full.vocab_size, 3);
  EXPECT_FALSE(torch::allclose(a->forward(shorter), b->forward(shorter), 1e-4, 1e-4));
}

TEST(DenseModel, PackedDocumentsEqualDocumentsAlone) {
  for (const std::string att : {"full", "sliding", "strided"}) {
    auto c = btest::tiny_dense(att);
    DenseModel m(c);
    btest::perturb(*m, 3);
    m->to(torch::kFloat64);
    auto a = btest::random_tokens(1, 7, c.vocab_size, 4), b = btest::random_tokens(1, 6, c.vocab_size, 5);
    auto packed = torch::cat({a, b, torch::zeros({1, 2}, torch::kInt64)}, 1);  // 7 + 6 + 2 padding
    auto doc = torch::tensor({0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -1, -1}, torch::kInt64).unsqueeze(0);
    auto lp = m->forward(packed, doc);
    auto la = m->forward(a), lb = m->forward(b);
    EXPECT_TRUE(torch::allclose(lp.slice(1, 0, 7), la, 1e-10, 1e-10)) << att;
    EXPECT_TRUE(torch::allclose(lp.slice(1, 7, 13), lb, 1e-10, 1e-10)) << att;
  }
}

TEST(DenseModel, AttentionReachMatchesPattern) {
  // One layer: changing token p changes the logits at q only if p's key is visible to q.
  for (const std::string att : {"full", "sliding", "strided"}) {
    auto c = btest::tiny_dense(att);
    c.n_layers = 1;
    DenseModel m(c);
    btest::perturb(*m, 6);
    m->to(torch::kFloat64);
    const int64_t T = 12, p = 3;
    auto tok = btest::random_tokens(1, T, c.vocab_size, 7);
    auto tok2 = tok.clone();
    tok2[0][p] = (tok[0][p].item<int64_t>() + 1) % c.vocab_size;
    auto diff = (m->forward(tok) - m->forward(tok2)).abs().amax(-1)[0];
    for (int64_t q = 0; q < T; ++q) {
      bool visible = q >= p;
      if (att == "sliding") visible = visible && q - p < c.window;
      if (att == "strided") visible = visible && q / c.window == p / c.window;  // depth 1: shift 0
      EXPECT_EQ(diff[q].item<double>() > 1e-12, visible) << att << " q=" << q;
    }
  }
}

TEST(DenseModel, StridedLayersShiftWindowsAndKeepFullPreludeCoda) {
  auto c = btest::tiny_dense("strided");
  c.n_layers = 5;
  c.n_full_prelude = 1;
  c.n_full_coda = 1;
  EXPECT_EQ(c.layer_attention(0).kind, AttentionKind::Full);
  EXPECT_EQ(c.layer_attention(4).kind, AttentionKind::Full);
  for (int64_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(c.layer_attention(i).kind, AttentionKind::Strided);
    EXPECT_EQ(c.layer_attention(i).depth, i);
  }
  // Allowed pairs: full n(n+1)/2; sliding with W >= n is full; strided windows partition.
  LayerAttention full, sl{AttentionKind::Sliding, 100, 0, 0}, st{AttentionKind::Strided, 4, 3, 2};
  EXPECT_DOUBLE_EQ(allowed_pairs(10, full), 55.0);
  EXPECT_DOUBLE_EQ(allowed_pairs(10, sl), 55.0);
  // depth 2, shift 3: windows [0,1) [1,5) [5,9) [9,10) -> 1 + 10 + 10 + 1
  EXPECT_DOUBLE_EQ(allowed_pairs(10, st), 22.0);
}

TEST(DenseConfig, StrictJson) {
  auto c = btest::tiny_dense("sliding");
  auto j = c.to_json();
  EXPECT_EQ(DenseConfig::from_json(j, "x").to_json(), j);
  auto err = [&](nlohmann::json k) {
    try {
      DenseConfig::from_json(k, "cfg.json");
    } catch (const lol::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto k = j;
  k["n_layer"] = 3;
  EXPECT_NE(err(k).find("n_layer"), std::string::npos);
  k = j;
  k["attention"] = "local";
  EXPECT_NE(err(k).find("full, sliding, strided"), std::string::npos);
  k = j;
  k["window"] = 0;
  EXPECT_NE(err(k).find("'window'"), std::string::npos);
  k = j;
  k["n_kv_heads"] = 3;
  EXPECT_NE(err(k).find("n_kv_heads"), std::string::npos);
  k = j;
  k["architecture"] = "lol";
  EXPECT_NE(err(k).find("architecture"), std::string::npos);
  k = j;
  k["attention"] = "full";
  k["n_full_prelude"] = 1;
  EXPECT_NE(err(k).find("n_full_prelude"), std::string::npos);
}

TEST(DenseTrainable, SaveLoadRoundTripThroughFactory) {
  btest::TempDir dir("dense-save");
  auto c = btest::tiny_dense("strided");
  c.qkv_bias = true;
  nlohmann::json section = c.to_json();
  section.erase("vocab_size");
  auto model = lol::training::make_model(section, "test", c.vocab_size, 32, 11);
  ASSERT_EQ(model->architecture(), "dense");
  btest::perturb(model->module(), 12);
  model->save(dir.path(), {{"note", "x"}});
  auto loaded = lol::training::load_model(dir.path());
  ASSERT_EQ(loaded->architecture(), "dense");
  EXPECT_EQ(loaded->config_json(), model->config_json());
  auto tok = btest::random_tokens(2, 9, c.vocab_size, 13);
  lol::training::TrainBatch b;
  b.tokens = tok;
  EXPECT_TRUE(torch::equal(model->forward(b), loaded->forward(b)));
  // Muon gets exactly the attention/MLP matrices; embeddings and head AdamW with decay.
  for (const auto& g : model->grouped_parameters()) {
    const bool matrix = g.tensor.dim() == 2 && (g.name.find("self_attn") != std::string::npos ||
                                                g.name.find("mlp") != std::string::npos);
    EXPECT_EQ(g.group == lol::training::ParamGroup::Muon, matrix) << g.name;
  }
  // Two different seeds give different weights; the same seed the same.
  auto m1 = lol::training::make_model(section, "test", c.vocab_size, 32, 11);
  auto m2 = lol::training::make_model(section, "test", c.vocab_size, 32, 12);
  auto w = [](lol::training::TrainableModel& m) { return m.module().named_parameters()["model.layers.0.mlp.up_proj.weight"]; };
  EXPECT_TRUE(torch::equal(w(*m1), w(*lol::training::make_model(section, "test", c.vocab_size, 32, 11))));
  EXPECT_FALSE(torch::equal(w(*m1), w(*m2)));
}

// A baseline whose float32 weights exceed this machine's memory is refused before any
// allocation (as LoL is), naming the config and the size.
TEST(BaselineFactory, RefusesWeightsBeyondPhysicalMemory) {
  auto grow = [](lol::baselines::TransformerShape& s) {
    s.d_model = 16384;
    s.n_heads = 128;
    s.n_kv_heads = 128;
    s.ffn_hidden = 65536;
  };
  auto dense = btest::tiny_dense("full");
  grow(dense);
  dense.n_layers = 200;
  lol::baselines::LoopedConfig looped;
  static_cast<lol::baselines::TransformerShape&>(looped) = btest::tiny_dense("full");
  grow(looped);
  looped.n_recur = 200;
  auto moe = btest::tiny_moe();
  grow(moe);
  moe.n_experts = 64;
  moe.core_depth = 16;
  for (const auto& section : {dense.to_json(), looped.to_json(), moe.to_json()}) {
    try {
      lol::training::make_model(section, "big.json", 16, 32, 1);
      ADD_FAILURE() << section.dump() << " was built";
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("big.json: the model's float32 weights need about "), std::string::npos)
          << e.what();
    }
  }
}
