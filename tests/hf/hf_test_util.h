// Helpers of the Hugging Face tests: temporary folders, InputError checks, and tiny
// checkpoints written in Hugging Face layout by the tests themselves (tensor names,
// config.json and index.json spelled out here, independently of src/hf).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "baselines/dense_model.h"
#include "core/tensor_io.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "inference/dense_session.h"
#include "tokenizers/byte_tokenizer.h"
#include "util/error.h"
#include "../common/test_files.h"

namespace lol::hf::test {

using ::lol_test::TempDir;
using ::lol_test::read_text;
using ::lol_test::write_text;
using ::lol_test::expect_input_error;

/// Shape of a tiny test checkpoint.
struct TinyShape {
  std::string arch = "Qwen2ForCausalLM";
  int64_t vocab = 61, hidden = 32, ffn = 40, layers = 2, heads = 4, kv_heads = 2, max_pos = 128;
  int64_t head_dim = 0;  ///< 0: hidden / heads (written to config.json when set, always for Qwen3)
  bool tied = true;
  double rope_theta = 10000.0, eps = 1e-6;
  nlohmann::json rope_scaling = nullptr;  ///< config.json "rope_scaling" as written
  /// The reference's inverse frequencies [hd / 2] when rope_scaling is set (computed by
  /// the test from transformers' formulas) and its cos/sin multiplier.
  std::vector<double> ref_inv_freq;
  double ref_attention_factor = 1.0;
  int64_t hd() const { return head_dim > 0 ? head_dim : hidden / heads; }
  bool qwen3() const { return arch == "Qwen3ForCausalLM"; }
};

/// Byte-level tokenizer (259 ids) with the ChatML tokens, <|im_end|> as end of sequence
/// and Qwen2-Instruct's chat template, as a Qwen2-Instruct folder's tokenizer has them.
inline tokenizers::ByteTokenizer chatml_byte_tokenizer() {
  static const char* kQwenChatTemplate =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
      "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|im_start|>assistant\\n' }}{% endif %}";
  tokenizers::ByteTokenizer tok(std::vector<std::string>{});
  tok.add_token({"<|endoftext|>", -1});
  tok.add_token({"<|im_start|>", -1});
  tok.add_token({"<|im_end|>", -1});
  tok.set_eos_token("<|im_end|>");
  tok.set_chat_template(kQwenChatTemplate);
  return tok;
}

/// config.json text of `s` as transformers writes it for Qwen2 / Llama.
inline nlohmann::json tiny_config_json(const TinyShape& s, const std::string& torch_dtype = "float32") {
  nlohmann::json j = {{"architectures", {s.arch}},
                      {"model_type", s.arch == "Qwen2ForCausalLM"     ? "qwen2"
                                     : s.qwen3()                      ? "qwen3"
                                     : s.arch == "MistralForCausalLM" ? "mistral"
                                                                      : "llama"},
                      {"vocab_size", s.vocab},
                      {"hidden_size", s.hidden},
                      {"intermediate_size", s.ffn},
                      {"num_hidden_layers", s.layers},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"max_position_embeddings", s.max_pos},
                      {"rope_theta", s.rope_theta},
                      {"rms_norm_eps", s.eps},
                      {"hidden_act", "silu"},
                      {"tie_word_embeddings", s.tied},
                      {"torch_dtype", torch_dtype},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"rope_scaling", s.rope_scaling}};
  if (s.arch == "Qwen2ForCausalLM" || s.qwen3()) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = s.max_pos;
    j["max_window_layers"] = s.layers;
  }
  if (s.arch == "MistralForCausalLM") j["sliding_window"] = nullptr;  // Mistral v0.2+
  else if (s.arch != "Qwen2ForCausalLM") j["attention_bias"] = false;
  if (s.head_dim > 0 || s.qwen3()) j["head_dim"] = s.hd();
  return j;
}

