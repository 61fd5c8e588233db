// The config.json files of the LayerNorm architectures (config_parts.h): GPT2Config's,
// GPTNeoXConfig's, PhiConfig's and StableLmConfig's keys, defaults and refusals, read into
// the HfConfig the rest of the loader uses.
#include <cmath>
#include <optional>
#include <tuple>

#include "hf/config_parts.h"
#include "nn/activation.h"
#include "nn/rope_scaling.h"

namespace lol::hf::config_parts {

namespace {

/// The MLP activation of an ACT2FN name read from `key` (default `def`): gelu_new,
/// gelu_fast and gelu_pytorch_tanh are the tanh form ("gelu_pytorch_tanh"), gelu the
/// exact one; any other name is refused.
std::string gelu_activation(util::JsonFields& f, const std::string& where, const char* key, const char* def) {
  std::string act = def;
  f.get(key, act);
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") return "gelu_pytorch_tanh";
  if (act == "gelu") return "gelu";
  unsupported(where, key, "\"" + act + "\"", "implemented: gelu_new, gelu_fast, gelu_pytorch_tanh (tanh GELU) and gelu (exact)");
}

/// The required size fields `keys` (each with its upper bound) into their outputs.
void read_sizes(util::JsonFields& f, const std::string& where,
                std::initializer_list<std::tuple<const char*, int64_t*, int64_t>> keys) {
  for (auto [key, out, hi] : keys) {
    if (!f.has(key)) throw InputError(where + ": " + field(key) + " is missing (expected a positive integer)");
    f.get(key, *out);
    util::check_range(where, key, *out, 1, hi);
  }
}

/// head_dim = hidden / heads for the GPT family's multi-head attention (`hidden_key` and
/// `heads_key` name the fields in errors): a divisor and an even quotient are required.
void multi_head(HfConfig& c, const std::string& where, const char* hidden_key, const char* heads_key) {
  c.num_key_value_heads = c.num_attention_heads;
  if (c.hidden_size % c.num_attention_heads != 0)
    throw InputError(where + ": " + field(hidden_key) + " = " + std::to_string(c.hidden_size) +
                     ": expected a multiple of " + heads_key + " = " + std::to_string(c.num_attention_heads));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim % 2 != 0)
    throw InputError(where + ": " + field(hidden_key) + " = " + std::to_string(c.hidden_size) + " / " + field(heads_key) +
                     " = " + std::to_string(c.num_attention_heads) + " gives heads of " + std::to_string(c.head_dim) +
                     ": expected an even head size (lol's attention kernels)");
}

/// model_type, when given, must be `want` (`extra` ends the message).
void check_model_type(util::JsonFields& f, const std::string& where, const std::string& want, const char* arch,
                      const std::string& extra_if = "", const std::string& extra = "") {
  std::string model_type = want;
  f.get("model_type", model_type);
  if (model_type != want)
    throw InputError(where + ": " + field("model_type") + " = \"" + model_type + "\": expected \"" + want + "\" for " +
                     arch + (!extra_if.empty() && model_type == extra_if ? extra : ""));
}

/// The LayerNorms' epsilon from `key` (default 1e-5), in (0, 1).
double layer_norm_eps(util::JsonFields& f, const std::string& where, const char* key) {
  double eps = 1e-5;
  f.get(key, eps);
  if (!(eps > 0 && eps < 1)) throw InputError(where + ": " + field(key) + ": expected 0 < " + key + " < 1");
  return eps;
}

/// The keys every GPT-family config ends with: quantization_config refused, the stored
/// dtype, bos / eos ids (defaults `bos`, `eos`: the config class's) and pad.
void read_tail(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c, int64_t bos,
               int64_t eos) {
  if (f.has("quantization_config"))
    unsupported(where, "quantization_config", j["quantization_config"].dump(), "quantized weights");
  read_torch_dtype(f, j, where, c);
  c.bos_token_id = {bos};
  c.eos_token_id = {eos};
  if (f.has("bos_token_id")) c.bos_token_id = token_id_list(j, "bos_token_id", where);
  if (f.has("eos_token_id")) c.eos_token_id = token_id_list(j, "eos_token_id", where);
  c.pad_token_id = pad_token_id_of(j);
}

/// The Llama-style size keys (GPT-NeoX, Phi), all required.
void read_llama_sizes(util::JsonFields& f, const std::string& where, HfConfig& c) {
  read_sizes(f, where, {{"vocab_size", &c.vocab_size, int64_t(1) << 31},
                        {"hidden_size", &c.hidden_size, int64_t(1) << 20},
                        {"intermediate_size", &c.intermediate_size, int64_t(1) << 24},
                        {"num_hidden_layers", &c.num_hidden_layers, 4096},
                        {"num_attention_heads", &c.num_attention_heads, int64_t(1) << 16},
                        {"max_position_embeddings", &c.max_position_embeddings, int64_t(1) << 24}});
  multi_head(c, where, "hidden_size", "num_attention_heads");
}

/// num_key_value_heads into c (read_llama_sizes set it to the query heads): a divisor of
/// num_attention_heads; null means the query heads when `null_is_heads`, else is refused.
void read_kv_heads(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c,
                   bool null_is_heads) {
  if (!f.has("num_key_value_heads")) return;
  if (j["num_key_value_heads"].is_null()) {
    if (null_is_heads) return;
    throw InputError(where + ": " + field("num_key_value_heads") + " = null: expected a divisor of num_attention_heads = " +
                     std::to_string(c.num_attention_heads) + " (transformers fails on null here)");
  }
  f.get("num_key_value_heads", c.num_key_value_heads);
  util::check_range(where, "num_key_value_heads", c.num_key_value_heads, 1, c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw InputError(where + ": " + field("num_key_value_heads") + " = " + std::to_string(c.num_key_value_heads) +
                     ": expected a divisor of num_attention_heads = " + std::to_string(c.num_attention_heads));
}

/// RoPE settings of the GPT family into c: the base from the top-level `theta_keys` (default
/// 10000), the rotated share of each head from `factor_keys` (default `default_factor`), and
/// rope_scaling / rope_parameters (transformers 5 puts rope_theta and partial_rotary_factor
/// inside; they count as stated values too). Every stated value must agree (which one a
/// transformers release reads differs); the rotary dimension int(head_dim * share) must be
/// even and >= 2; longrope is refused (Phi-3 only).
void read_partial_rope(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c,
                       std::initializer_list<const char*> theta_keys, std::initializer_list<const char*> factor_keys,
                       double default_factor, const std::string& default_note) {
  struct Stated {
    double value;
    std::string key;
  };
  std::optional<Stated> theta, factor;
  const auto state = [&](std::optional<Stated>& slot, const std::string& key, const nlohmann::json& v) {
    if (v.is_null()) return;
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw InputError(where + ": " + field(key) + " = " + v.dump() + ": expected a number");
    if (slot && slot->value != v.get<double>())
      throw InputError(where + ": " + field(key) + " = " + v.dump() + " differs from " + field(slot->key) + " = " +
                       num_text(slot->value) + ": expected one value");
    if (!slot) slot = Stated{v.get<double>(), key};
  };
  for (const char* key : theta_keys)
    if (f.has(key)) state(theta, key, j[key]);
  for (const char* key : factor_keys)
    if (f.has(key)) state(factor, key, j[key]);
  std::optional<nn::RopeScaling> scaling;
  std::string scaling_key = "rope_scaling";
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!f.has(key) || j[key].is_null()) continue;
    nlohmann::json rp = j[key];
    if (rp.is_object()) {
      for (const char* inner : {"rope_theta", "partial_rotary_factor"}) {
        if (!rp.contains(inner)) continue;
        state(std::string(inner) == "rope_theta" ? theta : factor, std::string(key) + "." + inner, rp[inner]);
        rp.erase(inner);
      }
    }
    auto s = nn::RopeScaling::from_json(rp, where, key, c.max_position_embeddings, true);
    if (scaling && *scaling != s)
      throw InputError(where + ": " + field(key) + " = " + j[key].dump() + " differs from " + field(scaling_key) +
                       " = " + j[scaling_key].dump() + ": expected one RoPE setting");
    scaling = s;
    scaling_key = key;
  }
  c.rope_theta = theta ? theta->value : 10000.0;
  c.partial_rotary_factor = factor ? factor->value : default_factor;
  const std::string factor_key = factor ? factor->key : *factor_keys.begin();
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1) || c.rotary_dim() < 2 || c.rotary_dim() % 2 != 0)
    throw InputError(where + ": " + field(factor_key) + " = " + num_text(c.partial_rotary_factor) +
                     (factor ? "" : " (" + default_note + ")") +
                     ": expected a number in (0, 1] whose rotary dimension int(head_dim " + std::to_string(c.head_dim) +
                     " * it) is even and >= 2");
  if (!(c.rope_theta >= 1 && c.rope_theta <= 1e30))
    throw InputError(where + ": " + field(theta ? theta->key : *theta_keys.begin()) + " = " + num_text(c.rope_theta) +
                     ": expected a value in [1, 1e30]");
  if (scaling) c.rope_scaling = *scaling;
  if (c.rope_scaling.type == "longrope")
    unsupported(where, scaling_key, "\"longrope\"", "longrope is implemented for Phi-3 folders (Phi3ForCausalLM)");
  c.rope_scaling.check_rotary_dim(c.rotary_dim(), where, scaling_key);
}

}  // namespace

