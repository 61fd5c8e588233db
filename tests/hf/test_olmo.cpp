// OLMo 2 (Olmo2ForCausalLM) and OLMo 3 (Olmo3ForCausalLM) folders: config.json parsing
// (defaults, OLMo 3's sliding layers, refusals) and the loaded model's logits against a
// float64 reference written here from transformers' Olmo2DecoderLayer equations: no input
// norms, RMSNorm on the attention and MLP outputs before their residual adds, and q_norm /
// k_norm over the whole q and k projections ([H hd], [Hkv hd]) before RoPE; OLMo 3's
// sliding-window layers (all but every fourth by default). Full forward, cached decoding on
// both paths (fused CPU kernels and tensors), batched sessions, the dense config.json
// round trip, export (--arch olmo2 / olmo3) and what it refuses. (LayerRoute on an OLMo
// base: tests/layerroute/test_generate.cpp.)
#include "hf_test_util.h"
#include "baselines/flops.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "inference/dense_session.h"
#include "layerroute/gated_model.h"

namespace lol::hf::test {
namespace {

/// A tiny OLMo 2 / OLMo 3 folder's shape and config.json.
struct OlmoShape {
  bool olmo3 = false;
  int64_t vocab = 61, hidden = 32, ffn = 40, layers = 3, heads = 4, kv_heads = 2, max_pos = 64;
  int64_t head_dim = 0;  ///< 0: hidden / heads, no head_dim key
  int64_t window = 5;    ///< OLMo 3's sliding_window
  double rope_theta = 500, eps = 1e-5;
  bool tied = false;
  nlohmann::json layer_types = nullptr;  ///< OLMo 3: null = the default (full every fourth)

  int64_t hd() const { return head_dim > 0 ? head_dim : hidden / heads; }
  bool sliding(int64_t i) const {
    if (!olmo3) return false;
    if (!layer_types.is_null()) return layer_types[size_t(i)] == "sliding_attention";
    return (i + 1) % 4 != 0;
  }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {olmo3 ? "Olmo3ForCausalLM" : "Olmo2ForCausalLM"}},
                        {"model_type", olmo3 ? "olmo3" : "olmo2"},
                        {"vocab_size", vocab},
                        {"hidden_size", hidden},
                        {"intermediate_size", ffn},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"num_key_value_heads", kv_heads},
                        {"max_position_embeddings", max_pos},
                        {"rms_norm_eps", eps},
                        {"rope_theta", rope_theta},
                        {"rope_scaling", nullptr},
                        {"hidden_act", "silu"},
                        {"attention_bias", false},
                        {"attention_dropout", 0.0},
                        {"tie_word_embeddings", tied},
                        {"torch_dtype", "float32"},
                        {"pad_token_id", 1},
                        {"bos_token_id", nullptr},
                        {"eos_token_id", 2}};
    if (head_dim > 0) j["head_dim"] = head_dim;
    if (olmo3) {
      j["sliding_window"] = window;
      if (!layer_types.is_null()) j["layer_types"] = layer_types;
    }
    return j;
  }
};

/// Random weights under OLMo's names: norm weights 1 + N(0, 0.3) so that a misplaced or
/// missing norm computes another function.
NamedTensors olmo_weights(const OlmoShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t hd = s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, s.hidden}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({s.heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({s.hidden, s.heads * hd}, 0.25));
    w.emplace_back(p + "self_attn.q_norm.weight", rnd({s.heads * hd}, 0.3, 1.0));
    w.emplace_back(p + "self_attn.k_norm.weight", rnd({s.kv_heads * hd}, 0.3, 1.0));
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({s.hidden}, 0.3, 1.0));
    w.emplace_back(p + "post_feedforward_layernorm.weight", rnd({s.hidden}, 0.3, 1.0));
    w.emplace_back(p + "mlp.gate_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.up_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.down_proj.weight", rnd({s.hidden, s.ffn}, 0.3));
  }
  w.emplace_back("model.norm.weight", rnd({s.hidden}, 0.3, 1.0));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, s.hidden}, 0.3));
  return w;
}

