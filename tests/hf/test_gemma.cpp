// Gemma (GemmaForCausalLM), Gemma 2 (Gemma2ForCausalLM) and Gemma 3 text
// (Gemma3ForCausalLM) folders: config.json
// parsing (defaults, layer_types, per-type rope_parameters, refusals) and the loaded
// model's logits against a float64 reference written here from transformers' Gemma
// equations: RMSNorm x (1 + w), embeddings times sqrt(hidden_size), GeGLU, and for
// Gemma 3 sandwich norms, q/k norms, the query_pre_attn_scalar attention scale, sliding
// layers with their own RoPE base and a full layer every P-th; Gemma 2's attention and
// final logit soft-capping.
#include "hf_test_util.h"
#include "baselines/flops.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "inference/dense_session.h"
#include "layerroute/gated_model.h"

namespace lol::hf::test {
namespace {

/// A tiny Gemma / Gemma 3 folder's shape and config.json.
struct GemmaShape {
  bool gemma3 = true;
  bool gemma2 = false;              ///< Gemma 2 (gemma3 false): sandwich norms, no q/k norms, soft-capping
  double attn_cap = 0, final_cap = 0;  ///< soft-capping (0: null in config.json)
  int64_t vocab = 61, hidden = 32, ffn = 40, layers = 4, heads = 4, kv_heads = 2, head_dim = 12, max_pos = 64;
  int64_t window = 5, pattern = 2;  ///< Gemma 3: sliding window, full layer every pattern-th
  double rope_theta = 1e6, rope_local = 10000, qpas = 20, eps = 1e-6;
  double rope_linear = 0;           ///< > 0: full layers' rope_scaling {linear, factor}
  std::string act = "gelu_pytorch_tanh";
  bool tied = true;

  bool sliding(int64_t i) const { return (gemma3 || gemma2) && (i + 1) % pattern != 0; }
  bool sandwich() const { return gemma3 || gemma2; }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {gemma3 ? "Gemma3ForCausalLM" : gemma2 ? "Gemma2ForCausalLM" : "GemmaForCausalLM"}},
                        {"model_type", gemma3 ? "gemma3_text" : gemma2 ? "gemma2" : "gemma"},
                        {"vocab_size", vocab},
                        {"hidden_size", hidden},
                        {"intermediate_size", ffn},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"num_key_value_heads", kv_heads},
                        {"head_dim", head_dim},
                        {"max_position_embeddings", max_pos},
                        {"rms_norm_eps", eps},
                        {"rope_theta", rope_theta},
                        {"hidden_act", "gelu"},
                        {"hidden_activation", act},
                        {"tie_word_embeddings", tied},
                        {"attention_bias", false},
                        {"torch_dtype", "float32"},
                        {"bos_token_id", 2},
                        {"eos_token_id", 1}};
    if (gemma3 || gemma2) {
      j["sliding_window"] = window;
      if (gemma3) {
        j["sliding_window_pattern"] = pattern;
        j["rope_local_base_freq"] = rope_local;
      }
      j["query_pre_attn_scalar"] = qpas;
      j["final_logit_softcapping"] = final_cap > 0 ? nlohmann::json(final_cap) : nlohmann::json(nullptr);
      j["attn_logit_softcapping"] = attn_cap > 0 ? nlohmann::json(attn_cap) : nlohmann::json(nullptr);
      j["rope_scaling"] = rope_linear > 0 ? nlohmann::json{{"rope_type", "linear"}, {"factor", rope_linear}}
                                          : nlohmann::json(nullptr);
    }
    return j;
  }
};

/// Random weights under Gemma's names; norm weights are offsets N(0, 0.3) from 1, so that
/// a loader without the offset computes another function.
NamedTensors gemma_weights(const GemmaShape& s, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto rnd = [&](std::vector<int64_t> shape, double scale) {
    return (scale * at::normal(0.0, 1.0, shape, gen)).to(torch::kFloat64);
  };
  const int64_t hd = s.head_dim;
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, s.hidden}, 0.2));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({s.hidden}, 0.3));
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({s.heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({s.hidden, s.heads * hd}, 0.25));
    if (s.gemma3) {
      w.emplace_back(p + "self_attn.q_norm.weight", rnd({hd}, 0.3));
      w.emplace_back(p + "self_attn.k_norm.weight", rnd({hd}, 0.3));
    }
    if (s.sandwich()) {
      w.emplace_back(p + "pre_feedforward_layernorm.weight", rnd({s.hidden}, 0.3));
      w.emplace_back(p + "post_feedforward_layernorm.weight", rnd({s.hidden}, 0.3));
    }
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({s.hidden}, 0.3));
    w.emplace_back(p + "mlp.gate_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.up_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.down_proj.weight", rnd({s.hidden, s.ffn}, 0.3));
  }
  w.emplace_back("model.norm.weight", rnd({s.hidden}, 0.3));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, s.hidden}, 0.3));
  return w;
}

