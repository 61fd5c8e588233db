// Falcon (FalconForCausalLM: falcon-7b / -40b / -180b, Falcon2-11B) folders: config.json
// parsing (FalconConfig's names and defaults, the layouts transformers' FalconDecoderLayer
// builds, refusals), the parameter counts of falcon-7b and falcon-40b (transformers'
// num_parameters), the loaded model's logits (full forward and cached decoding) against a
// float64 reference written here from Falcon's equations, and export back to the folder:
//   parallel, one norm (falcon-7b, Falcon2-11B): y = x + dense(attn(ln x)) + mlp(ln x)
//   parallel, two norms (falcon-40b):             y = x + dense(attn(ln_attn x)) + mlp(ln_mlp x)
//   sequential (parallel_attn false):             h = x + dense(attn(ln1 x)), y = h + mlp(ln2 h)
// with LayerNorms (weight and bias), q/k/v in one query_key_value laid out per key/value
// group ([T, Hkv, H/Hkv + 2, hd] after the product: the group's query heads, its key head,
// its value head), rotate-half RoPE over whole heads, mlp = dense_4h_to_h(gelu(dense_h_to_4h m)),
// and biases on every projection (bias) or on none.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

enum class Layout { k7b, k40b, k11b, kSequential, kSequentialMultiQuery };

struct FalconShape {
  int64_t vocab = 53, hidden = 32, layers = 2, heads = 4, kv = 2, ffn = 48, positions = 64;
  double eps = 1e-5, base = 10000.0, linear_factor = 0;
  std::string act = "gelu";
  Layout layout = Layout::k7b;
  bool bias = false, tied = true;
  int64_t hd() const { return hidden / heads; }
  bool new_arch() const { return layout == Layout::k40b || layout == Layout::k11b; }
  bool parallel() const { return layout != Layout::kSequential && layout != Layout::kSequentialMultiQuery; }
  bool two_norms() const { return layout == Layout::k40b; }
  /// The key/value heads transformers' FalconAttention runs with.
  int64_t kv_heads() const {
    return new_arch() ? kv : layout == Layout::kSequential ? heads : 1;
  }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {"FalconForCausalLM"}},
                        {"model_type", "falcon"},
                        {"vocab_size", vocab},
                        {"hidden_size", hidden},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"ffn_hidden_size", ffn},
                        {"max_position_embeddings", positions},
                        {"layer_norm_epsilon", eps},
                        {"activation", act},
                        {"alibi", false},
                        {"bias", bias},
                        {"new_decoder_architecture", new_arch()},
                        {"multi_query", layout == Layout::k7b || layout == Layout::kSequentialMultiQuery},
                        {"parallel_attn", parallel()},
                        {"rope_theta", base},
                        {"tie_word_embeddings", tied},
                        {"attention_dropout", 0.0},
                        {"hidden_dropout", 0.0},
                        {"bos_token_id", 11},
                        {"eos_token_id", 11},
                        {"torch_dtype", "float32"}};
    if (new_arch()) j["num_kv_heads"] = kv;
    if (layout == Layout::k11b) j["num_ln_in_parallel_attn"] = 1;
    j["rope_scaling"] = linear_factor > 0 ? nlohmann::json{{"rope_type", "linear"}, {"factor", linear_factor}} : nullptr;
    return j;
  }
};

