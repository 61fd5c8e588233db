// OPT (OPTForCausalLM) folders: config.json parsing (OPTConfig's names and defaults,
// refusals of opt-350m's layout), the parameter count of facebook/opt-125m (transformers'
// num_parameters: 125,239,296), and the loaded model's logits (full forward and cached
// decoding) against a float64 reference written here from OPT's equations:
// x = embed_tokens[ids] + embed_positions[p + 2], h = x + out_proj(attn(self_attn_layer_norm(x)))
// with q = q_proj(.) head_dim^-1/2, y = h + fc2(relu(fc1(final_layer_norm(h)))), the final
// LayerNorm, logits = y embed_tokens^T.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct OptShape {
  int64_t vocab = 61, hidden = 32, layers = 3, heads = 4, positions = 48, ffn = 40;
  std::string act = "relu";
  bool bias = true;
  std::string prefix = "model.decoder.";  ///< "decoder.": OPTModel's state dict (older files)
  bool tied = true;
  bool stored_head = false;  ///< lm_head.weight stored too (a tied copy)
  nlohmann::json config() const {
    return {{"architectures", {"OPTForCausalLM"}},
            {"model_type", "opt"},
            {"vocab_size", vocab},
            {"hidden_size", hidden},
            {"ffn_dim", ffn},
            {"num_hidden_layers", layers},
            {"num_attention_heads", heads},
            {"max_position_embeddings", positions},
            {"word_embed_proj_dim", hidden},
            {"do_layer_norm_before", true},
            {"activation_function", act},
            {"enable_bias", bias},
            {"dropout", 0.1},
            {"attention_dropout", 0.0},
            {"pad_token_id", 1},
            {"bos_token_id", 2},
            {"eos_token_id", 2},
            {"torch_dtype", "float32"},
            {"tie_word_embeddings", tied}};
  }
};

/// Random weights under OPT's names; LayerNorm weights near 1 with biases. The position
/// table's first two rows (OPT's offset: padding positions) are random too unless
/// `zero_offset_rows` (what export writes back).
NamedTensors opt_weights(const OptShape& s, uint64_t seed, bool zero_offset_rows = false) {
  RandomDraw rnd(seed);
  const std::string pre = s.prefix;
  const int64_t d = s.hidden, F = s.ffn;
  NamedTensors w;
  w.emplace_back(pre + "embed_tokens.weight", rnd({s.vocab, d}, 0.3));
  auto pos = rnd({s.positions + 2, d}, 0.3);
  if (zero_offset_rows) pos.narrow(0, 0, 2).zero_();
  w.emplace_back(pre + "embed_positions.weight", pos);
  auto linear = [&](const std::string& n, int64_t out, int64_t in, double scale) {
    w.emplace_back(n + ".weight", rnd({out, in}, scale));
    if (s.bias) w.emplace_back(n + ".bias", rnd({out}, 0.2));
  };
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = pre + "layers." + std::to_string(i) + ".";
    linear(p + "self_attn.k_proj", d, d, 0.3);
    linear(p + "self_attn.v_proj", d, d, 0.3);
    linear(p + "self_attn.q_proj", d, d, 0.3);
    linear(p + "self_attn.out_proj", d, d, 0.2);
    w.emplace_back(p + "self_attn_layer_norm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "self_attn_layer_norm.bias", rnd({d}, 0.2, 0.5));
    linear(p + "fc1", F, d, 0.3);
    linear(p + "fc2", d, F, 0.2);
    w.emplace_back(p + "final_layer_norm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "final_layer_norm.bias", rnd({d}, 0.2, -0.5));
  }
  w.emplace_back(pre + "final_layer_norm.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back(pre + "final_layer_norm.bias", rnd({d}, 0.2));
  if (s.stored_head) w.emplace_back("lm_head.weight", w[0].second.clone());
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.3));
  return w;
}

