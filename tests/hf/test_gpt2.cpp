// GPT-2 (GPT2LMHeadModel) folders: config.json parsing (GPT2Config's names and defaults,
// refusals), the parameter count of gpt2 (transformers' num_parameters: 124,439,808), and
// the loaded model's logits (full forward and cached decoding) against a float64
// reference written here from GPT-2's equations: h = x + c_proj(attn(ln_1(x))),
// y = h + mlp.c_proj(gelu_new(mlp.c_fc(ln_2(h)))), LayerNorms with biases, learned
// absolute positions (wpe), Conv1D weights stored [in, out], q/k/v in one c_attn.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct Gpt2Shape {
  int64_t vocab = 61, embd = 32, layers = 3, heads = 4, positions = 48, inner = 0;  ///< inner 0: 4 embd
  double eps = 1e-5;
  std::string act = "gelu_new";
  bool prefix = true;      ///< tensors under "transformer." (GPT2LMHeadModel's state dict)
  bool buffers = false;    ///< older files' attn.bias (bool / uint8) / attn.masked_bias causal-mask buffers
  bool stored_head = false;  ///< lm_head.weight stored too (a tied copy)
  bool tied = true;          ///< false: a separate lm_head.weight (tie_word_embeddings false)
  int64_t ffn() const { return inner > 0 ? inner : 4 * embd; }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                        {"model_type", "gpt2"},
                        {"vocab_size", vocab},
                        {"n_embd", embd},
                        {"n_layer", layers},
                        {"n_head", heads},
                        {"n_positions", positions},
                        {"n_ctx", positions},
                        {"n_inner", inner > 0 ? nlohmann::json(inner) : nlohmann::json(nullptr)},
                        {"activation_function", act},
                        {"layer_norm_epsilon", eps},
                        {"resid_pdrop", 0.1},
                        {"embd_pdrop", 0.1},
                        {"attn_pdrop", 0.1},
                        {"initializer_range", 0.02},
                        {"scale_attn_weights", true},
                        {"reorder_and_upcast_attn", false},
                        {"bos_token_id", 2},
                        {"eos_token_id", 1},
                        {"torch_dtype", "float32"},
                        {"tie_word_embeddings", tied}};
    return j;
  }
};

/// Random weights under GPT-2's names (Conv1D weights [in, out]); LayerNorm weights near 1
/// with biases, so that a loader dropping the bias or the mean computes another function.
NamedTensors gpt2_weights(const Gpt2Shape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const std::string pre = s.prefix ? "transformer." : "";
  const int64_t d = s.embd, F = s.ffn();
  NamedTensors w;
  w.emplace_back(pre + "wte.weight", rnd({s.vocab, d}, 0.3));
  w.emplace_back(pre + "wpe.weight", rnd({s.positions, d}, 0.3));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = pre + "h." + std::to_string(i) + ".";
    w.emplace_back(p + "ln_1.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "ln_1.bias", rnd({d}, 0.2, 0.5));
    w.emplace_back(p + "attn.c_attn.weight", rnd({d, 3 * d}, 0.3));
    w.emplace_back(p + "attn.c_attn.bias", rnd({3 * d}, 0.3));
    w.emplace_back(p + "attn.c_proj.weight", rnd({d, d}, 0.2));
    w.emplace_back(p + "attn.c_proj.bias", rnd({d}, 0.2));
    w.emplace_back(p + "ln_2.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "ln_2.bias", rnd({d}, 0.2, -0.5));
    w.emplace_back(p + "mlp.c_fc.weight", rnd({d, F}, 0.3));
    w.emplace_back(p + "mlp.c_fc.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.c_proj.weight", rnd({F, d}, 0.2));
    w.emplace_back(p + "mlp.c_proj.bias", rnd({d}, 0.2));
    if (s.buffers) {
      // (transformers 4.x saved the mask as bool, older releases as uint8)
      w.emplace_back(p + "attn.bias",
                     torch::ones({1, 1, s.positions, s.positions}, i % 2 ? torch::kUInt8 : torch::kBool).tril());
      w.emplace_back(p + "attn.masked_bias", torch::full({}, -1e4, torch::kFloat64));
    }
  }
  w.emplace_back(pre + "ln_f.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back(pre + "ln_f.bias", rnd({d}, 0.2));
  if (s.stored_head) w.emplace_back("lm_head.weight", w[0].second.clone());
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.3));
  return w;
}

