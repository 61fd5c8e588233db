// GPT-J (GPTJForCausalLM, model_type "gptj": EleutherAI/gpt-j-6b) folders: config.json
// parsing (GPTJConfig's names and defaults, refusals), the parameter count of gpt-j-6b
// (the sum of its tensors' sizes, 6,050,882,784), the loaded model's logits (full forward and
// cached decoding) against a float64 reference written here from GPT-J's equations, and
// export back to the same folder:
//   n = ln_1(x); y = x + out_proj(attn(n)) + fc_out(gelu(fc_in(n)))
// with LayerNorms (weight and bias), q/k/v_proj and out_proj without biases, RoPE on the
// leading rotary_dim dimensions of each head in interleaved pairs (2i, 2i + 1) turned by
// position * 10000^(-2i / rotary_dim) (modeling_gptj.py's rotate_every_two), ln_f, and an
// untied lm_head with a bias.
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct GptjShape {
  int64_t vocab = 57, hidden = 48, layers = 3, heads = 4, rotary = 6, inner = 64, positions = 64;
  double eps = 1e-5;
  std::string act = "gelu_new";
  bool buffers = false;  ///< attn.bias / attn.masked_bias buffers of older files
  int64_t hd() const { return hidden / heads; }
  nlohmann::json config() const {
    return {{"architectures", {"GPTJForCausalLM"}},
            {"model_type", "gptj"},
            {"vocab_size", vocab},
            {"n_embd", hidden},
            {"n_layer", layers},
            {"n_head", heads},
            {"n_inner", inner},
            {"n_positions", positions},
            {"rotary_dim", rotary},
            {"activation_function", act},
            {"layer_norm_epsilon", eps},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"tie_word_embeddings", false},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
  }
};

/// Random weights under GPT-J's names; LayerNorm weights near 1 with biases.
NamedTensors gptj_weights(const GptjShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.hidden, F = s.inner;
  NamedTensors w;
  w.emplace_back("transformer.wte.weight", rnd({s.vocab, d}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    w.emplace_back(p + "ln_1.weight", rnd({d}, 0.2, 1.0));
    w.emplace_back(p + "ln_1.bias", rnd({d}, 0.2, 0.3));
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) w.emplace_back(p + "attn." + proj + ".weight", rnd({d, d}, 0.4));
    w.emplace_back(p + "attn.out_proj.weight", rnd({d, d}, 0.2));
    w.emplace_back(p + "mlp.fc_in.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.fc_in.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.fc_out.weight", rnd({d, F}, 0.2));
    w.emplace_back(p + "mlp.fc_out.bias", rnd({d}, 0.2));
    if (s.buffers) {
      w.emplace_back(p + "attn.bias", torch::ones({1, 1, s.positions, s.positions}, torch::kBool).tril());
      w.emplace_back(p + "attn.masked_bias", torch::full({}, -1e9, torch::kFloat64));
    }
  }
  w.emplace_back("transformer.ln_f.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("transformer.ln_f.bias", rnd({d}, 0.2));
  w.emplace_back("lm_head.weight", rnd({s.vocab, d}, 0.5));
  w.emplace_back("lm_head.bias", rnd({s.vocab}, 0.5));
  return w;
}

/// GPT-J's interleaved RoPE on x [T, heads, hd]: for i < r/2 the pair (2i, 2i + 1) turns by
/// t * inv_freq[i], inv_freq = 1 / 10000^(arange(0, r, 2) / r), angles in float32 as
/// transformers' create_sinusoidal_positions computes them; the other hd - r dims pass.
torch::Tensor interleaved_rope(const torch::Tensor& x, int64_t r) {
  const int64_t T = x.size(0);
  auto inv = 1.0 / torch::pow(torch::tensor(10000.0, torch::kFloat32),
                              torch::arange(0, r, 2, torch::kInt64).to(torch::kFloat32) / double(r));
  auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);  // [T, r/2]
  auto cos = ang.cos().to(torch::kFloat64).unsqueeze(1), sin = ang.sin().to(torch::kFloat64).unsqueeze(1);
  auto pairs = x.narrow(-1, 0, r).reshape({x.size(0), x.size(1), r / 2, 2});
  auto even = pairs.select(-1, 0), odd = pairs.select(-1, 1);
  auto rotated = torch::stack({even * cos - odd * sin, odd * cos + even * sin}, -1).reshape({x.size(0), x.size(1), r});
  return torch::cat({rotated, x.narrow(-1, r, x.size(-1) - r)}, -1);
}

