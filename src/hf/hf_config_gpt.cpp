// The config.json files of the LayerNorm architectures (config_parts.h): GPT2Config's,
// GPTNeoXConfig's, PhiConfig's, StableLmConfig's and FalconConfig's keys, defaults and
// refusals, read into the HfConfig the rest of the loader uses.
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
/// exact one, relu where `relu` (OPT); any other name is refused.
std::string mlp_activation(util::JsonFields& f, const std::string& where, const char* key, const char* def,
                            bool relu = false) {
  std::string act = def;
  f.get(key, act);
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") return "gelu_pytorch_tanh";
  if (act == "gelu") return "gelu";
  if (relu && act == "relu") return "relu";
  unsupported(where, key, "\"" + act + "\"",
              std::string("implemented: ") + (relu ? "relu, " : "") +
                  "gelu_new, gelu_fast, gelu_pytorch_tanh (tanh GELU) and gelu (exact)");
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

/// An optional positive size `key` (null or absent: `def`) with upper bound `hi`.
int64_t optional_size(util::JsonFields& f, const nlohmann::json& j, const std::string& where, const char* key,
                      int64_t def, int64_t hi) {
  int64_t v = def;
  if (f.has(key) && !j[key].is_null()) f.get(key, v);
  util::check_range(where, key, v, 1, hi);
  return v;
}

/// GPT2Config's names of the sizes, the LayerNorms' epsilon and the GELU (GPTJConfig's too):
/// vocab_size, n_embd, n_layer, n_head and n_positions required; n_inner (null or absent:
/// 4 n_embd), layer_norm_epsilon (1e-5), activation_function (`default_activation`).
void read_gpt2_names(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c,
                     const char* default_activation = "gelu_new") {
  read_sizes(f, where, {{"vocab_size", &c.vocab_size, int64_t(1) << 31},
                        {"n_embd", &c.hidden_size, int64_t(1) << 20},
                        {"n_layer", &c.num_hidden_layers, 4096},
                        {"n_head", &c.num_attention_heads, int64_t(1) << 16},
                        {"n_positions", &c.max_position_embeddings, int64_t(1) << 24}});
  multi_head(c, where, "n_embd", "n_head");
  c.intermediate_size = optional_size(f, j, where, "n_inner", 4 * c.hidden_size, int64_t(1) << 24);
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_epsilon");  // (the LayerNorms' epsilon)
  c.activation = mlp_activation(f, where, "activation_function", default_activation);
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

/// GPT-2's and GPT-BigCode's common switches: scale_attn_weights false and
/// add_cross_attention refused, biases on every projection, tied embeddings by default,
/// bos / eos 50256.
void read_gpt2_switches(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c) {
  bool scale_weights = true, cross = false;
  f.get("scale_attn_weights", scale_weights);
  f.get("add_cross_attention", cross);
  if (!scale_weights) unsupported(where, "scale_attn_weights", "false", "attention scores are scaled by head_size^-1/2");
  if (cross) unsupported(where, "add_cross_attention", "true", "decoder-only blocks");
  c.qkv_bias = true;
  c.tie_word_embeddings = true;  // PretrainedConfig's default; GPT-2 and GPT-BigCode tie them
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 50256, 50256);  // (GPT2Config's and GPTBigCodeConfig's defaults)
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
  read_gpt2_names(f, j, where, c);
  // Switches that change the attention: refused unless at GPT-2's values.
  bool by_layer = false;
  f.get("scale_attn_by_inverse_layer_idx", by_layer);
  if (by_layer)
    unsupported(where, "scale_attn_by_inverse_layer_idx", "true", "attention scores are scaled by head_size^-1/2 only");
  // reorder_and_upcast_attn only changes the precision of the scores (lol computes them in
  // float32 or wider already).
  read_gpt2_switches(f, j, where, c);
  return c;
}

HfConfig opt_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kOptArch;
  check_model_type(f, where, "opt", kOptArch);
  read_sizes(f, where, {{"vocab_size", &c.vocab_size, int64_t(1) << 31},
                        {"hidden_size", &c.hidden_size, int64_t(1) << 20},
                        {"ffn_dim", &c.intermediate_size, int64_t(1) << 24},
                        {"num_hidden_layers", &c.num_hidden_layers, 4096},
                        {"num_attention_heads", &c.num_attention_heads, int64_t(1) << 16},
                        {"max_position_embeddings", &c.max_position_embeddings, int64_t(1) << 24}});
  multi_head(c, where, "hidden_size", "num_attention_heads");
  c.rms_norm_eps = 1e-5;  // (nn.LayerNorm's default: OPTConfig has no epsilon)
  c.activation = mlp_activation(f, where, "activation_function", "relu", true);
  // opt-350m's layout (post-norm blocks, embeddings projected from word_embed_proj_dim) and
  // the switches that drop the final norm or the LayerNorms' parameters: not implemented.
  bool before = true, remove_final = false, affine = true;
  f.get("do_layer_norm_before", before);
  f.get("_remove_final_layer_norm", remove_final);
  f.get("layer_norm_elementwise_affine", affine);
  if (!before) unsupported(where, "do_layer_norm_before", "false", "pre-norm blocks (opt-350m's post-norm blocks are not implemented)");
  if (remove_final) unsupported(where, "_remove_final_layer_norm", "true", "the final LayerNorm");
  if (!affine) unsupported(where, "layer_norm_elementwise_affine", "false", "LayerNorms with a weight and a bias");
  if (f.has("word_embed_proj_dim") && !j["word_embed_proj_dim"].is_null()) {
    int64_t proj = 0;
    f.get("word_embed_proj_dim", proj);
    if (proj != c.hidden_size)
      unsupported(where, "word_embed_proj_dim", std::to_string(proj),
                  "word_embed_proj_dim = hidden_size = " + std::to_string(c.hidden_size) +
                      " (opt-350m's project_in / project_out are not implemented)");
  }
  c.qkv_bias = true;  // enable_bias: q/k/v/out_proj, fc1 and fc2 alike
  f.get("enable_bias", c.qkv_bias);
  c.tie_word_embeddings = true;  // (OPTForCausalLM ties lm_head to embed_tokens)
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 2, 2);  // (OPTConfig's bos / eos: 2, "</s>")
  return c;
}

