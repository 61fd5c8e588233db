// StableLM (StableLmForCausalLM, model_type "stablelm": stablelm-2-1_6b, stablelm-3b-4e1t)
// folders: config.json parsing (StableLmConfig's names and defaults, refusals), the
// parameter count of stablelm-2-1_6b (transformers' num_parameters: 1,644,515,328), the
// loaded model's logits (full forward and cached decoding) against a float64 reference
// written here from StableLM's equations, and export back to the same folder:
//   sequential: h = x + o_proj(attn(ln1 x)); y = h + down(act(gate(ln2 h)) * up(ln2 h))
//   parallel:   n = ln1 x; y = x + o_proj(attn(n)) + down(act(gate n) * up n)
// with LayerNorms (weight and bias), grouped-query attention, q/k/v biases with
// use_qkv_bias, and rotate-half RoPE on the leading int(hd partial_rotary_factor) dims.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct StableLmShape {
  int64_t vocab = 59, hidden = 32, layers = 3, heads = 4, kv_heads = 2, inner = 48, positions = 64;
  double eps = 1e-5, rotary = 0.25, base = 10000.0;
  std::string act = "silu";
  bool qkv_bias = true, parallel = false, tied = false;
  int64_t hd() const { return hidden / heads; }
  int64_t rot() const { return int64_t(double(hd()) * rotary); }
  nlohmann::json config() const {
    return {{"architectures", {"StableLmForCausalLM"}},
            {"model_type", "stablelm"},
            {"vocab_size", vocab},
            {"hidden_size", hidden},
            {"num_hidden_layers", layers},
            {"num_attention_heads", heads},
            {"num_key_value_heads", kv_heads},
            {"intermediate_size", inner},
            {"max_position_embeddings", positions},
            {"hidden_act", act},
            {"layer_norm_eps", eps},
            {"partial_rotary_factor", rotary},
            {"rope_theta", base},
            {"rope_scaling", nullptr},
            {"use_qkv_bias", qkv_bias},
            {"use_parallel_residual", parallel},
            {"qk_layernorm", false},
            {"hidden_dropout", 0.0},
            {"attention_dropout", 0.0},
            {"tie_word_embeddings", tied},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
  }
};

/// Random weights under StableLM's names (Llama's, LayerNorm biases added).
NamedTensors stablelm_weights(const StableLmShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.inner, kv = s.kv_heads * s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "input_layernorm.bias", rnd({d}, 0.2, 0.3));
    for (const auto& [proj, rows] : {std::pair<const char*, int64_t>{"q_proj", d}, {"k_proj", kv}, {"v_proj", kv}}) {
      w.emplace_back(p + "self_attn." + proj + ".weight", rnd({rows, d}, 0.4));
      if (s.qkv_bias) w.emplace_back(p + "self_attn." + proj + ".bias", rnd({rows}, 0.3));
    }
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({d, d}, 0.2));
    if (!s.parallel) {
      w.emplace_back(p + "post_attention_layernorm.weight", rnd({d}, 0.2, 1.0));
      w.emplace_back(p + "post_attention_layernorm.bias", rnd({d}, 0.2, -0.3));
    }
    w.emplace_back(p + "mlp.gate_proj.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.up_proj.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.down_proj.weight", rnd({d, F}, 0.2));
  }
  w.emplace_back("model.norm.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("model.norm.bias", rnd({d}, 0.2));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.5));
  return w;
}

/// transformers' StableLmForCausalLM forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor stablelm_reference(const StableLmShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), H = s.heads, Hkv = s.kv_heads, hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return named_linear(w, x, n); };
  auto act = [&](const torch::Tensor& g) { return s.act == "gelu" ? reference_gelu(g, true) : g * torch::sigmoid(g); };
  const ReferenceRope rope(T, hd, s.rot(), s.base);
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto n = ln(x, p + "input_layernorm");
    auto o = reference_causal_attention(rope(lin(n, p + "self_attn.q_proj").view({T, H, hd})),
                                        rope(lin(n, p + "self_attn.k_proj").view({T, Hkv, hd})),
                                        lin(n, p + "self_attn.v_proj").view({T, Hkv, hd}));
    auto a = lin(o, p + "self_attn.o_proj");
    auto mlp = [&](const torch::Tensor& m) {
      return lin(act(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj");
    };
    x = s.parallel ? x + a + mlp(n) : (x + a) + mlp(ln(x + a, p + "post_attention_layernorm"));
  }
  return torch::matmul(ln(x, "model.norm"), w.at(s.tied ? "model.embed_tokens.weight" : "lm_head.weight").t());
}