/// transformers' GPT2LMHeadModel forward in float64, from the equations: tokens [T] -> logits [T, vocab].
torch::Tensor gpt2_reference(const Gpt2Shape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  const std::string pre = s.prefix ? "transformer." : "";
  for (const auto& [n, t] : named) w[n.rfind(pre, 0) == 0 ? n.substr(pre.size()) : n] = t;
  const int64_t T = int64_t(tokens.size()), d = s.embd, H = s.heads, hd = d / H;
  auto ln = [&](const torch::Tensor& x, const std::string& n) {
    auto mu = x.mean(-1, true);
    auto var = (x - mu).pow(2).mean(-1, true);
    return (x - mu) / torch::sqrt(var + s.eps) * w.at(n + ".weight") + w.at(n + ".bias");
  };
  auto conv1d = [&](const torch::Tensor& x, const std::string& n) {  // Conv1D: x W + b, W [in, out]
    return torch::matmul(x, w.at(n + ".weight")) + w.at(n + ".bias");
  };
  auto gelu = [&](const torch::Tensor& g) {
    if (s.act == "gelu") return 0.5 * g * (1.0 + torch::erf(g / std::sqrt(2.0)));
    return 0.5 * g * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g.pow(3))));
  };
  auto ids = torch::tensor(tokens, torch::kInt64);
  auto x = w.at("wte.weight").index_select(0, ids) + w.at("wpe.weight").narrow(0, 0, T);
  auto idx = torch::arange(T, torch::kInt64);
  auto causal = idx.unsqueeze(1) >= idx.unsqueeze(0);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    auto qkv = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn");  // [T, 3d]
    auto q = qkv.narrow(1, 0, d).view({T, H, hd}), k = qkv.narrow(1, d, d).view({T, H, hd});
    auto v = qkv.narrow(1, 2 * d, d).view({T, H, hd});
    auto sc = torch::einsum("qhd,khd->hqk", {q, k}) / std::sqrt(double(hd));
    sc = sc.masked_fill(~causal, -std::numeric_limits<double>::infinity());
    auto a = torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), v}).reshape({T, d});
    x = x + conv1d(a, p + "attn.c_proj");
    x = x + conv1d(gelu(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj");
  }
  return torch::matmul(ln(x, "ln_f"), w.at(s.tied ? "wte.weight" : "lm_head.weight").t());
}

void check_against_reference(const Gpt2Shape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("gpt2");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = gpt2_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto ref = gpt2_reference(s, rounded(weights, torch::kFloat32), tokens);
  ASSERT_GT(ref.std().item<double>(), 0.3);
  auto m = expect_folder_matches_reference(dir.path(), tokens, ref);
  // The positions matter: the same tokens shifted by one position give other logits.
  std::vector<int64_t> shifted = {tokens[0]};
  shifted.insert(shifted.end(), tokens.begin(), tokens.end());
  EXPECT_GT((full_logits(m, shifted).narrow(0, 1, 10) - ref.narrow(0, 0, 10)).abs().max().item<double>(), 1e-3);
}

TEST(HfGpt2, LogitsEqualReference) {
  Gpt2Shape s;
  check_against_reference(s, "gpt2 tanh GELU, transformer. prefix");
  s.prefix = false;  // GPT2Model's state dict (the Hub's gpt2 model.safetensors)
  s.buffers = true;
  s.stored_head = true;
  s.act = "gelu";
  s.inner = 40;
  check_against_reference(s, "gpt2 without prefix, mask buffers, stored lm_head, exact GELU, n_inner 40");
}