HfConfig gpt2_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kGpt2Arch;
  check_model_type(f, where, "gpt2", kGpt2Arch);
  // Sizes: required, as for the other architectures (GPT-2 folders always list them).
  read_sizes(f, where, {{"vocab_size", &c.vocab_size, int64_t(1) << 31},
                        {"n_embd", &c.hidden_size, int64_t(1) << 20},
                        {"n_layer", &c.num_hidden_layers, 4096},
                        {"n_head", &c.num_attention_heads, int64_t(1) << 16},
                        {"n_positions", &c.max_position_embeddings, int64_t(1) << 24}});
  multi_head(c, where, "n_embd", "n_head");
  c.intermediate_size = 4 * c.hidden_size;  // n_inner: null = 4 n_embd
  if (f.has("n_inner") && !j["n_inner"].is_null()) {
    f.get("n_inner", c.intermediate_size);
    util::check_range(where, "n_inner", c.intermediate_size, 1, int64_t(1) << 24);
  }
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_epsilon");  // (the LayerNorms' epsilon)
  c.activation = gelu_activation(f, where, "activation_function", "gelu_new");
  // Switches that change the attention: refused unless at GPT-2's values.
  bool scale_weights = true, by_layer = false, cross = false;
  f.get("scale_attn_weights", scale_weights);
  f.get("scale_attn_by_inverse_layer_idx", by_layer);
  f.get("add_cross_attention", cross);
  if (!scale_weights) unsupported(where, "scale_attn_weights", "false", "attention scores are scaled by head_size^-1/2");
  if (by_layer)
    unsupported(where, "scale_attn_by_inverse_layer_idx", "true", "attention scores are scaled by head_size^-1/2 only");
  if (cross) unsupported(where, "add_cross_attention", "true", "decoder-only blocks");
  // reorder_and_upcast_attn only changes the precision of the scores (lol computes them in
  // float32 or wider already).
  c.qkv_bias = true;
  c.tie_word_embeddings = true;  // PretrainedConfig's default; GPT-2 ties them
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 50256, 50256);  // (GPT2Config's defaults)
  return c;
}

