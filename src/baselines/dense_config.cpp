#include "baselines/dense_config.h"

#include <algorithm>
#include <cmath>

#include "nn/activation.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::baselines {

LayerAttention DenseConfig::layer_attention(int64_t i) const {
  LayerAttention a;
  const AttentionKind kind = parse_attention_kind(attention, "dense config: field 'attention'");
  if (kind == AttentionKind::Full || i < n_full_prelude || i >= n_layers - n_full_coda) return a;
  if (full_attention_interval > 0 && (i + 1) % full_attention_interval == 0) return a;
  a.kind = kind;
  a.window = window;
  a.stride = stride;
  a.depth = i - n_full_prelude + 1;
  return a;
}

nn::BlockShape DenseConfig::dense_block_shape() const {
  nn::BlockShape s = block_shape();
  s.activation = nn::activation_from_name(activation, "dense config: field 'activation'");
  s.sandwich_norm = sandwich_norm;
  s.input_norms = input_norms;
  s.attn.softcap = attn_logit_softcap;
  s.layer_norm = norm == "layernorm";
  s.gated_mlp = mlp == "gated";
  s.mlp_bias = mlp_bias;
  s.attn.o_bias = o_bias;
  s.attn.rope = !learned_positions();
  s.parallel_residual = parallel_residual;
  s.shared_input_norm = shared_input_norm;
  return s;
}

bool DenseConfig::is_moe_layer(int64_t i) const {
  if (n_experts == 0 || moe_layer_step < 1 || (i + 1) % moe_layer_step != 0) return false;
  return std::find(dense_ffn_layers.begin(), dense_ffn_layers.end(), i) == dense_ffn_layers.end();
}

nn::BlockShape DenseConfig::layer_block_shape(int64_t i) const {
  nn::BlockShape s = dense_block_shape();
  if (!is_moe_layer(i)) return s;
  s.ffn_hidden = effective_expert_ffn();
  s.moe.n_experts = n_experts;
  s.moe.top_k = top_k;
  s.moe.normalize_top_k = normalize_top_k;
  s.moe.shared_expert_hidden = shared_expert_ffn_hidden;
  return s;
}

double DenseConfig::query_fold() const {
  if (attention_multiplier > 0) return attention_multiplier * std::sqrt(double(effective_head_dim()));
  return query_pre_attn_scalar > 0 ? std::sqrt(double(effective_head_dim()) / query_pre_attn_scalar) : 1.0;
}

double DenseConfig::weight_fold(const std::string& target) const {
  if (target == "q_proj") return qk_norm ? 1.0 : query_fold();
  if (target == "o_proj" || target == "down_proj") return residual_multiplier;
  return 1.0;
}

int64_t DenseConfig::rotary_dim() const {
  return int64_t(double(effective_head_dim()) * partial_rotary_factor);
}

bool DenseConfig::local_rope(int64_t layer) const {
  return rope_local_theta > 0 && layer_attention(layer).kind == AttentionKind::Sliding;
}