TEST(HfGpt2, ConfigDefaultsParameterCountAndRefusals) {
  // gpt2 (124M): the Hub's config.json keys that matter.
  nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", 50257},
                      {"n_embd", 768}, {"n_layer", 12}, {"n_head", 12}, {"n_positions", 1024}, {"n_ctx", 1024},
                      {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_gpt2());
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{50256});
  EXPECT_EQ(c.activation, "gelu_pytorch_tanh");
  EXPECT_EQ(parameter_count(c), 124439808);  // transformers: GPT2LMHeadModel("gpt2").num_parameters()
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.norm, "layernorm");
  EXPECT_EQ(dc.positions, "learned");
  EXPECT_EQ(baselines::DenseConfig::from_json(dc.to_json(), "x").to_json(), dc.to_json());

  auto refused = [&](const char* key, nlohmann::json v, std::vector<std::string> needles) {
    auto bad = j;
    bad[key] = v;
    needles.push_back(key);
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  refused("scale_attn_weights", false, {"not supported"});
  refused("scale_attn_by_inverse_layer_idx", true, {"not supported"});
  refused("add_cross_attention", true, {"not supported"});
  refused("activation_function", "relu", {"relu"});
  refused("n_head", 7, {"n_embd", "multiple of n_head"});
  auto missing = j;
  missing.erase("n_embd");
  expect_input_error([&] { HfConfig::from_json(missing, "config.json"); }, {"n_embd", "missing"});

  // A folder missing a tensor names it by GPT-2's name; a wrongly shaped c_attn names its
  // expected [in, out] shape.
  Gpt2Shape s;
  TempDir dir("gpt2-bad");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  NamedTensors w;
  for (auto& [n, t] : gpt2_weights(s, 3))
    if (n != "transformer.h.1.mlp.c_fc.bias") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"h.1.mlp.c_fc.bias", "missing"});
  for (auto& [n, t] : w)
    if (n == "transformer.h.0.attn.c_attn.weight") t = t.t().contiguous();
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"h.0.attn.c_attn.weight", "[32, 96]"});

  // Export as another architecture is refused, naming the layout.
  write_hf_weights(dir.path(), gpt2_weights(s, 3), torch::kFloat32);
  auto m = load_hf_model(dir.path());
  expect_input_error([&] { from_dense_config(m->config(), kQwen2Arch, "float32"); }, {"GPT-2's", "layout", "--arch gpt2"});
  // GPT2LMHeadModel holds GPT-2's layout only.
  auto gqa = m->config();
  gqa.n_kv_heads = 2;
  expect_input_error([&] { from_dense_config(gqa, kGpt2Arch, "float32"); }, {"n_kv_heads = 2", "GPT2LMHeadModel"});
  auto silu = m->config();
  silu.activation = "silu";
  expect_input_error([&] { from_dense_config(silu, kGpt2Arch, "float32"); }, {"activation \"silu\""});
  baselines::DenseConfig llama;
  llama.vocab_size = 61;
  llama.d_model = 32;
  llama.n_heads = llama.n_kv_heads = 4;
  llama.ffn_hidden = 40;
  llama.n_layers = 2;
  expect_input_error([&] { from_dense_config(llama, kGpt2Arch, "float32"); }, {"norm \"rmsnorm\"", "GPT2LMHeadModel"});
}

// `lol export --hf` of a GPT-2-layout model writes GPT2LMHeadModel's folder: GPT2Config's
// keys, the source's tensor names and values (Conv1D [in, out], c_attn fused again), and
// the function (the exported folder against the float64 reference of the source weights).
TEST(HfGpt2, ExportWritesTheSourceFolderBack) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Gpt2Shape s;
    s.inner = 40;
    s.act = "gelu";
    s.tied = tied;
    TempDir dir("gpt2-export");
    const auto cfg = s.config();
    write_text(dir.path() + "/config.json", cfg.dump(2));
    const auto weights = gpt2_weights(s, 9);
    write_hf_weights(dir.path(), weights, torch::kFloat32);
    auto m = load_hf_model(dir.path());
    const std::string out = dir.path() + "/exported";
    const auto stored = rounded(weights, torch::kFloat32);
    expect_export_writes_source_back(m, kGpt2Arch, out, cfg,
                                     {"vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "n_inner",
                                      "activation_function", "layer_norm_epsilon", "tie_word_embeddings"},
                                     stored);
    const auto tokens = some_tokens(29, s.vocab);
    Gpt2Shape read_back = s;
    read_back.prefix = true;
    expect_folder_matches_reference(out, tokens, gpt2_reference(read_back, stored, tokens));
  }
}

}  // namespace
}  // namespace lol::hf::test