/// Random weights under Falcon's names; LayerNorm weights near 1 with biases.
NamedTensors falcon_weights(const FalconShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.ffn, rows = (s.heads + 2 * s.kv_heads()) * s.hd();
  NamedTensors w;
  w.emplace_back("transformer.word_embeddings.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const std::vector<std::string> norms = s.two_norms()   ? std::vector<std::string>{"ln_attn", "ln_mlp"}
                                           : s.parallel() ? std::vector<std::string>{"input_layernorm"}
                                                          : std::vector<std::string>{"input_layernorm", "post_attention_layernorm"};
    for (const auto& n : norms) {
      w.emplace_back(p + n + ".weight", rnd({d}, 0.2, 1.0));
      w.emplace_back(p + n + ".bias", rnd({d}, 0.2, 0.3));
    }
    w.emplace_back(p + "self_attention.query_key_value.weight", rnd({rows, d}, 0.4));
    if (s.bias) w.emplace_back(p + "self_attention.query_key_value.bias", rnd({rows}, 0.3));
    w.emplace_back(p + "self_attention.dense.weight", rnd({d, d}, 0.2));
    if (s.bias) w.emplace_back(p + "self_attention.dense.bias", rnd({d}, 0.2));
    w.emplace_back(p + "mlp.dense_h_to_4h.weight", rnd({F, d}, 0.3));
    if (s.bias) w.emplace_back(p + "mlp.dense_h_to_4h.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.dense_4h_to_h.weight", rnd({d, F}, 0.2));
    if (s.bias) w.emplace_back(p + "mlp.dense_4h_to_h.bias", rnd({d}, 0.2));
  }
  w.emplace_back("transformer.ln_f.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("transformer.ln_f.bias", rnd({d}, 0.2));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.5));
  return w;
}

/// transformers' FalconForCausalLM forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor falcon_reference(const FalconShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), d = s.hidden, H = s.heads, hd = s.hd(), kv = s.kv_heads(), G = H / kv;
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return named_linear(w, x, n); };
  const ReferenceRope rope(T, hd, hd, s.base, s.linear_factor);
  auto x = w.at("transformer.word_embeddings.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const auto a_in = ln(x, p + (s.two_norms() ? "ln_attn" : "input_layernorm"));
    // query_key_value per key/value group: [T, Hkv, G + 2, hd]
    auto qkv = lin(a_in, p + "self_attention.query_key_value").view({T, kv, G + 2, hd});
    auto o = reference_causal_attention(rope(qkv.narrow(2, 0, G).reshape({T, H, hd})),
                                        rope(qkv.select(2, G)), qkv.select(2, G + 1));
    auto a = lin(o.reshape({T, d}), p + "self_attention.dense");
    auto mlp = [&](const torch::Tensor& m) {
      return lin(reference_gelu(lin(m, p + "mlp.dense_h_to_4h"), s.act == "gelu"), p + "mlp.dense_4h_to_h");
    };
    if (!s.parallel())
      x = (x + a) + mlp(ln(x + a, p + "post_attention_layernorm"));
    else
      x = x + a + mlp(s.two_norms() ? ln(x, p + "ln_mlp") : a_in);
  }
  return torch::matmul(ln(x, "transformer.ln_f"),
                       w.at(s.tied ? "transformer.word_embeddings.weight" : "lm_head.weight").t());
}