/// Random weights of `s` under their Hugging Face names, float64, in the order
/// transformers stores them. Qwen2 gets q/k/v biases, Qwen3 q_norm / k_norm. Norm weights near 1.
inline NamedTensors tiny_weights(const TinyShape& s, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto rnd = [&](std::vector<int64_t> shape, double scale, double mean = 0.0) {
    return (mean + scale * at::normal(0.0, 1.0, shape, gen)).to(torch::kFloat64);
  };
  const int64_t hd = s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, s.hidden}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({s.hidden}, 0.1, 1.0));
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({s.heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    if (s.arch == "Qwen2ForCausalLM") {
      w.emplace_back(p + "self_attn.q_proj.bias", rnd({s.heads * hd}, 0.2));
      w.emplace_back(p + "self_attn.k_proj.bias", rnd({s.kv_heads * hd}, 0.2));
      w.emplace_back(p + "self_attn.v_proj.bias", rnd({s.kv_heads * hd}, 0.2));
    }
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({s.hidden, s.heads * hd}, 0.25));
    if (s.qwen3()) {
      w.emplace_back(p + "self_attn.q_norm.weight", rnd({hd}, 0.3, 1.0));
      w.emplace_back(p + "self_attn.k_norm.weight", rnd({hd}, 0.3, 1.0));
    }
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({s.hidden}, 0.1, 1.0));
    w.emplace_back(p + "mlp.gate_proj.weight", rnd({s.ffn, s.hidden}, 0.25));
    w.emplace_back(p + "mlp.up_proj.weight", rnd({s.ffn, s.hidden}, 0.25));
    w.emplace_back(p + "mlp.down_proj.weight", rnd({s.hidden, s.ffn}, 0.25));
  }
  w.emplace_back("model.norm.weight", rnd({s.hidden}, 0.1, 1.0));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, s.hidden}, 0.5));
  return w;
}

/// Writes `weights` (converted to `store`) into `dir` in Hugging Face layout: one
/// model.safetensors when shards == 1, else model-0000i-of-0000n.safetensors files
/// (tensors dealt round-robin) and model.safetensors.index.json.
inline void write_hf_weights(const std::string& dir, const NamedTensors& weights, torch::ScalarType store,
                             int shards = 1) {
  std::vector<NamedTensors> parts(shards);
  for (size_t i = 0; i < weights.size(); ++i) parts[i % shards].push_back(weights[i]);
  if (shards == 1) {
    save_tensors(dir + "/model.safetensors", parts[0], {{"format", "pt"}}, store);
    return;
  }
  nlohmann::json map = nlohmann::json::object();
  int64_t total = 0;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    save_tensors(dir + "/" + name, parts[s], {{"format", "pt"}}, store);
    for (const auto& [n, t] : parts[s]) {
      map[n] = name;
      total += t.numel() * int64_t(c10::elementSize(store));
    }
  }
  write_text(dir + "/model.safetensors.index.json",
             nlohmann::json({{"metadata", {{"total_size", total}}}, {"weight_map", map}}).dump(2));
}

/// A new temporary folder (named after `tag`) holding `config` as config.json and `weights`
/// stored as float32: a folder for one refusal check.
inline std::unique_ptr<TempDir> folder_with(const std::string& tag, const nlohmann::json& config,
                                            const NamedTensors& weights) {
  auto dir = std::make_unique<TempDir>(tag);
  write_text(dir->path() + "/config.json", config.dump(2));
  write_hf_weights(dir->path(), weights, torch::kFloat32);
  return dir;
}

/// A complete tiny folder: config.json + weights.
inline void write_tiny_checkpoint(const std::string& dir, const TinyShape& s, uint64_t seed, torch::ScalarType store,
                                  int shards = 1) {
  const std::string dtype = store == torch::kBFloat16 ? "bfloat16" : store == torch::kFloat16 ? "float16" : "float32";
  write_text(dir + "/config.json", tiny_config_json(s, dtype).dump(2));
  write_hf_weights(dir, tiny_weights(s, seed), store, shards);
}

