// GPT-BigCode (GPTBigCodeForCausalLM, model_type "gpt_bigcode": bigcode/starcoder,
// starcoderbase, santacoder, tiny_starcoder) folders: config.json parsing (GPTBigCodeConfig's
// names and defaults, refusals), the parameter count of starcoderbase-1b's shapes, the loaded
// model's logits (full forward and cached decoding) against a float64 reference written here
// from GPT-BigCode's equations, and export back to the same folder:
//   h = x + c_proj(attn(ln_1 x)); y = h + mlp.c_proj(gelu(mlp.c_fc(ln_2 h)))
// with LayerNorms (weight and bias), learned absolute positions (wpe), nn.Linear weights
// stored [out, in], and c_attn holding the query rows, then one key head's, then one value
// head's (multi_query) or per head [q; k; v] (multi_query false).
#include "hf_test_util.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"

namespace lol::hf::test {
namespace {

struct BigCodeShape {
  int64_t vocab = 61, embd = 32, layers = 3, heads = 4, positions = 48, inner = 56;
  double eps = 1e-5;
  std::string act = "gelu_pytorch_tanh";
  bool multi_query = true, buffer = false;
  int64_t hd() const { return embd / heads; }
  int64_t kv() const { return multi_query ? 1 : heads; }
  nlohmann::json config() const {
    return {{"architectures", {"GPTBigCodeForCausalLM"}},
            {"model_type", "gpt_bigcode"},
            {"vocab_size", vocab},
            {"n_embd", embd},
            {"n_layer", layers},
            {"n_head", heads},
            {"n_positions", positions},
            {"n_inner", inner},
            {"activation_function", act},
            {"layer_norm_epsilon", eps},
            {"multi_query", multi_query},
            {"scale_attn_weights", true},
            {"attention_softmax_in_fp32", true},
            {"scale_attention_softmax_in_fp32", true},
            {"resid_pdrop", 0.1},
            {"embd_pdrop", 0.1},
            {"attn_pdrop", 0.1},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
  }
};

/// Random weights under GPT-BigCode's names ("transformer." prefix); LayerNorm weights near 1.
NamedTensors bigcode_weights(const BigCodeShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t d = s.embd, F = s.inner, rows = d + 2 * s.kv() * s.hd();
  NamedTensors w;
  w.emplace_back("transformer.wte.weight", rnd({s.vocab, d}, 0.5));
  w.emplace_back("transformer.wpe.weight", rnd({s.positions, d}, 0.3));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* n : {"ln_1", "ln_2"}) {
      w.emplace_back(p + n + ".weight", rnd({d}, 0.2, 1.0));
      w.emplace_back(p + n + ".bias", rnd({d}, 0.2, 0.2));
    }
    w.emplace_back(p + "attn.c_attn.weight", rnd({rows, d}, 0.4));
    w.emplace_back(p + "attn.c_attn.bias", rnd({rows}, 0.3));
    w.emplace_back(p + "attn.c_proj.weight", rnd({d, d}, 0.2));
    w.emplace_back(p + "attn.c_proj.bias", rnd({d}, 0.2));
    w.emplace_back(p + "mlp.c_fc.weight", rnd({F, d}, 0.3));
    w.emplace_back(p + "mlp.c_fc.bias", rnd({F}, 0.3));
    w.emplace_back(p + "mlp.c_proj.weight", rnd({d, F}, 0.2));
    w.emplace_back(p + "mlp.c_proj.bias", rnd({d}, 0.2));
  }
  w.emplace_back("transformer.ln_f.weight", rnd({d}, 0.2, 1.0));
  w.emplace_back("transformer.ln_f.bias", rnd({d}, 0.2));
  if (s.buffer)  // (older files: the model-level causal mask)
    w.emplace_back("transformer.bias", torch::ones({s.positions, s.positions}, torch::kBool).tril());
  return w;
}

/// transformers' GPTBigCodeForCausalLM forward in float64: tokens [T] -> logits [T, vocab].
torch::Tensor bigcode_reference(const BigCodeShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w(named.begin(), named.end());
  const int64_t T = int64_t(tokens.size()), d = s.embd, H = s.heads, hd = s.hd();
  auto ln = [&](const torch::Tensor& x, const std::string& n) { return named_layer_norm(w, x, n, s.eps); };
  auto lin = [&](const torch::Tensor& x, const std::string& n) {
    return torch::matmul(x, w.at(n + ".weight").t()) + w.at(n + ".bias");
  };
  auto x = w.at("transformer.wte.weight").index_select(0, torch::tensor(tokens, torch::kInt64)) +
           w.at("transformer.wpe.weight").narrow(0, 0, T);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    auto qkv = lin(ln(x, p + "ln_1"), p + "attn.c_attn");
    torch::Tensor q, k, v;
    if (s.multi_query) {  // split((d, 2 hd)): queries, then the key head, then the value head
      q = qkv.narrow(1, 0, d).view({T, H, hd});
      k = qkv.narrow(1, d, hd).view({T, 1, hd});
      v = qkv.narrow(1, d + hd, hd).view({T, 1, hd});
    } else {  // view(T, H, 3 hd): per head q, k, v
      auto per = qkv.view({T, H, 3 * hd});
      q = per.narrow(2, 0, hd), k = per.narrow(2, hd, hd), v = per.narrow(2, 2 * hd, hd);
    }
    x = x + lin(reference_causal_attention(q, k, v), p + "attn.c_proj");
    x = x + lin(reference_gelu(lin(ln(x, p + "ln_2"), p + "mlp.c_fc"), s.act == "gelu"), p + "mlp.c_proj");
  }
  return torch::matmul(ln(x, "transformer.ln_f"), w.at("transformer.wte.weight").t());
}