HfConfig gpt_bigcode_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kGptBigCodeArch;
  check_model_type(f, where, "gpt_bigcode", kGptBigCodeArch);
  read_gpt2_names(f, j, where, c, "gelu_pytorch_tanh");
  bool multi_query = true;  // GPTBigCodeConfig's default: one key/value head
  f.get("multi_query", multi_query);
  c.num_key_value_heads = multi_query ? 1 : c.num_attention_heads;
  // attention_softmax_in_fp32 / scale_attention_softmax_in_fp32 only change the precision
  // of the softmax (the second scales the scores by 1 / (layer + 1) and back in float32).
  read_gpt2_switches(f, j, where, c);
  return c;
}

HfConfig gpt_neox_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kGptNeoXArch;
  check_model_type(f, where, "gpt_neox", kGptNeoXArch);
  read_llama_sizes(f, where, c);
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_eps");  // (the LayerNorms' epsilon)
  c.activation = mlp_activation(f, where, "hidden_act", "gelu");
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
  c.activation = mlp_activation(f, where, "hidden_act", "gelu_new");
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
  c.activation = gate_activation(where, "hidden_act", c.activation);
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

namespace {

/// Refuses RefinedWeb's key `legacy` (the remote-code configs falcon folders had before
/// transformers' Falcon) unless `modern` is present with the same value: transformers'
/// FalconConfig no longer reads it, so the model it builds could differ from the file's.
void refuse_legacy_key(util::JsonFields& f, const nlohmann::json& j, const std::string& where, const char* legacy,
                       const char* modern) {
  if (!f.has(legacy)) return;
  if (f.has(modern) && j[modern] == j[legacy]) return;
  unsupported(where, legacy, j[legacy].dump(),
              std::string("RefinedWeb's key: transformers' FalconConfig reads ") + modern +
                  (f.has(modern) ? " = " + j[modern].dump() + " instead" : ", which is missing") + "; write " + modern);
}

}  // namespace

