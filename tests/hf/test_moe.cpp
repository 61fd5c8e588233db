// Mixture-of-experts Hugging Face folders: Mixtral (MixtralForCausalLM), OLMoE
// (OlmoeForCausalLM) and Qwen3-MoE (Qwen3MoeForCausalLM). config.json parsing (defaults,
// Qwen3-MoE's sparse layers, refusals) and the loaded model's logits against a float64
// reference written here from transformers' equations: the router's p = softmax(gate x)
// (in float32 or wider), the top-k experts of p, their weights p_e (divided by their sum
// for Mixtral and with norm_topk_prob), y = sum_e w_e down_e(silu(gate_e x) * up_e x);
// Mixtral's block_sparse_moe.experts.{e}.w1 / w3 / w2 names; OLMoE's q_norm / k_norm over
// the whole projections in pre-norm blocks; Qwen3-MoE's per-head q/k norms and its dense
// layers (decoder_sparse_step, mlp_only_layers). Full forward, cached decoding on both
// paths, export back to the same files, the dense config.json round trip, parameter
// counts, and what is refused (LayerRoute on an MoE base included).
#include "hf_test_util.h"
#include "baselines/flops.h"
#include "core/module_io.h"
#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "inference/dense_session.h"
#include "layerroute/gated_model.h"
#include "nn/moe_routing.h"

namespace lol::hf::test {
namespace {

enum class Kind { Mixtral, Olmoe, Qwen3Moe, Qwen2Moe };

/// A tiny MoE folder's shape and config.json.
struct MoeShape {
  Kind kind = Kind::Mixtral;
  int64_t vocab = 61, hidden = 32, ffn = 24, layers = 3, heads = 4, kv_heads = 2, max_pos = 64;
  int64_t experts = 5, top_k = 2;
  int64_t head_dim = 0;        ///< 0: hidden / heads, no head_dim key
  int64_t moe_ffn = 20;        ///< Qwen2/3-MoE: moe_intermediate_size (ffn: their dense layers)
  int64_t shared_ffn = 28;     ///< Qwen2-MoE: shared_expert_intermediate_size
  bool norm_topk = false;      ///< OLMoE / Qwen3-MoE: norm_topk_prob (Mixtral: always)
  int64_t sparse_step = 1;     ///< Qwen2/3-MoE: decoder_sparse_step
  std::vector<int64_t> mlp_only;  ///< Qwen2/3-MoE: mlp_only_layers
  double rope_theta = 500, eps = 1e-5;
  bool tied = false;