HfConfig gpt_neox_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kGptNeoXArch;
  check_model_type(f, where, "gpt_neox", kGptNeoXArch);
  read_llama_sizes(f, where, c);
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_eps");  // (the LayerNorms' epsilon)
  c.activation = gelu_activation(f, where, "hidden_act", "gelu");
  c.qkv_bias = true;  // attention_bias: query_key_value and dense (o_proj) biases
  f.get("attention_bias", c.qkv_bias);
  c.parallel_residual = true;
  f.get("use_parallel_residual", c.parallel_residual);

  // RoPE on the leading int(head_size * rotary_pct) dimensions of each head, base
  // rotary_emb_base (transformers 4.x; 4.4x also saves them as partial_rotary_factor and
  // rope_theta); transformers 5 keeps both in rope_parameters.
  read_partial_rope(f, j, where, c, {"rotary_emb_base", "rope_theta"}, {"rotary_pct", "partial_rotary_factor"}, 0.25,
                    "GPTNeoXConfig's default");
  c.tie_word_embeddings = false;  // GPTNeoXConfig's default: embed_out is its own matrix
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 0, 2);  // (GPTNeoXConfig's defaults)
  return c;
}

HfConfig phi_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kPhiArch;
  check_model_type(f, where, "phi", kPhiArch, "phi-msft",
                   " (a phi-msft folder predates transformers' Phi: its tensor names are not read here)");
  read_llama_sizes(f, where, c);
  read_kv_heads(f, j, where, c, true);  // (PhiConfig: null or absent = the query heads)
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_eps");  // (the LayerNorms' epsilon)
  c.activation = gelu_activation(f, where, "hidden_act", "gelu_new");
  read_partial_rope(f, j, where, c, {"rope_theta"}, {"partial_rotary_factor"}, 0.5, "PhiConfig's default");
  bool qk_layernorm = false;
  f.get("qk_layernorm", qk_layernorm);
  if (qk_layernorm)
    unsupported(where, "qk_layernorm", "true", "LayerNorms of the queries and keys are not implemented (no released "
                                               "Phi model sets it)");
  bool tied = false;  // PhiConfig's default
  f.get("tie_word_embeddings", tied);
  if (tied)
    unsupported(where, "tie_word_embeddings", "true", "Phi's lm_head has its own bias; tied Phi heads are not implemented");
  c.tie_word_embeddings = false;
  c.qkv_bias = true;  // q/k/v_proj, dense, fc1, fc2 and lm_head all have biases
  c.parallel_residual = true;
  read_tail(f, j, where, c, 1, 2);  // (PhiConfig's defaults)
  return c;
}