HfConfig falcon_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kFalconArch;
  check_model_type(f, where, "falcon", kFalconArch, "RefinedWebModel",
                   " (a RefinedWeb folder needs its remote code: convert it with transformers' Falcon first)");
  refuse_legacy_key(f, j, where, "n_embed", "hidden_size");
  refuse_legacy_key(f, j, where, "n_head", "num_attention_heads");
  refuse_legacy_key(f, j, where, "n_layer", "num_hidden_layers");
  refuse_legacy_key(f, j, where, "n_head_kv", "num_kv_heads");
  // The sizes FalconConfig defaults to falcon-7b's are required here (a missing one is a
  // broken file); max_position_embeddings and ffn_hidden_size keep its defaults (2048,
  // 4 hidden_size), which falcon-7b's own config.json relies on.
  read_sizes(f, where, {{"vocab_size", &c.vocab_size, int64_t(1) << 31},
                        {"hidden_size", &c.hidden_size, int64_t(1) << 20},
                        {"num_hidden_layers", &c.num_hidden_layers, 4096},
                        {"num_attention_heads", &c.num_attention_heads, int64_t(1) << 16}});
  c.max_position_embeddings = optional_size(f, j, where, "max_position_embeddings", 2048, int64_t(1) << 24);
  c.intermediate_size = optional_size(f, j, where, "ffn_hidden_size", 4 * c.hidden_size, int64_t(1) << 24);
  multi_head(c, where, "hidden_size", "num_attention_heads");
  c.rms_norm_eps = layer_norm_eps(f, where, "layer_norm_epsilon");  // (the LayerNorms' epsilon)
  c.activation = mlp_activation(f, where, "activation", "gelu");

  bool alibi = false, new_arch = false, multi_query = true, parallel = true;
  f.get("alibi", alibi);
  f.get("new_decoder_architecture", new_arch);
  f.get("multi_query", multi_query);
  f.get("parallel_attn", parallel);
  if (alibi) unsupported(where, "alibi", "true", "ALiBi position biases (falcon-rw) are not implemented; lol reads Falcon's RoPE models");
  // Key/value heads (FalconAttention): num_kv_heads with the new decoder architecture, 1
  // with multi_query, else num_kv_heads, which the per-head [q; k; v] layout needs equal to
  // the query heads.
  const int64_t kv = optional_size(f, j, where, "num_kv_heads", c.num_attention_heads, c.num_attention_heads);
  if (new_arch && c.num_attention_heads % kv != 0)
    throw InputError(where + ": " + field("num_kv_heads") + " = " + std::to_string(kv) +
                     ": expected a divisor of num_attention_heads = " + std::to_string(c.num_attention_heads));
  if (!new_arch && !multi_query && kv != c.num_attention_heads)
    throw InputError(where + ": " + field("num_kv_heads") + " = " + std::to_string(kv) +
                     " with multi_query false and new_decoder_architecture false: expected num_attention_heads = " +
                     std::to_string(c.num_attention_heads) + " (query_key_value holds [q; k; v] for every head)");
  c.num_key_value_heads = new_arch ? kv : multi_query ? 1 : kv;
  // The blocks (FalconDecoderLayer): with parallel_attn, one input_layernorm (old
  // architecture, or num_ln_in_parallel_attn 1) or ln_attn and ln_mlp (the new architecture's
  // default, 2); without it, sequential blocks. Layouts on which transformers' layer fails
  // are refused.
  int64_t num_ln = 0;  // null
  if (f.has("num_ln_in_parallel_attn") && !j["num_ln_in_parallel_attn"].is_null())
    f.get("num_ln_in_parallel_attn", num_ln);
  if (new_arch && !parallel)
    unsupported(where, "parallel_attn", "false",
                "with new_decoder_architecture true transformers' FalconDecoderLayer has no sequential form");
  if (parallel) {
    if (num_ln != 0 && num_ln != 1 && num_ln != 2)
      throw InputError(where + ": " + field("num_ln_in_parallel_attn") + " = " + std::to_string(num_ln) +
                       ": expected null, 1 (one input_layernorm) or 2 (ln_attn and ln_mlp)");
    if (num_ln == 2 && !new_arch)
      unsupported(where, "num_ln_in_parallel_attn", "2",
                  "with new_decoder_architecture false transformers builds ln_attn / ln_mlp but runs input_layernorm");
  }
  c.parallel_residual = parallel;
  c.shared_input_norm = parallel && (!new_arch || num_ln == 1);
  c.falcon_new_decoder = new_arch;

  // RoPE over whole heads, base rope_theta; rope_scaling as the other architectures'.
  read_partial_rope(f, j, where, c, {"rope_theta"}, {"partial_rotary_factor"}, 1.0, "Falcon's whole heads");
  if (c.partial_rotary_factor != 1.0)
    unsupported(where, "partial_rotary_factor", num_text(c.partial_rotary_factor),
                "Falcon rotates whole heads; transformers' FalconAttention does not read it");
  c.qkv_bias = false;  // bias: query_key_value, dense, dense_h_to_4h and dense_4h_to_h alike
  f.get("bias", c.qkv_bias);
  c.tie_word_embeddings = true;  // PretrainedConfig's default; Falcon's lm_head is word_embeddings
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 11, 11);  // (FalconConfig's defaults)
  return c;
}