  int64_t hd() const { return head_dim > 0 ? head_dim : hidden / heads; }
  bool qwen() const { return kind == Kind::Qwen3Moe || kind == Kind::Qwen2Moe; }
  bool moe_layer(int64_t i) const {
    if (!qwen()) return true;
    return (i + 1) % sparse_step == 0 && std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
  }
  int64_t expert_ffn() const { return qwen() ? moe_ffn : ffn; }
  bool normalized() const { return kind == Kind::Mixtral || norm_topk; }
  std::string arch() const {
    return kind == Kind::Mixtral    ? "MixtralForCausalLM"
           : kind == Kind::Olmoe    ? "OlmoeForCausalLM"
           : kind == Kind::Qwen2Moe ? "Qwen2MoeForCausalLM"
                                    : "Qwen3MoeForCausalLM";
  }
  nlohmann::json config() const {
    nlohmann::json j = {{"architectures", {arch()}},
                        {"model_type", kind == Kind::Mixtral    ? "mixtral"
                                       : kind == Kind::Olmoe    ? "olmoe"
                                       : kind == Kind::Qwen2Moe ? "qwen2_moe"
                                                                : "qwen3_moe"},
                        {"vocab_size", vocab},
                        {"hidden_size", hidden},
                        {"intermediate_size", ffn},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"num_key_value_heads", kv_heads},
                        {"max_position_embeddings", max_pos},
                        {"rms_norm_eps", eps},
                        {"rope_theta", rope_theta},
                        {"hidden_act", "silu"},
                        {"tie_word_embeddings", tied},
                        {"num_experts_per_tok", top_k},
                        {"torch_dtype", "float32"},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2}};
    j[kind == Kind::Mixtral ? "num_local_experts" : "num_experts"] = experts;
    if (head_dim > 0) j["head_dim"] = head_dim;
    if (kind == Kind::Mixtral) j["sliding_window"] = nullptr;
    if (kind != Kind::Mixtral) j["norm_topk_prob"] = norm_topk;
    if (kind == Kind::Olmoe) j["clip_qkv"] = nullptr;
    if (kind == Kind::Qwen2Moe) {
      j["shared_expert_intermediate_size"] = shared_ffn;
      j["qkv_bias"] = true;
    }
    if (qwen()) {
      j["moe_intermediate_size"] = moe_ffn;
      j["decoder_sparse_step"] = sparse_step;
      j["mlp_only_layers"] = mlp_only;
      j["use_sliding_window"] = false;
    }
    return j;
  }
  /// The stored name of expert e's projection `proj` (gate_proj, up_proj, down_proj) in layer prefix p.
  std::string expert(const std::string& p, int64_t e, const std::string& proj) const {
    if (kind == Kind::Mixtral) {
      const char* w = proj == "gate_proj" ? "w1" : proj == "up_proj" ? "w3" : "w2";
      return p + "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight";
    }
    return p + "mlp.experts." + std::to_string(e) + "." + proj + ".weight";
  }
  std::string router(const std::string& p) const {
    return p + (kind == Kind::Mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
  }
};

/// Random weights under the architecture's names (norm gains 1 + N(0, 0.3); routers
/// N(0, 0.6), so that routing depends on the input).
NamedTensors moe_weights(const MoeShape& s, uint64_t seed) {
  RandomDraw rnd(seed);
  const int64_t hd = s.hd();
  NamedTensors w;
  w.emplace_back("model.embed_tokens.weight", rnd({s.vocab, s.hidden}, 0.5));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", rnd({s.hidden}, 0.3, 1.0));
    w.emplace_back(p + "self_attn.q_proj.weight", rnd({s.heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.k_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    w.emplace_back(p + "self_attn.v_proj.weight", rnd({s.kv_heads * hd, s.hidden}, 0.25));
    if (s.kind == Kind::Qwen2Moe) {
      w.emplace_back(p + "self_attn.q_proj.bias", rnd({s.heads * hd}, 0.2));
      w.emplace_back(p + "self_attn.k_proj.bias", rnd({s.kv_heads * hd}, 0.2));
      w.emplace_back(p + "self_attn.v_proj.bias", rnd({s.kv_heads * hd}, 0.2));
    }
    w.emplace_back(p + "self_attn.o_proj.weight", rnd({s.hidden, s.heads * hd}, 0.25));
    if (s.kind == Kind::Olmoe) {
      w.emplace_back(p + "self_attn.q_norm.weight", rnd({s.heads * hd}, 0.3, 1.0));
      w.emplace_back(p + "self_attn.k_norm.weight", rnd({s.kv_heads * hd}, 0.3, 1.0));
    } else if (s.kind == Kind::Qwen3Moe) {
      w.emplace_back(p + "self_attn.q_norm.weight", rnd({hd}, 0.3, 1.0));
      w.emplace_back(p + "self_attn.k_norm.weight", rnd({hd}, 0.3, 1.0));
    }
    w.emplace_back(p + "post_attention_layernorm.weight", rnd({s.hidden}, 0.3, 1.0));
    if (s.moe_layer(i)) {
      w.emplace_back(s.router(p), rnd({s.experts, s.hidden}, 0.6));
      const int64_t F = s.expert_ffn();
      for (int64_t e = 0; e < s.experts; ++e) {
        w.emplace_back(s.expert(p, e, "gate_proj"), rnd({F, s.hidden}, 0.25));
        w.emplace_back(s.expert(p, e, "up_proj"), rnd({F, s.hidden}, 0.25));
        w.emplace_back(s.expert(p, e, "down_proj"), rnd({s.hidden, F}, 0.25));
      }
      if (s.kind == Kind::Qwen2Moe) {
        w.emplace_back(p + "mlp.shared_expert.gate_proj.weight", rnd({s.shared_ffn, s.hidden}, 0.25));
        w.emplace_back(p + "mlp.shared_expert.up_proj.weight", rnd({s.shared_ffn, s.hidden}, 0.25));
        w.emplace_back(p + "mlp.shared_expert.down_proj.weight", rnd({s.hidden, s.shared_ffn}, 0.25));
        w.emplace_back(p + "mlp.shared_expert_gate.weight", rnd({1, s.hidden}, 0.6));
      }
    } else {
      w.emplace_back(p + "mlp.gate_proj.weight", rnd({s.ffn, s.hidden}, 0.25));
      w.emplace_back(p + "mlp.up_proj.weight", rnd({s.ffn, s.hidden}, 0.25));
      w.emplace_back(p + "mlp.down_proj.weight", rnd({s.hidden, s.ffn}, 0.25));
    }
  }
  w.emplace_back("model.norm.weight", rnd({s.hidden}, 0.3, 1.0));
  if (!s.tied) w.emplace_back("lm_head.weight", rnd({s.vocab, s.hidden}, 0.5));
  return w;
}

/// Float64 forward of transformers' MixtralForCausalLM / OlmoeForCausalLM /
/// Qwen3MoeForCausalLM on the named tensors: tokens [T] -> logits [T, V]. The experts of each
/// token are chosen and weighted one token at a time (the sparse block's definition).
torch::Tensor moe_reference_logits(const MoeShape& s, const NamedTensors& named, const std::vector<int64_t>& tokens) {
  std::map<std::string, torch::Tensor> w;
  for (const auto& [n, t] : named) w[n] = t.to(torch::kFloat64);
  const int64_t T = int64_t(tokens.size()), hd = s.hd();
  auto rms = [&](const torch::Tensor& x, const torch::Tensor& g) {
    return g * x / torch::sqrt(x.pow(2).mean(-1, true) + s.eps);
  };
  // x W^T (+ the bias stored beside a weight: Qwen2-MoE's q/k/v)
  auto lin = [&](const torch::Tensor& x, const std::string& n) {
    auto y = torch::matmul(x, w.at(n).t());
    const std::string b = n.substr(0, n.size() - 6) + "bias";
    return w.count(b) ? y + w.at(b) : y;
  };
  const ReferenceRope rope(T, hd, hd, s.rope_theta);
  auto x = w.at("model.embed_tokens.weight").index_select(0, torch::tensor(tokens, torch::kInt64));
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto h = rms(x, w.at(p + "input_layernorm.weight"));
    auto q = lin(h, p + "self_attn.q_proj.weight"), k = lin(h, p + "self_attn.k_proj.weight");
    if (s.kind == Kind::Olmoe) {  // over the whole projections
      q = rms(q, w.at(p + "self_attn.q_norm.weight"));
      k = rms(k, w.at(p + "self_attn.k_norm.weight"));
    }
    q = q.view({T, s.heads, hd});
    k = k.view({T, s.kv_heads, hd});
    if (s.kind == Kind::Qwen3Moe) {  // per head
      q = rms(q, w.at(p + "self_attn.q_norm.weight"));
      k = rms(k, w.at(p + "self_attn.k_norm.weight"));
    }
    auto v = lin(h, p + "self_attn.v_proj.weight").view({T, s.kv_heads, hd});
    x = x + lin(reference_causal_attention(rope(q), rope(k), v), p + "self_attn.o_proj.weight");
    h = rms(x, w.at(p + "post_attention_layernorm.weight"));
    auto swiglu = [&](const torch::Tensor& a, const std::string& gate, const std::string& up, const std::string& down) {
      return lin(torch::silu(lin(a, gate)) * lin(a, up), down);
    };
    if (!s.moe_layer(i)) {
      x = x + swiglu(h, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight");
      continue;
    }
    auto y = torch::zeros_like(x);
    for (int64_t t = 0; t < T; ++t) {
      auto ht = h[t].unsqueeze(0);
      auto probs = torch::softmax(lin(ht, s.router(p)), -1).squeeze(0);  // [E]
      auto [top, idx] = probs.topk(s.top_k);
      if (s.normalized()) top = top / top.sum();
      for (int64_t j = 0; j < s.top_k; ++j) {
        const int64_t e = idx[j].item<int64_t>();
        y[t] += top[j] * swiglu(ht, s.expert(p, e, "gate_proj"), s.expert(p, e, "up_proj"), s.expert(p, e, "down_proj"))
                             .squeeze(0);
      }
    }
    if (s.kind == Kind::Qwen2Moe)  // the shared expert, sigmoid-gated, for every token
      y = y + torch::sigmoid(lin(h, p + "mlp.shared_expert_gate.weight")) *
                  swiglu(h, p + "mlp.shared_expert.gate_proj.weight", p + "mlp.shared_expert.up_proj.weight",
                         p + "mlp.shared_expert.down_proj.weight");
    x = x + y;
  }
  x = rms(x, w.at("model.norm.weight"));
  return torch::matmul(x, (s.tied ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight")).t());
}

/// The shapes each test runs: Mixtral; OLMoE without renormalisation; Qwen3-MoE with an
/// explicit head_dim, renormalisation, and a dense layer from mlp_only_layers; Qwen2-MoE
/// with q/k/v biases, a shared expert and a leading dense layer.
std::vector<MoeShape> shapes() {
  MoeShape mixtral;
  MoeShape olmoe;
  olmoe.kind = Kind::Olmoe;
  olmoe.experts = 6;
  olmoe.top_k = 3;
  MoeShape qwen;
  qwen.kind = Kind::Qwen3Moe;
  qwen.layers = 4;
  qwen.head_dim = 12;
  qwen.norm_topk = true;
  qwen.mlp_only = {2};
  qwen.tied = true;
  MoeShape qwen2;
  qwen2.kind = Kind::Qwen2Moe;
  qwen2.experts = 4;
  qwen2.mlp_only = {0};
  return {mixtral, olmoe, qwen, qwen2};
}

/// A folder of `s` in `dir` (weights stored as float32); returns the stored tensors as read back.
NamedTensors write_moe_folder(const std::string& dir, const MoeShape& s, uint64_t seed) {
  write_text(dir + "/config.json", s.config().dump(2));
  const auto w = moe_weights(s, seed);
  write_hf_weights(dir, w, torch::kFloat32, 2);
  return rounded(w, torch::kFloat32);
}

TEST(HfMoe, FoldersMatchTheFloat64Reference) {
  for (const auto& s : shapes()) {
    SCOPED_TRACE(s.arch());
    TempDir dir("moe_ref");
    const auto stored = write_moe_folder(dir.path(), s, 11);
    const auto tokens = some_tokens(14, s.vocab);
    const auto ref = moe_reference_logits(s, stored, tokens);
    auto m = expect_folder_matches_reference(dir.path(), tokens, ref);
    // The routing matters: every expert's weights reach the output, and a layer routed
    // to other experts computes other logits.
    const auto& c = m->config();
    EXPECT_EQ(c.n_experts, s.experts);
    EXPECT_EQ(c.top_k, s.top_k);
    EXPECT_EQ(c.normalize_top_k, s.normalized());
    for (int64_t i = 0; i < s.layers; ++i) EXPECT_EQ(c.is_moe_layer(i), s.moe_layer(i)) << i;
    MoeShape other = s;
    other.top_k = s.top_k + 1;
    EXPECT_GT((moe_reference_logits(other, stored, tokens) - ref).abs().max().item<double>(), 1e-3);
  }
}

TEST(HfMoe, ConfigDefaultsFollowTheConfigClasses) {
  auto strip = [](nlohmann::json j, std::vector<std::string> keys) {
    for (const auto& k : keys) j.erase(k);
    return j;
  };
  MoeShape mixtral;
  auto stripped = strip(mixtral.config(), {"num_local_experts", "num_experts_per_tok", "rms_norm_eps", "rope_theta",
                                           "num_key_value_heads", "sliding_window"});
  stripped["num_attention_heads"] = 8;  // (MixtralConfig's 8 key/value heads divide them)
  auto c = HfConfig::from_json(stripped, "config.json");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.sliding_window, 0);
  // Mixtral reads sliding_window (every layer), as Mistral does.
  auto j = mixtral.config();
  j["sliding_window"] = 7;
  EXPECT_EQ(HfConfig::from_json(j, "config.json").sliding_window, 7);
  // Mixtral's norm_topk_prob key does not exist: its router always renormalises.
  j["norm_topk_prob"] = false;
  EXPECT_TRUE(HfConfig::from_json(j, "config.json").norm_topk_prob);

  MoeShape olmoe;
  olmoe.kind = Kind::Olmoe;
  c = HfConfig::from_json(
      strip(olmoe.config(), {"num_experts", "num_experts_per_tok", "norm_topk_prob", "num_key_value_heads"}),
      "config.json");
  EXPECT_EQ(c.num_experts, 64);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.num_key_value_heads, c.num_attention_heads);
  EXPECT_TRUE(c.qk_norm && c.qk_norm_across_heads && c.input_norms && !c.sandwich_norm);

  MoeShape qwen;
  qwen.kind = Kind::Qwen3Moe;
  qwen.layers = 6;
  c = HfConfig::from_json(strip(qwen.config(), {"num_experts", "num_experts_per_tok", "norm_topk_prob",
                                                "moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers",
                                                "num_key_value_heads", "rms_norm_eps"}),
                          "config.json");
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.head_dim, qwen.hidden / qwen.heads);  // (no Qwen3-style default of 128)
  // decoder_sparse_step 2 with layer 3 listed dense: MoE layers 1 and 5.
  j = qwen.config();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  c = HfConfig::from_json(j, "config.json");
  std::vector<int64_t> sparse;
  for (int64_t i = 0; i < qwen.layers; ++i)
    if (c.is_moe_layer(i)) sparse.push_back(i);
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 5}));
  const auto dc = to_dense_config(c);
  for (int64_t i = 0; i < qwen.layers; ++i) EXPECT_EQ(dc.is_moe_layer(i), c.is_moe_layer(i)) << i;
  EXPECT_EQ(dc.layer_block_shape(1).ffn_hidden, qwen.moe_ffn);
  EXPECT_EQ(dc.layer_block_shape(3).ffn_hidden, qwen.ffn);
  EXPECT_EQ(dc.layer_block_shape(3).moe.n_experts, 0);
}

