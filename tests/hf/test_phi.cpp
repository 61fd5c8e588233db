// Phi-1 / Phi-1.5 / Phi-2 (PhiForCausalLM, model_type "phi") folders: config.json parsing
// (PhiConfig's names and defaults, refusals), the parameter count of phi-2 (transformers'
// num_parameters: 2,779,683,840), the loaded model's logits (full forward and cached
// decoding) against a float64 reference written here from Phi's equations, and export back
// to the same folder:
//   n = input_layernorm(x); y = x + dense(attn(n)) + fc2(gelu(fc1(n)))
// with LayerNorms (weight and bias), q/k/v_proj and dense with biases, grouped-query
// attention, rotate-half RoPE on the leading int(hd partial_rotary_factor) dimensions,
// final_layernorm and lm_head with a bias.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct PhiShape {
  int64_t vocab = 57, hidden = 40, layers = 3, heads = 4, kv_heads = 4, inner = 56, positions = 64;
  double eps = 1e-5, rotary = 0.4, base = 10000.0;
  std::string act = "gelu_new";
  int64_t hd() const { return hidden / heads; }
  int64_t rot() const { return int64_t(double(hd()) * rotary); }
  nlohmann::json config() const {
    return {{"architectures", {"PhiForCausalLM"}},
            {"model_type", "phi"},
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
            {"qk_layernorm", false},
            {"resid_pdrop", 0.1},
            {"embd_pdrop", 0.0},
            {"attention_dropout", 0.0},
            {"tie_word_embeddings", false},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
  }
};

/// Random weights under Phi's names; LayerNorm weights near 1 with biases.
NamedTensors phi_weights(const PhiShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.inner, kv = s.kv_heads * s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "input_layernorm.bias", rnd({d}, 0.2, 0.3));
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({d, d}, 0.4));
    w.emplace_back(p + "self_attn.q_proj.bias", rnd({d}, 0.3));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({kv, d}, 0.4));
    w.emplace_back(p + "self_attn.k_proj.bias", rnd({kv}, 0.3));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({kv, d}, 0.4));
    w.emplace_back(p + "self_attn.v_proj.bias", rnd({kv}, 0.3));
    w.emplace_back(p + "self_attn.dense.weight", rnd({d, d}, 0.2));
    w.emplace_back(p + "self_attn.dense.bias", rnd({d}, 0.2));
    w.emplace_back(p + "mlp.fc1.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.fc1.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.fc2.weight", rnd({d, F}, 0.2));
    w.emplace_back(p + "mlp.fc2.bias", rnd({d}, 0.2));
  }
  w.emplace_back("model.final_layernorm.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("model.final_layernorm.bias", rnd({d}, 0.2));
  w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.5));
  w.emplace_back("lm_head.bias", rnd({s.vocab}, 1.0));
  return w;
}

/// transformers' PhiForCausalLM forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor phi_reference(const PhiShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), H = s.heads, Hkv = s.kv_heads, hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) {
    return torch::matmul(x, w.at(n + ".weight").t()) + w.at(n + ".bias");
  };
  const ReferenceRope rope(T, hd, s.rot(), s.base);
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto n = ln(x, p + "input_layernorm");  // one norm for both sublayers
    auto o = reference_causal_attention(rope(lin(n, p + "self_attn.q_proj").view({T, H, hd})),
                                        rope(lin(n, p + "self_attn.k_proj").view({T, Hkv, hd})),
                                        lin(n, p + "self_attn.v_proj").view({T, Hkv, hd}));
    x = x + lin(o, p + "self_attn.dense") + lin(reference_gelu(lin(n, p + "mlp.fc1"), s.act == "gelu"), p + "mlp.fc2");
  }
  return lin(ln(x, "model.final_layernorm"), "lm_head");
}