HfConfig gptj_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kGptJArch;
  check_model_type(f, where, "gptj", kGptJArch);
  read_gpt2_names(f, j, where, c);  // (GPTJConfig's attribute_map: hidden_size = n_embd, ...)
  // RoPE on the leading rotary_dim dimensions of each head in interleaved pairs (2i, 2i + 1),
  // base 10000 (GPTJAttention's fixed table); lol stores q_proj / k_proj with those rows
  // reordered so that rotate-half pairs (i, i + rotary_dim / 2) compute the same function
  // (hf_model.cpp), so the rest of lol sees partial rotate-half RoPE.
  if (f.has("rotary_dim") && j["rotary_dim"].is_null())
    unsupported(where, "rotary_dim", "null",
                "transformers' GPT-J then builds its sin / cos table over n_embd, which fits no head of a multi-head model");
  int64_t rotary = 64;  // GPTJConfig's default
  f.get("rotary_dim", rotary);
  if (rotary < 2 || rotary > c.head_dim || rotary % 2 != 0)
    throw InputError(where + ": " + field("rotary_dim") + " = " + std::to_string(rotary) +
                     ": expected an even number in [2, n_embd / n_head = " + std::to_string(c.head_dim) + "]");
  c.partial_rotary_factor = double(rotary) / double(c.head_dim);
  while (c.rotary_dim() < rotary) c.partial_rotary_factor = std::nextafter(c.partial_rotary_factor, 2.0);
  for (const char* key : {"rope_scaling", "rope_parameters", "rope_theta"})
    if (f.has(key) && !j[key].is_null() && !(std::string(key) == "rope_theta" && j[key] == 10000))
      unsupported(where, key, j[key].dump(), "GPT-J's RoPE has base 10000 and no scaling; transformers' GPTJConfig ignores it");
  c.tie_word_embeddings = false;  // GPTJConfig's default
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  if (c.tie_word_embeddings)
    unsupported(where, "tie_word_embeddings", "true", "GPT-J's lm_head has its own bias; tied GPT-J heads are not implemented");
  c.parallel_residual = c.shared_input_norm = true;  // x + attn(ln_1 x) + mlp(ln_1 x)
  c.qkv_bias = false;                               // q/k/v and out_proj have none; fc_in, fc_out and lm_head do
  read_tail(f, j, where, c, 50256, 50256);          // (GPTJConfig's defaults)
  return c;
}

HfConfig starcoder2_config(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  HfConfig c;
  c.architecture = kStarcoder2Arch;
  check_model_type(f, where, "starcoder2", kStarcoder2Arch);
  read_llama_sizes(f, where, c);
  if (!f.has("num_key_value_heads")) c.num_key_value_heads = 2;  // Starcoder2Config's default
  read_kv_heads(f, j, where, c, false);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw InputError(where + ": " + field("num_key_value_heads") +
                     " is missing, and Starcoder2Config's default is 2: expected a divisor of num_attention_heads = " +
                     std::to_string(c.num_attention_heads));
  c.rms_norm_eps = layer_norm_eps(f, where, "norm_epsilon");  // (the LayerNorms' epsilon)
  c.activation = mlp_activation(f, where, "hidden_act", "gelu_pytorch_tanh");
  read_partial_rope(f, j, where, c, {"rope_theta"}, {"partial_rotary_factor"}, 1.0, "StarCoder2's whole heads");
  if (c.partial_rotary_factor != 1.0)
    unsupported(where, "partial_rotary_factor", num_text(c.partial_rotary_factor),
                "StarCoder2 rotates whole heads; transformers' Starcoder2Attention does not read it");
  c.qkv_bias = true;  // use_bias: q/k/v/o_proj, c_fc and c_proj alike
  f.get("use_bias", c.qkv_bias);
  // sliding_window (default null): every layer attends within it; one of
  // max_position_embeddings or more never binds (full attention, as the Llama family's).
  bool sliding = false;
  if (f.has("sliding_window") && !j["sliding_window"].is_null()) {
    int64_t w = 0;
    f.get("sliding_window", w);
    if (w < 1)
      throw InputError(where + ": " + field("sliding_window") + " = " + std::to_string(w) +
                       ": expected a positive number of tokens or null");
    sliding = true;
    if (w < c.max_position_embeddings) c.sliding_window = w;
  }
  if (f.has("layer_types") && !j["layer_types"].is_null()) {  // (if written: the same kind on every layer)
    const auto& lt = j["layer_types"];
    const char* want = sliding ? "sliding_attention" : "full_attention";
    if (!lt.is_array() || int64_t(lt.size()) != c.num_hidden_layers)
      throw InputError(where + ": " + field("layer_types") + ": expected a list of num_hidden_layers = " +
                       std::to_string(c.num_hidden_layers) + " entries");
    for (size_t i = 0; i < lt.size(); ++i)
      if (lt[i] != want)
        unsupported(where, "layer_types[" + std::to_string(i) + "]", lt[i].dump(),
                    std::string("StarCoder2 has \"") + want + "\" on every layer with this sliding_window");
  }
  c.tie_word_embeddings = true;  // PretrainedConfig's default (Starcoder2Config does not change it)
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  read_tail(f, j, where, c, 50256, 50256);  // (Starcoder2Config's defaults)
  return c;
}

}  // namespace lol::hf::config_parts