void check_against_reference(const StableLmShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("stablelm");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = stablelm_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto ref = stablelm_reference(s, rounded(weights, torch::kFloat32), tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
}

TEST(HfStableLm, LogitsEqualReference) {
  StableLmShape s;
  check_against_reference(s, "stablelm-2 layout: sequential, q/k/v biases, GQA, rotary 0.25");
  s.parallel = true;
  s.qkv_bias = false;
  s.tied = true;
  s.act = "gelu";
  s.rotary = 0.5;
  s.base = 500.0;
  check_against_reference(s, "parallel with one input norm, no biases, tied, GeGLU, rotary 0.5");
}

TEST(HfStableLm, ConfigDefaultsParameterCountAndRefusals) {
  // stablelm-2-1_6b's config.json (the Hub's keys that matter).
  const nlohmann::json j = {{"architectures", {"StableLmForCausalLM"}}, {"bos_token_id", 100257},
                            {"eos_token_id", 100257}, {"hidden_act", "silu"}, {"hidden_size", 2048},
                            {"initializer_range", 0.02}, {"intermediate_size", 5632}, {"layer_norm_eps", 1e-05},
                            {"max_position_embeddings", 4096}, {"model_type", "stablelm"}, {"num_attention_heads", 32},
                            {"num_hidden_layers", 24}, {"num_key_value_heads", 32}, {"partial_rotary_factor", 0.25},
                            {"qk_layernorm", false}, {"rope_scaling", nullptr}, {"rope_theta", 10000},
                            {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}, {"use_cache", true},
                            {"use_parallel_residual", false}, {"use_qkv_bias", true}, {"vocab_size", 100352}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_stablelm());
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(parameter_count(c), 1644515328);  // transformers: StableLmForCausalLM(stablelm-2-1_6b).num_parameters()
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.norm, "layernorm");
  EXPECT_EQ(dc.mlp, "gated");
  EXPECT_FALSE(dc.o_bias || dc.mlp_bias || dc.parallel_residual || dc.lm_head_bias);
  EXPECT_EQ(default_architecture(dc), kStableLmArch);
  const auto back = HfConfig::from_json(nlohmann::json::parse(c.to_json().dump()), "written");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  EXPECT_EQ(back.to_json().dump(), c.to_json().dump());  // (fuzz_configs' round-trip property)
  auto minimal = j;  // StableLmConfig's defaults: kv heads 32, rotary 0.25, silu, no biases, sequential
  for (const char* k : {"num_key_value_heads", "partial_rotary_factor", "hidden_act", "use_qkv_bias",
                        "use_parallel_residual", "qk_layernorm", "rope_theta", "bos_token_id", "eos_token_id"})
    minimal.erase(k);
  const auto m = HfConfig::from_json(minimal, "config.json");
  EXPECT_EQ(m.num_key_value_heads, 32);
  EXPECT_EQ(m.rotary_dim(), 16);
  EXPECT_FALSE(m.qkv_bias || m.parallel_residual);
  EXPECT_EQ(m.eos_token_id, std::vector<int64_t>{0});
  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  refused(set("qk_layernorm", true), {"qk_layernorm", "not supported"});
  refused(set("num_key_value_heads", nullptr), {"num_key_value_heads", "null"});
  refused(set("num_key_value_heads", 5), {"num_key_value_heads", "divisor"});
  refused(set("hidden_act", "relu"), {"hidden_act", "relu"});
  refused(set("model_type", "stablelm_epoch"), {"model_type", "stablelm_epoch", "remote code"});
  refused(set("partial_rotary_factor", 0.3), {"partial_rotary_factor", "even"});  // int(64 * 0.3) = 19
  auto small_heads = minimal;
  small_heads["num_attention_heads"] = 8;
  refused(small_heads, {"num_key_value_heads", "default is 32"});
}

TEST(HfStableLm, FoldersRefusedByNameAndExportedBack) {
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "sequential");
    StableLmShape s;
    s.parallel = parallel;
    TempDir dir("stablelm-folder");
    write_text(dir.path() + "/config.json", s.config().dump(2));
    const auto weights = stablelm_weights(s, 3);
    NamedTensors w;
    for (auto& [n, t] : weights)
      if (n != "model.layers.1.input_layernorm.bias") w.emplace_back(n, t);
    write_hf_weights(dir.path(), w, torch::kFloat32);
    expect_input_error([&] { load_hf_model(dir.path()); }, {"model.layers.1.input_layernorm.bias", "missing"});
    if (parallel) {  // a parallel block has no post_attention_layernorm
      auto extra = weights;
      extra.emplace_back("model.layers.0.post_attention_layernorm.weight", torch::ones({32}, torch::kFloat64));
      write_hf_weights(dir.path(), extra, torch::kFloat32);
      expect_input_error([&] { load_hf_model(dir.path()); }, {"post_attention_layernorm", "unexpected"});
    }
    write_hf_weights(dir.path(), weights, torch::kFloat32);
    auto m = load_hf_model(dir.path());
    expect_input_error([&] { from_dense_config(m->config(), kGptNeoXArch, "float32"); },
                       {"GPTNeoXForCausalLM", "export as StableLmForCausalLM"});
    expect_input_error([&] { from_dense_config(m->config(), kLlamaArch, "float32"); }, {"StableLM's", "--arch stablelm"});
    const std::string out = dir.path() + "/exported";
    const auto stored = rounded(weights, torch::kFloat32);
    expect_export_writes_source_back(m, kStableLmArch, out, s.config(),
                                     {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "num_key_value_heads", "intermediate_size", "max_position_embeddings",
                                      "partial_rotary_factor", "rope_theta", "layer_norm_eps", "hidden_act",
                                      "use_qkv_bias", "use_parallel_residual", "tie_word_embeddings"},
                                     stored);
    const auto tokens = some_tokens(29, s.vocab);
    expect_folder_matches_reference(out, tokens, stablelm_reference(s, stored, tokens));
  }
}

}  // namespace
}  // namespace lol::hf::test