TEST(HfMoe, ReleasedConfigsCountTheirParameters) {
  // The config.json files of Mixtral-8x7B-v0.1, OLMoE-1B-7B-0924, Qwen3-30B-A3B and
  // Qwen1.5-MoE-A2.7B (tests/hf/data;
  // their size fields as the Hub's files state them): every expert counted, as transformers'
  // num_parameters() does; active parameters: the routers and top-k experts per token.
  struct Released {
    const char* file;
    int64_t total;
    double active_lo, active_hi;
  };
  // Mixtral-8x7B: 46,702,792,704 (its published count; 12.9 B active). OLMoE-1B-7B: 6.9 B
  // total, 1.3 B active. Qwen3-30B-A3B: 30.5 B total, 3.3 B active. Qwen1.5-MoE-A2.7B: 14.3 B
  // total, 2.7 B active, its shared expert included (the model cards' rounding).
  for (const auto& r : {Released{"mixtral-8x7b-v0.1", 46702792704, 12.8e9, 13.0e9},
                        Released{"olmoe-1b-7b-0924", 6919161856, 1.25e9, 1.35e9},
                        Released{"qwen3-30b-a3b", 30532122624, 3.2e9, 3.4e9},
                        Released{"qwen1.5-moe-a2.7b", 14315784192, 2.6e9, 2.8e9}}) {
    SCOPED_TRACE(r.file);
    const std::string path = std::string(LOL_SOURCE_DIR) + "/tests/hf/data/" + r.file + ".config.json";
    const auto c = HfConfig::from_json(nlohmann::json::parse(read_text(path)), path);
    EXPECT_EQ(parameter_count(c), r.total);
    const double active = double(baselines::cost_model(to_dense_config(c)).active_parameters);
    EXPECT_GT(active, r.active_lo);
    EXPECT_LT(active, r.active_hi);
  }
}