void DenseConfig::validate(const std::string& w) const {
  using util::check_range;
  TransformerShape::validate(w);
  check_range(w, "n_layers", n_layers, 1, 4096);
  const AttentionKind kind = parse_attention_kind(attention, w + ": field 'attention'");
  if (kind != AttentionKind::Full) {
    check_range(w, "window", window, 1, int64_t(1) << 24);
    check_range(w, "n_full_prelude", n_full_prelude, 0, n_layers);
    check_range(w, "n_full_coda", n_full_coda, 0, n_layers - n_full_prelude);
  } else {
    require(n_full_prelude == 0 && n_full_coda == 0, w,
            "fields 'n_full_prelude'/'n_full_coda' apply to sliding or strided attention only: expected 0 with "
            "attention = \"full\"");
  }
  if (kind == AttentionKind::Strided) check_range(w, "stride", stride, 0, window - 1);
  nn::activation_from_name(activation, w + ": field 'activation'");
  require(input_norms || sandwich_norm, w,
          "field 'input_norms' = false: expected sandwich_norm = true (a block keeps its output norms, OLMo 2's layout)");
  require(std::isfinite(query_pre_attn_scalar) && query_pre_attn_scalar >= 0, w,
          "field 'query_pre_attn_scalar' = " + std::to_string(query_pre_attn_scalar) + ": expected 0 (none) or > 0");
  for (auto [key, v] : {std::pair<const char*, double>{"embedding_multiplier", embedding_multiplier},
                        {"logit_scale", logit_scale},
                        {"logits_scaling", logits_scaling},
                        {"residual_multiplier", residual_multiplier}})
    require(std::isfinite(v) && v > 0, w, std::string("field '") + key + "' = " + std::to_string(v) +
                                              ": expected a positive number (1: none)");
  require(std::isfinite(attention_multiplier) && attention_multiplier >= 0, w,
          "field 'attention_multiplier' = " + std::to_string(attention_multiplier) +
              ": expected 0 (head_dim^-1/2) or a positive attention scale");
  require(attention_multiplier == 0 || query_pre_attn_scalar == 0, w,
          "fields 'attention_multiplier' and 'query_pre_attn_scalar' both set: expected one attention scale");
  for (auto [key, v] : {std::pair<const char*, double>{"attn_logit_softcap", attn_logit_softcap},
                        {"final_logit_softcap", final_logit_softcap}})
    require(std::isfinite(v) && v >= 0, w, std::string("field '") + key + "' = " + std::to_string(v) +
                                               ": expected 0 (none) or a positive cap");
  if (full_attention_interval != 0 || rope_local_theta != 0) {
    require(kind == AttentionKind::Sliding, w,
            "fields 'full_attention_interval'/'rope_local_theta' apply to sliding attention only: expected 0 with "
            "attention = \"" + attention + "\"");
    check_range(w, "full_attention_interval", full_attention_interval, 0, n_layers);
    require(std::isfinite(rope_local_theta) && rope_local_theta >= 0, w,
            "field 'rope_local_theta' = " + std::to_string(rope_local_theta) + ": expected 0 or a positive base");
  }
  require(std::isfinite(partial_rotary_factor) && partial_rotary_factor > 0 && partial_rotary_factor <= 1, w,
          "field 'partial_rotary_factor' = " + std::to_string(partial_rotary_factor) + ": expected a number in (0, 1]");
  require(rotary_dim() >= 2 && rotary_dim() % 2 == 0, w,
          "field 'partial_rotary_factor' = " + std::to_string(partial_rotary_factor) + ": the rotary dimension int(" +
              std::to_string(effective_head_dim()) + " * " + std::to_string(partial_rotary_factor) +
              ") = " + std::to_string(rotary_dim()) + ": expected an even number >= 2");
  rope_scaling.check_rotary_dim(rotary_dim(), w, "rope_scaling");
  require(norm == "rmsnorm" || norm == "layernorm", w, "field 'norm' = \"" + norm + "\": expected \"rmsnorm\" or \"layernorm\"");
  require(mlp == "gated" || mlp == "plain", w, "field 'mlp' = \"" + mlp + "\": expected \"gated\" or \"plain\"");
  require(positions == "rope" || positions == "learned", w,
          "field 'positions' = \"" + positions + "\": expected \"rope\" or \"learned\"");
  require(!(norm == "layernorm" || mlp == "plain" || mlp_bias || parallel_residual) || (!sandwich_norm && input_norms),
          w,
          "fields 'norm' = \"layernorm\" / 'mlp' = \"plain\" / 'mlp_bias' / 'parallel_residual' (GPT-2's and "
          "GPT-NeoX's blocks): expected the pre-norm layout (no sandwich_norm, input_norms true)");
  require(!learned_positions() || (rope_scaling.is_default() && rope_local_theta == 0 && partial_rotary_factor == 1.0),
          w, "field 'positions' = \"learned\": expected no RoPE settings (rope_scaling, rope_local_theta, "
             "partial_rotary_factor)");
  require(!shared_input_norm || parallel_residual, w,
          "field 'shared_input_norm' = true: expected parallel_residual = true (Phi's parallel blocks)");
  require(!lm_head_bias || !tie_word_embeddings, w,
          "field 'lm_head_bias' = true: expected tie_word_embeddings = false (the bias belongs to lm_head)");
  if (n_experts != 0 || top_k != 0 || expert_ffn_hidden != 0 || normalize_top_k || moe_layer_step != 1 ||
      !dense_ffn_layers.empty() || shared_expert_ffn_hidden != 0) {
    check_range(w, "n_experts", n_experts, 1, 4096);
    check_range(w, "top_k", top_k, 1, n_experts);
    check_range(w, "expert_ffn_hidden", expert_ffn_hidden, 0, int64_t(1) << 24);
    check_range(w, "moe_layer_step", moe_layer_step, 1, n_layers + 1);
    check_range(w, "shared_expert_ffn_hidden", shared_expert_ffn_hidden, 0, int64_t(1) << 24);
    for (size_t i = 0; i < dense_ffn_layers.size(); ++i) {
      check_range(w, "dense_ffn_layers[" + std::to_string(i) + "]", dense_ffn_layers[i], 0, n_layers - 1);
      require(std::count(dense_ffn_layers.begin(), dense_ffn_layers.end(), dense_ffn_layers[i]) == 1, w,
              "field 'dense_ffn_layers' lists layer " + std::to_string(dense_ffn_layers[i]) + " twice: expected each once");
    }
    require(activation == "silu" && mlp == "gated" && !mlp_bias && norm == "rmsnorm" && !parallel_residual, w,
            "field 'n_experts' = " + std::to_string(n_experts) +
                ": the experts are SwiGLU MLPs without biases in pre-norm RMSNorm blocks (expected activation "
                "\"silu\", mlp \"gated\", no mlp_bias, norm \"rmsnorm\", no parallel_residual)");
  }
  double blocks = 0;
  for (int64_t i = 0; i < n_layers; ++i)
    blocks += is_moe_layer(i) ? block_parameter_estimate(n_experts, effective_expert_ffn()) +
                                    3.0 * double(d_model) * double(shared_expert_ffn_hidden)
                              : block_parameter_estimate(1, ffn_hidden);
  util::check_parameter_estimate(w, "n_layers blocks and the embeddings", blocks + 2.0 * double(vocab_size) * double(d_model));
}

