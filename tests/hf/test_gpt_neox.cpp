// GPT-NeoX (GPTNeoXForCausalLM: Pythia, gpt-neox-20b) folders: config.json parsing
// (GPTNeoXConfig's names and defaults in transformers 4.x's and 5's layouts, refusals),
// the parameter count of pythia-70m (transformers' num_parameters: 70,426,624), the
// loaded model's logits (full forward and cached decoding) against a float64 reference
// written here from GPT-NeoX's equations, and export back to the same folder:
//   parallel:   y = x + dense(attn(ln1 x)) + mlp(ln2 x)
//   sequential: h = x + dense(attn(ln1 x)), y = h + mlp(ln2 h)
// with LayerNorms (weight and bias), q/k/v in one query_key_value laid out per head
// ([T, H, 3 hd] after the product), rotate-half RoPE on the leading int(hd rotary_pct)
// dimensions, and mlp = dense_4h_to_h(gelu(dense_h_to_4h m)).
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct NeoxShape {
  int64_t vocab = 53, hidden = 32, layers = 3, heads = 2, inner = 48, positions = 64;
  double eps = 1e-5, rotary_pct = 0.25, base = 10000.0, linear_factor = 0;  ///< linear_factor > 0: linear RoPE scaling
  std::string act = "gelu";
  bool parallel = true, bias = true, tied = false;
  bool v5 = false;      ///< transformers 5's layout: rope_parameters {rope_theta, partial_rotary_factor}
  bool buffers = false; ///< attention.bias / masked_bias / rotary_emb.inv_freq buffers of older files
  int64_t hd() const { return hidden / heads; }
  int64_t rot() const { return int64_t(double(hd()) * rotary_pct); }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {"GPTNeoXForCausalLM"}},
                        {"model_type", "gpt_neox"},
                        {"vocab_size", vocab},
                        {"hidden_size", hidden},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"intermediate_size", inner},
                        {"max_position_embeddings", positions},
                        {"hidden_act", act},
                        {"layer_norm_eps", eps},
                        {"use_parallel_residual", parallel},
                        {"attention_bias", bias},
                        {"tie_word_embeddings", tied},
                        {"hidden_dropout", 0.0},
                        {"attention_dropout", 0.0},
                        {"classifier_dropout", 0.1},
                        {"initializer_range", 0.02},
                        {"use_cache", true},
                        {"bos_token_id", 0},
                        {"eos_token_id", 0},
                        {"torch_dtype", "float32"}};
    nlohmann::json rope = nullptr;
    if (linear_factor > 0) rope = {{"rope_type", "linear"}, {"factor", linear_factor}};
    if (v5) {
      if (rope.is_null()) rope = {{"rope_type", "default"}};
      rope["rope_theta"] = base;
      rope["partial_rotary_factor"] = rotary_pct;
      j["rope_parameters"] = rope;
    } else {
      j["rotary_pct"] = rotary_pct;
      j["rotary_emb_base"] = base;
      j["rope_scaling"] = rope;
    }
    return j;
  }
};

/// Random weights under GPT-NeoX's names; LayerNorm weights near 1 with biases.
NamedTensors neox_weights(const NeoxShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.inner;
  NamedTensors w;
  w.emplace_back("gpt_neox.embed_in.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "input_layernorm.bias", rnd({d}, 0.2, 0.5));
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "post_attention_layernorm.bias", rnd({d}, 0.2, -0.5));
    w.emplace_back(p + "attention.query_key_value.weight", rnd({3 * d, d}, 0.4));
    if (s.bias) w.emplace_back(p + "attention.query_key_value.bias", rnd({3 * d}, 0.3));
    w.emplace_back(p + "attention.dense.weight", rnd({d, d}, 0.2));
    if (s.bias) w.emplace_back(p + "attention.dense.bias", rnd({d}, 0.2));
    w.emplace_back(p + "mlp.dense_h_to_4h.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.dense_h_to_4h.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.dense_4h_to_h.weight", rnd({d, F}, 0.2));
    w.emplace_back(p + "mlp.dense_4h_to_h.bias", rnd({d}, 0.2));
    if (s.buffers) {
      w.emplace_back(p + "attention.bias", torch::ones({1, 1, s.positions, s.positions}, torch::kBool).tril());
      w.emplace_back(p + "attention.masked_bias", torch::full({}, -1e9, torch::kFloat64));
      w.emplace_back(p + "attention.rotary_emb.inv_freq", torch::ones({s.rot() / 2}, torch::kFloat64));
    }
  }
  w.emplace_back("gpt_neox.final_layer_norm.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("gpt_neox.final_layer_norm.bias", rnd({d}, 0.2));
  if (!s.tied) w.emplace_back("embed_out.weight", rnd({s.vocab, d}, 0.5));
  return w;
}