/// transformers' GemmaForCausalLM / Gemma3ForCausalLM forward in float64, from the
/// equations: tokens [T] -> logits [T, vocab].
torch::Tensor gemma_reference(const GemmaShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t;
  const int64_t T = int64_t(tokens.size()), hd = s.head_dim, G = s.heads / s.kv_heads;
  auto norm = [&](const torch::Tensor& x, const std::string& n) {
    return x / torch::sqrt(x.pow(2).mean(-1, true) + s.eps) * (1.0 + w.at(n));
  };
  auto rope_tables = [&](double theta, double factor) {  // float32 angles, as transformers
    auto inv = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32),
                                torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd));
    inv = inv / float(factor);
    auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);
    auto c = ang.cos().to(torch::kFloat64), sn = ang.sin().to(torch::kFloat64);
    return std::make_pair(torch::cat({c, c}, -1).unsqueeze(1), torch::cat({sn, sn}, -1).unsqueeze(1));
  };
  const auto global = rope_tables(s.rope_theta, s.rope_linear > 0 ? s.rope_linear : 1.0);
  const auto local = s.gemma3 ? rope_tables(s.rope_local, 1.0) : global;  // Gemma 2: one RoPE
  auto rope = [&](const torch::Tensor& x, const std::pair<torch::Tensor, torch::Tensor>& cs) {
    auto rot = torch::cat({-x.narrow(-1, hd / 2, hd / 2), x.narrow(-1, 0, hd / 2)}, -1);
    return x * cs.first + rot * cs.second;
  };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return torch::matmul(x, w.at(n + ".weight").t()); };
  auto act = [&](const torch::Tensor& g) {
    if (s.act == "gelu") return 0.5 * g * (1.0 + torch::erf(g / std::sqrt(2.0)));
    return 0.5 * g * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g.pow(3))));
  };
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64)) *
           std::sqrt(double(s.hidden));
  auto idx = torch::arange(T, torch::kInt64);
  auto causal = idx.unsqueeze(1) >= idx.unsqueeze(0);
  auto band = causal & (idx.unsqueeze(1) - idx.unsqueeze(0) < s.window);
  const double scale = s.sandwich() ? 1.0 / std::sqrt(s.qpas) : 1.0 / std::sqrt(double(hd));
  auto cap = [](const torch::Tensor& t, double c) { return c > 0 ? c * torch::tanh(t / c) : t; };
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto h = norm(x, p + "input_layernorm.weight");
    auto q = lin(h, p + "self_attn.q_proj").view({T, s.heads, hd});
    auto k = lin(h, p + "self_attn.k_proj").view({T, s.kv_heads, hd});
    auto v = lin(h, p + "self_attn.v_proj").view({T, s.kv_heads, hd});
    if (s.gemma3) {
      q = norm(q, p + "self_attn.q_norm.weight");
      k = norm(k, p + "self_attn.k_norm.weight");
    }
    const auto& cs = s.sliding(i) ? local : global;
    q = rope(q, cs);
    k = rope(k, cs).repeat_interleave(G, 1);
    v = v.repeat_interleave(G, 1);
    auto sc = cap(torch::einsum("qhd,khd->hqk", {q, k}) * scale, s.attn_cap);
    sc = sc.masked_fill(~(s.sliding(i) ? band : causal), -std::numeric_limits<double>::infinity());
    auto a = lin(torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), v}).reshape({T, s.heads * hd}),
                 p + "self_attn.o_proj");
    if (s.sandwich()) {
      x = x + norm(a, p + "post_attention_layernorm.weight");
      h = norm(x, p + "pre_feedforward_layernorm.weight");
      auto m = lin(act(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj");
      x = x + norm(m, p + "post_feedforward_layernorm.weight");
    } else {
      x = x + a;
      h = norm(x, p + "post_attention_layernorm.weight");
      x = x + lin(act(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj");
    }
  }
  x = norm(x, "model.norm.weight");
  return cap(torch::matmul(x, (s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight")).t()), s.final_cap);
}

void check_against_reference(const GemmaShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("gemma");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = gemma_weights(s, 11);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto stored = rounded(weights, torch::kFloat32);
  const auto tokens = some_tokens(23, s.vocab);
  const auto ref = gemma_reference(s, stored, tokens);
  ASSERT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
}

TEST(HfGemma, Gemma3LogitsEqualReference) {
  GemmaShape s;
  check_against_reference(s, "gemma3 pattern 2, window 5, query_pre_attn_scalar 20");
  s.rope_linear = 4;
  s.tied = false;
  s.pattern = 3;
  s.layers = 3;
  check_against_reference(s, "gemma3 linear rope on full layers, untied, pattern 3");
  s.window = 64;  // never binds, but the sliding layers keep their own RoPE
  check_against_reference(s, "gemma3 window = max_position_embeddings");
}

TEST(HfGemma, Gemma3VisionFolderLoadsItsTextModel) {
  // Gemma3ForConditionalGeneration (gemma-3-4b and larger): text_config + language-model
  // tensors under a prefix, vision tensors skipped; both prefixes of transformers' layouts.
  GemmaShape s;
  const auto weights = gemma_weights(s, 5);
  const auto tokens = some_tokens(17, s.vocab);
  const auto ref = gemma_reference(s, rounded(weights, torch::kFloat32), tokens);
  auto text = s.config();
  for (const char* k : {"architectures", "bos_token_id", "eos_token_id", "torch_dtype"}) text.erase(k);
  const nlohmann::json cfg = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                              {"model_type", "gemma3"},
                              {"text_config", text},
                              {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 8}}},
                              {"mm_tokens_per_image", 256},
                              {"eos_token_id", {1, 106}},
                              {"torch_dtype", "float32"}};
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    SCOPED_TRACE(prefix);
    TempDir dir("gemma3v");
    write_text(dir.path() + "/config.json", cfg.dump(2));
    NamedTensors w;
    for (const auto& [n, t] : weights) w.emplace_back(prefix + n.substr(std::string("model.").size()), t);
    w.emplace_back("vision_tower.vision_model.embeddings.patch_embedding.weight", torch::ones({8, 3, 2, 2}, torch::kFloat64));
    w.emplace_back("multi_modal_projector.mm_input_projection_weight", torch::ones({8, s.hidden}, torch::kFloat64));
    write_hf_weights(dir.path(), w, torch::kFloat32, 2);
    HfConfig c;
    auto m = load_hf_model(dir.path(), torch::kFloat64, c10::Device(c10::kCPU), &c);
    EXPECT_TRUE(c.multimodal_text);
    EXPECT_EQ(c.architecture, kGemma3Arch);
    EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{1, 106}));
    EXPECT_LT((full_logits(m, tokens) - ref).abs().max().item<double>(), 1e-9);
  }
  // Absent text_config keys take Gemma3TextConfig's defaults (the Hub's files omit them).
  auto sparse = cfg;
  sparse["text_config"] = {{"hidden_size", 2560}, {"intermediate_size", 10240}, {"model_type", "gemma3_text"},
                           {"num_hidden_layers", 34}, {"sliding_window", 1024},
                           {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}}};
  auto c = HfConfig::from_json(sparse, "config.json");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.full_attention_interval, 6);
  auto no_text = cfg;
  no_text.erase("text_config");
  expect_input_error([&] { HfConfig::from_json(no_text, "config.json"); }, {"text_config"});
  // A missing language-model tensor is named as stored.
  TempDir dir("gemma3v-missing");
  write_text(dir.path() + "/config.json", cfg.dump(2));
  NamedTensors w;
  for (const auto& [n, t] : weights)
    if (n != "model.layers.0.self_attn.k_norm.weight") w.emplace_back("language_model." + n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); },
                     {"model.layers.0.self_attn.k_norm.weight", "language_model.model.layers.0.self_attn.k_norm.weight"});
}