HfConfig stablelm_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kStableLmArch;
  check_model_type(f, where, "stablelm", kStableLmArch, "stablelm_epoch",
                   " (a stablelm_epoch folder needs its own remote code: not read here)");
  read_llama_sizes(f, where, c);
  if (!f.has("num_key_value_heads")) c.num_key_value_heads = 32;  // StableLmConfig's default
  read_kv_heads(f, j, where, c, false);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw InputError(where + ": " + field("num_key_value_heads") +
                     " is missing, and StableLmConfig's default is 32: expected a divisor of num_attention_heads = " +
                     std::to_string(c.num_attention_heads));
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_eps");  // (the LayerNorms' epsilon)
  c.activation = "silu";  // the gate's ACT2FN name
  f.get("hidden_act", c.activation);
  c.activation = nn::activation_name(nn::activation_from_name(c.activation, where + ": " + field("hidden_act")));
  read_partial_rope(f, j, where, c, {"rope_theta"}, {"partial_rotary_factor"}, 0.25, "StableLmConfig's default");
  bool qk_layernorm = false;
  f.get("qk_layernorm", qk_layernorm);
  if (qk_layernorm)
    unsupported(where, "qk_layernorm", "true", "the per-head LayerNorms of stablelm-2-12b's queries and keys are not "
                                               "implemented");
  c.qkv_bias = false;  // use_qkv_bias: q/k/v_proj biases (stablelm-2-1_6b: true); o_proj and the MLP never have any
  f.get("use_qkv_bias", c.qkv_bias);
  c.parallel_residual = false;
  f.get("use_parallel_residual", c.parallel_residual);
  c.tie_word_embeddings = false;  // StableLmConfig's default
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 0, 0);  // (StableLmConfig's defaults)
  return c;
}

}  // namespace lol::hf::config_parts