/// Reference forward of transformers' Qwen2ForCausalLM / LlamaForCausalLM, written
/// directly from the published equations on the named tensors (float64): RMSNorm
/// w * x / sqrt(mean(x^2) + eps), rotate-half RoPE with inv_freq = theta^(-2j/hd),
/// causal grouped-query attention (kv head j serves query heads j G .. j G + G - 1),
/// SwiGLU down(silu(gate x) * up x); Qwen3: each q and k head RMSNorm-ed with q_norm /
/// k_norm before RoPE. tokens [seq] -> logits [seq, vocab].
inline torch::Tensor reference_logits(const TinyShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t.to(torch::kFloat64);
  const int64_t T = int64_t(tokens.size()), hd = s.hd(), G = s.heads / s.kv_heads;
  auto norm = [&](const torch::Tensor& x, const torch::Tensor& g) {
    return g * x / torch::sqrt(x.pow(2).mean(-1, true) + s.eps);
  };
  // transformers: inv_freq = 1 / theta^(arange(0, hd, 2) / hd) and the angles in float32.
  // A scaled RoPE: the test's own frequencies (rounded to float32, as transformers keeps
  // them) and cos/sin times the attention factor.
  auto inv = s.ref_inv_freq.empty()
                 ? 1.0 / torch::pow(torch::tensor(s.rope_theta, torch::kFloat32),
                                    torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd))
                 : torch::tensor(s.ref_inv_freq, torch::kFloat64).to(torch::kFloat32);
  auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);
  auto c = ang.cos().to(torch::kFloat64) * s.ref_attention_factor,
       sn = ang.sin().to(torch::kFloat64) * s.ref_attention_factor;
  auto cos = torch::cat({c, c}, -1).unsqueeze(1), sin = torch::cat({sn, sn}, -1).unsqueeze(1);
  auto rope = [&](const torch::Tensor& x) {  // [T, heads, hd]
    auto rot = torch::cat({-x.narrow(-1, hd / 2, hd / 2), x.narrow(-1, 0, hd / 2)}, -1);
    return x * cos + rot * sin;
  };
  auto lin = [&](const torch::Tensor& x, const std::string& n) {
    auto y = torch::matmul(x, w.at(n + ".weight").t());
    return w.count(n + ".bias") ? y + w.at(n + ".bias") : y;
  };
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  auto mask = torch::ones({T, T}, torch::kBool).tril();
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto h = norm(x, w.at(p + "input_layernorm.weight"));
    auto q = lin(h, p + "self_attn.q_proj").view({T, s.heads, hd});
    auto k = lin(h, p + "self_attn.k_proj").view({T, s.kv_heads, hd});
    if (s.qwen3()) {
      q = norm(q, w.at(p + "self_attn.q_norm.weight"));
      k = norm(k, w.at(p + "self_attn.k_norm.weight"));
    }
    q = rope(q);
    k = rope(k);
    auto v = lin(h, p + "self_attn.v_proj").view({T, s.kv_heads, hd});
    k = k.repeat_interleave(G, 1);
    v = v.repeat_interleave(G, 1);
    auto sc = torch::einsum("qhd,khd->hqk", {q, k}) / std::sqrt(double(hd));
    sc = sc.masked_fill(~mask, -std::numeric_limits<double>::infinity());
    auto o = torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), v}).reshape({T, s.heads * hd});
    x = x + lin(o, p + "self_attn.o_proj");
    h = norm(x, w.at(p + "post_attention_layernorm.weight"));
    x = x + lin(torch::silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj");
  }
  x = norm(x, w.at("model.norm.weight"));
  return torch::matmul(x, (s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight")).t());
}

/// The tensors as stored in `dtype` and read back (what a loader sees).
inline NamedTensors rounded(const NamedTensors& named, torch::ScalarType dtype) {
  NamedTensors out;
  for (const auto& [n, t] : named) out.emplace_back(n, t.to(dtype).to(torch::kFloat64));
  return out;
}

/// A dense model with random weights large enough for peaked, input-dependent logits
/// (norm weights 1 + 0.1 N(0, 1), the others 0.3 N(0, 1), drawn from `seed`), in `dtype`.
inline baselines::DenseModel random_dense(const baselines::DenseConfig& c, uint64_t seed, torch::ScalarType dtype) {
  baselines::DenseModel m(c);
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : m->named_parameters()) {
    auto noise = at::normal(0.0, 1.0, p.value().sizes(), gen);
    const bool norm = p.key().find("norm") != std::string::npos;
    p.value().copy_(norm ? 1.0 + 0.1 * noise : 0.3 * noise);
  }
  m->to(dtype);
  m->eval();
  return m;
}