/// transformers' Olmo2ForCausalLM / Olmo3ForCausalLM forward in float64, from the
/// equations: tokens [T] -> logits [T, vocab].
torch::Tensor olmo_reference(const OlmoShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t;
  const int64_t T = int64_t(tokens.size()), hd = s.hd(), G = s.heads / s.kv_heads;
  auto norm = [&](const torch::Tensor& x, const std::string& n) {
    return w.at(n) * x / torch::sqrt(x.pow(2).mean(-1, true) + s.eps);
  };
  auto inv = 1.0 / torch::pow(torch::tensor(s.rope_theta, torch::kFloat32),
                              torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd));
  auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);
  auto c = ang.cos().to(torch::kFloat64), sn = ang.sin().to(torch::kFloat64);
  auto cos = torch::cat({c, c}, -1).unsqueeze(1), sin = torch::cat({sn, sn}, -1).unsqueeze(1);
  auto rope = [&](const torch::Tensor& x) {
    auto rot = torch::cat({-x.narrow(-1, hd / 2, hd / 2), x.narrow(-1, 0, hd / 2)}, -1);
    return x * cos + rot * sin;
  };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return torch::matmul(x, w.at(n + ".weight").t()); };
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  auto idx = torch::arange(T, torch::kInt64);
  auto causal = idx.unsqueeze(1) >= idx.unsqueeze(0);
  auto band = causal & (idx.unsqueeze(1) - idx.unsqueeze(0) < s.window);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    // q_norm / k_norm over the whole projections, then the heads.
    auto q = norm(lin(x, p + "self_attn.q_proj"), p + "self_attn.q_norm.weight").view({T, s.heads, hd});
    auto k = norm(lin(x, p + "self_attn.k_proj"), p + "self_attn.k_norm.weight").view({T, s.kv_heads, hd});
    auto v = lin(x, p + "self_attn.v_proj").view({T, s.kv_heads, hd});
    q = rope(q);
    k = rope(k).repeat_interleave(G, 1);
    v = v.repeat_interleave(G, 1);
    auto sc = torch::einsum("qhd,khd->hqk", {q, k}) / std::sqrt(double(hd));
    sc = sc.masked_fill(~(s.sliding(i) ? band : causal), -std::numeric_limits<double>::infinity());
    auto a = lin(torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), v}).reshape({T, s.heads * hd}),
                 p + "self_attn.o_proj");
    x = x + norm(a, p + "post_attention_layernorm.weight");
    auto m = lin(torch::silu(lin(x, p + "mlp.gate_proj")) * lin(x, p + "mlp.up_proj"), p + "mlp.down_proj");
    x = x + norm(m, p + "post_feedforward_layernorm.weight");
  }
  x = norm(x, "model.norm.weight");
  return torch::matmul(x, (s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight")).t());
}

void check_against_reference(const OlmoShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("olmo");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = olmo_weights(s, 13);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto stored = rounded(weights, torch::kFloat32);
  const auto tokens = some_tokens(23, s.vocab);
  const auto ref = olmo_reference(s, stored, tokens);
  ASSERT_GT(ref.std().item<double>(), 0.3);
  auto m64 = expect_folder_matches_reference(dir.path(), tokens, ref);
  // Two sequences of different lengths in one batched session, on both decoding paths.
  for (bool kernels : {true, false}) {
    inference::DenseSessionOptions so;
    so.cpu_kernels = kernels;
    so.batch_size = 2;
    inference::DenseDecodeSession batch(m64, so);
    const std::vector<int64_t> other = some_tokens(9, s.vocab);
    const auto other_ref = olmo_reference(s, stored, other);
    batch.feed({{0, {tokens.begin(), tokens.begin() + 4}}, {1, {other.begin(), other.begin() + 2}}});
    torch::Tensor last0, last1;
    for (size_t i = 0; i < 7; ++i) {
      auto step = batch.step({tokens[4 + i], other[2 + i]});
      last0 = step[0];
      last1 = step[1];
    }
    EXPECT_LT((last0.to(torch::kFloat64) - ref[10]).abs().max().item<double>(), 1e-9) << "batched row 0";
    EXPECT_LT((last1.to(torch::kFloat64) - other_ref[8]).abs().max().item<double>(), 1e-9) << "batched row 1";
  }
}

TEST(HfOlmo, Olmo2LogitsEqualReference) {
  OlmoShape s;
  check_against_reference(s, "OLMo 2, 4 heads / 2 kv heads");
  s.kv_heads = 1;  // MQA: k_norm is [hd], the width of one head, q_norm [H hd]
  s.tied = true;
  check_against_reference(s, "OLMo 2, one kv head, tied embeddings");
  s.kv_heads = 4;
  s.head_dim = 12;  // an explicit head_dim other than hidden / heads
  check_against_reference(s, "OLMo 2, head_dim 12");
}

TEST(HfOlmo, Olmo3SlidingLayersEqualReference) {
  OlmoShape s;
  s.olmo3 = true;
  s.layers = 5;  // layers 0, 1, 2, 4 slide, 3 has full attention
  check_against_reference(s, "OLMo 3, default layer_types");
  s.layers = 4;
  s.layer_types = {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"};
  check_against_reference(s, "OLMo 3, full layer first");
}

TEST(HfOlmo, NormsSpanAllHeads) {
  // q_norm / k_norm normalise the whole projection: scaling one query head's q_proj rows
  // changes the logits (Qwen3's per-head norms would undo the factor, up to eps), and lol
  // still agrees with the reference on the changed weights.
  OlmoShape s;
  const auto w = olmo_weights(s, 13);
  const auto tokens = some_tokens(12, s.vocab);
  NamedTensors changed = w;
  for (auto& [n, t] : changed)
    if (n == "model.layers.0.self_attn.q_proj.weight") t = t.clone(), t.narrow(0, s.hd(), s.hd()).mul_(3.0);
  auto logits_of = [&](const NamedTensors& weights) {
    TempDir dir("olmo-heads");
    write_text(dir.path() + "/config.json", s.config().dump(2));
    write_hf_weights(dir.path(), weights, torch::kFloat32);
    auto m = load_hf_model(dir.path(), torch::kFloat64);
    return full_logits(m, tokens);
  };
  const auto before = logits_of(w), after = logits_of(changed);
  EXPECT_GT((after - before).abs().max().item<double>(), 1e-2);
  EXPECT_LT((after - olmo_reference(s, rounded(changed, torch::kFloat32), tokens)).abs().max().item<double>(), 1e-9);
}

TEST(HfOlmo, ConfigDefaultsAndLayout) {
  OlmoShape s;
  auto j = s.config();
  for (const char* k : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "tie_word_embeddings"}) j.erase(k);
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_EQ(c.model_type(), "olmo2");
  EXPECT_EQ(c.num_key_value_heads, s.heads);  // Olmo2Config: None -> the query heads
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm && c.qk_norm_across_heads && c.sandwich_norm && !c.input_norms);
  EXPECT_EQ(c.sliding_window, 0);
  // The parameter count is the folder's tensors' (no input norms; q/k norms [H hd], [Hkv hd]).
  int64_t numel = 0;
  for (const auto& [n, t] : olmo_weights(s, 1)) numel += t.numel();
  EXPECT_EQ(parameter_count(HfConfig::from_json(s.config(), "config.json")), numel);

  // OLMo 3: sliding_window 4096 by default, on all layers but every fourth.
  OlmoShape s3;
  s3.olmo3 = true;
  s3.layers = 8;
  s3.max_pos = 8192;
  auto j3 = s3.config();
  j3.erase("sliding_window");
  const auto c3 = HfConfig::from_json(j3, "config.json");
  EXPECT_EQ(c3.sliding_window, 4096);
  EXPECT_EQ(c3.full_attention_interval, 4);
  const auto d3 = to_dense_config(c3);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(d3.layer_attention(i).kind == baselines::AttentionKind::Sliding, (i + 1) % 4 != 0) << i;
  // A window of max_position_embeddings or more never binds: full attention.
  j3["max_position_embeddings"] = 4096;
  EXPECT_EQ(HfConfig::from_json(j3, "config.json").sliding_window, 0);

  // The dense config.json round trip keeps the layout, and its fields are validated.
  const auto d = to_dense_config(c);
  const auto back = baselines::DenseConfig::from_json(d.to_json(), "config.json");
  EXPECT_FALSE(back.input_norms);
  EXPECT_TRUE(back.qk_norm_across_heads && back.sandwich_norm);
  auto bad = d.to_json();
  bad["sandwich_norm"] = false;
  expect_input_error([&] { baselines::DenseConfig::from_json(bad, "run/config.json"); },
                     {"run/config.json", "input_norms", "sandwich_norm"});
  bad = d.to_json();
  bad.erase("qk_norm");
  expect_input_error([&] { baselines::DenseConfig::from_json(bad, "run/config.json"); },
                     {"run/config.json", "qk_norm_across_heads", "qk_norm"});
}

