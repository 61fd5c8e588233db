// Cohere Command-R (CohereForCausalLM) folders: config.json parsing (CohereConfig's
// defaults: layer_norm_eps 1e-5, logit_scale 0.0625, tied embeddings; refusals), the loaded
// model's logits against a float64 reference written here from transformers'
// CohereDecoderLayer / CohereAttention / CohereLayerNorm equations (parallel blocks with one
// bias-free LayerNorm, RoPE in interleaved pairs, logits times logit_scale), full forward
// and cached decoding on both paths, export back to the source folder, and refusals.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

/// A tiny Command-R folder.
struct CohereShape {
  int64_t vocab = 61, hidden = 32, ffn = 40, layers = 3, heads = 4, kv_heads = 2, max_pos = 64;
  double rope_theta = 500, eps = 1e-5, logit_scale = 0.3;
  bool tied = true;
  int64_t hd() const { return hidden / heads; }
  nlohmann::json config() const {
    return {{"architectures", {"CohereForCausalLM"}},
            {"model_type", "cohere"},
            {"vocab_size", vocab},
            {"hidden_size", hidden},
            {"intermediate_size", ffn},
            {"logit_scale", logit_scale},
            {"num_hidden_layers", layers},
            {"num_attention_heads", heads},
            {"num_key_value_heads", kv_heads},
            {"hidden_act", "silu"},
            {"max_position_embeddings", max_pos},
            {"layer_norm_eps", eps},
            {"rope_theta", rope_theta},
            {"rope_scaling", nullptr},
            {"attention_bias", false},
            {"use_qk_norm", false},
            {"tie_word_embeddings", tied},
            {"torch_dtype", "float32"},
            {"pad_token_id", 0},
            {"bos_token_id", 5},
            {"eos_token_id", 6}};
  }
};

/// Random weights under Cohere's names (no post_attention_layernorm, no biases); norm
/// weights 1 + N(0, 0.3).
NamedTensors cohere_weights(const CohereShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t hd = s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, s.hidden}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({s.hidden}, 0.3, 1.0));
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({s.heads * hd, s.hidden}, 0.3));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.3));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.3));
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({s.hidden, s.heads * hd}, 0.3));
    w.emplace_back(p + "mlp.gate_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.up_proj.weight", rnd({s.ffn, s.hidden}, 0.3));
    w.emplace_back(p + "mlp.down_proj.weight", rnd({s.hidden, s.ffn}, 0.3));
  }
  w.emplace_back("model.norm.weight", rnd({s.hidden}, 0.3, 1.0));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, s.hidden}, 0.3));
  return w;
}

/// transformers' CohereForCausalLM forward in float64, from the equations: tokens [T] ->
/// logits [T, vocab]. `interleaved` false: rotate-half RoPE instead (the sensitivity check).
torch::Tensor cohere_reference(const CohereShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens,
                               bool interleaved = true) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t.to(torch::kFloat64);
  const int64_t T = int64_t(tokens.size()), hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) {  // CohereLayerNorm: no bias
    auto mu = x.mean(-1, true);
    return w.at(n) * (x - mu) / torch::sqrt((x - mu).pow(2).mean(-1, true) + s.eps);
  };
  // Cohere's rotary embedding: freqs in float32, repeated element-wise (repeat_interleave),
  // rotate_half pairing (2i, 2i + 1): [-x1, x0, -x3, x2, ...].
  auto inv = 1.0 / torch::pow(torch::tensor(s.rope_theta, torch::kFloat32),
                              torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd));
  auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);
  const ReferenceRope half(T, hd, hd, s.rope_theta);
  auto cos = ang.cos().to(torch::kFloat64).repeat_interleave(2, -1).unsqueeze(1);
  auto sin = ang.sin().to(torch::kFloat64).repeat_interleave(2, -1).unsqueeze(1);
  auto rope = [&](const torch::Tensor& x) {  // [T, heads, hd]
    if (!interleaved) return half(x);
    auto pairs = x.view({T, x.size(1), hd / 2, 2});
    auto rot = torch::stack({-pairs.select(-1, 1), pairs.select(-1, 0)}, -1).view({T, x.size(1), hd});
    return x * cos + rot * sin;
  };
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto h = ln(x, p + "input_layernorm.weight");
    auto q = rope(named_linear(w, h, p + "self_attn.q_proj").view({T, s.heads, hd}));
    auto k = rope(named_linear(w, h, p + "self_attn.k_proj").view({T, s.kv_heads, hd}));
    auto v = named_linear(w, h, p + "self_attn.v_proj").view({T, s.kv_heads, hd});
    auto attn = named_linear(w, reference_causal_attention(q, k, v), p + "self_attn.o_proj");
    auto mlp = named_linear(
        w, torch::silu(named_linear(w, h, p + "mlp.gate_proj")) * named_linear(w, h, p + "mlp.up_proj"), p + "mlp.down_proj");
    x = x + attn + mlp;  // parallel: both read ln(x)
  }
  x = ln(x, "model.norm.weight");
  const auto& head = s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
  return torch::matmul(x, head.t()) * s.logit_scale;
}