TEST(HfMoe, RefusesWhatItDoesNotCompute) {
  MoeShape olmoe;
  olmoe.kind = Kind::Olmoe;
  auto j = olmoe.config();
  j["num_experts_per_tok"] = 7;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); },
                     {"config.json", "num_experts_per_tok", "7", "num_experts = 5"});
  j = olmoe.config();
  j["clip_qkv"] = 8.0;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "clip_qkv", "8.0"});
  j = olmoe.config();
  j["head_dim"] = 16;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "head_dim", "q_norm"});
  MoeShape qwen;
  qwen.kind = Kind::Qwen3Moe;
  j = qwen.config();
  j["use_sliding_window"] = true;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "use_sliding_window"});
  j = qwen.config();
  j["decoder_sparse_step"] = 0;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "decoder_sparse_step", "0"});
  j = qwen.config();
  j["mlp_only_layers"] = {3};
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "mlp_only_layers", "3"});
  MoeShape qwen2;
  qwen2.kind = Kind::Qwen2Moe;
  j = qwen2.config();
  j["qkv_bias"] = false;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "qkv_bias", "false"});
  j = qwen2.config();
  j["use_sliding_window"] = true;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "use_sliding_window"});
  j = qwen2.config();
  j["shared_expert_intermediate_size"] = 0;
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "shared_expert_intermediate_size"});
  MoeShape mixtral;
  j = mixtral.config();
  j["hidden_act"] = "gelu";
  expect_input_error([&] { HfConfig::from_json(j, "config.json"); }, {"config.json", "hidden_act"});

  // A missing expert is named as Mixtral stores it, with its shape.
  auto w = moe_weights(mixtral, 3);
  NamedTensors less;
  for (auto& nt : w)
    if (nt.first != "model.layers.1.block_sparse_moe.experts.4.w3.weight") less.push_back(nt);
  auto dir = folder_with("moe_missing", mixtral.config(), less);
  expect_input_error([&] { load_hf_model(dir->path()); },
                     {"missing tensor 'model.layers.1.block_sparse_moe.experts.4.w3.weight'", "[24, 32]"});
  // OLMoE's names in a Mixtral folder are not Mixtral's tensors.
  NamedTensors renamed = w;
  for (auto& [n, t] : renamed)
    if (n == "model.layers.0.block_sparse_moe.gate.weight") n = "model.layers.0.mlp.gate.weight";
  dir = folder_with("moe_renamed", mixtral.config(), renamed);
  expect_input_error([&] { load_hf_model(dir->path()); }, {"model.layers.0.mlp.gate.weight", "unexpected tensor"});
  // A router of the wrong width names the config fields that set it.
  NamedTensors wide = w;
  for (auto& [n, t] : wide)
    if (n == "model.layers.2.block_sparse_moe.gate.weight") t = torch::zeros({4, 32}, torch::kFloat64);
  dir = folder_with("moe_wide", mixtral.config(), wide);
  expect_input_error([&] { load_hf_model(dir->path()); },
                     {"model.layers.2.block_sparse_moe.gate.weight", "[4, 32]", "[5, 32]", "num_local_experts"});
}