TEST(HfPhi, LogitsEqualReference) {
  for (bool gqa : {false, true}) {
    PhiShape s;
    if (gqa) {
      s.kv_heads = 2;
      s.act = "gelu";
      s.rotary = 0.8;  // (8 of head_dim 10)
      s.base = 700.0;
    }
    SCOPED_TRACE(gqa ? "2 kv heads, exact GELU, rotary 0.8" : "phi-2 layout: rotary 0.4, tanh GELU");
    TempDir dir("phi");
    write_text(dir.path() + "/config.json", s.config().dump(2));
    const auto weights = phi_weights(s, 5);
    write_hf_weights(dir.path(), weights, torch::kFloat32);
    const auto tokens = some_tokens(29, s.vocab);
    const auto ref = phi_reference(s, rounded(weights, torch::kFloat32), tokens);
    EXPECT_GT(ref.std().item<double>(), 0.3);
    expect_folder_matches_reference(dir.path(), tokens, ref);
  }
}

TEST(HfPhi, ConfigDefaultsParameterCountAndRefusals) {
  // phi-2's config.json (the Hub's, transformers' native layout).
  const nlohmann::json j = {{"architectures", {"PhiForCausalLM"}}, {"attention_dropout", 0.0}, {"bos_token_id", 50256},
                            {"embd_pdrop", 0.0}, {"eos_token_id", 50256}, {"hidden_act", "gelu_new"},
                            {"hidden_size", 2560}, {"initializer_range", 0.02}, {"intermediate_size", 10240},
                            {"layer_norm_eps", 1e-05}, {"max_position_embeddings", 2048}, {"model_type", "phi"},
                            {"num_attention_heads", 32}, {"num_hidden_layers", 32}, {"num_key_value_heads", 32},
                            {"partial_rotary_factor", 0.4}, {"qk_layernorm", false}, {"resid_pdrop", 0.1},
                            {"rope_scaling", nullptr}, {"rope_theta", 10000.0}, {"tie_word_embeddings", false},
                            {"torch_dtype", "float16"}, {"transformers_version", "4.37.0"}, {"use_cache", true},
                            {"vocab_size", 51200}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_phi());
  EXPECT_EQ(c.head_dim, 80);
  EXPECT_EQ(c.rotary_dim(), 32);
  EXPECT_EQ(c.activation, "gelu_pytorch_tanh");
  EXPECT_EQ(parameter_count(c), 2779683840LL);  // transformers: PhiForCausalLM(phi-2).num_parameters()
  const auto dc = to_dense_config(c);
  EXPECT_TRUE(dc.parallel_residual && dc.shared_input_norm && dc.lm_head_bias && dc.qkv_bias && dc.o_bias);
  EXPECT_EQ(baselines::DenseConfig::from_json(dc.to_json(), "x").to_json(), dc.to_json());
  EXPECT_EQ(default_architecture(dc), kPhiArch);
  const auto back = HfConfig::from_json(nlohmann::json::parse(c.to_json().dump()), "written");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  EXPECT_EQ(back.to_json().dump(), c.to_json().dump());  // (fuzz_configs' round-trip property)
  // PhiConfig's defaults: partial_rotary_factor 0.5, base 10000, kv heads = heads, bos 1 / eos 2.
  auto minimal = j;
  for (const char* k : {"partial_rotary_factor", "rope_theta", "num_key_value_heads", "hidden_act", "layer_norm_eps",
                        "bos_token_id", "eos_token_id", "qk_layernorm", "tie_word_embeddings", "rope_scaling"})
    minimal.erase(k);
  const auto m = HfConfig::from_json(minimal, "config.json");
  EXPECT_EQ(m.rotary_dim(), 40);
  EXPECT_EQ(m.num_key_value_heads, 32);
  EXPECT_EQ(m.eos_token_id, std::vector<int64_t>{2});
  auto v5 = minimal;  // transformers 5: the RoPE settings in rope_parameters
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.4}};
  EXPECT_EQ(HfConfig::from_json(v5, "config.json").rotary_dim(), 32);

  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  refused(set("qk_layernorm", true), {"qk_layernorm", "not supported"});
  refused(set("tie_word_embeddings", true), {"tie_word_embeddings", "not supported"});
  refused(set("partial_rotary_factor", 0.3125), {"partial_rotary_factor", "even"});  // int(80 * 0.3125) = 25
  refused(set("num_key_value_heads", 5), {"num_key_value_heads", "divisor"});
  refused(set("model_type", "phi-msft"), {"model_type", "phi-msft"});
  refused(set("hidden_act", "relu"), {"hidden_act", "relu"});
}