torch::Tensor check_against_reference(const BigCodeShape& s, const std::string& what) {
  SCOPED_TRACE(what);
  TempDir dir("bigcode");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = bigcode_weights(s, 5);
  write_hf_weights(dir.path(), weights, torch::kFloat32);
  const auto tokens = some_tokens(29, s.vocab);
  NamedTensors params;  // (the mask buffer is no parameter)
  for (const auto& [n, t] : rounded(weights, torch::kFloat32))
    if (n != "transformer.bias") params.emplace_back(n, t);
  const auto ref = bigcode_reference(s, params, tokens);
  EXPECT_GT(ref.std().item<double>(), 0.3);
  expect_folder_matches_reference(dir.path(), tokens, ref);
  return ref;
}

TEST(HfGptBigCode, LogitsEqualReference) {
  BigCodeShape s;
  s.buffer = true;
  check_against_reference(s, "multi_query, tanh GELU, the old mask buffer");
  BigCodeShape mha;
  mha.multi_query = false;
  mha.act = "gelu";
  check_against_reference(mha, "multi-head (per head [q; k; v]), exact GELU");
}

TEST(HfGptBigCode, ConfigDefaultsParameterCountAndRefusals) {
  // starcoderbase-1b's shapes (GPTBigCodeConfig's keys; multi_query by default).
  const nlohmann::json j = {{"architectures", {"GPTBigCodeForCausalLM"}}, {"model_type", "gpt_bigcode"},
                            {"vocab_size", 49152}, {"n_embd", 2048}, {"n_layer", 24}, {"n_head", 16},
                            {"n_positions", 8192}, {"n_inner", 8192}, {"activation_function", "gelu_pytorch_tanh"},
                            {"layer_norm_epsilon", 1e-05}, {"scale_attn_weights", true},
                            {"attention_softmax_in_fp32", true}, {"scale_attention_softmax_in_fp32", true},
                            {"bos_token_id", 0}, {"eos_token_id", 0}, {"torch_dtype", "float32"}};
  const auto c = HfConfig::from_json(j, "config.json");
  EXPECT_TRUE(c.is_gpt_bigcode());
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qkv_bias && c.tie_word_embeddings);
  // 24 ((2048 + 256) 2048 + 2048 + 256 + 2048^2 + 2048 + 2 * 2048 * 8192 + 8192 + 2048 + 4 * 2048)
  // + 49152 * 2048 + 8192 * 2048 + 2 * 2048 (tied)
  const int64_t d = 2048, F = 8192;
  EXPECT_EQ(parameter_count(c), 24 * ((d + 256) * d + d + 256 + d * d + d + 2 * d * F + F + d + 4 * d) + 49152 * d +
                                    8192 * d + 2 * d);
  const auto dc = to_dense_config(c);
  EXPECT_EQ(dc.positions, "learned");
  EXPECT_EQ(dc.n_kv_heads, 1);
  EXPECT_EQ(default_architecture(dc), kGptBigCodeArch);
  const auto back = HfConfig::from_json(nlohmann::json::parse(from_dense_config(dc, kGptBigCodeArch, "").to_json().dump()), "w");
  EXPECT_EQ(to_dense_config(back).to_json(), dc.to_json());
  auto mha = j;
  mha["multi_query"] = false;
  EXPECT_EQ(HfConfig::from_json(mha, "config.json").num_key_value_heads, 16);
  auto defaults = j;
  defaults.erase("activation_function");
  EXPECT_EQ(HfConfig::from_json(defaults, "config.json").activation, "gelu_pytorch_tanh");

  auto refused = [&](const nlohmann::json& bad, std::vector<std::string> needles) {
    expect_input_error([&] { HfConfig::from_json(bad, "config.json"); }, needles);
  };
  auto set = [&](const char* key, nlohmann::json v) {
    auto b = j;
    b[key] = v;
    return b;
  };
  refused(set("scale_attn_weights", false), {"scale_attn_weights"});
  refused(set("add_cross_attention", true), {"add_cross_attention"});
  refused(set("activation_function", "relu"), {"activation_function", "relu"});
  refused(set("model_type", "gpt2"), {"model_type", "gpt_bigcode"});
}