TEST(HfMoe, ExportWritesTheFolderBackAndRefusesOtherClasses) {
  for (const auto& s : shapes()) {
    SCOPED_TRACE(s.arch());
    TempDir dir("moe_export"), out("moe_export_out");
    const auto stored = write_moe_folder(dir.path(), s, 5);
    auto m = load_hf_model(dir.path());
    std::vector<std::string> keys = {"architectures", "model_type", "num_hidden_layers", "num_experts_per_tok",
                                     "intermediate_size"};
    keys.push_back(s.kind == Kind::Mixtral ? "num_local_experts" : "num_experts");
    if (s.kind != Kind::Mixtral) keys.push_back("norm_topk_prob");
    if (s.kind == Kind::Qwen3Moe) keys.push_back("head_dim");
    if (s.kind == Kind::Qwen2Moe) keys.push_back("shared_expert_intermediate_size");
    if (s.qwen())
      for (const char* k : {"moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers"}) keys.push_back(k);
    expect_export_writes_source_back(m, s.arch(), out.path(), s.config(), keys, stored);
    // ... which loads back to the same logits.
    const auto tokens = some_tokens(9, s.vocab);
    auto back = load_hf_model(out.path());
    EXPECT_LT((full_logits(back, tokens) - full_logits(m, tokens)).abs().max().item<double>(), 1e-6);
    // Dense classes do not hold experts.
    ExportOptions eo;
    eo.architecture = kQwen2Arch;
    TempDir refused("moe_export_refused");
    expect_input_error([&] { export_hf(*m, nullptr, refused.path(), eo); },
                       {"n_experts " + std::to_string(s.experts), "Qwen2ForCausalLM", "has dense FFNs", s.arch()});
  }
  // Nor do the MoE classes hold a dense model, or one another's blocks.
  baselines::DenseConfig dense = to_dense_config(HfConfig::from_json(shapes()[0].config(), "config.json"));
  dense.n_experts = 0;
  dense.top_k = 0;
  dense.normalize_top_k = false;
  auto m = random_dense(dense, 1, torch::kFloat32);
  ExportOptions eo;
  eo.architecture = kMixtralArch;
  TempDir refused("moe_export_dense");
  expect_input_error([&] { export_hf(*m, nullptr, refused.path(), eo); },
                     {"dense FFNs", "MixtralForCausalLM", "has mixture-of-experts FFNs"});
  auto olmoe = to_dense_config(HfConfig::from_json(shapes()[1].config(), "config.json"));
  auto mo = random_dense(olmoe, 1, torch::kFloat32);
  eo.architecture = kMixtralArch;
  expect_input_error([&] { export_hf(*mo, nullptr, refused.path(), eo); },
                     {"normalize_top_k false", "renormalises", "export as OlmoeForCausalLM"});
  olmoe.normalize_top_k = true;
  auto mo2 = random_dense(olmoe, 1, torch::kFloat32);
  expect_input_error([&] { export_hf(*mo2, nullptr, refused.path(), eo); }, {"qk_norm true", "MixtralForCausalLM"});
  // Qwen2-MoE's shared expert has no place in the other classes, and it needs one.
  auto qwen2 = to_dense_config(HfConfig::from_json(shapes()[3].config(), "config.json"));
  auto mq = random_dense(qwen2, 1, torch::kFloat32);
  eo.architecture = kQwen3MoeArch;
  expect_input_error([&] { export_hf(*mq, nullptr, refused.path(), eo); },
                     {"a shared expert (shared_expert_ffn_hidden 28)", "Qwen3MoeForCausalLM", "has none"});
  qwen2.shared_expert_ffn_hidden = 0;
  auto mq2 = random_dense(qwen2, 1, torch::kFloat32);
  eo.architecture = kQwen2MoeArch;
  expect_input_error([&] { export_hf(*mq2, nullptr, refused.path(), eo); },
                     {"no shared expert", "Qwen2MoeForCausalLM", "runs a shared expert"});
}