void check_against_reference(const CohereShape& s, uint64_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("cohere");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = cohere_weights(s, seed);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(14, s.vocab);
  const auto ref = cohere_reference(s, rounded(weights, torch::kFloat32), tokens);
  // (The reference is sensitive to the pairing: rotate-half pairs compute other logits.)
  EXPECT_GT((cohere_reference(s, rounded(weights, torch::kFloat32), tokens, false) - ref).abs().max().item<double>(),
            1e-3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
}

TEST(HfCohere, LogitsEqualReference) {
  CohereShape s;
  check_against_reference(s, 3, "tied, 4 heads / 2 kv heads, logit_scale 0.3");
  s.tied = false;
  s.kv_heads = 1;
  s.logit_scale = 2.0;
  check_against_reference(s, 5, "untied, one kv head, logit_scale 2");
}

TEST(HfCohere, ConfigDefaultsAndRefusals) {
  CohereShape s;
  auto j = s.config();
  for (const char* k : {"num_key_value_heads", "layer_norm_eps", "rope_theta", "tie_word_embeddings", "logit_scale",
                        "attention_bias", "use_qk_norm"})
    j.erase(k);
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_cohere());
  EXPECT_EQ(c.model_type(), "cohere");
  EXPECT_EQ(c.num_key_value_heads, s.heads);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.logit_scale, 0.0625);
  const auto d = to_dense_config(c);
  EXPECT_EQ(d.norm, "layernorm");
  EXPECT_TRUE(d.parallel_residual && d.shared_input_norm);
  EXPECT_EQ(d.mlp, "gated");
  EXPECT_EQ(d.logit_scale, 0.0625);
  EXPECT_EQ(default_architecture(d), kCohereArch);
  EXPECT_EQ(architecture_from_name("cohere"), kCohereArch);
  // The dense config.json keeps logit_scale.
  EXPECT_EQ(baselines::DenseConfig::from_json(d.to_json(), "config.json").logit_scale, 0.0625);
  // The parameter count is the folder's tensors' (no norm biases, no post-attention norm).
  int64_t numel = 0;
  for (const auto& [n, t] : cohere_weights(s, 1)) numel += t.numel();
  EXPECT_EQ(parameter_count(HfConfig::from_json(s.config(), "config.json")), numel);

  auto refused = [&](const char* key, const nlohmann::json& value, std::vector<std::string> words) {
    auto bad = CohereShape().config();
    bad[key] = value;
    words.insert(words.begin(), {"m/config.json", key});
    expect_input_error([&] { HfConfig::from_json(bad, "m/config.json"); }, words);
  };
  refused("use_qk_norm", true, {"Command R+"});
  refused("attention_bias", true, {"o_proj"});
  refused("hidden_act", "gelu", {"SiLU"});
  refused("logit_scale", 0.0, {"positive"});
  refused("logit_scale", nullptr, {"positive number"});
  refused("layer_norm_eps", 2.0, {"layer_norm_eps"});
}