/// transformers' GPTNeoXForCausalLM forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor neox_reference(const NeoxShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), d = s.hidden, H = s.heads, hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return named_linear(w, x, n); };
  const ReferenceRope rope(T, hd, s.rot(), s.base, s.linear_factor);
  auto x = w.at("gpt_neox.embed_in.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
    // query_key_value per head: [T, H, 3 hd] -> q, k, v of each head
    auto qkv = lin(ln(x, p + "input_layernorm"), p + "attention.query_key_value").view({T, H, 3 * hd});
    auto o = reference_causal_attention(rope(qkv.narrow(-1, 0, hd)), rope(qkv.narrow(-1, hd, hd)),
                                        qkv.narrow(-1, 2 * hd, hd));
    auto a = lin(o.reshape({T, d}), p + "attention.dense");
    auto mlp = [&](const torch::Tensor& h) {
      return lin(reference_gelu(lin(ln(h, p + "post_attention_layernorm"), p + "mlp.dense_h_to_4h"), s.act == "gelu"),
                 p + "mlp.dense_4h_to_h");
    };
    x = s.parallel ? x + a + mlp(x) : (x + a) + mlp(x + a);
  }
  return torch::matmul(ln(x, "gpt_neox.final_layer_norm"),
                       w.at(s.tied ? "gpt_neox.embed_in.weight" : "embed_out.weight").t());
}