/// Logits [T, V] in float64 of one sequence `t` through the model's full forward.
inline torch::Tensor full_logits(baselines::DenseModel& m, const std::vector<int64_t>& t) {
  c10::InferenceMode g;
  return m->forward(torch::tensor(t, torch::kInt64).unsqueeze(0)).squeeze(0).to(torch::kFloat64);
}

/// n token ids below `vocab`, spread by a quadratic.
inline std::vector<int64_t> some_tokens(int64_t n, int64_t vocab) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back((i * 17 + i * i * 5 + 3) % vocab);
  return t;
}

/// The Hugging Face folder `dir` loaded by lol against a reference's logits ref [T, V]
/// (float64) of `tokens`: the full forward in float64 (within 1e-9) and float32 (2e-4),
/// and cached decoding in float64 (a prompt of 6 tokens, then one at a time) on the
/// fused CPU kernels and on the tensor path (1e-9). Returns the float64 model.
inline baselines::DenseModel expect_folder_matches_reference(const std::string& dir, const std::vector<int64_t>& tokens,
                                                             const torch::Tensor& ref) {
  auto m64 = load_hf_model(dir, torch::kFloat64);
  EXPECT_LT((full_logits(m64, tokens) - ref).abs().max().item<double>(), 1e-9);
  auto m32 = load_hf_model(dir, torch::kFloat32);
  EXPECT_LT((full_logits(m32, tokens) - ref).abs().max().item<double>(), 2e-4);
  for (bool kernels : {true, false}) {
    inference::DenseSessionOptions so;
    so.cpu_kernels = kernels;
    inference::DenseDecodeSession session(m64, so);
    auto got = session.feed({{0, {tokens.begin(), tokens.begin() + 6}}}, true);
    for (size_t i = 6; i < tokens.size(); ++i) got = torch::cat({got, session.step({tokens[i]})});
    EXPECT_LT((got.to(torch::kFloat64) - ref).abs().max().item<double>(), 1e-9) << (kernels ? "kernels" : "tensors");
  }
  return m64;
}

/// `lol export --hf` of `m` (loaded from a folder of config `source_config` and stored
/// tensors `stored`, as read back) to `out` as its default architecture, which must be
/// `arch` (or, with `as_default` false, as `arch`, which no layout defaults to: --arch):
/// the written config.json has `source_config`'s values of `keys`, and the written tensors
/// are `stored`'s, the same names and values bit for bit.
inline void expect_export_writes_source_back(baselines::DenseModel& m, const std::string& arch, const std::string& out,
                                             const nlohmann::json& source_config, const std::vector<std::string>& keys,
                                             const NamedTensors& stored, bool as_default = true) {
  ExportOptions eo;
  eo.architecture = as_default ? default_architecture(m->config()) : arch;
  EXPECT_EQ(eo.architecture, arch);
  export_hf(*m, nullptr, out, eo);
  const auto written = nlohmann::json::parse(read_text(out + "/config.json"));
  for (const auto& key : keys) EXPECT_EQ(written.at(key), source_config.at(key)) << key;
  std::map<std::string, torch::Tensor> source(stored.begin(), stored.end());
  const auto exported = load_tensors(out + "/model.safetensors");
  EXPECT_EQ(exported.size(), source.size());
  for (const auto& [name, t] : exported) {
    ASSERT_TRUE(source.count(name)) << name;
    EXPECT_EQ((t.to(torch::kFloat64) - source.at(name)).abs().max().item<double>(), 0.0) << name;
  }
}

// ---- float64 pieces of the LayerNorm architectures' references (GPT-NeoX, Phi, StableLM),
// transcribed from transformers' equations (independent of src/).

/// Float64 draws mean + scale N(0, 1) of any shape from one generator seeded with `seed`
/// (the tiny folders' random weights).
struct RandomDraw {
  at::Generator gen;
  explicit RandomDraw(uint64_t seed) : gen(at::detail::createCPUGenerator(seed)) {}
  torch::Tensor operator()(std::vector<int64_t> shape, double scale, double mean = 0.0) {
    return (mean + scale * at::normal(0.0, 1.0, shape, gen)).to(torch::kFloat64);
  }
};