TEST(HfOlmo, RefusedFeaturesAndTensors) {
  OlmoShape s;
  auto j = s.config();
  j["attention_bias"] = true;
  expect_input_error([&] { HfConfig::from_json(j, "m/config.json"); }, {"m/config.json", "attention_bias", "o_proj"});
  j = s.config();
  j["model_type"] = "olmo";
  expect_input_error([&] { HfConfig::from_json(j, "m/config.json"); }, {"model_type", "olmo2"});
  OlmoShape s3;
  s3.olmo3 = true;
  j = s3.config();
  j["sliding_window"] = nullptr;
  expect_input_error([&] { HfConfig::from_json(j, "m/config.json"); }, {"sliding_window", "window"});
  j = s.config();  // OLMo 2 has no sliding layers (transformers ignores these keys)
  j["sliding_window"] = 4;
  j["layer_types"] = {"sliding_attention", "full_attention", "full_attention"};
  expect_input_error([&] { HfConfig::from_json(j, "m/config.json"); },
                     {"layer_types[0]", "Olmo2ForCausalLM has no sliding layers"});
  j["layer_types"] = {"full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(HfConfig::from_json(j, "m/config.json").sliding_window, 0);

  // Tensors: an input norm is not a parameter; a per-head q_norm has the wrong shape.
  auto folder = [&](const NamedTensors& w) { return folder_with("olmo-bad", s.config(), w); };
  auto w = olmo_weights(s, 3);
  w.emplace_back("model.layers.0.input_layernorm.weight", torch::ones({s.hidden}, torch::kFloat64));
  auto d1 = folder(w);
  expect_input_error([&] { load_hf_model(d1->path(), torch::kFloat32); },
                     {"model.layers.0.input_layernorm.weight", "unexpected tensor"});
  w = olmo_weights(s, 3);
  for (auto& [n, t] : w)
    if (n == "model.layers.1.self_attn.q_norm.weight") t = torch::ones({s.hd()}, torch::kFloat64);
  auto d2 = folder(w);
  expect_input_error([&] { load_hf_model(d2->path(), torch::kFloat32); },
                     {"model.layers.1.self_attn.q_norm.weight", "shape [8]", "[32]", "num_attention_heads"});
  w = olmo_weights(s, 3);
  w.erase(std::remove_if(w.begin(), w.end(), [](const auto& p) { return p.first == "model.layers.2.post_feedforward_layernorm.weight"; }),
          w.end());
  auto d3 = folder(w);
  expect_input_error([&] { load_hf_model(d3->path(), torch::kFloat32); },
                     {"missing tensor 'model.layers.2.post_feedforward_layernorm.weight'"});

  // Export: OLMo's layout only as OLMo 2/3, and they only with it; LayerRoute needs full attention.
  const auto dense = to_dense_config(HfConfig::from_json(s.config(), "config.json"));
  expect_input_error([&] { from_dense_config(dense, kLlamaArch, "float32"); }, {"OLMo-layout", "olmo2"});
  expect_input_error([&] { from_dense_config(dense, kQwen3Arch, "float32"); }, {"OLMo-layout"});
  auto llama = dense;
  llama.input_norms = true;
  llama.sandwich_norm = llama.qk_norm = llama.qk_norm_across_heads = false;
  expect_input_error([&] { from_dense_config(llama, kOlmo2Arch, "float32"); },
                     {"Olmo2ForCausalLM", "input_norms true", "export as Qwen2ForCausalLM"});
  // Llama-layout blocks with q/k norms across heads, or OLMo's without them: no
  // architecture has them (an export would not load), whatever --arch says.
  auto mixed = llama;
  mixed.qk_norm = mixed.qk_norm_across_heads = true;
  auto headless = dense;
  headless.qk_norm_across_heads = false;
  for (const auto& bad_blocks : {mixed, headless})
    for (const char* arch : {kQwen3Arch, kQwen2Arch, kOlmo2Arch, kOlmo3Arch})
      expect_input_error([&] { from_dense_config(bad_blocks, arch, "float32"); },
                         {"no Hugging Face architecture has them"});
  s3.layers = 4;
  const auto sliding = to_dense_config(HfConfig::from_json(s3.config(), "config.json"));
  expect_input_error([&] { from_dense_config(sliding, kOlmo2Arch, "float32"); }, {"sliding", "Olmo2ForCausalLM"});
  // LayerRoute runs OLMo 3's sliding layers: with every gate open and no LoRA, the
  // base's own forward.
  auto base = random_dense(sliding, 1, torch::kFloat32);
  layerroute::GatedModel gated(base, layerroute::LoraConfig{}, layerroute::GateConfig{}, 0);
  layerroute::GatedOptions open;
  open.mode = layerroute::GateMode::Open;
  torch::NoGradGuard ng;
  const auto t = torch::tensor(some_tokens(14, s.vocab), torch::kInt64).unsqueeze(0);
  EXPECT_LT((gated->forward(t, torch::Tensor(), open).logits - base->forward(t)).abs().max().item<double>(), 1e-5);
}

TEST(HfOlmo, ExportRoundTrip) {
  // A loaded OLMo 2 / OLMo 3 folder exported again (the default architecture follows the
  // layout) reloads with the same config and the same logits; OLMo 3's layer types are
  // written out.
  for (bool olmo3 : {false, true}) {
    SCOPED_TRACE(olmo3 ? "OLMo 3" : "OLMo 2");
    OlmoShape s;
    s.olmo3 = olmo3;
    s.layers = 5;
    TempDir dir("olmo-export");
    std::filesystem::create_directories(dir.path() + "/in");
    write_text(dir.path() + "/in/config.json", s.config().dump(2));
    write_hf_weights(dir.path() + "/in", olmo_weights(s, 17), torch::kFloat32);
    HfConfig read;
    auto m = load_hf_model(dir.path() + "/in", torch::kFloat32, torch::kCPU, &read);
    ExportOptions eo;
    eo.architecture = default_architecture(m->config());
    EXPECT_EQ(eo.architecture, olmo3 ? kOlmo3Arch : kOlmo2Arch);
    const auto written = export_hf(*m, nullptr, dir.path() + "/out", eo);
    const auto j = nlohmann::json::parse(read_text(dir.path() + "/out/config.json"));
    EXPECT_EQ(j["model_type"], olmo3 ? "olmo3" : "olmo2");
    EXPECT_FALSE(j.contains("mlp_bias"));
    if (olmo3) {
      EXPECT_EQ(j["layer_types"], nlohmann::json({"sliding_attention", "sliding_attention", "sliding_attention",
                                                  "full_attention", "sliding_attention"}));
      EXPECT_EQ(j["sliding_window"], s.window);
    }
    HfConfig again;
    auto m2 = load_hf_model(dir.path() + "/out", torch::kFloat32, torch::kCPU, &again);
    EXPECT_EQ(again.sliding_window, read.sliding_window);
    EXPECT_EQ(again.full_attention_interval, read.full_attention_interval);
    EXPECT_EQ(m2->config().to_json(), m->config().to_json());
    const auto tokens = some_tokens(15, s.vocab);
    EXPECT_EQ((full_logits(m2, tokens) - full_logits(m, tokens)).abs().max().item<double>(), 0.0);
  }
}

TEST(HfOlmo, Olmo3ExportOfLeadingFullLayersAndAnIntervalReloads) {
  // n_full_prelude 1 and full_attention_interval 3 over 6 layers: layer_types F S F S S F,
  // which the reader takes back as the same layout (and the same logits).
  OlmoShape s;
  s.olmo3 = true;
  s.layers = 6;
  auto d = to_dense_config(HfConfig::from_json(s.config(), "config.json"));
  d.n_full_prelude = 1;
  d.full_attention_interval = 3;
  auto m = random_dense(d, 3, torch::kFloat32);
  TempDir dir("olmo3-layout");
  ExportOptions eo;
  eo.architecture = kOlmo3Arch;
  export_hf(*m, nullptr, dir.path() + "/out", eo);
  const auto j = nlohmann::json::parse(read_text(dir.path() + "/out/config.json"));
  EXPECT_EQ(j["layer_types"], nlohmann::json({"full_attention", "sliding_attention", "full_attention",
                                              "sliding_attention", "sliding_attention", "full_attention"}));
  auto back = load_hf_model(dir.path() + "/out", torch::kFloat32);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(back->config().layer_attention(i).kind, d.layer_attention(i).kind) << i;
  const auto tokens = some_tokens(17, s.vocab);
  EXPECT_EQ((full_logits(back, tokens) - full_logits(m, tokens)).abs().max().item<double>(), 0.0);
}

TEST(HfOlmo, OutputNormLayoutTrains) {
  // A dense model of OLMo's layout trains like any other: the gradient of its loss
  // reaches every parameter (the output norms and the whole-width q/k norms included).
  OlmoShape s;
  auto dense = to_dense_config(HfConfig::from_json(s.config(), "config.json"));
  auto m = random_dense(dense, 5, torch::kFloat64);
  m->train();
  const auto t = torch::tensor(some_tokens(12, s.vocab), torch::kInt64).unsqueeze(0);
  auto logits = m->forward(t);
  auto loss = torch::nn::functional::cross_entropy(logits.squeeze(0).narrow(0, 0, 11), t.squeeze(0).narrow(0, 1, 11));
  loss.backward();
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
  EXPECT_FALSE(m->named_parameters().contains("model.layers.0.input_layernorm.weight"));
  EXPECT_TRUE(m->named_parameters().contains("model.layers.0.post_feedforward_layernorm.weight"));
  EXPECT_EQ(m->named_parameters()["model.layers.0.self_attn.q_norm.weight"].numel(), s.heads * s.hd());
}

}  // namespace
}  // namespace lol::hf::test