TEST(HfCohere, RefusedTensors) {
  CohereShape s;
  auto folder = [&](const NamedTensors& w) { return folder_with("cohere-bad", s.config(), w); };
  // A LayerNorm bias is no parameter of CohereLayerNorm (transformers would ignore it).
  auto w = cohere_weights(s, 3);
  w.emplace_back("model.layers.1.input_layernorm.bias", torch::zeros({s.hidden}, torch::kFloat64));
  auto d1 = folder(w);
  expect_input_error([&] { load_hf_model(d1->path(), torch::kFloat32); },
                     {"model.layers.1.input_layernorm.bias", "unexpected tensor"});
  // Llama's post_attention_layernorm is not Cohere's either.
  w = cohere_weights(s, 3);
  w.emplace_back("model.layers.0.post_attention_layernorm.weight", torch::ones({s.hidden}, torch::kFloat64));
  auto d2 = folder(w);
  expect_input_error([&] { load_hf_model(d2->path(), torch::kFloat32); },
                     {"model.layers.0.post_attention_layernorm.weight", "unexpected tensor"});
  w = cohere_weights(s, 3);
  w.erase(std::remove_if(w.begin(), w.end(), [](const auto& p) { return p.first == "model.layers.2.mlp.up_proj.weight"; }),
          w.end());
  auto d3 = folder(w);
  expect_input_error([&] { load_hf_model(d3->path(), torch::kFloat32); },
                     {"missing tensor 'model.layers.2.mlp.up_proj.weight'"});
}

TEST(HfCohere, ExportWritesTheSourceFolderBack) {
  CohereShape s;
  s.tied = false;
  TempDir dir("cohere-export");
  const auto config = s.config();
  write_text(dir.path() + "/config.json", config.dump(2));
  const auto weights = cohere_weights(s, 9);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path(), torch::kFloat32);
  // Rows reordered on load and back on export, zero norm biases dropped: bit for bit.
  expect_export_writes_source_back(m, kCohereArch, dir.path() + "/out", config,
                                   {"architectures", "model_type", "logit_scale", "layer_norm_eps", "rope_theta",
                                    "num_key_value_heads", "tie_word_embeddings", "use_qk_norm"},
                                   rounded(weights, torch::kFloat32));
  // As StableLM (parallel blocks with one input_layernorm, zero LayerNorm biases, whole
  // heads rotated): refused for its logit scale.
  expect_input_error([&] { from_dense_config(m->config(), kStableLmArch, "float32"); },
                     {"logit_scale 0.3", "does not scale its logits", "export as CohereForCausalLM"});
  // A model whose LayerNorm biases are not zero (trained here with "norm": "layernorm") is refused.
  {
    torch::NoGradGuard ng;
    m->layers[1]->as<nn::Block>()->input_layernorm->bias.fill_(0.5);
  }
  ExportOptions eo;
  eo.architecture = kCohereArch;
  expect_input_error([&] { export_hf(*m, nullptr, dir.path() + "/out2", eo); },
                     {"model.layers.1.input_layernorm.bias", "no bias", "StableLmForCausalLM"});
  // Cohere's blocks only: sequential blocks or q/k/v biases are refused.
  auto seq = m->config();
  seq.parallel_residual = seq.shared_input_norm = false;
  expect_input_error([&] { from_dense_config(seq, kCohereArch, "float32"); }, {"parallel", "CohereForCausalLM"});
  auto biased = m->config();
  biased.qkv_bias = true;
  expect_input_error([&] { from_dense_config(biased, kCohereArch, "float32"); }, {"qkv_bias", "CohereForCausalLM"});
}

}  // namespace
}  // namespace lol::hf::test
