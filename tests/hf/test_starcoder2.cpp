// StarCoder2 (Starcoder2ForCausalLM, model_type "starcoder2": bigcode/starcoder2-3b / -7b /
// -15b) folders: config.json parsing (Starcoder2Config's names and defaults, refusals), the
// parameter count of starcoder2-3b (the sum of its tensors' sizes, 3,030,371,328), the loaded
// model's logits (full forward and cached decoding) against a float64 reference written
// here from StarCoder2's equations, and export back to the same folder:
//   h = x + o_proj(attn(ln1 x)); y = h + c_proj(gelu(c_fc(ln2 h)))
// with LayerNorms (weight and bias), grouped-query attention within sliding_window tokens
// (key j visible from query i iff i - W < j <= i), rotate-half RoPE over whole heads, and
// biases on every projection (use_bias) or on none.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct Starcoder2Shape {
  int64_t vocab = 53, hidden = 32, layers = 3, heads = 4, kv = 2, inner = 48, positions = 64;
  int64_t window = 0;  ///< sliding_window (0: null)
  double eps = 1e-5, base = 10000.0;
  std::string act = "gelu_pytorch_tanh";
  bool bias = true, tied = true;
  int64_t hd() const { return hidden / heads; }
  nlohmann::json config() const {
    return {{"architectures", {"Starcoder2ForCausalLM"}},
            {"model_type", "starcoder2"},
            {"vocab_size", vocab},
            {"hidden_size", hidden},
            {"intermediate_size", inner},
            {"num_hidden_layers", layers},
            {"num_attention_heads", heads},
            {"num_key_value_heads", kv},
            {"max_position_embeddings", positions},
            {"rope_theta", base},
            {"rope_scaling", nullptr},
            {"sliding_window", window > 0 ? nlohmann::json(window) : nlohmann::json(nullptr)},
            {"norm_epsilon", eps},
            {"norm_type", "layer_norm"},
            {"mlp_type", "default"},
            {"hidden_act", act},
            {"use_bias", bias},
            {"tie_word_embeddings", tied},
            {"attention_dropout", 0.1},
            {"residual_dropout", 0.1},
            {"embedding_dropout", 0.1},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
  }
};

/// Random weights under StarCoder2's names; LayerNorm weights near 1 with biases.
NamedTensors starcoder2_weights(const Starcoder2Shape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.inner, kvd = s.kv * s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& n, int64_t out, int64_t in, double scale) {
      w.emplace_back(p + n + ".weight", rnd({out, in}, scale));
      if (s.bias) w.emplace_back(p + n + ".bias", rnd({out}, 0.3));
    };
    w.emplace_back(p + "input_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "input_layernorm.bias", rnd({d}, 0.2, 0.3));
    linear("self_attn.q_proj", d, d, 0.4);
    linear("self_attn.k_proj", kvd, d, 0.4);
    linear("self_attn.v_proj", kvd, d, 0.4);
    linear("self_attn.o_proj", d, d, 0.2);
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "post_attention_layernorm.bias", rnd({d}, 0.2, -0.3));
    linear("mlp.c_fc", F, d, 0.3);
    linear("mlp.c_proj", d, F, 0.2);
  }
  w.emplace_back("model.norm.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("model.norm.bias", rnd({d}, 0.2));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.5));
  return w;
}