DenseConfig DenseConfig::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  DenseConfig c;
  f.get("architecture", std::string("dense"), {"dense"});
  c.read(f);
  f.get("n_layers", c.n_layers);
  f.get("attention", c.attention);
  f.get("window", c.window);
  f.get("stride", c.stride);
  f.get("n_full_prelude", c.n_full_prelude);
  f.get("n_full_coda", c.n_full_coda);
  f.get("full_attention_interval", c.full_attention_interval);
  f.get("rope_local_theta", c.rope_local_theta);
  f.get("activation", c.activation);
  f.get("sandwich_norm", c.sandwich_norm);
  f.get("input_norms", c.input_norms);
  f.get("scale_embeddings", c.scale_embeddings);
  f.get("attn_logit_softcap", c.attn_logit_softcap);
  f.get("final_logit_softcap", c.final_logit_softcap);
  f.get("query_pre_attn_scalar", c.query_pre_attn_scalar);
  f.get("partial_rotary_factor", c.partial_rotary_factor);
  f.get("embedding_multiplier", c.embedding_multiplier);
  f.get("logits_scaling", c.logits_scaling);
  f.get("logit_scale", c.logit_scale);
  f.get("residual_multiplier", c.residual_multiplier);
  f.get("attention_multiplier", c.attention_multiplier);
  f.get("norm", c.norm);
  f.get("mlp", c.mlp);
  f.get("o_bias", c.o_bias);
  f.get("mlp_bias", c.mlp_bias);
  f.get("positions", c.positions);
  f.get("parallel_residual", c.parallel_residual);
  f.get("shared_input_norm", c.shared_input_norm);
  f.get("lm_head_bias", c.lm_head_bias);
  f.get("n_experts", c.n_experts);
  f.get("top_k", c.top_k);
  f.get("expert_ffn_hidden", c.expert_ffn_hidden);
  f.get("normalize_top_k", c.normalize_top_k);
  f.get("moe_layer_step", c.moe_layer_step);
  f.get("dense_ffn_layers", c.dense_ffn_layers);
  f.get("shared_expert_ffn_hidden", c.shared_expert_ffn_hidden);
  f.reject_unknown();
  c.validate(w);
  return c;
}

nlohmann::json DenseConfig::to_json() const {
  nlohmann::json j = {{"architecture", "dense"}};
  write(j);
  j["n_layers"] = n_layers;
  j["attention"] = attention;
  j["window"] = window;
  j["stride"] = stride;
  j["n_full_prelude"] = n_full_prelude;
  j["n_full_coda"] = n_full_coda;
  if (full_attention_interval != 0) j["full_attention_interval"] = full_attention_interval;
  if (rope_local_theta != 0) j["rope_local_theta"] = rope_local_theta;
  if (activation != "silu") j["activation"] = activation;
  if (sandwich_norm) j["sandwich_norm"] = true;
  if (!input_norms) j["input_norms"] = false;
  if (scale_embeddings) j["scale_embeddings"] = true;
  if (attn_logit_softcap != 0) j["attn_logit_softcap"] = attn_logit_softcap;
  if (final_logit_softcap != 0) j["final_logit_softcap"] = final_logit_softcap;
  if (query_pre_attn_scalar != 0) j["query_pre_attn_scalar"] = query_pre_attn_scalar;
  if (partial_rotary_factor != 1.0) j["partial_rotary_factor"] = partial_rotary_factor;
  if (embedding_multiplier != 1.0) j["embedding_multiplier"] = embedding_multiplier;
  if (logits_scaling != 1.0) j["logits_scaling"] = logits_scaling;
  if (logit_scale != 1.0) j["logit_scale"] = logit_scale;
  if (residual_multiplier != 1.0) j["residual_multiplier"] = residual_multiplier;
  if (attention_multiplier != 0) j["attention_multiplier"] = attention_multiplier;
  if (norm != "rmsnorm") j["norm"] = norm;
  if (mlp != "gated") j["mlp"] = mlp;
  if (o_bias) j["o_bias"] = true;
  if (mlp_bias) j["mlp_bias"] = true;
  if (positions != "rope") j["positions"] = positions;
  if (parallel_residual) j["parallel_residual"] = true;
  if (shared_input_norm) j["shared_input_norm"] = true;
  if (lm_head_bias) j["lm_head_bias"] = true;
  if (n_experts > 0) {
    j["n_experts"] = n_experts;
    j["top_k"] = top_k;
    j["expert_ffn_hidden"] = expert_ffn_hidden;
    j["normalize_top_k"] = normalize_top_k;
    j["moe_layer_step"] = moe_layer_step;
    j["dense_ffn_layers"] = dense_ffn_layers;
    if (shared_expert_ffn_hidden > 0) j["shared_expert_ffn_hidden"] = shared_expert_ffn_hidden;
  }
  return j;
}

}  // namespace lol::baselines