TEST(HfMoe, DenseConfigRoundTripsAndParameterCountsMatchTheFiles) {
  for (const auto& s : shapes()) {
    SCOPED_TRACE(s.arch());
    const auto hc = HfConfig::from_json(s.config(), "config.json");
    const auto c = to_dense_config(hc);
    const auto back = baselines::DenseConfig::from_json(c.to_json(), "config.json");
    EXPECT_EQ(back.to_json(), c.to_json());
    int64_t stored = 0, active = 0;
    for (const auto& [n, t] : moe_weights(s, 1)) {
      stored += t.numel();
      const bool expert = n.find(".experts.") != std::string::npos || n.find(".shared_expert.") != std::string::npos;
      if (!expert) active += t.numel();
    }
    // Each token runs top_k experts of each MoE layer (and the shared expert, which the
    // name filter above left out).
    for (int64_t i = 0; i < s.layers; ++i)
      if (s.moe_layer(i))
        active += s.top_k * 3 * s.hidden * s.expert_ffn() +
                  (s.kind == Kind::Qwen2Moe ? 3 * s.hidden * s.shared_ffn : 0);
    EXPECT_EQ(parameter_count(hc), stored);
    const auto cost = baselines::cost_model(c);
    EXPECT_EQ(cost.parameters, stored);
    EXPECT_EQ(cost.active_parameters, active);
    // A lol checkpoint of the loaded model reads back as the same model.
    TempDir dir("moe_ckpt");
    write_moe_folder(dir.path(), s, 2);
    auto m = load_hf_model(dir.path());
    TempDir ck("moe_ckpt_out");
    write_text(ck.path() + "/config.json", m->config().to_json().dump(2));
    save_module(*m, ck.path() + "/model.safetensors");
    baselines::DenseModel again(baselines::DenseConfig::from_json(
        nlohmann::json::parse(read_text(ck.path() + "/config.json")), ck.path() + "/config.json"));
    load_module(*again, ck.path() + "/model.safetensors");
    again->eval();
    const auto tokens = some_tokens(7, s.vocab);
    EXPECT_EQ((full_logits(again, tokens) - full_logits(m, tokens)).abs().max().item<double>(), 0.0);
  }
  auto c = to_dense_config(HfConfig::from_json(shapes()[0].config(), "config.json")).to_json();
  c["top_k"] = 6;
  expect_input_error([&] { baselines::DenseConfig::from_json(c, "config.json"); }, {"config.json", "top_k", "6"});
  c["top_k"] = 2;
  c["dense_ffn_layers"] = {1, 1};
  expect_input_error([&] { baselines::DenseConfig::from_json(c, "config.json"); },
                     {"config.json", "dense_ffn_layers", "twice"});
  c["dense_ffn_layers"] = nlohmann::json::array();
  c["activation"] = "gelu";
  expect_input_error([&] { baselines::DenseConfig::from_json(c, "config.json"); },
                     {"config.json", "n_experts", "silu"});
}