/// transformers' Starcoder2ForCausalLM forward in float64: tokens [T] -> logits [T, vocab].
torch::Tensor starcoder2_reference(const Starcoder2Shape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), H = s.heads, hd = s.hd(), G = H / s.kv;
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return named_linear(w, x, n); };
  const ReferenceRope rope(T, hd, hd, s.base);
  // Causal attention within the window: key j from query i iff i - W < j <= i.
  auto allowed = torch::ones({T, T}, torch::kBool).tril();
  if (s.window > 0) allowed = allowed & torch::ones({T, T}, torch::kBool).triu(-(s.window - 1));
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const auto n = ln(x, p + "input_layernorm");
    auto q = rope(lin(n, p + "self_attn.q_proj").view({T, H, hd}));
    auto k = rope(lin(n, p + "self_attn.k_proj").view({T, s.kv, hd})).repeat_interleave(G, 1);
    auto v = lin(n, p + "self_attn.v_proj").view({T, s.kv, hd}).repeat_interleave(G, 1);
    auto sc = torch::einsum("qhd,khd->hqk", {q, k}) / std::sqrt(double(hd));
    sc = sc.masked_fill(~allowed, -std::numeric_limits<double>::infinity());
    auto o = torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), v}).reshape({T, H * hd});
    x = x + lin(o, p + "self_attn.o_proj");
    x = x + lin(reference_gelu(lin(ln(x, p + "post_attention_layernorm"), p + "mlp.c_fc"), s.act == "gelu"),
                p + "mlp.c_proj");
  }
  return torch::matmul(ln(x, "model.norm"), w.at(s.tied ? "model.embed_tokens.weight" : "lm_head.weight").t());
}

torch::Tensor check_against_reference(const Starcoder2Shape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("starcoder2");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = starcoder2_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto ref = starcoder2_reference(s, rounded(weights, torch::kFloat32), tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
  return ref;
}

TEST(HfStarcoder2, LogitsEqualReference) {
  Starcoder2Shape s;
  s.window = 7;  // (binds: 29 tokens)
  const auto windowed = check_against_reference(s, "sliding window 7, grouped-query, biases, tied, tanh GELU");
  Starcoder2Shape full = s;
  full.window = 0;
  const auto tokens = some_tokens(29, s.vocab);
  EXPECT_GT((starcoder2_reference(full, rounded(starcoder2_weights(s, 5), torch::kFloat32), tokens) - windowed)
                .abs()
                .max()
                .item<double>(),
            1e-2)
      << "the window binds";
  full.bias = false;
  full.tied = false;
  full.act = "gelu";
  full.base = 999999.4420358813;  // (starcoder2-3b's rope_theta)
  full.kv = 1;
  check_against_reference(full, "full attention, no biases, untied, exact GELU, one key/value head");
}

TEST(HfStarcoder2, ConfigDefaultsParameterCountAndRefusals) {
  // starcoder2-3b's config.json (the Hub's keys).
  const nlohmann::json j = {{"architectures", {"Starcoder2ForCausalLM"}}, {"attention_dropout", 0.1},
                            {"residual_dropout", 0.1}, {"embedding_dropout", 0.1}, {"bos_token_id", 0},
                            {"eos_token_id", 0}, {"hidden_act", "gelu_pytorch_tanh"}, {"hidden_size", 3072},
                            {"initializer_range", 0.018042}, {"intermediate_size", 12288},
                            {"max_position_embeddings", 16384}, {"mlp_type", "default"}, {"model_type", "starcoder2"},
                            {"norm_epsilon", 1e-05}, {"norm_type", "layer_norm"}, {"num_attention_heads", 24},
                            {"num_hidden_layers", 30}, {"num_key_value_heads", 2}, {"rope_theta", 999999.4420358813},
                            {"sliding_window", 4096}, {"torch_dtype", "bfloat16"}, {"transformers_version", "4.37.0.dev0"},
                            {"use_bias", true}, {"use_cache", true}, {"vocab_size", 49152}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_starcoder2());
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.full_attention_layers, 0);
  EXPECT_TRUE(c.qkv_bias && c.tie_word_embeddings && !c.parallel_residual);
  // 30 (2 (3072^2 + 3072) + 2 (256 * 3072 + 256) + 2 * 3072 * 12288 + 12288 + 3072 + 4 * 3072)
  // + 49152 * 3072 + 2 * 3072 (tied)
  EXPECT_EQ(parameter_count(c), 3030371328);
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.attention, "sliding");
  EXPECT_EQ(dc.window, 4096);
  EXPECT_TRUE(dc.qkv_bias && dc.o_bias && dc.mlp_bias);
  EXPECT_EQ(default_architecture(dc), kStarcoder2Arch);
  const auto back = HfConfig::from_json(nlohmann::json::parse(from_dense_config(dc, kStarcoder2Arch, "").to_json().dump()), "w");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  EXPECT_EQ(back.to_json().dump(), HfConfig::from_json(nlohmann::json::parse(back.to_json().dump()), "w").to_json().dump());

  // Starcoder2Config's defaults: 2 kv heads, biases, no window, tanh GELU, tied.
  auto minimal = j;
  for (const char* k : {"num_key_value_heads", "use_bias", "sliding_window", "hidden_act", "norm_epsilon", "rope_theta"})
    minimal.erase(k);
  const auto m = HfConfig::from_json(minimal, "config.json");
  EXPECT_EQ(m.num_key_value_heads, 2);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_EQ(m.activation, "gelu_pytorch_tanh");
  EXPECT_TRUE(m.qkv_bias);
  auto never_binds = j;
  never_binds["sliding_window"] = 16384;
  EXPECT_EQ(HfConfig::from_json(never_binds, "config.json").sliding_window, 0);

  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  refused(set("num_key_value_heads", nullptr), {"num_key_value_heads", "null"});
  refused(set("num_key_value_heads", 5), {"num_key_value_heads", "divisor"});
  refused(set("hidden_act", "relu"), {"hidden_act", "relu"});
  refused(set("partial_rotary_factor", 0.5), {"partial_rotary_factor", "whole heads"});
  refused(set("sliding_window", 0), {"sliding_window", "positive"});
  refused(set("layer_types", std::vector<std::string>(30, "full_attention")), {"layer_types[0]", "sliding_attention"});
  auto missing = minimal;
  missing.erase("intermediate_size");
  refused(missing, {"intermediate_size", "missing"});
}