/// transformers' GPTJForCausalLM forward in float64: tokens [T] -> logits [T, vocab].
torch::Tensor gptj_reference(const GptjShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens,
                             bool rotate_half = false) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), d = s.hidden, H = s.heads, hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) { return named_linear(w, x, n); };
  const ReferenceRope half(T, hd, s.rotary, 10000.0);
  auto rope = [&](const torch::Tensor& x) { return rotate_half ? half(x) : interleaved_rope(x, s.rotary); };
  auto x = w.at("transformer.wte.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const auto n = ln(x, p + "ln_1");
    auto o = reference_causal_attention(rope(lin(n, p + "attn.q_proj").view({T, H, hd})),
                                        rope(lin(n, p + "attn.k_proj").view({T, H, hd})),
                                        lin(n, p + "attn.v_proj").view({T, H, hd}));
    x = x + lin(o, p + "attn.out_proj") +
        lin(reference_gelu(lin(n, p + "mlp.fc_in"), s.act == "gelu"), p + "mlp.fc_out");
  }
  return lin(ln(x, "transformer.ln_f"), "lm_head");
}

torch::Tensor check_against_reference(const GptjShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("gptj");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = gptj_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto stored = rounded(weights, torch::kFloat32);
  const auto ref = gptj_reference(s, stored, tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  // Interleaved pairs matter: the same weights with rotate-half RoPE give other logits.
  EXPECT_GT((gptj_reference(s, stored, tokens, true) - ref).abs().max().item<double>(), 1e-2);
  expect_folder_matches_reference(dir.path(), tokens, ref);
  return ref;
}

TEST(HfGptJ, LogitsEqualReference) {
  GptjShape s;
  s.buffers = true;
  check_against_reference(s, "partial interleaved rotary (6 of 12), tanh GELU, old buffers");
  GptjShape full;
  full.rotary = 12;
  full.act = "gelu";
  full.heads = 4;
  check_against_reference(full, "rotary over whole heads, exact GELU");
  // The reordering is a permutation of each head's rows and its own inverse's inverse.
  const auto w = torch::arange(2 * 8, torch::kFloat64).reshape({16, 1});
  const auto r = gptj_rotary_rows(w, 2, 8, 6, false);
  EXPECT_TRUE(torch::equal(r.flatten(), torch::tensor(std::vector<double>{0, 2, 4, 1, 3, 5, 6, 7, 8, 10, 12, 9, 11, 13, 14, 15},
                                                      torch::kFloat64)));
  EXPECT_TRUE(torch::equal(gptj_rotary_rows(r, 2, 8, 6, true), w));
}

TEST(HfGptJ, ConfigDefaultsParameterCountAndRefusals) {
  // gpt-j-6b's config.json (the Hub's keys).
  const nlohmann::json j = {{"activation_function", "gelu_new"}, {"architectures", {"GPTJForCausalLM"}},
                            {"attn_pdrop", 0.0}, {"bos_token_id", 50256}, {"embd_pdrop", 0.0},
                            {"eos_token_id", 50256}, {"gradient_checkpointing", false}, {"initializer_range", 0.02},
                            {"layer_norm_epsilon", 1e-05}, {"model_type", "gptj"}, {"n_embd", 4096}, {"n_head", 16},
                            {"n_inner", nullptr}, {"n_layer", 28}, {"n_positions", 2048}, {"resid_pdrop", 0.0},
                            {"rotary", true}, {"rotary_dim", 64}, {"scale_attn_weights", true},
                            {"tie_word_embeddings", false}, {"torch_dtype", "float32"},
                            {"transformers_version", "4.18.0.dev0"}, {"use_cache", true}, {"vocab_size", 50400}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_gptj());
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.activation, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.parallel_residual && c.shared_input_norm && !c.qkv_bias && !c.tie_word_embeddings);
  // 28 (4 4096^2 + 2 4096 16384 + 16384 + 4096 + 2 4096) + 50400 4096 (wte) + 2 4096 (ln_f)
  // + 50400 (4096 + 1) (lm_head)
  EXPECT_EQ(parameter_count(c), 6050882784);
  const auto dc = to_dense_config(c);
  EXPECT_TRUE(dc.parallel_residual && dc.shared_input_norm && dc.mlp_bias && dc.lm_head_bias && !dc.o_bias &&
              !dc.qkv_bias);
  EXPECT_EQ(default_architecture(dc), kPhiArch);  // (the same function, written with Phi's names and rotate-half RoPE)
  const auto back = HfConfig::from_json(nlohmann::json::parse(from_dense_config(dc, kGptJArch, "float32").to_json().dump()), "w");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  EXPECT_EQ(back.rotary_dim(), 64);
  // Rotary dims whose share of the head is no exact binary fraction still read back exactly.
  for (int64_t r : {2, 10, 26, 62, 254}) {
    auto jr = j;
    jr["rotary_dim"] = r;
    EXPECT_EQ(HfConfig::from_json(jr, "config.json").rotary_dim(), r) << r;
  }

  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  refused(set("rotary_dim", nullptr), {"rotary_dim", "null"});
  refused(set("rotary_dim", 63), {"rotary_dim", "even"});
  refused(set("rotary_dim", 258), {"rotary_dim", "256"});
  refused(set("tie_word_embeddings", true), {"tie_word_embeddings", "bias"});
  refused(set("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}), {"rope_scaling", "10000"});
  refused(set("activation_function", "relu"), {"activation_function", "relu"});
  refused(set("n_head", 5), {"n_embd", "multiple of n_head"});
  auto missing = j;
  missing.erase("n_positions");
  refused(missing, {"n_positions", "missing"});
}

// Bad folders name GPT-J's tensors; the export of a loaded folder (as GPT-J) writes it back
// bit for bit, the rotary rows in interleaved order again; exported as Phi (its default) it
// computes the same logits.
TEST(HfGptJ, FoldersRefusedByNameAndExportedBack) {
  GptjShape s;
  TempDir dir("gptj-folder");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = gptj_weights(s, 3);
  NamedTensors w;
  for (auto& [n, t] : weights)
    if (n != "transformer.h.1.attn.k_proj.weight") w.emplace_back(n, t);
  write_hf_weights(dir.path(), w, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"transformer.h.1.attn.k_proj.weight", "missing"});
  auto extra = weights;
  extra.emplace_back("transformer.h.0.attn.q_proj.bias", torch::zeros({s.hidden}, torch::kFloat64));
  write_hf_weights(dir.path(), extra, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"transformer.h.0.attn.q_proj.bias", "unexpected"});
  auto llama_names = weights;
  llama_names.emplace_back("model.layers.0.self_attn.q_proj.weight", torch::zeros({s.hidden, s.hidden}, torch::kFloat64));
  write_hf_weights(dir.path(), llama_names, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"model.layers.0.self_attn.q_proj.weight", "unexpected"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  const auto stored = rounded(weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  const auto ref = gptj_reference(s, stored, tokens);
  expect_export_writes_source_back(m, kGptJArch, dir.path() + "/exported", s.config(),
                                   {"vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "n_positions", "rotary_dim",
                                    "activation_function", "layer_norm_epsilon", "tie_word_embeddings"},
                                   stored, false);
  expect_folder_matches_reference(dir.path() + "/exported", tokens, ref);
  ExportOptions as_phi;
  as_phi.architecture = default_architecture(m->config());
  export_hf(*m, nullptr, dir.path() + "/as-phi", as_phi);
  expect_folder_matches_reference(dir.path() + "/as-phi", tokens, ref);

  auto biased = m->config();
  biased.o_bias = true;
  expect_input_error([&] { from_dense_config(biased, kGptJArch, "float32"); }, {"o_bias", "out_proj"});
  auto based = m->config();
  based.rope_theta = 500.0;
  expect_input_error([&] { from_dense_config(based, kGptJArch, "float32"); }, {"rope_theta", "10000"});
}

}  // namespace
}  // namespace lol::hf::test