TEST(HfGemma, Gemma2LogitsEqualReference) {
  GemmaShape s;
  s.gemma3 = false;
  s.gemma2 = true;
  s.attn_cap = 1.5;  // binding: the scores reach several units
  s.final_cap = 2.0;
  check_against_reference(s, "gemma2 soft-capped, window 5 on layers 0 and 2");
  s.attn_cap = s.final_cap = 0;
  s.tied = false;
  check_against_reference(s, "gemma2 without soft-capping, untied");
  // Gemma 3 with soft-capping set (Gemma3TextConfig allows it; transformers applies it).
  GemmaShape g3;
  g3.attn_cap = 2.5;
  g3.final_cap = 3.0;
  check_against_reference(g3, "gemma3 soft-capped");
}

TEST(HfGemma, GemmaLogitsEqualReference) {
  GemmaShape s;
  s.gemma3 = false;
  s.layers = 2;
  s.kv_heads = 1;
  check_against_reference(s, "gemma tanh GELU, MQA");
  s.act = "gelu";
  s.tied = false;
  check_against_reference(s, "gemma exact GELU, untied");
}

TEST(HfGemma, ConfigDefaultsAndLayerTypes) {
  GemmaShape s;
  auto j = s.config();
  for (const char* k : {"num_key_value_heads", "head_dim", "rope_theta", "rope_local_base_freq", "query_pre_attn_scalar",
                        "sliding_window", "sliding_window_pattern", "tie_word_embeddings", "rms_norm_eps",
                        "hidden_activation"})
    j.erase(k);
  j["max_position_embeddings"] = 32768;
  j["num_hidden_layers"] = 26;
  auto c = HfConfig::from_json(j, "config.json");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 10000.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.full_attention_interval, 6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.activation, "gelu_pytorch_tanh");  // not hidden_act's "gelu"
  EXPECT_TRUE(c.sandwich_norm && c.qk_norm && c.norm_offset && c.scale_embeddings);
  const auto d = to_dense_config(c);
  for (int64_t i = 0; i < 26; ++i)
    EXPECT_EQ(d.layer_attention(i).kind == baselines::AttentionKind::Full, i == 5 || i == 11 || i == 17 || i == 23)
        << "layer " << i;
  EXPECT_TRUE(d.local_rope(0));
  EXPECT_FALSE(d.local_rope(5));
  // Parameters count the sandwich norms: 4 d per layer besides q/k norms (2 hd).
  const int64_t hd = 256, dm = 32, F = 40, V = 61, H = 4, Hkv = 4;
  EXPECT_EQ(parameter_count(c), V * dm + dm + 26 * (dm * H * hd + 2 * dm * Hkv * hd + H * hd * dm + 3 * dm * F + 4 * dm + 2 * hd));

  // layer_types decides over the pattern; the same interleaving written out.
  auto lt = s.config();
  lt.erase("sliding_window_pattern");
  lt["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention", "sliding_attention"};
  auto c3 = HfConfig::from_json(lt, "config.json");
  EXPECT_EQ(c3.full_attention_interval, 3);
  EXPECT_EQ(c3.sliding_window, 5);
  lt["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  expect_input_error([&] { HfConfig::from_json(lt, "config.json"); }, {"layer_types[2]", "every P-th", "P = 2"});
  // Full layers first, then sliding ones, still reads as before.
  lt["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"};
  auto cf = HfConfig::from_json(lt, "config.json");
  EXPECT_EQ(cf.full_attention_interval, 0);
  EXPECT_EQ(cf.full_attention_layers, 1);

  // transformers 5: one RoPE object per layer type.
  auto rp = s.config();
  rp.erase("rope_theta");
  rp.erase("rope_local_base_freq");
  rp.erase("rope_scaling");
  rp["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  auto c5 = HfConfig::from_json(rp, "config.json");
  EXPECT_EQ(c5.rope_theta, 1e6);
  EXPECT_EQ(c5.rope_scaling.type, "linear");
  EXPECT_EQ(c5.rope_local_theta, 10000.0);
  rp["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_input_error([&] { HfConfig::from_json(rp, "config.json"); }, {"rope_parameters.sliding_attention", "unscaled"});
}

TEST(HfGemma, RefusedFeatures) {
  GemmaShape s;
  auto soft = s.config();
  soft["final_logit_softcapping"] = 0.0;
  expect_input_error([&] { HfConfig::from_json(soft, "config.json"); }, {"final_logit_softcapping", "positive cap or null"});
  soft = s.config();
  soft["attn_logit_softcapping"] = -50.0;
  expect_input_error([&] { HfConfig::from_json(soft, "config.json"); }, {"attn_logit_softcapping", "-50"});
  // Gemma 2's defaults: soft-capping 50 / 30, layers 0, 2, ... sliding within 4096.
  auto g2 = s.config();
  g2["architectures"] = {"Gemma2ForCausalLM"};
  g2["model_type"] = "gemma2";
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping", "sliding_window", "sliding_window_pattern",
                        "query_pre_attn_scalar", "rope_local_base_freq", "rope_theta"})
    g2.erase(k);
  g2["max_position_embeddings"] = 8192;
  auto c2 = HfConfig::from_json(g2, "config.json");
  EXPECT_EQ(c2.attn_logit_softcapping, 50.0);
  EXPECT_EQ(c2.final_logit_softcapping, 30.0);
  EXPECT_EQ(c2.sliding_window, 4096);
  EXPECT_EQ(c2.full_attention_interval, 2);
  EXPECT_EQ(c2.rope_theta, 10000.0);
  EXPECT_EQ(c2.rope_local_theta, 0.0);
  EXPECT_FALSE(c2.qk_norm);
  EXPECT_TRUE(c2.sandwich_norm);
  g2["sliding_window"] = nullptr;
  expect_input_error([&] { HfConfig::from_json(g2, "config.json"); }, {"sliding_window", "Gemma 2's sliding layers"});
  g2["sliding_window"] = 4096;
  g2.erase("num_key_value_heads");  // Gemma2Config's default (current transformers) is 4
  EXPECT_EQ(HfConfig::from_json(g2, "config.json").num_key_value_heads, 4);
  g2["num_attention_heads"] = 6;
  g2["hidden_size"] = 36;
  expect_input_error([&] { HfConfig::from_json(g2, "config.json"); }, {"num_key_value_heads", "Gemma2Config's default is 4"});
  auto relu = s.config();
  relu["hidden_activation"] = "relu";
  expect_input_error([&] { HfConfig::from_json(relu, "config.json"); }, {"hidden_activation", "relu"});
  relu["hidden_activation"] = nullptr;  // Gemma 1 falls back to the tanh GELU; Gemma 2/3 fail in transformers
  expect_input_error([&] { HfConfig::from_json(relu, "config.json"); }, {"hidden_activation", "null"});
  relu["architectures"] = {"GemmaForCausalLM"};
  relu["model_type"] = "gemma";
  EXPECT_EQ(HfConfig::from_json(relu, "config.json").activation, "gelu_pytorch_tanh");
  auto null_window = s.config();  // sliding layers (pattern 2) without a window: transformers fails
  null_window["sliding_window"] = nullptr;
  expect_input_error([&] { HfConfig::from_json(null_window, "config.json"); }, {"sliding_window", "null", "need a window"});
  null_window["sliding_window_pattern"] = 1;  // every layer full: no window needed
  EXPECT_EQ(HfConfig::from_json(null_window, "config.json").sliding_window, 0);
  auto bias = s.config();
  bias["attention_bias"] = true;
  expect_input_error([&] { HfConfig::from_json(bias, "config.json"); }, {"attention_bias"});

  // A Gemma 3 folder without its post-feed-forward norm names the tensor.
  TempDir dir("gemma");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  NamedTensors w;
  for (auto& [n, t] : gemma_weights(s, 3))
    if (n != "model.layers.1.post_feedforward_layernorm.weight") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.layers.1.post_feedforward_layernorm.weight", "missing"});

  // Export as a Llama-family architecture names the Gemma one that fits.
  write_hf_weights(dir.path(), gemma_weights(s, 3), torch::kFloat32);
  auto m = load_hf_model(dir.path());
  expect_input_error([&] { from_dense_config(m->config(), kQwen2Arch, "float32"); },
                     {"Gemma-layout", "export as Gemma3ForCausalLM"});
}