torch::Tensor check_against_reference(const FalconShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("falcon");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = falcon_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto stored = rounded(weights, torch::kFloat32);
  const auto ref = falcon_reference(s, stored, tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
  return ref;
}

TEST(HfFalcon, LogitsEqualReferenceInEveryLayout) {
  FalconShape s7;  // falcon-7b: multi_query, parallel, one norm, no biases, tied
  const auto ref7 = check_against_reference(s7, "falcon-7b layout");
  // The grouped query_key_value matters: the same weights read as three contiguous blocks
  // (q rows, then k, then v) give other logits.
  {
    FalconShape blocks = s7;
    blocks.layout = Layout::k40b;  // (new arch with kv = 1: one group, the same rows as multi_query)
    blocks.kv = 1;
    const auto tokens = some_tokens(29, s7.vocab);
    const auto stored = rounded(falcon_weights(s7, 5), torch::kFloat32);
    NamedTensors two_norms;  // ln_attn = ln_mlp = input_layernorm: the one-norm model again
    for (const auto& [n, t] : stored) {
      if (n.find("input_layernorm") == std::string::npos) {
        two_norms.emplace_back(n, t);
        continue;
      }
      for (const char* to : {"ln_attn", "ln_mlp"}) {
        std::string m = n;
        m.replace(m.find("input_layernorm"), 15, to);
        two_norms.emplace_back(m, t);
      }
    }
    EXPECT_LT((falcon_reference(blocks, two_norms, tokens) - ref7).abs().max().item<double>(), 1e-9);
  }
  FalconShape s40;  // falcon-40b: new decoder architecture, grouped kv, ln_attn + ln_mlp
  s40.layout = Layout::k40b;
  s40.bias = true;
  s40.act = "gelu_new";
  check_against_reference(s40, "falcon-40b layout, biases, tanh GELU");
  FalconShape s11;  // Falcon2-11B: new architecture with one norm, its own rope_theta, untied
  s11.layout = Layout::k11b;
  s11.kv = 1;
  s11.base = 500042.0;
  s11.tied = false;
  check_against_reference(s11, "Falcon2-11B layout, rope_theta 500042, untied");
  FalconShape seq;  // the oldest layout: sequential, per-head [q; k; v]
  seq.layout = Layout::kSequential;
  seq.bias = true;
  seq.tied = false;
  seq.linear_factor = 2.0;
  const auto ref_seq = check_against_reference(seq, "sequential, multi-head, biases, linear RoPE scaling");
  FalconShape seq_mq = seq;
  seq_mq.layout = Layout::kSequentialMultiQuery;
  seq_mq.linear_factor = 0;
  check_against_reference(seq_mq, "sequential, multi_query");
  // The per-head grouping matters: the sequential model's rows read per group of 2 differ.
  FalconShape regrouped = seq;
  regrouped.layout = Layout::kSequential;
  auto w = rounded(falcon_weights(seq, 5), torch::kFloat32);
  const auto tokens = some_tokens(29, seq.vocab);
  for (auto& [n, t] : w)
    if (n.find("query_key_value") != std::string::npos) t = split_grouped_qkv(t, 4, 1, seq.hd());  // q; k; v blocks
  EXPECT_GT((falcon_reference(regrouped, w, tokens) - ref_seq).abs().max().item<double>(), 1e-2);
}

TEST(HfFalcon, ConfigDefaultsParameterCountAndRefusals) {
  // falcon-7b's config.json (the Hub's keys; max_position_embeddings and ffn_hidden_size absent).
  const nlohmann::json j7 = {{"alibi", false}, {"apply_residual_connection_post_layernorm", false},
                             {"architectures", {"FalconForCausalLM"}}, {"attention_dropout", 0.0}, {"bias", false},
                             {"bos_token_id", 11}, {"eos_token_id", 11}, {"hidden_dropout", 0.0}, {"hidden_size", 4544},
                             {"initializer_range", 0.02}, {"layer_norm_epsilon", 1e-05}, {"model_type", "falcon"},
                             {"multi_query", true}, {"new_decoder_architecture", false}, {"num_attention_heads", 71},
                             {"num_hidden_layers", 32}, {"parallel_attn", true}, {"torch_dtype", "bfloat16"},
                             {"transformers_version", "4.27.4"}, {"use_cache", true}, {"vocab_size", 65024}};
  const auto c7 = HfConfig::from_json(j7, "config.json");
  EXPECT_TRUE(c7.is_falcon());
  EXPECT_EQ(c7.head_dim, 64);
  EXPECT_EQ(c7.num_key_value_heads, 1);
  EXPECT_EQ(c7.intermediate_size, 4 * 4544);
  EXPECT_EQ(c7.max_position_embeddings, 2048);
  EXPECT_TRUE(c7.parallel_residual && c7.shared_input_norm && c7.tie_word_embeddings && !c7.qkv_bias);
  EXPECT_EQ(c7.activation, "gelu");
  EXPECT_EQ(parameter_count(c7), 6921720704);  // transformers: FalconForCausalLM(falcon-7b).num_parameters()
  const auto dc7 = to_dense_config(c7);
  EXPECT_EQ(dc7.norm, "layernorm");
  EXPECT_TRUE(dc7.parallel_residual && dc7.shared_input_norm && !dc7.o_bias && !dc7.mlp_bias);
  EXPECT_EQ(baselines::DenseConfig::from_json(dc7.to_json(), "x").to_json(), dc7.to_json());
  // The config lol writes for the model: falcon-7b's layout again.
  const auto back7 = HfConfig::from_json(nlohmann::json::parse(from_dense_config(dc7, kFalconArch, "bfloat16").to_json().dump()), "w");
  EXPECT_EQ(to_dense_config(back7).to_json(), dc7.to_json());
  EXPECT_FALSE(back7.falcon_new_decoder);
  EXPECT_EQ(back7.to_json().dump(), HfConfig::from_json(nlohmann::json::parse(back7.to_json().dump()), "w").to_json().dump());

  // falcon-40b's: new decoder architecture, 8 kv heads, ln_attn and ln_mlp.
  nlohmann::json j40 = j7;
  j40["hidden_size"] = 8192;
  j40["num_attention_heads"] = 128;
  j40["num_hidden_layers"] = 60;
  j40["num_kv_heads"] = 8;
  j40["new_decoder_architecture"] = true;
  const auto c40 = HfConfig::from_json(j40, "config.json");
  EXPECT_EQ(c40.num_key_value_heads, 8);
  EXPECT_TRUE(c40.parallel_residual && !c40.shared_input_norm && c40.falcon_new_decoder);
  // 60 (144 * 64 * 8192 + 8192^2 + 2 * 8192 * 32768 + 4 * 8192) + 65024 * 8192 + 2 * 8192 (tied)
  EXPECT_EQ(parameter_count(c40), 41303293952);
  const auto w40 = from_dense_config(to_dense_config(c40), kFalconArch, "bfloat16").to_json();
  EXPECT_EQ(w40.at("new_decoder_architecture"), true);
  EXPECT_EQ(w40.at("num_ln_in_parallel_attn"), 2);
  EXPECT_EQ(w40.at("num_kv_heads"), 8);
  // Falcon2-11B's: the new architecture with one norm.
  nlohmann::json j11 = j40;
  j11["num_ln_in_parallel_attn"] = 1;
  const auto c11 = HfConfig::from_json(j11, "config.json");
  EXPECT_TRUE(c11.shared_input_norm && c11.falcon_new_decoder);
  EXPECT_EQ(from_dense_config(to_dense_config(c11), kFalconArch, "").to_json().at("num_ln_in_parallel_attn"), 1);

  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  auto set = [&](nlohmann::json base, const char* key, nlohmann::json v) {
    base[key] = v;
    return base;
  };
  refused(set(j7, "alibi", true), {"alibi", "ALiBi"});
  refused(set(j40, "parallel_attn", false), {"parallel_attn", "new_decoder_architecture"});
  refused(set(j7, "num_ln_in_parallel_attn", 2), {"num_ln_in_parallel_attn", "input_layernorm"});
  refused(set(j40, "num_ln_in_parallel_attn", 3), {"num_ln_in_parallel_attn", "expected null, 1"});
  refused(set(set(j7, "multi_query", false), "num_kv_heads", 8), {"num_kv_heads", "num_attention_heads = 71"});
  refused(set(j40, "num_kv_heads", 7), {"num_kv_heads", "divisor"});
  refused(set(j7, "activation", "relu"), {"activation", "relu"});
  refused(set(j7, "partial_rotary_factor", 0.5), {"partial_rotary_factor", "whole heads"});
  refused(set(j7, "n_head", 32), {"n_head", "num_attention_heads"});
  refused(set(j7, "model_type", "RefinedWebModel"), {"model_type", "RefinedWeb"});
  auto legacy = j7;
  legacy.erase("num_hidden_layers");
  legacy["n_layer"] = 32;
  refused(legacy, {"n_layer", "num_hidden_layers", "missing"});
  EXPECT_EQ(HfConfig::from_json(set(j7, "n_head", 71), "config.json").num_attention_heads, 71);  // (restated: accepted)
  auto missing = j7;
  missing.erase("vocab_size");
  refused(missing, {"vocab_size", "missing"});
}

// Bad folders name Falcon's tensors; the export of a loaded folder writes it back bit for
// bit (names, values, config keys) in each layout.
TEST(HfFalcon, FoldersRefusedByNameAndExportedBack) {
  FalconShape s;
  s.layout = Layout::k40b;
  s.bias = true;
  TempDir dir("falcon-folder");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = falcon_weights(s, 3);
  NamedTensors w;
  for (auto& [n, t] : weights)
    if (n != "transformer.h.1.self_attention.query_key_value.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); },
                     {"transformer.h.1.self_attention.query_key_value.bias", "missing", "fused"});
  for (auto& [n, t] : w)
    if (n == "transformer.h.0.self_attention.query_key_value.weight") t = t.narrow(0, 0, 32).contiguous();
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); },
                     {"transformer.h.0.self_attention.query_key_value.weight", "[64, 32]", "key/value heads 2"});
  auto extra = weights;  // a one-norm layout's tensor in a two-norm folder
  extra.emplace_back("transformer.h.0.input_layernorm.weight", torch::ones({32}, torch::kFloat64));
  write_hf_weights(dir.path(), extra, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"transformer.h.0.input_layernorm.weight", "unexpected"});
  auto tied_differs = weights;
  tied_differs.emplace_back("lm_head.weight", torch::zeros({s.vocab, s.hidden}, torch::kFloat64));
  write_hf_weights(dir.path(), tied_differs, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); },
                     {"lm_head.weight", "differs from transformer.word_embeddings.weight", "tie_word_embeddings"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  auto odd_bias = m->config();
  odd_bias.mlp_bias = false;
  expect_input_error([&] { from_dense_config(odd_bias, kFalconArch, "float32"); }, {"mlp_bias", "bias"});
  auto partial = m->config();
  partial.partial_rotary_factor = 0.5;
  expect_input_error([&] { from_dense_config(partial, kFalconArch, "float32"); }, {"partial_rotary_factor", "whole heads"});

  for (Layout layout : {Layout::k7b, Layout::k40b, Layout::k11b, Layout::kSequential, Layout::kSequentialMultiQuery}) {
    FalconShape e;
    e.layout = layout;
    e.bias = layout == Layout::k40b || layout == Layout::kSequential;
    e.tied = layout != Layout::k11b;
    SCOPED_TRACE(e.config().dump());
    TempDir src("falcon-export");
    write_text(src.path() + "/config.json", e.config().dump(2));
    const auto ew = falcon_weights(e, 9);
    write_hf_weights(src.path(), ew, torch::kFloat32);
    auto loaded = load_hf_model(src.path());
    const std::string out = src.path() + "/exported";
    const auto stored = rounded(ew, torch::kFloat32);
    expect_export_writes_source_back(loaded, kFalconArch, out, e.config(),
                                     {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "ffn_hidden_size", "max_position_embeddings", "layer_norm_epsilon", "bias",
                                      "new_decoder_architecture", "parallel_attn", "multi_query", "tie_word_embeddings",
                                      "rope_theta"},
                                     stored, false);
    const auto tokens = some_tokens(29, e.vocab);
    expect_folder_matches_reference(out, tokens, falcon_reference(e, stored, tokens));
  }
}

}  // namespace
}  // namespace lol::hf::test