/// transformers' OPTForCausalLM forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor opt_reference(const OptShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n.rfind(s.prefix, 0) == 0 ? n.substr(s.prefix.size()) : n] = t;
  const int64_t T = int64_t(tokens.size()), d = s.hidden, H = s.heads, hd = d / H;
  auto ln = [&](const torch::Tensor& x, const std::string& n) {
    auto mu = x.mean(-1, true);
    auto var = (x - mu).pow(2).mean(-1, true);
    return (x - mu) / torch::sqrt(var + 1e-5) * w.at(n + ".weight") + w.at(n + ".bias");
  };
  auto linear = [&](const torch::Tensor& x, const std::string& n) {
    auto y = torch::matmul(x, w.at(n + ".weight").t());
    return s.bias ? y + w.at(n + ".bias") : y;
  };
  auto act = [&](const torch::Tensor& g) { return s.act == "relu" ? torch::relu(g) : reference_gelu(g, true); };
  auto ids = torch::tensor(tokens, torch::kInt64);
  auto x = w.at("embed_tokens.weight").index_select(0, ids) + w.at("embed_positions.weight").narrow(0, 2, T);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    auto h = ln(x, p + "self_attn_layer_norm");
    // (OPT scales q_proj's output by head_dim^-1/2: the scores' scale, as the helper applies it)
    auto q = linear(h, p + "self_attn.q_proj").view({T, H, hd});
    auto k = linear(h, p + "self_attn.k_proj").view({T, H, hd});
    auto v = linear(h, p + "self_attn.v_proj").view({T, H, hd});
    x = x + linear(reference_causal_attention(q, k, v), p + "self_attn.out_proj");
    x = x + linear(act(linear(ln(x, p + "final_layer_norm"), p + "fc1")), p + "fc2");
  }
  return torch::matmul(ln(x, "final_layer_norm"), w.at(s.tied ? "embed_tokens.weight" : "lm_head.weight").t());
}

void check_against_reference(const OptShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("opt");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = opt_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto ref = opt_reference(s, rounded(weights, torch::kFloat32), tokens);
  ASSERT_GT(ref.std().item<double>(), 0.3);
  auto m = expect_folder_matches_reference(dir.path(), tokens, ref);
  // The offset matters: reading positions from row p (not p + 2) gives other logits.
  auto shifted = rounded(weights, torch::kFloat32);
  for (auto& [n, t] : shifted)
    if (n == s.prefix + "embed_positions.weight") t = torch::cat({t.narrow(0, 2, 2), t}, 0).narrow(0, 0, t.size(0));
  EXPECT_GT((opt_reference(s, shifted, tokens) - ref).abs().max().item<double>(), 1e-3);
}

TEST(HfOpt, LogitsEqualReference) {
  OptShape s;
  check_against_reference(s, "opt: ReLU, biases, model.decoder. names");
  s.prefix = "decoder.";  // OPTModel's state dict
  s.stored_head = true;
  s.act = "gelu";
  s.bias = false;
  check_against_reference(s, "decoder. names, stored tied lm_head, exact GELU, enable_bias false");
  s = OptShape();
  s.tied = false;
  check_against_reference(s, "untied lm_head");
}