/// LayerNorm: (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance.
inline torch::Tensor reference_layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                          double eps) {
  auto mu = x.mean(-1, true);
  auto var = (x - mu).pow(2).mean(-1, true);
  return (x - mu) / torch::sqrt(var + eps) * w + b;
}

/// x W^T + b of the named weights w[n + ".weight"] ([out, in]) and, when present, w[n + ".bias"].
inline torch::Tensor named_linear(const std::map<std::string, torch::Tensor>& w, const torch::Tensor& x,
                                  const std::string& n) {
  auto y = torch::matmul(x, w.at(n + ".weight").t());
  return w.count(n + ".bias") ? y + w.at(n + ".bias") : y;
}

/// reference_layer_norm with the named weight and bias w[n + ".weight"], w[n + ".bias"].
inline torch::Tensor named_layer_norm(const std::map<std::string, torch::Tensor>& w, const torch::Tensor& x,
                                      const std::string& n, double eps) {
  return reference_layer_norm(x, w.at(n + ".weight"), w.at(n + ".bias"), eps);
}

/// GELU: exact 0.5 g (1 + erf(g / sqrt 2)), or the tanh form (gelu_new / gelu_pytorch_tanh).
inline torch::Tensor reference_gelu(const torch::Tensor& g, bool exact) {
  if (exact) return 0.5 * g * (1.0 + torch::erf(g / std::sqrt(2.0)));
  return 0.5 * g * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g.pow(3))));
}

/// Rotate-half RoPE on the leading r of each head's hd dimensions at positions 0..T-1 (the
/// others pass), inv_freq = 1 / base^(arange(0, r, 2) / r) and the angles in float32 as
/// transformers computes them (divided by linear_factor when > 0: linear scaling).
struct ReferenceRope {
  torch::Tensor cos, sin;  ///< [T, 1, r] float64
  int64_t hd = 0, r = 0;
  ReferenceRope(int64_t T, int64_t hd_, int64_t r_, double base, double linear_factor = 0) : hd(hd_), r(r_) {
    auto inv = 1.0 / torch::pow(torch::tensor(base, torch::kFloat32),
                                torch::arange(0, r, 2, torch::kInt64).to(torch::kFloat32) / double(r));
    if (linear_factor > 0) inv = inv / linear_factor;
    auto ang = torch::outer(torch::arange(T, torch::kInt64).to(torch::kFloat32), inv);
    cos = torch::cat({ang.cos(), ang.cos()}, -1).to(torch::kFloat64).unsqueeze(1);
    sin = torch::cat({ang.sin(), ang.sin()}, -1).to(torch::kFloat64).unsqueeze(1);
  }
  /// x [T, heads, hd] -> the same, rotated.
  torch::Tensor operator()(const torch::Tensor& x) const {
    auto xr = x.narrow(-1, 0, r);
    auto rot = torch::cat({-xr.narrow(-1, r / 2, r / 2), xr.narrow(-1, 0, r / 2)}, -1);
    return torch::cat({xr * cos + rot * sin, x.narrow(-1, r, hd - r)}, -1);
  }
};

/// Causal softmax attention of q [T, H, hd] over k, v [T, Hkv, hd] (kv head j serves query
/// heads j G .. j G + G - 1), scores scaled by hd^-1/2 -> [T, H hd].
inline torch::Tensor reference_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(0), H = q.size(1), hd = q.size(2), G = H / k.size(1);
  auto kk = k.repeat_interleave(G, 1), vv = v.repeat_interleave(G, 1);
  auto sc = torch::einsum("qhd,khd->hqk", {q, kk}) / std::sqrt(double(hd));
  sc = sc.masked_fill(~torch::ones({T, T}, torch::kBool).tril(), -std::numeric_limits<double>::infinity());
  return torch::einsum("hqk,khd->qhd", {torch::softmax(sc, -1), vv}).reshape({T, H * hd});
}

}  // namespace lol::hf::test