/// Exports the folder of `s` (loaded) with the default architecture: config.json names
/// `arch`, the exported folder computes the float64 reference of the source weights, and
/// the stored norm weights are the source's offsets w (not 1 + w).
void check_export(const GemmaShape& s, const std::string& arch, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("gemma-export");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = gemma_weights(s, 11);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  ExportOptions eo;
  eo.architecture = default_architecture(m->config());
  EXPECT_EQ(eo.architecture, arch);
  eo.derived_from = dir.path();
  const std::string out = dir.path() + "/exported";
  export_hf(*m, nullptr, out, eo);
  const auto written = nlohmann::json::parse(read_text(out + "/config.json"));
  EXPECT_EQ(written["architectures"], nlohmann::json::array({arch}));
  // The exported folder read as transformers reads it (its query_pre_attn_scalar the
  // source's: the loader's fold is divided out of the queries' weights again) ...
  if (s.sandwich()) EXPECT_EQ(written.at("query_pre_attn_scalar").get<double>(), s.qpas);
  const auto exported = load_tensors(out + "/model.safetensors");
  NamedTensors exported64;
  for (const auto& [name, t] : exported) exported64.emplace_back(name, t.to(torch::kFloat64));
  const auto tokens = some_tokens(23, s.vocab);
  const auto ref = gemma_reference(s, exported64, tokens);
  expect_folder_matches_reference(out, tokens, ref);
  // ... is the source's function, up to float32 rounding of the folded weights ...
  const auto stored = rounded(weights, torch::kFloat32);
  EXPECT_LT((ref - gemma_reference(s, stored, tokens)).abs().max().item<double>(), 1e-5);
  // ... and its tensors are the source's: norms stored as the offset w (1 + w rounded to
  // float32 by the model, then - 1), the queries unfolded.
  std::map<std::string, torch::Tensor> source(stored.begin(), stored.end());
  int64_t norms = 0;
  for (const auto& [name, t] : exported) {
    const double scale = source.at(name).abs().max().item<double>();
    EXPECT_LT((t.to(torch::kFloat64) - source.at(name)).abs().max().item<double>(), 1e-6 * std::max(1.0, scale)) << name;
    if (name.find("layernorm") != std::string::npos || name == "model.norm.weight") ++norms;
  }
  EXPECT_EQ(norms, s.layers * (s.sandwich() ? 4 : 2) + 1);
  EXPECT_EQ(exported.size(), weights.size());
}