TEST(HfOpt, ConfigDefaultsParameterCountAndRefusals) {
  // facebook/opt-125m's config.json (the keys that matter).
  nlohmann::json j = {{"architectures", {"OPTForCausalLM"}}, {"model_type", "opt"}, {"vocab_size", 50272},
                      {"hidden_size", 768}, {"ffn_dim", 3072}, {"num_hidden_layers", 12},
                      {"num_attention_heads", 12}, {"max_position_embeddings", 2048}, {"word_embed_proj_dim", 768},
                      {"do_layer_norm_before", true}, {"activation_function", "relu"}, {"pad_token_id", 1},
                      {"bos_token_id", 2}, {"eos_token_id", 2}, {"prefix", "</s>"}, {"torch_dtype", "float16"}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_opt());
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_TRUE(c.tie_word_embeddings && c.qkv_bias);
  EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{2});
  EXPECT_EQ(c.activation, "relu");
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  // 50272 768 + 2050 768 (OPT's 2 offset rows) + 12 (4 (768^2 + 768) + 2 (768 3072) + 3072 + 768
  // + 4 768) + 2 768: OPTForCausalLM("facebook/opt-125m").num_parameters()
  EXPECT_EQ(parameter_count(c), 125239296);
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.positions, "learned");
  EXPECT_EQ(dc.activation, "relu");
  EXPECT_EQ(dc.max_seq_len, 2048);
  EXPECT_EQ(baselines::DenseConfig::from_json(dc.to_json(), "x").to_json(), dc.to_json());
  EXPECT_EQ(default_architecture(dc), kOptArch);
  const auto back = HfConfig::from_json(nlohmann::json::parse(from_dense_config(dc, kOptArch, "").to_json().dump()), "w");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());

  auto refused = [&](const char* key, nlohmann::json v, std::vector<std::string> needles) {
    auto bad = j;
    bad[key] = v;
    needles.push_back(key);
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  refused("do_layer_norm_before", false, {"not supported", "opt-350m"});
  refused("word_embed_proj_dim", 512, {"not supported", "project_in"});
  refused("_remove_final_layer_norm", true, {"not supported"});
  refused("layer_norm_elementwise_affine", false, {"not supported"});
  refused("activation_function", "silu", {"relu"});
  refused("num_attention_heads", 7, {"hidden_size", "multiple of num_attention_heads"});
  refused("model_type", "gpt2", {"expected \"opt\""});
  auto missing = j;
  missing.erase("ffn_dim");
  expect_input_error([&] { HfConfig::from_json(missing, "config.json"); }, {"ffn_dim", "missing"});

  // A folder missing a tensor names it by OPT's name; a position table without the offset
  // rows names the expected shape.
  OptShape s;
  TempDir dir("opt-bad");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  NamedTensors w;
  for (auto& [n, t] : opt_weights(s, 3))
    if (n != "model.decoder.layers.1.fc1.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.decoder.layers.1.fc1.bias", "missing"});
  w = opt_weights(s, 3);
  for (auto& [n, t] : w)
    if (n == "model.decoder.embed_positions.weight") t = t.narrow(0, 2, s.positions).contiguous();
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"embed_positions.weight", "[50, 32]", "offset"});
  w.clear();
  for (auto& [n, t] : opt_weights(s, 3))
    if (n != "model.decoder.embed_positions.weight") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.decoder.embed_positions.weight", "missing", "[50, 32]"});
  w = opt_weights(s, 3);
  for (auto& [n, t] : w)
    if (n == "model.decoder.layers.0.fc1.weight") t = t.t().contiguous();
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"layers.0.fc1.weight", "ffn_dim, hidden_size"});

  // OPTForCausalLM holds OPT's layout only.
  write_hf_weights(dir.path(), opt_weights(s, 3), torch::kFloat32);
  auto m = load_hf_model(dir.path());
  auto gqa = m->config();
  gqa.n_kv_heads = 2;
  expect_input_error([&] { from_dense_config(gqa, kOptArch, "float32"); }, {"n_kv_heads = 2", "OPTForCausalLM"});
  auto mixed = m->config();
  mixed.mlp_bias = false;
  expect_input_error([&] { from_dense_config(mixed, kOptArch, "float32"); }, {"enable_bias"});
  auto silu = m->config();
  silu.activation = "silu";
  expect_input_error([&] { from_dense_config(silu, kOptArch, "float32"); }, {"activation \"silu\""});
  auto eps = m->config();  // (OPTConfig has no epsilon: the folder would be read with 1e-5)
  eps.norm_eps = 1e-3;
  expect_input_error([&] { from_dense_config(eps, kOptArch, "float32"); }, {"norm_eps 0.001", "1e-5"});
  expect_input_error([&] { from_dense_config(m->config(), kGpt2Arch, "float32"); }, {"activation \"relu\""});
  // ReLU is implemented for OPT's ungated MLP: a gated one (ReGLU) is no export's.
  auto reglu = m->config();
  reglu.mlp = "gated";
  reglu.mlp_bias = false;
  expect_input_error([&] { from_dense_config(reglu, kStableLmArch, "float32"); }, {"activation \"relu\""});
}

// `lol export --hf` of an OPT-layout model writes OPTForCausalLM's folder: OPTConfig's keys,
// the source's tensor names and values (the position table's two offset rows as zeros),
// and the function.
TEST(HfOpt, ExportWritesTheSourceFolderBack) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "biases" : "enable_bias false");
    OptShape s;
    s.bias = bias;
    TempDir dir("opt-export");
    const auto cfg = s.config();
    write_text(dir.path() + "/config.json", cfg.dump(2));
    const auto weights = opt_weights(s, 9, true);
    write_hf_weights(dir.path(), weights, torch::kFloat32);
    auto m = load_hf_model(dir.path());
    const std::string out = dir.path() + "/exported";
    const auto stored = rounded(weights, torch::kFloat32);
    expect_export_writes_source_back(m, kOptArch, out, cfg,
                                     {"vocab_size", "hidden_size", "ffn_dim", "num_hidden_layers", "num_attention_heads",
                                      "max_position_embeddings", "activation_function", "enable_bias",
                                      "tie_word_embeddings", "word_embed_proj_dim", "do_layer_norm_before"},
                                     stored);
    const auto tokens = some_tokens(29, s.vocab);
    expect_folder_matches_reference(out, tokens, opt_reference(s, stored, tokens));
  }
}

}  // namespace
}  // namespace lol::hf::test