TEST(HfMoe, LayerRouteRefusesAnMoEBase) {
  const auto c = to_dense_config(HfConfig::from_json(shapes()[0].config(), "config.json"));
  expect_input_error([&] { layerroute::require_layerroute_base(c, "base/config.json"); },
                     {"base/config.json", "n_experts 5", "dense FFNs"});
}

TEST(HfMoe, RoutingWeightsAsTransformersComputesThem) {
  // 16-bit router logits get float32 probabilities (F.softmax(router_logits, dtype=torch.float));
  // the selected weights are renormalised on request and cast to the states' dtype.
  auto logits = torch::tensor({{2.0, 1.0, -1.0, 0.5}, {0.0, 3.0, 1.0, 1.0}}, torch::kFloat64);
  auto p16 = nn::routing_probabilities(logits.to(torch::kBFloat16));
  EXPECT_EQ(p16.scalar_type(), torch::kFloat32);
  auto p64 = nn::routing_probabilities(logits);
  EXPECT_EQ(p64.scalar_type(), torch::kFloat64);
  EXPECT_LT((p64 - torch::softmax(logits, -1)).abs().max().item<double>(), 1e-15);
  auto sel = std::get<1>(p64.topk(2, -1));
  auto raw = nn::selected_weights(p64, sel, false, torch::kFloat64);
  auto norm = nn::selected_weights(p64, sel, true, torch::kFloat64);
  EXPECT_LT((raw - p64.gather(1, sel)).abs().max().item<double>(), 1e-15);
  EXPECT_LT((norm.sum(-1) - 1.0).abs().max().item<double>(), 1e-15);
  // Renormalised weights are the softmax over the selected experts' logits (Mixtral's rule).
  EXPECT_LT((norm - torch::softmax(logits.gather(1, sel), -1)).abs().max().item<double>(), 1e-15);
  EXPECT_EQ(nn::selected_weights(p16, sel, true, torch::kBFloat16).scalar_type(), torch::kBFloat16);

  // A bfloat16 MoE model decodes as its full forward computes.
  const auto s = shapes()[0];
  TempDir dir("moe_bf16");
  write_moe_folder(dir.path(), s, 9);
  auto m16 = load_hf_model(dir.path(), torch::kBFloat16);
  const auto tokens = some_tokens(10, s.vocab);
  const auto full = full_logits(m16, tokens);
  inference::DenseDecodeSession session(m16, {});
  auto got = session.feed({{0, tokens}}, true).to(torch::kFloat64);
  EXPECT_LT((got - full).abs().max().item<double>(), 0.05 * full.abs().max().item<double>());
}

}  // namespace
}  // namespace lol::hf::test