TEST(HfGemma, ExportWritesEachGemmaArchitecture) {
  GemmaShape s;  // Gemma 3: query_pre_attn_scalar 20 (folded into q_norm when loaded), pattern 2
  s.rope_linear = 4;
  check_export(s, kGemma3Arch, "gemma3, linear RoPE on the full layers");
  s.window = 64;  // never binds; the sliding layers keep their own RoPE base
  check_export(s, kGemma3Arch, "gemma3, window = max_position_embeddings");
  GemmaShape g2;
  g2.gemma3 = false;
  g2.gemma2 = true;
  g2.attn_cap = 1.5;
  g2.final_cap = 2.0;
  g2.tied = false;
  check_export(g2, kGemma2Arch, "gemma2 soft-capped (query_pre_attn_scalar 20 folded into q_proj), untied");
  GemmaShape g1;
  g1.gemma3 = false;
  g1.layers = 2;
  g1.act = "gelu";
  check_export(g1, kGemmaArch, "gemma exact GELU");

  // Layouts an architecture cannot hold are refused, naming what differs.
  auto c = to_dense_config(HfConfig::from_json(GemmaShape().config(), "config.json"));
  expect_input_error([&] { from_dense_config(c, kGemma2Arch, "float32"); }, {"qk_norm = true", "Gemma2ForCausalLM"});
  expect_input_error([&] { from_dense_config(c, kGemmaArch, "float32"); }, {"sandwich_norm = true", "GemmaForCausalLM"});
  auto c2 = to_dense_config(HfConfig::from_json(g2.config(), "config.json"));
  c2.full_attention_interval = 3;
  expect_input_error([&] { from_dense_config(c2, kGemma2Arch, "float32"); }, {"full_attention_interval = 3", "0, 2, 4"});
  auto flat = c;
  flat.scale_embeddings = false;
  expect_input_error([&] { from_dense_config(flat, kGemma3Arch, "float32"); }, {"scale_embeddings = false"});
  auto scaled_local = c;  // sliding layers on the full layers' scaled RoPE: not Gemma 3's
  scaled_local.rope_local_theta = 0;
  scaled_local.rope_scaling.type = "linear";
  scaled_local.rope_scaling.factor = 2;
  expect_input_error([&] { from_dense_config(scaled_local, kGemma3Arch, "float32"); }, {"unscaled RoPE"});
}

}  // namespace
}  // namespace lol::hf::test