// Bad folders name StarCoder2's tensors; the export of a loaded folder writes it back bit
// for bit (names, values, config keys), and layouts it cannot hold are refused.
TEST(HfStarcoder2, FoldersRefusedByNameAndExportedBack) {
  Starcoder2Shape s;
  s.window = 7;
  TempDir dir("starcoder2-folder");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = starcoder2_weights(s, 3);
  NamedTensors w;
  for (auto& [n, t] : weights)
    if (n != "model.layers.1.mlp.c_fc.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.layers.1.mlp.c_fc.bias", "missing"});
  auto llama_names = weights;
  llama_names.emplace_back("model.layers.0.mlp.up_proj.weight", torch::zeros({s.inner, s.hidden}, torch::kFloat64));
  write_hf_weights(dir.path(), llama_names, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.layers.0.mlp.up_proj.weight", "unexpected"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  const auto stored = rounded(weights, torch::kFloat32);
  expect_export_writes_source_back(m, kStarcoder2Arch, dir.path() + "/exported", s.config(),
                                   {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                    "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                                    "rope_theta", "sliding_window", "norm_epsilon", "hidden_act", "use_bias",
                                    "tie_word_embeddings"},
                                   stored);
  const auto tokens = some_tokens(29, s.vocab);
  expect_folder_matches_reference(dir.path() + "/exported", tokens, starcoder2_reference(s, stored, tokens));

  auto parallel = m->config();
  parallel.parallel_residual = true;
  expect_input_error([&] { from_dense_config(parallel, kStarcoder2Arch, "float32"); }, {"parallel_residual", "sequential"});
  auto some_bias = m->config();
  some_bias.o_bias = false;
  expect_input_error([&] { from_dense_config(some_bias, kStarcoder2Arch, "float32"); }, {"o_bias", "use_bias"});
  auto prelude = m->config();
  prelude.n_full_prelude = 1;
  expect_input_error([&] { from_dense_config(prelude, kStarcoder2Arch, "float32"); }, {"sliding", "every layer"});
  // Other architectures refuse the window (GPT-NeoX has none).
  expect_input_error([&] { from_dense_config(m->config(), kGptNeoXArch, "float32"); }, {"attention \"sliding\""});
}

}  // namespace
}  // namespace lol::hf::test
