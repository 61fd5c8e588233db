// Granite (GraniteForCausalLM) folders: config.json parsing (GraniteConfig's defaults, every
// multiplier 1.0 and the attention scale too; refusals), the loaded model's logits against a
// float64 reference written here from transformers' GraniteModel / GraniteDecoderLayer /
// GraniteAttention equations (embeddings times embedding_multiplier, scores times
// attention_multiplier instead of head_dim^-1/2, sublayer outputs times residual_multiplier,
// logits divided by logits_scaling), full forward and cached decoding on both paths, the
// dense config.json round trip, export back to the source folder, and what other
// architectures refuse. (LayerRoute on a Granite base: tests/layerroute/test_generate.cpp.)
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

/// A tiny Granite folder: Llama's shapes and names, multipliers far from 1 so that a
/// missing or misplaced one moves the logits by far more than the tolerances.
struct GraniteShape {
  TinyShape base;
  double embedding = 3.0, attention = 0.09, residual = 0.4, logits = 2.5;
  bool write_multipliers = true;  ///< false: no multiplier keys (GraniteConfig's defaults, all 1.0)
  GraniteShape() {
    base.arch = "GraniteForCausalLM";
    base.tied = false;
  }
  nlohmann::json config(const std::string& dtype = "float32") const {
    auto j = tiny_config_json(base, dtype);
    j["model_type"] = "granite";
    j["mlp_bias"] = false;
    if (write_multipliers) {
      j["embedding_multiplier"] = embedding;
      j["attention_multiplier"] = attention;
      j["residual_multiplier"] = residual;
      j["logits_scaling"] = logits;
    }
    return j;
  }
  double e() const { return write_multipliers ? embedding : 1.0; }
  double a() const { return write_multipliers ? attention : 1.0; }
  double r() const { return write_multipliers ? residual : 1.0; }
  double l() const { return write_multipliers ? logits : 1.0; }
};

/// transformers' GraniteForCausalLM forward in float64, from the equations (weights as
/// stored, Llama's names): tokens [T] -> logits [T, vocab].
torch::Tensor granite_reference(const GraniteShape& g, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  const TinyShape& s = g.base;
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t.to(torch::kFloat64);
  const int64_t T = int64_t(tokens.size()), hd = s.hd();
  auto norm = [&](const torch::Tensor& x, const std::string& n) {
    return w.at(n) * x / torch::sqrt(x.pow(2).mean(-1, true) + s.eps);
  };
  const ReferenceRope rope(T, hd, hd, s.rope_theta);
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64)) * g.e();
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto h = norm(x, p + "input_layernorm.weight");
    auto q = rope(named_linear(w, h, p + "self_attn.q_proj").view({T, s.heads, hd}));
    auto k = rope(named_linear(w, h, p + "self_attn.k_proj").view({T, s.kv_heads, hd}));
    auto v = named_linear(w, h, p + "self_attn.v_proj").view({T, s.kv_heads, hd});
    // reference_causal_attention scales by hd^-1/2: Granite's scale is attention_multiplier.
    auto o = reference_causal_attention(q * (g.a() * std::sqrt(double(hd))), k, v);
    x = x + named_linear(w, o, p + "self_attn.o_proj") * g.r();
    h = norm(x, p + "post_attention_layernorm.weight");
    auto mlp = named_linear(
        w, torch::silu(named_linear(w, h, p + "mlp.gate_proj")) * named_linear(w, h, p + "mlp.up_proj"), p + "mlp.down_proj");
    x = x + mlp * g.r();
  }
  x = norm(x, "model.norm.weight");
  const auto& head = s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
  return torch::matmul(x, head.t()) / g.l();
}

/// Writes `g`'s folder with weights from `seed` stored as `store`, loads it and checks it
/// against granite_reference (expect_folder_matches_reference: float64, float32, cached
/// decoding on both paths); returns the float64 model.
baselines::DenseModel check_against_reference(const GraniteShape& g, uint64_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("granite");
  write_text(dir.path() + "/config.json", g.config().dump(2));
  const auto weights = tiny_weights(g.base, seed);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(14, g.base.vocab);
  return expect_folder_matches_reference(dir.path(), tokens,
                                         granite_reference(g, rounded(weights, torch::kFloat32), tokens));
}