TEST(HfPhi, FoldersRefusedByNameAndExportedBack) {
  PhiShape s;
  s.kv_heads = 2;
  TempDir dir("phi-folder");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = phi_weights(s, 3);
  NamedTensors w;
  for (auto& [n, t] : weights)
    if (n != "lm_head.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"lm_head.bias", "missing"});
  auto extra = weights;
  extra.emplace_back("model.layers.0.post_attention_layernorm.weight", torch::ones({40}, torch::kFloat64));
  write_hf_weights(dir.path(), extra, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"post_attention_layernorm", "unexpected"});
  auto llama_names = weights;  // the dense model's own names are not Phi's
  for (auto& [n, t] : llama_names)
    if (n == "model.final_layernorm.weight") n = "model.norm.weight";
  write_hf_weights(dir.path(), llama_names, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.norm.weight", "unexpected"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  expect_input_error([&] { from_dense_config(m->config(), kGptNeoXArch, "float32"); },
                     {"GPTNeoXForCausalLM", "export as PhiForCausalLM"});
  expect_input_error([&] { from_dense_config(m->config(), kLlamaArch, "float32"); }, {"Phi's", "layout", "--arch phi"});
  const std::string out = dir.path() + "/exported";
  const auto stored = rounded(weights, torch::kFloat32);
  expect_export_writes_source_back(m, kPhiArch, out, s.config(),
                                   {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                    "num_key_value_heads", "intermediate_size", "max_position_embeddings",
                                    "partial_rotary_factor", "rope_theta", "layer_norm_eps", "hidden_act",
                                    "tie_word_embeddings"},
                                   stored);
  const auto tokens = some_tokens(29, s.vocab);
  expect_folder_matches_reference(out, tokens, phi_reference(s, stored, tokens));

  // A model of Phi's blocks trained without biases exports with zero biases (the same
  // function); tied embeddings are refused, naming the field.
  auto bare = m->config();
  bare.qkv_bias = bare.o_bias = bare.mlp_bias = bare.lm_head_bias = false;
  auto unbiased = random_dense(bare, 7, torch::kFloat32);
  const std::string bare_out = dir.path() + "/bare";
  ExportOptions eo;
  eo.architecture = default_architecture(bare);
  EXPECT_EQ(eo.architecture, kPhiArch);
  export_hf(*unbiased, nullptr, bare_out, eo);
  const auto written_list = load_tensors(bare_out + "/model.safetensors");
  const std::map<std::string, torch::Tensor> written(written_list.begin(), written_list.end());
  ASSERT_TRUE(written.count("lm_head.bias") && written.count("model.layers.2.mlp.fc1.bias"));
  EXPECT_EQ(written.at("model.layers.2.self_attn.k_proj.bias").size(0), 2 * s.hd());
  EXPECT_EQ(written.at("lm_head.bias").abs().max().item<double>(), 0.0);
  auto reloaded = load_hf_model(bare_out, torch::kFloat32);  // (the float32 weights exactly, and zeros)
  const auto want = full_logits(unbiased, tokens);
  EXPECT_GT(want.abs().max().item<double>(), 1.0);
  EXPECT_LT((full_logits(reloaded, tokens) - want).abs().max().item<double>(), 1e-4);
  auto tied = bare;
  tied.tie_word_embeddings = true;
  expect_input_error([&] { from_dense_config(tied, kPhiArch, "float32"); }, {"tie_word_embeddings true", "PhiForCausalLM"});
}

}  // namespace
}  // namespace lol::hf::test