torch::Tensor check_against_reference(const NeoxShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("neox");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = neox_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  auto stored = rounded(weights, torch::kFloat32);
  const auto ref = neox_reference(s, stored, tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
  return ref;
}

TEST(HfGptNeox, LogitsEqualReference) {
  NeoxShape s;
  s.buffers = true;
  const auto parallel = check_against_reference(s, "pythia layout: parallel, biases, exact GELU, rotary_pct 0.25");
  // The layout matters: the same weights read as sequential blocks give other logits.
  NeoxShape seq = s;
  seq.parallel = false;
  const auto tokens = some_tokens(29, s.vocab);
  EXPECT_GT((neox_reference(seq, rounded(neox_weights(s, 5), torch::kFloat32), tokens) - parallel).abs().max().item<double>(),
            1e-2);
  seq.buffers = false;
  seq.bias = false;
  seq.tied = true;
  seq.act = "gelu_new";
  seq.rotary_pct = 0.5;
  seq.base = 500.0;
  seq.v5 = true;
  check_against_reference(seq, "sequential, no attention biases, tied, tanh GELU, rotary 0.5, transformers 5 config");
  NeoxShape scaled;
  scaled.linear_factor = 2.0;
  scaled.rotary_pct = 1.0;
  check_against_reference(scaled, "linear RoPE scaling, rotary on every dimension");
}

TEST(HfGptNeox, ConfigDefaultsParameterCountAndRefusals) {
  // pythia-70m's config.json (the Hub's, every key).
  const nlohmann::json j = {{"architectures", {"GPTNeoXForCausalLM"}}, {"bos_token_id", 0}, {"eos_token_id", 0},
                            {"hidden_act", "gelu"}, {"hidden_size", 512}, {"initializer_range", 0.02},
                            {"intermediate_size", 2048}, {"layer_norm_eps", 1e-05}, {"max_position_embeddings", 2048},
                            {"model_type", "gpt_neox"}, {"num_attention_heads", 8}, {"num_hidden_layers", 6},
                            {"rotary_emb_base", 10000}, {"rotary_pct", 0.25}, {"tie_word_embeddings", false},
                            {"torch_dtype", "float16"}, {"transformers_version", "4.24.0"}, {"use_cache", true},
                            {"use_parallel_residual", true}, {"vocab_size", 50304}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_gpt_neox());
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_TRUE(c.qkv_bias);  // attention_bias's default
  EXPECT_TRUE(c.parallel_residual);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.activation, "gelu");
  EXPECT_EQ(parameter_count(c), 70426624);  // transformers: GPTNeoXForCausalLM(pythia-70m).num_parameters()
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.norm, "layernorm");
  EXPECT_EQ(dc.positions, "rope");
  EXPECT_TRUE(dc.parallel_residual && dc.o_bias && dc.mlp_bias && dc.qkv_bias);
  EXPECT_EQ(baselines::DenseConfig::from_json(dc.to_json(), "x").to_json(), dc.to_json());
  EXPECT_EQ(default_architecture(dc), kGptNeoXArch);
  // The config lol writes reads back as the same HfConfig fields.
  const auto back = HfConfig::from_json(nlohmann::json::parse(c.to_json().dump()), "written");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  EXPECT_EQ(back.to_json().dump(), c.to_json().dump());  // (fuzz_configs' round-trip property)

  // GPTNeoXConfig's defaults: rotary_pct 0.25, base 10000, parallel blocks, biases, untied.
  auto minimal = j;
  for (const char* k : {"rotary_pct", "rotary_emb_base", "use_parallel_residual", "tie_word_embeddings", "hidden_act",
                        "layer_norm_eps", "bos_token_id", "eos_token_id"})
    minimal.erase(k);
  const auto m = HfConfig::from_json(minimal, "config.json");
  EXPECT_EQ(m.rotary_dim(), 16);
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_TRUE(m.parallel_residual && m.qkv_bias && !m.tie_word_embeddings);
  EXPECT_EQ(m.eos_token_id, std::vector<int64_t>{2});
  // transformers 4.4x saves rope_theta / partial_rotary_factor beside them: agreeing, accepted.
  auto both = j;
  both["rope_theta"] = 10000.0;
  both["partial_rotary_factor"] = 0.25;
  EXPECT_EQ(HfConfig::from_json(both, "config.json").rotary_dim(), 16);

  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  refused(set("rotary_pct", 0.3), {"rotary_pct", "even"});  // int(64 * 0.3) = 19
  refused(set("rope_theta", 500.0), {"rope_theta", "differs from", "rotary_emb_base"});
  refused(set("partial_rotary_factor", 0.5), {"partial_rotary_factor", "differs from", "rotary_pct"});
  refused(set("hidden_act", "relu"), {"hidden_act", "relu"});
  refused(set("num_attention_heads", 7), {"hidden_size", "multiple of num_attention_heads"});
  refused(set("model_type", "gpt2"), {"model_type", "gpt_neox"});
  refused(set("rope_scaling", {{"rope_type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}}),
          {"rope_scaling"});
  refused(set("rope_parameters", {{"rope_type", "default"}, {"rope_theta", 20000.0}}),
          {"rope_parameters.rope_theta", "differs from"});
  auto missing = j;
  missing.erase("intermediate_size");
  refused(missing, {"intermediate_size", "missing"});
}

// Bad folders name GPT-NeoX's tensors; the export of a loaded folder writes it back bit
// for bit (names, values, config keys), and other architectures refuse its layout.
TEST(HfGptNeox, FoldersRefusedByNameAndExportedBack) {
  NeoxShape s;
  s.buffers = true;
  TempDir dir("neox-folder");
  const auto cfg = s.config();
  write_text(dir.path() + "/config.json", cfg.dump(2));
  const auto weights = neox_weights(s, 3);
  NamedTensors w;
  for (auto& [n, t] : weights)
    if (n != "gpt_neox.layers.1.attention.query_key_value.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); },
                     {"gpt_neox.layers.1.attention.query_key_value.bias", "missing", "fused"});
  for (auto& [n, t] : w)
    if (n == "gpt_neox.layers.0.attention.query_key_value.weight") t = t.t().contiguous();
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"gpt_neox.layers.0.attention.query_key_value.weight", "[96, 32]"});
  auto extra = weights;
  extra.emplace_back("gpt_neox.layers.0.attention.q_proj.weight", torch::zeros({32, 32}, torch::kFloat64));
  write_hf_weights(dir.path(), extra, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"gpt_neox.layers.0.attention.q_proj.weight", "unexpected"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  expect_input_error([&] { from_dense_config(m->config(), kQwen2Arch, "float32"); }, {"GPT-NeoX's", "layout", "--arch gpt_neox"});
  expect_input_error([&] { from_dense_config(m->config(), kGpt2Arch, "float32"); }, {"GPT2LMHeadModel", "export as GPTNeoXForCausalLM"});
  auto odd_bias = m->config();
  odd_bias.o_bias = false;
  expect_input_error([&] { from_dense_config(odd_bias, kGptNeoXArch, "float32"); }, {"o_bias false", "attention_bias"});

  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied, sequential, no biases" : "untied, parallel");
    NeoxShape e = s;
    e.buffers = false;
    e.tied = tied;
    e.parallel = !tied;
    e.bias = !tied;
    TempDir src("neox-export");
    write_text(src.path() + "/config.json", e.config().dump(2));
    const auto ew = neox_weights(e, 9);
    write_hf_weights(src.path(), ew, torch::kFloat32);
    auto loaded = load_hf_model(src.path());
    const std::string out = src.path() + "/exported";
    const auto stored = rounded(ew, torch::kFloat32);
    expect_export_writes_source_back(
        loaded, kGptNeoXArch, out, e.config(),
        {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
         "max_position_embeddings", "rotary_pct", "rotary_emb_base", "layer_norm_eps", "hidden_act",
         "use_parallel_residual", "attention_bias", "tie_word_embeddings"},
        stored);
    const auto tokens = some_tokens(29, e.vocab);
    expect_folder_matches_reference(out, tokens, neox_reference(e, stored, tokens));
  }
}

}  // namespace
}  // namespace lol::hf::test