TEST(HfGranite, LogitsEqualReference) {
  GraniteShape g;
  check_against_reference(g, 3, "grouped-query attention, untied, multipliers 3 / 0.09 / 0.4 / 2.5");
  g.base.tied = true;
  g.base.kv_heads = g.base.heads;
  g.embedding = 12.0, g.attention = 1.0 / 8, g.residual = 0.22, g.logits = 8.0;  // granite-3.0-2b's values (head_dim 8 here)
  check_against_reference(g, 5, "multi-head attention, tied, Granite 3.0's multipliers");
  g.write_multipliers = false;
  check_against_reference(g, 7, "no multiplier keys: all 1.0, the attention scale too");
}

TEST(HfGranite, EachMultiplierMovesTheLogits) {
  // The reference itself is sensitive to each multiplier: dropping any one of them (or
  // scaling attention by head_dim^-1/2) changes the logits by far more than the
  // tolerances of LogitsEqualReference.
  GraniteShape g;
  const auto w = tiny_weights(g.base, 3);
  const auto tokens = some_tokens(14, g.base.vocab);
  const auto ref = granite_reference(g, w, tokens);
  for (int k = 0; k < 5; ++k) {
    GraniteShape other = g;
    if (k == 0) other.embedding = 1.0;
    if (k == 1) other.attention = 1.0;
    if (k == 2) other.attention = 1.0 / std::sqrt(double(g.base.hd()));
    if (k == 3) other.residual = 1.0;
    if (k == 4) other.logits = 1.0;
    EXPECT_GT((granite_reference(other, w, tokens) - ref).abs().max().item<double>(), 1e-2) << k;
  }
}

TEST(HfGranite, ConfigDefaultsAndRefusals) {
  GraniteShape g;
  g.write_multipliers = false;
  auto j = g.config();
  for (const char* k : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "attention_bias",
                        "mlp_bias"})
    j.erase(k);
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_granite());
  EXPECT_EQ(c.model_type(), "granite");
  EXPECT_EQ(c.num_key_value_heads, g.base.heads);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  for (double v : {c.embedding_multiplier, c.logits_scaling, c.residual_multiplier, c.attention_multiplier})
    EXPECT_EQ(v, 1.0);
  // The dense model folds attention_multiplier 1.0 into q_proj as sqrt(head_dim).
  const auto d = to_dense_config(c);
  EXPECT_DOUBLE_EQ(d.query_fold(), std::sqrt(double(g.base.hd())));
  EXPECT_EQ(architecture_from_name("granite"), kGraniteArch);
  EXPECT_EQ(cli_architecture_name(kGraniteArch), "granite");

  auto refused = [&](const char* key, const nlohmann::json& value, std::vector<std::string> words) {
    auto bad = GraniteShape().config();
    bad[key] = value;
    words.insert(words.begin(), {"m/config.json", key});
    expect_input_error([&] { HfConfig::from_json(bad, "m/config.json"); }, words);
  };
  refused("attention_bias", true, {"o_proj"});
  refused("mlp_bias", true, {"biases"});
  refused("hidden_act", "gelu", {"SiLU"});
  refused("embedding_multiplier", 0.0, {"positive"});
  refused("residual_multiplier", -0.22, {"positive"});
  refused("logits_scaling", "8", {"positive number"});
  refused("attention_multiplier", nullptr, {"positive number"});
  refused("head_dim", 16, {"hidden_size / num_attention_heads"});
  auto same_head_dim = GraniteShape().config();
  same_head_dim["head_dim"] = GraniteShape().base.hd();
  EXPECT_EQ(HfConfig::from_json(same_head_dim, "config.json").head_dim, GraniteShape().base.hd());
}

TEST(HfGranite, DenseConfigKeepsTheMultipliers) {
  const auto c = to_dense_config(HfConfig::from_json(GraniteShape().config(), "config.json"));
  EXPECT_TRUE(c.granite_multipliers());
  EXPECT_DOUBLE_EQ(c.query_fold(), 0.09 * std::sqrt(8.0));
  EXPECT_EQ(c.weight_fold("o_proj"), 0.4);
  EXPECT_EQ(c.weight_fold("down_proj"), 0.4);
  EXPECT_EQ(c.weight_fold("up_proj"), 1.0);
  const auto back = baselines::DenseConfig::from_json(c.to_json(), "config.json");
  EXPECT_EQ(back.embedding_multiplier, 3.0);
  EXPECT_EQ(back.logits_scaling, 2.5);
  EXPECT_EQ(back.residual_multiplier, 0.4);
  EXPECT_EQ(back.attention_multiplier, 0.09);
  // A Llama-layout model writes none of the keys.
  const auto plain = baselines::DenseConfig::from_json(to_dense_config(HfConfig::from_json(
                                                           tiny_config_json(TinyShape{}), "config.json"))
                                                           .to_json(),
                                                       "config.json");
  EXPECT_FALSE(plain.granite_multipliers());
  EXPECT_FALSE(plain.to_json().contains("logits_scaling"));
  for (auto [key, value] : {std::pair<const char*, double>{"logits_scaling", 0.0},
                            {"embedding_multiplier", -1.0},
                            {"attention_multiplier", -0.5}}) {
    auto bad = c.to_json();
    bad[key] = value;
    expect_input_error([&] { baselines::DenseConfig::from_json(bad, "run/config.json"); }, {"run/config.json", key});
  }
  auto both = c.to_json();
  both["query_pre_attn_scalar"] = 16;
  expect_input_error([&] { baselines::DenseConfig::from_json(both, "run/config.json"); },
                     {"attention_multiplier", "query_pre_attn_scalar", "one attention scale"});
}