// Bad folders name GPT-BigCode's tensors; the export of a loaded folder writes it back bit
// for bit; GPT-2 refuses the multi-query model.
TEST(HfGptBigCode, FoldersRefusedByNameAndExportedBack) {
  BigCodeShape s;
  TempDir dir("bigcode-folder");
  write_text(dir.path() + "/config.json", s.config().dump(2));
  const auto weights = bigcode_weights(s, 3);
  auto transposed = weights;
  for (auto& [n, t] : transposed)
    if (n == "transformer.h.0.attn.c_attn.weight") t = t.t().contiguous();  // (Conv1D's layout: refused)
  write_hf_weights(dir.path(), transposed, torch::kFloat32);
  expect_input_error([&] { load_hf_model(dir.path()); }, {"transformer.h.0.attn.c_attn.weight", "[48, 32]", "multi_query"});

  write_hf_weights(dir.path(), weights, torch::kFloat32);
  auto m = load_hf_model(dir.path());
  const auto stored = rounded(weights, torch::kFloat32);
  expect_export_writes_source_back(m, kGptBigCodeArch, dir.path() + "/exported", s.config(),
                                   {"vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "n_inner",
                                    "activation_function", "layer_norm_epsilon", "multi_query"},
                                   stored);
  const auto tokens = some_tokens(29, s.vocab);
  expect_folder_matches_reference(dir.path() + "/exported", tokens, bigcode_reference(s, stored, tokens));
  expect_input_error([&] { from_dense_config(m->config(), kGpt2Arch, "float32"); },
                     {"n_kv_heads = 1", "multi-head", "export as GPTBigCodeForCausalLM"});
  auto grouped = m->config();
  grouped.n_kv_heads = 2;
  expect_input_error([&] { from_dense_config(grouped, kGptBigCodeArch, "float32"); }, {"n_kv_heads = 2", "multi_query"});
}

}  // namespace
}  // namespace lol::hf::test