TEST(HfGranite, ExportWritesTheSourceFolderBack) {
  // A bfloat16 folder loaded in float64: the folds (times 0.09 sqrt(8), 0.4) and their
  // division on export move a weight by float64 rounding only, which the float32 file
  // cannot hold: the stored values come back bit for bit. (In a float32 model the fold
  // rounds to float32: a float32 file's q_proj, o_proj and down_proj come back within an ulp.)
  GraniteShape g;
  g.base.tied = true;
  TempDir dir("granite-export");
  const auto config = g.config("bfloat16");
  write_text(dir.path() + "/config.json", config.dump(2));
  const auto weights = tiny_weights(g.base, 9);
  write_hf_weights(dir.path(), weights, torch::kBFloat16);
  auto m = load_hf_model(dir.path(), torch::kFloat64);
  EXPECT_EQ(default_architecture(m->config()), kGraniteArch);
  expect_export_writes_source_back(m, kGraniteArch, dir.path() + "/out", config,
                                   {"architectures", "model_type", "embedding_multiplier", "attention_multiplier",
                                    "residual_multiplier", "logits_scaling", "tie_word_embeddings", "hidden_act"},
                                   rounded(weights, torch::kBFloat16));
  // The exported folder computes the source's function.
  const auto tokens = some_tokens(10, g.base.vocab);
  auto back = load_hf_model(dir.path() + "/out", torch::kFloat64);
  EXPECT_LT((full_logits(back, tokens) - granite_reference(g, rounded(weights, torch::kBFloat16), tokens))
                .abs()
                .max()
                .item<double>(),
            1e-9);

  // A model trained here without multipliers exports as Granite with the neutral values:
  // the attention scale head_dim^-1/2, the others 1.
  TinyShape llama;
  llama.arch = "LlamaForCausalLM";
  const auto plain = to_dense_config(HfConfig::from_json(tiny_config_json(llama), "config.json"));
  const auto h = from_dense_config(plain, kGraniteArch, "float32");
  EXPECT_DOUBLE_EQ(h.attention_multiplier, 1.0 / std::sqrt(double(TinyShape{}.hd())));
  EXPECT_EQ(h.embedding_multiplier, 1.0);
  EXPECT_EQ(h.residual_multiplier, 1.0);
  EXPECT_EQ(h.logits_scaling, 1.0);
}

TEST(HfGranite, OtherArchitecturesRefuseTheMultipliers) {
  const auto c = to_dense_config(HfConfig::from_json(GraniteShape().config(), "config.json"));
  for (const char* arch : {kLlamaArch, kQwen2Arch, kMistralArch, kGemmaArch, kGpt2Arch, kStarcoder2Arch})
    expect_input_error([&] { from_dense_config(c, arch, "float32"); },
                       {"Granite's multipliers", "residual_multiplier 0.4", "has none of them", "GraniteForCausalLM"});
  // Granite has Llama's blocks: no q/k/v-only biases, no q/k norms, no sliding window.
  auto biased = c;
  biased.qkv_bias = true;
  expect_input_error([&] { from_dense_config(biased, kGraniteArch, "float32"); }, {"qkv_bias", "GraniteForCausalLM"});
  auto normed = c;
  normed.qk_norm = true;
  expect_input_error([&] { from_dense_config(normed, kGraniteArch, "float32"); }, {"qk_norm", "GraniteForCausalLM"});
  auto sliding = c;
  sliding.attention = "sliding";
  sliding.window = 4;
  expect_input_error([&] { from_dense_config(sliding, kGraniteArch, "float32"); },
                     {"sliding", "GraniteForCausalLM has no sliding window"});
}

}  // namespace
}  // namespace lol::hf::test
