#include "hf/hf_config.h"

#include "hf/config_parts.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <tuple>

#include "io/json_file.h"
#include "nn/activation.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::hf {

using namespace config_parts;

namespace {

/// config.json's number `key` into `out` when present (else `out` unchanged: the default
/// `default_text` names); InputError naming `where` and the field unless it is a positive
/// finite number (Granite's multipliers, Cohere's logit_scale).
void read_positive(util::JsonFields& f, const nlohmann::json& j, const std::string& where, const char* key, double& out,
                   const std::string& default_text) {
  if (f.has(key) && !j[key].is_number())
    throw InputError(where + ": " + field(key) + " = " + j[key].dump() + ": expected a positive number");
  f.get(key, out);
  if (!(out > 0 && std::isfinite(out) && out < 1e30))
    throw InputError(where + ": " + field(key) + " = " + num_text(out) + ": expected a positive finite number (" +
                     default_text + ")");
}

/// Gemma3ForConditionalGeneration: its text_config as a Gemma3ForCausalLM config. The
/// Hub's files list only the keys that differ from Gemma3TextConfig's defaults (gemma-3-4b:
/// hidden_size, intermediate_size, num_hidden_layers, rope_scaling, sliding_window), so
/// absent size keys take those defaults here; bos/eos ids, the dtype, tied embeddings and
/// quantization come from the top level when it has them.
nlohmann::json gemma3_text_config(const nlohmann::json& j, const std::string& where) {
  if (j.contains("model_type") && j["model_type"] != "gemma3")
    throw InputError(where + ": " + field("model_type") + " = " + j["model_type"].dump() + ": expected \"gemma3\" for " +
                     kGemma3VisionArch);
  if (!j.contains("text_config") || !j["text_config"].is_object())
    throw InputError(where + ": " + field("text_config") + ": expected an object (the text model's settings of " +
                     kGemma3VisionArch + ")");
  nlohmann::json t = j["text_config"];
  if (t.contains("model_type") && t["model_type"] != "gemma3_text")
    throw InputError(where + ": " + field("text_config.model_type") + " = " + t["model_type"].dump() +
                     ": expected \"gemma3_text\"");
  static const nlohmann::json kDefaults = {{"vocab_size", 262208},      {"hidden_size", 2304},
                                           {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                                           {"num_attention_heads", 8},  {"num_key_value_heads", 4},
                                           {"head_dim", 256},           {"max_position_embeddings", 131072}};
  for (const auto& [k, v] : kDefaults.items())
    if (!t.contains(k)) t[k] = v;
  t["architectures"] = {kGemma3Arch};
  t["model_type"] = "gemma3_text";
  for (const char* k : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype", "tie_word_embeddings", "quantization_config"})
    if (j.contains(k) && !j[k].is_null()) t[k] = j[k];
  return t;
}

}  // namespace

namespace {

/// The mixture-of-experts fields of Mixtral's, OLMoE's, Qwen2-MoE's and Qwen3-MoE's config.json
/// into c (the config classes' defaults for absent keys). InputError naming `where` and the
/// field for a top-k outside 1 .. experts, sizes < 1, decoder_sparse_step < 1, or
/// mlp_only_layers outside 0 .. num_hidden_layers - 1.
void read_moe_fields(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c) {
  const char* experts_key = c.is_mixtral() ? "num_local_experts" : "num_experts";
  c.num_experts = c.is_mixtral() ? 8 : c.is_olmoe() ? 64 : c.is_qwen2_moe() ? 60 : 128;
  c.num_experts_per_tok = c.is_mixtral() ? 2 : c.is_qwen2_moe() ? 4 : 8;
  f.get(experts_key, c.num_experts);
  f.get("num_experts_per_tok", c.num_experts_per_tok);
  util::check_range(where, experts_key, c.num_experts, 1, 4096);
  if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts)
    throw InputError(where + ": " + field("num_experts_per_tok") + " = " + std::to_string(c.num_experts_per_tok) +
                     ": expected 1 <= num_experts_per_tok <= " + experts_key + " = " + std::to_string(c.num_experts));
  c.norm_topk_prob = c.is_mixtral();  // MixtralSparseMoeBlock always renormalises
  if (!c.is_mixtral()) f.get("norm_topk_prob", c.norm_topk_prob);
  // (The routers' training-only settings, router_jitter_noise, router_aux_loss_coef and
  // output_router_logits, do not change the function computed here.)
  if (!c.is_qwen3_moe() && !c.is_qwen2_moe()) return;
  if (c.is_qwen2_moe()) {  // (Qwen2MoeConfig's defaults: Qwen1.5-MoE-A2.7B's sizes)
    c.shared_expert_intermediate_size = 5632;
    f.get("shared_expert_intermediate_size", c.shared_expert_intermediate_size);
    util::check_range(where, "shared_expert_intermediate_size", c.shared_expert_intermediate_size, 1, int64_t(1) << 24);
  }
  c.moe_intermediate_size = c.is_qwen2_moe() ? 1408 : 768;
  f.get("moe_intermediate_size", c.moe_intermediate_size);
  util::check_range(where, "moe_intermediate_size", c.moe_intermediate_size, 1, int64_t(1) << 24);
  f.get("decoder_sparse_step", c.decoder_sparse_step);
  if (c.decoder_sparse_step < 1)
    throw InputError(where + ": " + field("decoder_sparse_step") + " = " + std::to_string(c.decoder_sparse_step) +
                     ": expected >= 1 (layer i is sparse when (i + 1) % decoder_sparse_step == 0)");
  c.decoder_sparse_step = std::min(c.decoder_sparse_step, c.num_hidden_layers + 1);  // (beyond: no sparse layer)
  if (f.has("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    f.get("mlp_only_layers", c.mlp_only_layers);
    std::sort(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
    c.mlp_only_layers.erase(std::unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end()), c.mlp_only_layers.end());
    for (int64_t i : c.mlp_only_layers)
      if (i < 0 || i >= c.num_hidden_layers)
        throw InputError(where + ": " + field("mlp_only_layers") + " lists " + std::to_string(i) +
                         ": expected layer indices 0 .. num_hidden_layers - 1 = " + std::to_string(c.num_hidden_layers - 1));
  }
}

}  // namespace

bool HfConfig::is_moe_layer(int64_t i) const {
  return num_experts > 0 && (i + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end();
}

const std::vector<ArchitectureInfo>& architectures() {
  static const std::vector<ArchitectureInfo> table = {
      {kQwen2Arch, "qwen2", "qwen2"},       {kQwen3Arch, "qwen3", "qwen3"},
      {kLlamaArch, "llama", "llama"},       {kMistralArch, "mistral", "mistral"},
      {kPhi3Arch, "phi3", "phi3"},          {kOlmo2Arch, "olmo2", "olmo2"},
      {kOlmo3Arch, "olmo3", "olmo3"},       {kGemmaArch, "gemma", "gemma"},
      {kGemma2Arch, "gemma2", "gemma2"},    {kGemma3Arch, "gemma3_text", "gemma3"},
      {kGemma3VisionArch, "gemma3", nullptr}, {kGpt2Arch, "gpt2", "gpt2"},
      {kGptNeoXArch, "gpt_neox", "gpt_neox"}, {kPhiArch, "phi", "phi"},
      {kStableLmArch, "stablelm", "stablelm"}, {kFalconArch, "falcon", "falcon"},
      {kGptJArch, "gptj", "gptj"},           {kStarcoder2Arch, "starcoder2", "starcoder2"},
      {kGptBigCodeArch, "gpt_bigcode", "gpt_bigcode"}, {kGraniteArch, "granite", "granite"},
      {kCohereArch, "cohere", "cohere"},   {kOptArch, "opt", "opt"},
      {kMixtralArch, "mixtral", "mixtral"}, {kOlmoeArch, "olmoe", "olmoe"},
      {kQwen2MoeArch, "qwen2_moe", "qwen2_moe"}, {kQwen3MoeArch, "qwen3_moe", "qwen3_moe"}};
  return table;
}

const ArchitectureInfo* find_architecture(const std::string& cls) {
  for (const auto& a : architectures())
    if (cls == a.cls) return &a;
  return nullptr;
}

namespace {

/// "a, b or c" of `items`.
std::string or_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

}  // namespace

std::string architecture_list(bool writable_only) {
  std::vector<std::string> items;
  for (const auto& a : architectures())
    if (!writable_only || a.cli) items.push_back(std::string("\"") + a.cls + "\"");
  return or_list(items);
}

std::string HfConfig::model_type() const {
  const ArchitectureInfo* a = find_architecture(architecture);
  return a ? a->model_type : "llama";
}

std::string architecture_from_name(const std::string& name, const std::string& flag) {
  std::vector<std::string> names;
  for (const auto& a : architectures()) {
    if (!a.cli) continue;
    if (name == a.cli) return a.cls;
    names.push_back(a.cli);
  }
  throw InputError(flag + " \"" + name + "\": expected " + or_list(names));
}

std::string cli_architecture_name(const std::string& architecture) {
  const ArchitectureInfo* a = find_architecture(architecture);
  return a && a->cli ? a->cli : architecture;
}

std::vector<int64_t> pad_token_id_of(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("pad_token_id")) return {};
  const auto& v = config["pad_token_id"];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return {};
  return {v.get<int64_t>()};
}

std::vector<int64_t> token_id_list(const nlohmann::json& j, const std::string& key, const std::string& where) {
  std::vector<int64_t> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  const auto& v = j[key];
  auto one = [&](const nlohmann::json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      throw InputError(where + ": " + field(key) + " = " + v.dump() +
                       ": expected null, a token id >= 0 or a list of token ids");
    out.push_back(e.get<int64_t>());
  };
  if (v.is_array()) {
    for (const auto& e : v) one(e);
  } else {
    one(v);
  }
  return out;
}

HfConfig HfConfig::from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_object() && j.contains("architectures") && j["architectures"] == nlohmann::json::array({kGemma3VisionArch})) {
    HfConfig c = from_json(gemma3_text_config(j, where), where + " (text_config)");
    c.multimodal_text = true;
    return c;
  }
  // The LayerNorm architectures' own keys (hf_config_gpt.cpp).
  for (const auto& [cls, parse] : {std::pair<const char*, HfConfig (*)(const nlohmann::json&, const std::string&)>{
                                       kGpt2Arch, gpt2_config},
                                   {kGptNeoXArch, gpt_neox_config},
                                   {kPhiArch, phi_config},
                                   {kStableLmArch, stablelm_config},
                                   {kFalconArch, falcon_config},
                                   {kGptJArch, gptj_config},
                                   {kStarcoder2Arch, starcoder2_config},
                                   {kGptBigCodeArch, gpt_bigcode_config},
                                   {kOptArch, opt_config}})
    if (j.is_object() && j.contains("architectures") && j["architectures"] == nlohmann::json::array({cls}))
      return parse(j, where);
  util::JsonFields f(j, where);
  HfConfig c;
  std::vector<std::string> archs;
  f.get("architectures", archs);
  const std::string known = architecture_list();
  if (archs.size() != 1)
    throw InputError(where + ": " + field("architectures") + ": expected exactly one of " + known + ", got " +
                     std::to_string(archs.size()) + " entries");
  if (!find_architecture(archs[0]))
    throw InputError(where + ": " + field("architectures") + " = \"" + archs[0] + "\": expected " + known);
  c.architecture = archs[0];
  const std::string want_type = c.model_type();
  std::string model_type = want_type;
  f.get("model_type", model_type);
  if (model_type != want_type)
    throw InputError(where + ": " + field("model_type") + " = \"" + model_type + "\": expected \"" + want_type +
                     "\" for " + c.architecture);

  // Sizes: required, no defaults (a missing size is a broken file, not a default model).
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"vocab_size", &c.vocab_size},
                          {"hidden_size", &c.hidden_size},
                          {"intermediate_size", &c.intermediate_size},
                          {"num_hidden_layers", &c.num_hidden_layers},
                          {"num_attention_heads", &c.num_attention_heads},
                          {"max_position_embeddings", &c.max_position_embeddings}}) {
    if (!f.has(key)) throw InputError(where + ": " + field(key) + " is missing (expected a positive integer)");
    f.get(key, *out);
    require_positive(where, key, *out);
  }
  // The dense model's limits (baselines/shape.cpp, dense_config.cpp), by their names here.
  for (auto [key, v, hi] : {std::tuple<const char*, int64_t, int64_t>{"vocab_size", c.vocab_size, int64_t(1) << 31},
                            {"hidden_size", c.hidden_size, int64_t(1) << 20},
                            {"intermediate_size", c.intermediate_size, int64_t(1) << 24},
                            {"num_hidden_layers", c.num_hidden_layers, 4096},
                            {"num_attention_heads", c.num_attention_heads, int64_t(1) << 16},
                            {"max_position_embeddings", c.max_position_embeddings, int64_t(1) << 24}})
    util::check_range(where, key, v, 1, hi);
  // As transformers: null means the query heads; a missing key is LlamaConfig's default
  // (None: the query heads), Qwen2Config's / Qwen3Config's (32) or MistralConfig's (8).
  const bool kv_missing = !f.has("num_key_value_heads");
  const bool qwen = c.is_qwen2() || c.is_qwen3() || c.is_qwen2_moe() || c.is_qwen3_moe();
  const bool gemma = c.is_gemma() || c.is_gemma2() || c.is_gemma3();
  // (GemmaConfig's default is 16; Gemma2Config's (current transformers; 4.42: 16) and
  // Gemma3TextConfig's 4; MixtralConfig's 8, Qwen2MoeConfig's 16, Qwen3MoeConfig's 4.)
  const int64_t kv_default = c.is_qwen3_moe() ? 4
                             : c.is_qwen2_moe() ? 16
                             : qwen            ? 32
                             : c.is_mistral() || c.is_mixtral() ? 8
                             : c.is_gemma()   ? 16
                             : c.is_gemma2() || c.is_gemma3() ? 4
                                              : c.num_attention_heads;
  c.num_key_value_heads = kv_missing ? kv_default : c.num_attention_heads;
  if (!kv_missing && !j["num_key_value_heads"].is_null()) f.get("num_key_value_heads", c.num_key_value_heads);
  require_positive(where, "num_key_value_heads", c.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw InputError(where + ": " + field("num_key_value_heads") +
                     (kv_missing ? " is missing, and " +
                                       std::string(c.is_qwen3()     ? "Qwen3Config's default is 32"
                                                   : c.is_qwen3_moe() ? "Qwen3MoeConfig's default is 4"
                                                   : c.is_qwen2_moe() ? "Qwen2MoeConfig's default is 16"
                                                   : c.is_mixtral() ? "MixtralConfig's default is 8"
                                                   : c.is_mistral() ? "MistralConfig's default is 8"
                                                   : c.is_gemma()   ? "GemmaConfig's default is 16"
                                                   : c.is_gemma2()  ? "Gemma2Config's default is 4"
                                                   : c.is_gemma3()  ? "Gemma3TextConfig's default is 4"
                                                                    : "Qwen2Config's default is 32")
                                 : " = " + std::to_string(c.num_key_value_heads)) +
                     ": expected a divisor of num_attention_heads = " + std::to_string(c.num_attention_heads));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if ((c.is_qwen3() || gemma) && !f.has("head_dim")) {
    // Qwen3Config's / the Gemma configs' defaults; a null head_dim is hidden_size / heads,
    // as Qwen3Attention reads it.
    c.head_dim = gemma ? 256 : 128;
  } else if (f.has("head_dim") && !j["head_dim"].is_null()) {
    f.get("head_dim", c.head_dim);
  } else if (c.hidden_size % c.num_attention_heads != 0) {
    throw InputError(where + ": " + field("hidden_size") + " = " + std::to_string(c.hidden_size) +
                     ": expected a multiple of num_attention_heads = " + std::to_string(c.num_attention_heads) +
                     " (or an explicit head_dim)");
  }
  require_positive(where, "head_dim", c.head_dim);
  if (c.is_granite() && c.head_dim * c.num_attention_heads != c.hidden_size)
    unsupported(where, "head_dim", std::to_string(c.head_dim),
                "GraniteAttention's heads are hidden_size / num_attention_heads = " +
                    std::to_string(c.hidden_size / c.num_attention_heads) +
                    " wide in older transformers releases (4.45) and head_dim wide in newer ones: expected them equal");
  if (c.head_dim % 2 != 0)
    throw InputError(where + ": " + field("head_dim") + " = " + std::to_string(c.head_dim) + ": expected an even number (RoPE)");
  if (c.is_olmoe() && c.head_dim * c.num_attention_heads != c.hidden_size)
    unsupported(where, "head_dim", std::to_string(c.head_dim),
                "OlmoeAttention's q_norm spans hidden_size = " + std::to_string(c.hidden_size) +
                    " values: expected head_dim = hidden_size / num_attention_heads");

  const bool olmo = c.is_olmo2() || c.is_olmo3();
  // The config classes' defaults (Phi3Config, Olmo2Config, Olmo3Config: 1e-5).
  // (CohereConfig: a LayerNorm's layer_norm_eps, 1e-5.)
  const char* eps_key = c.is_cohere() ? "layer_norm_eps" : "rms_norm_eps";
  c.rms_norm_eps = c.is_phi3() || olmo || c.is_cohere() || c.is_mixtral() || c.is_olmoe() ? 1e-5 : 1e-6;
  f.get(eps_key, c.rms_norm_eps);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    throw InputError(where + ": " + field(eps_key) + ": expected 0 < " + eps_key + " < 1");
  c.rope_theta = c.is_gemma3() || c.is_mixtral() ? 1e6 : 10000.0;  // the config classes' defaults
  f.get("rope_theta", c.rope_theta);
  // Gemma 3: the sliding layers' RoPE base (transformers >= 5: rope_parameters.sliding_attention).
  double local_theta = 10000.0;
  if (c.is_gemma3()) f.get("rope_local_base_freq", local_theta);
  // RoPE: transformers 4.x writes rope_theta and rope_scaling {rope_type, factor, ...};
  // transformers >= 5 writes rope_parameters {rope_type, rope_theta, factor, ...}. Either
  // object may carry the base; when both objects are given, transformers uses rope_scaling.
  const bool theta_top = f.has("rope_theta") && !j["rope_theta"].is_null();
  std::optional<nn::RopeScaling> scaling;
  std::string scaling_key, theta_key;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!f.has(key) || j[key].is_null()) continue;
    // transformers >= 5 writes Gemma 3's as one object per layer type.
    const bool per_type = c.is_gemma3() && std::string(key) == "rope_parameters" && j[key].is_object() &&
                          (j[key].contains("full_attention") || j[key].contains("sliding_attention"));
    if (per_type) {
      for (const auto& [k, v] : j[key].items())
        if (k != "full_attention" && k != "sliding_attention")
          throw InputError(where + ": " + field(std::string(key) + "." + k) +
                           ": expected only \"full_attention\" and \"sliding_attention\" RoPE settings");
      if (j[key].contains("sliding_attention")) {
        const std::string sk = std::string(key) + ".sliding_attention";
        const auto& sl = j[key]["sliding_attention"];
        if (!nn::RopeScaling::from_json(sl, where, sk, c.max_position_embeddings, true).is_default())
          unsupported(where, sk, sl.dump(), "the sliding layers' RoPE is unscaled");
        if (sl.contains("rope_theta") && !sl["rope_theta"].is_null()) {
          if (!sl["rope_theta"].is_number())
            throw InputError(where + ": " + field(sk + ".rope_theta") + " = " + sl["rope_theta"].dump() +
                             ": expected a number");
          local_theta = sl["rope_theta"].get<double>();
        }
      }
      if (!j[key].contains("full_attention")) continue;
    }
    auto rp = per_type ? j[key]["full_attention"] : j[key];
    // Phi3Config (transformers 4.x and 5) renames the types "su" (the first 128k
    // checkpoints) and "yarn" to "longrope", and accepts no other scaling.
    if (c.is_phi3() && rp.is_object())
      for (const char* tk : {"type", "rope_type"})
        if (rp.contains(tk) && (rp[tk] == "su" || rp[tk] == "yarn")) rp[tk] = "longrope";
    auto s = nn::RopeScaling::from_json(rp, where, key, c.max_position_embeddings, true);
    if (scaling && *scaling != s)
      throw InputError(where + ": " + field(key) + " = " + rp.dump() + " differs from " + field(scaling_key) + " = " +
                       j[scaling_key].dump() + ": expected one RoPE setting");
    scaling = s;
    scaling_key = key;
    if (rp.contains("rope_theta") && !rp["rope_theta"].is_null()) {
      const auto& v = rp["rope_theta"];
      const std::string tk = std::string(key) + ".rope_theta";
      if (!v.is_number()) throw InputError(where + ": " + field(tk) + " = " + v.dump() + ": expected a number");
      if ((theta_top || !theta_key.empty()) && v.get<double>() != c.rope_theta)
        throw InputError(where + ": " + field(tk) + " = " + v.dump() + " differs from " +
                         field(theta_top ? std::string("rope_theta") : theta_key) + " = " + num_text(c.rope_theta) +
                         ": expected one RoPE base");
      c.rope_theta = v.get<double>();
      theta_key = tk;
    }
  }
  if (scaling) c.rope_scaling = *scaling;
  if (c.is_phi3() && !c.rope_scaling.is_default() && c.rope_scaling.type != "longrope")
    unsupported(where, scaling_key, "\"" + c.rope_scaling.type + "\"",
                "Phi3Config accepts longrope only (and renames su and yarn to it)");
  // A top-level original_max_position_embeddings (Phi-3 style): transformers 5 puts it
  // into the RoPE object of llama3 / yarn, 4.x ignores it. Accepted only when both agree.
  if (f.has("original_max_position_embeddings") && !j["original_max_position_embeddings"].is_null() &&
      (c.rope_scaling.type == "llama3" || c.rope_scaling.type == "yarn")) {
    const auto& v = j["original_max_position_embeddings"];
    if (!v.is_number() || v.get<double>() != double(c.rope_scaling.original_max_position_embeddings))
      throw InputError(where + ": " + field("original_max_position_embeddings") + " = " + v.dump() + " differs from " +
                       field(scaling_key + ".original_max_position_embeddings") + " = " +
                       std::to_string(c.rope_scaling.original_max_position_embeddings) +
                       (j[scaling_key].contains("original_max_position_embeddings") ? "" : " (its default)") +
                       ": transformers 5 uses the top-level value, 4.x the other; expected one value");
  }
  if (c.rope_scaling.type == "longrope") {
    // transformers' _compute_longrope_parameters and longrope_frequency_update read the
    // config's own original_max_position_embeddings (Phi3Config's default 4096): the
    // switch to the long factors, and factor = max_position_embeddings / it.
    if (!c.is_phi3())
      unsupported(where, scaling_key, "\"longrope\"",
                  "longrope is implemented for Phi-3 folders (Phi3ForCausalLM), whose config sets "
                  "original_max_position_embeddings");
    int64_t original = 4096;
    if (f.has("original_max_position_embeddings")) {
      const auto& v = j["original_max_position_embeddings"];
      if (!v.is_number() || v.get<double>() != std::floor(v.get<double>()) || v.get<double>() < 1 ||
          v.get<double>() > double(int64_t(1) << 24))
        throw InputError(where + ": " + field("original_max_position_embeddings") + " = " + v.dump() +
                         ": expected an integer in [1, 16777216] (the pretraining context of longrope)");
      original = v.get<int64_t>();
    }
    const auto& rp = j[scaling_key];
    if (rp.contains("original_max_position_embeddings") && !rp["original_max_position_embeddings"].is_null() &&
        rp["original_max_position_embeddings"] != original)
      throw InputError(where + ": " + field(scaling_key + ".original_max_position_embeddings") + " = " +
                       rp["original_max_position_embeddings"].dump() + " differs from " +
                       field("original_max_position_embeddings") + " = " + std::to_string(original) +
                       ": expected one value");
    c.rope_scaling.original_max_position_embeddings = original;
    c.rope_scaling.factor = double(c.max_position_embeddings) / double(original);
    c.rope_scaling.check_attention_factor(where, "original_max_position_embeddings");
  }
  // null: transformers' int(head_dim * None) fails (TypeError), for every architecture.
  if (f.has("partial_rotary_factor") &&
      !(j["partial_rotary_factor"].is_number() && j["partial_rotary_factor"].get<double>() == 1.0)) {
    const auto& v = j["partial_rotary_factor"];
    // Only Phi3Attention slices the rotated dimensions; Llama-style attention would fail.
    if (!c.is_phi3())
      unsupported(where, "partial_rotary_factor", v.dump(), "RoPE is applied to every dimension of a head");
    const bool in_range = v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1;
    if (in_range) c.partial_rotary_factor = v.get<double>();
    if (!in_range || c.rotary_dim() < 2 || c.rotary_dim() % 2 != 0)
      throw InputError(where + ": " + field("partial_rotary_factor") + " = " + v.dump() +
                       ": expected a number in (0, 1] whose rotary dimension int(head_dim " +
                       std::to_string(c.head_dim) + " * it) is even and >= 2");
  }
  c.rope_scaling.check_rotary_dim(c.rotary_dim(), where, scaling_key);
  // Below 1 the RoPE frequencies grow with the dimension and overflow (1e-44: every
  // logit NaN); no model uses such a base.
  if (!(c.rope_theta >= 1 && c.rope_theta <= 1e30))
    throw InputError(where + ": " + field("rope_theta") + " = " + std::to_string(c.rope_theta) +
                     ": expected a value in [1, 1e30]");
  // PretrainedConfig's default (the Gemma configs' and CohereConfig's: true); Qwen2.5-0.5B sets true
  c.tie_word_embeddings = gemma || c.is_cohere();
  f.get("tie_word_embeddings", c.tie_word_embeddings);

  read_torch_dtype(f, j, where, c);
  c.bos_token_id = token_id_list(j, "bos_token_id", where);
  c.eos_token_id = token_id_list(j, "eos_token_id", where);
  c.pad_token_id = pad_token_id_of(j);

  // ---- features that change the computed function: refuse unless neutral
  // Sliding layers: a window (none: nullopt) from layer full_layers on.
  std::optional<int64_t> window;
  int64_t full_layers = c.num_hidden_layers;
  if (gemma) {
    // Gemma's MLP computes the tanh-approximated GELU whatever hidden_act says (gemma-2b's
    // config.json has "gelu"; transformers 4.38-4.4x override it): hidden_activation
    // decides, default gelu_pytorch_tanh.
    c.activation = "gelu_pytorch_tanh";
    // Gemma 2/3 read hidden_activation directly: null fails to load in transformers.
    if (f.has("hidden_activation") && j["hidden_activation"].is_null() && !c.is_gemma())
      unsupported(where, "hidden_activation", "null", "expected an activation name, e.g. \"gelu_pytorch_tanh\"");
    if (f.has("hidden_activation") && !j["hidden_activation"].is_null()) f.get("hidden_activation", c.activation);
    c.activation = gate_activation(where, "hidden_activation", c.activation);
  } else {
    std::string act = "silu";
    f.get("hidden_act", act);
    // transformers' ACT2FN maps "swish" to SiLU too.
    if (act != "silu" && act != "swish") unsupported(where, "hidden_act", "\"" + act + "\"", "the MLP is SwiGLU with SiLU (\"silu\" or \"swish\")");
  }
  if (f.has("quantization_config"))
    unsupported(where, "quantization_config", j["quantization_config"].dump(), "quantized weights");
  if (qwen) {
    // Qwen2Attention: q/k/v always have biases, o_proj none (Qwen2-MoE: with qkv_bias, default
    // true, which transformers 4.x does not read); Qwen3Attention: q_norm / k_norm, biases
    // only with attention_bias.
    const bool qwen2_family = c.is_qwen2() || c.is_qwen2_moe();
    c.qkv_bias = qwen2_family;
    c.qk_norm = !qwen2_family;
    if (c.is_qwen2_moe()) {
      bool qkv_bias = true;
      f.get("qkv_bias", qkv_bias);
      if (!qkv_bias)
        unsupported(where, "qkv_bias", "false",
                    "transformers 4.x ignores it and gives Qwen2-MoE's q/k/v biases; 5 drops them");
    }
    if (!qwen2_family) {
      bool attention_bias = false;
      f.get("attention_bias", attention_bias);
      if (attention_bias)
        unsupported(where, "attention_bias", "true", "Qwen3 attention biases include an o_proj bias");
    }
    // transformers' Qwen2Config / Qwen3Config: with use_sliding_window, layers with index >=
    // max_window_layers (default 28) attend within sliding_window (default 4096; null =
    // no sliding) tokens.
    bool sliding = false;
    f.get("use_sliding_window", sliding);
    if (sliding && (c.is_qwen3_moe() || c.is_qwen2_moe()) && !(f.has("sliding_window") && j["sliding_window"].is_null()))
      unsupported(where, "use_sliding_window", "true",
                  c.architecture + "'s sliding layers differ between transformers releases (4.x and 5 read "
                  "max_window_layers and layer_types differently); no released checkpoint sets it");
    if (sliding && !(f.has("sliding_window") && j["sliding_window"].is_null())) {
      int64_t max_window_layers = 28, w = 4096;
      f.get("max_window_layers", max_window_layers);
      f.get("sliding_window", w);
      window = w;
      full_layers = std::clamp<int64_t>(max_window_layers, 0, c.num_hidden_layers);
    }
  } else if (gemma) {
    bool attention_bias = false;
    f.get("attention_bias", attention_bias);
    if (attention_bias) unsupported(where, "attention_bias", "true", "Gemma's projections have no biases");
    c.norm_offset = c.scale_embeddings = true;
    if (c.is_gemma2() || c.is_gemma3()) {
      // Soft-capping: Gemma2Config's defaults 50 / 30, Gemma3TextConfig's none; null: none.
      for (auto [key, out, def] :
           {std::tuple<const char*, double*, double>{"attn_logit_softcapping", &c.attn_logit_softcapping, 50.0},
            {"final_logit_softcapping", &c.final_logit_softcapping, 30.0}}) {
        *out = c.is_gemma2() ? def : 0.0;
        if (!f.has(key)) continue;
        if (j[key].is_null()) {
          *out = 0;
          continue;
        }
        f.get(key, *out);
        if (!(*out > 0 && std::isfinite(*out)))
          throw InputError(where + ": " + field(key) + " = " + j[key].dump() + ": expected a positive cap or null");
      }
      bool bidirectional = false;
      f.get("use_bidirectional_attention", bidirectional);
      if (bidirectional)
        unsupported(where, "use_bidirectional_attention", "true", "the decoder's attention is causal");
      c.sandwich_norm = true;
      c.qk_norm = c.is_gemma3();      // Gemma 2 has no q/k norms
      c.query_pre_attn_scalar = 256;  // the config classes' default
      f.get("query_pre_attn_scalar", c.query_pre_attn_scalar);
      if (!(c.query_pre_attn_scalar > 0 && std::isfinite(c.query_pre_attn_scalar)))
        throw InputError(where + ": " + field("query_pre_attn_scalar") + " = " + num_text(c.query_pre_attn_scalar) +
                         ": expected a positive number");
      if (c.is_gemma3()) {
        if (!(local_theta >= 1 && local_theta <= 1e30))
          throw InputError(where + ": " + field("rope_local_base_freq") + " = " + num_text(local_theta) +
                           ": expected a value in [1, 1e30]");
        c.rope_local_theta = local_theta;
      }
      // Sliding layers: Gemma 3's all but every sliding_window_pattern-th (default 6),
      // Gemma 2's every other one from layer 0 (pattern 2), window sliding_window (default
      // 4096); layer_types, when given, decides below.
      int64_t pattern = c.is_gemma3() ? 6 : 2;
      if (c.is_gemma3()) f.get("sliding_window_pattern", pattern);
      if (pattern < 1)
        throw InputError(where + ": " + field("sliding_window_pattern") + " = " + std::to_string(pattern) +
                         ": expected >= 1 (every pattern-th layer has full attention)");
      if (!(f.has("sliding_window") && j["sliding_window"].is_null())) {
        int64_t w = 4096;
        f.get("sliding_window", w);
        window = w;
        full_layers = 0;
        c.full_attention_interval = pattern;
      } else if (pattern > 1 && c.num_hidden_layers > 1 && !(f.has("layer_types") && !j["layer_types"].is_null())) {
        // transformers fails on it (no window for the sliding layers' mask).
        unsupported(where, "sliding_window", "null",
                    c.is_gemma3() ? "Gemma 3's sliding layers (all but every sliding_window_pattern = " +
                                        std::to_string(pattern) + "-th) need a window"
                                  : std::string("Gemma 2's sliding layers (0, 2, 4, ...) need a window"));
      }
    }
  } else if (olmo) {
    // Olmo2Attention: attention_bias puts biases on q, k, v and o_proj; the MLP never has any.
    bool attention_bias = false;
    f.get("attention_bias", attention_bias);
    if (attention_bias) unsupported(where, "attention_bias", "true", "OLMo's attention biases include an o_proj bias");
    c.qk_norm = c.qk_norm_across_heads = true;  // Olmo2Attention's q_norm / k_norm over the projections
    c.sandwich_norm = true;                     // post_attention_layernorm, post_feedforward_layernorm
    c.input_norms = false;                      // and no input norms
    if (c.is_olmo3()) {
      // Olmo3Config: sliding_window (default 4096) on every layer but each fourth
      // (layer_types' default); layer_types, when given, decides below.
      if (!(f.has("sliding_window") && j["sliding_window"].is_null())) {
        int64_t w = 4096;
        f.get("sliding_window", w);
        window = w;
        full_layers = 0;
        c.full_attention_interval = 4;
      } else if (c.num_hidden_layers > 0 && !(f.has("layer_types") && !j["layer_types"].is_null())) {
        unsupported(where, "sliding_window", "null",
                    "OLMo 3's sliding layers (all but every fourth, layer_types' default) need a window");
      }
    }
  } else {
    if (c.is_mistral() || c.is_phi3() || c.is_mixtral()) {
      // MistralConfig / Phi3Config / MixtralConfig: every layer attends within sliding_window
      // tokens (Mistral: default 4096, v0.1: 4096, v0.2 and later: null; Phi3 and Mixtral:
      // default null, Phi-3-mini-4k: 2047).
      if (!(f.has("sliding_window") && j["sliding_window"].is_null()) && (c.is_mistral() || f.has("sliding_window"))) {
        int64_t w = 4096;
        f.get("sliding_window", w);
        window = w;
        full_layers = 0;
      }
    }
    bool attention_bias = false, mlp_bias = false;
    f.get("attention_bias", attention_bias);
    if (!c.is_cohere()) f.get("mlp_bias", mlp_bias);  // (CohereConfig has none: its MLP never has biases)
    if (attention_bias)
      unsupported(where, "attention_bias", "true", "Llama attention biases include an o_proj bias");
    if (mlp_bias) unsupported(where, "mlp_bias", "true", "the MLP projections have no biases");
    c.qkv_bias = false;
    if (c.is_olmoe()) {
      // OlmoeAttention: q_norm / k_norm over the whole q and k projections (OLMo 2's), in
      // Llama's pre-norm blocks; clip_qkv clamps q, k and v.
      c.qk_norm = c.qk_norm_across_heads = true;
      if (f.has("clip_qkv") && !j["clip_qkv"].is_null())
        unsupported(where, "clip_qkv", j["clip_qkv"].dump(), "clamping q, k and v is not implemented");
    }
    if (c.is_cohere()) {
      // CohereConfig: use_qk_norm (Command R+) normalizes each q and k head with its own
      // LayerNorm weights [heads, head_dim]; logit_scale 0.0625 by default.
      bool qk_norm = false;
      f.get("use_qk_norm", qk_norm);
      if (qk_norm)
        unsupported(where, "use_qk_norm", "true",
                    "Command R+'s per-head LayerNorms of q and k (weights [heads, head_dim]) are not implemented");
      read_positive(f, j, where, "logit_scale", c.logit_scale, "CohereConfig's default 0.0625");
    }
    if (c.is_granite()) {
      // GraniteConfig: every multiplier 1.0 by default (the attention scale too, not
      // head_dim^-1/2); the Hub's Granite 3.x files set all four.
      for (auto [key, out] : {std::pair<const char*, double*>{"embedding_multiplier", &c.embedding_multiplier},
                              {"logits_scaling", &c.logits_scaling},
                              {"residual_multiplier", &c.residual_multiplier},
                              {"attention_multiplier", &c.attention_multiplier}})
        read_positive(f, j, where, key, *out, "GraniteConfig's default 1.0");
    }
  }
  if (c.is_mixtral() || c.is_olmoe() || c.is_qwen2_moe() || c.is_qwen3_moe()) read_moe_fields(f, j, where, c);
  // layer_types (transformers >= 4.53 writes it; it decides which layers slide): full
  // layers first, then sliding ones, as the dense model lays them out
  // (baselines::DenseConfig n_full_prelude).
  if (f.has("layer_types") && !j["layer_types"].is_null()) {
    const auto& lt = j["layer_types"];
    if (!lt.is_array() || int64_t(lt.size()) != c.num_hidden_layers)
      throw InputError(where + ": " + field("layer_types") + ": expected a list of num_hidden_layers = " +
                       std::to_string(c.num_hidden_layers) + " entries \"full_attention\" / \"sliding_attention\"");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string at = "layer_types[" + std::to_string(i) + "]";
      if (lt[size_t(i)] != "sliding_attention" && lt[size_t(i)] != "full_attention")
        unsupported(where, at, lt[size_t(i)].dump(), "\"full_attention\" or \"sliding_attention\" layers");
      if (c.is_olmo2() && lt[size_t(i)] == "sliding_attention")
        unsupported(where, at, "\"sliding_attention\"",
                    "Olmo2ForCausalLM has no sliding layers (transformers ignores layer_types and sliding_window "
                    "for it; OLMo 3's sliding layers are Olmo3ForCausalLM's)");
      if (!window && lt[size_t(i)] == "sliding_attention")
        unsupported(where, at, "\"sliding_attention\"",
                    "a sliding layer needs a window, and this config sets none (sliding_window " +
                        std::string(f.has("sliding_window") && !j["sliding_window"].is_null() ? "ignored by " + c.architecture
                                                                                               : "null") +
                        std::string(qwen ? " or use_sliding_window false" : "") + ")");
    }
    // The layouts of the dense model (baselines::DenseConfig): F leading full layers
    // (n_full_prelude), then sliding ones, of which those with (i + 1) % P == 0 are full
    // (Gemma's interleaving; P = 0: none).
    int64_t full = 0;
    while (full < c.num_hidden_layers && lt[size_t(full)] == "full_attention") ++full;
    int64_t next_full = full;
    while (next_full < c.num_hidden_layers && lt[size_t(next_full)] == "sliding_attention") ++next_full;
    full_layers = full;
    c.full_attention_interval = 0;
    if (next_full < c.num_hidden_layers) {  // a full layer after a sliding one: find P
      auto matches = [&](int64_t period) {
        for (int64_t i = full; i < c.num_hidden_layers; ++i)
          if ((lt[size_t(i)] == "full_attention") != ((i + 1) % period == 0)) return i;
        return c.num_hidden_layers;
      };
      int64_t mismatch = -1;
      for (int64_t period = 2; period <= next_full + 1 && c.full_attention_interval == 0; ++period) {
        if ((next_full + 1) % period != 0) continue;  // layer next_full is full: (next_full + 1) % P == 0
        const int64_t at = matches(period);
        if (at == c.num_hidden_layers) c.full_attention_interval = period;
        else if (period == next_full + 1) mismatch = at;
      }
      if (c.full_attention_interval == 0)
        unsupported(where, "layer_types[" + std::to_string(mismatch) + "]", lt[size_t(mismatch)].dump(),
                    "lol lays out full-attention layers first, then sliding ones of which every P-th layer (i + 1 "
                    "a multiple of P) is full: no P fits (P = " + std::to_string(next_full + 1) + " from the full layer " +
                        std::to_string(next_full) + " does not fit this one)");
    }
  }
  if (window) {
    if (*window < 1)
      throw InputError(where + ": " + field("sliding_window") + " = " + std::to_string(*window) +
                       ": expected a positive number of tokens or null");
    // A window of max_position_embeddings or more never binds: full attention, unless
    // the sliding layers' RoPE differs from the full layers' (Gemma 3).
    const bool own_rope = c.rope_local_theta > 0 && (c.rope_local_theta != c.rope_theta || !c.rope_scaling.is_default());
    const bool any_sliding = full_layers < c.num_hidden_layers && c.full_attention_interval != 1;
    if ((*window < c.max_position_embeddings || own_rope) && any_sliding) {
      c.sliding_window = *window;
      c.full_attention_layers = full_layers;
    }
  }
  if (c.sliding_window == 0) c.full_attention_interval = 0;
  // The sliding layers' own RoPE only where there are sliding layers and it differs.
  if (c.sliding_window == 0 || (c.rope_local_theta == c.rope_theta && c.rope_scaling.is_default()))
    c.rope_local_theta = 0;
  return c;
}

HfConfig HfConfig::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = dir + "/config.json";
  const std::string convert = "; `lol export --hf " + dir + " --out HF_DIR` writes a dense one as such)";
  // The two folders of lol's own that users mistake for Hugging Face ones.
  if (!fs::exists(path) && (fs::exists(fs::path(dir) / "latest") || fs::exists(fs::path(dir) / "run.json")))
    throw InputError(dir + ": a `lol train` run directory, not a Hugging Face model folder (config.json + "
                     "safetensors" + convert);
  const auto j = io::read_json_file(path);
  if (j.is_object() && !j.contains("architectures") && j.contains("architecture") && j["architecture"].is_string())
    throw InputError(path + ": a lol checkpoint (field 'architecture' = " + j["architecture"].dump() +
                     "), not a Hugging Face config (field 'architectures'" + convert);
  return from_json(j, path);
}

nlohmann::ordered_json HfConfig::to_json() const {
  // The keys every architecture ends with: token ids, the stored dtype and the first
  // transformers release with the architecture (Olmo2ForCausalLM: 4.47, Olmo3ForCausalLM:
  // 4.57, Gemma 2/3's layer_types: 4.53).
  const auto finish = [&](nlohmann::ordered_json& j) {
    auto ids = [](const std::vector<int64_t>& v) -> nlohmann::ordered_json {
      if (v.empty()) return nullptr;
      if (v.size() == 1) return v[0];
      return v;
    };
    if (!pad_token_id.empty()) j["pad_token_id"] = ids(pad_token_id);
    j["bos_token_id"] = ids(bos_token_id);
    j["eos_token_id"] = ids(eos_token_id);
    if (!torch_dtype.empty()) j["torch_dtype"] = torch_dtype;
    j["transformers_version"] =
        is_olmo3() ? "4.57.0" : is_olmo2() ? "4.47.0" : (is_gemma2() || is_gemma3() || is_qwen3_moe()) ? "4.53.0" : "4.45.0";
    // (CohereForCausalLM: 4.39; Granite: 4.45)
    return j;
  };
  // The class, model_type and sizes under Llama's key names, in LlamaConfig's order.
  const auto llama_sizes = [&](nlohmann::ordered_json& j) {
    j["architectures"] = {architecture};
    j["model_type"] = model_type();
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = hidden_size;
    j["intermediate_size"] = intermediate_size;
    j["num_hidden_layers"] = num_hidden_layers;
    j["num_attention_heads"] = num_attention_heads;
    j["num_key_value_heads"] = num_key_value_heads;
  };
  // rope_scaling as transformers 4.x writes it: null without scaling.
  const auto scaling_json = [&]() {
    return rope_scaling.is_default() ? nlohmann::ordered_json(nullptr) : rope_scaling.to_json(max_position_embeddings);
  };
  nlohmann::ordered_json j;
  if (is_gpt2() || is_gptj() || is_gpt_bigcode()) {  // GPT2Config's keys (GPTJConfig / GPTBigCodeConfig read the same names)
    j["architectures"] = {architecture};
    j["model_type"] = model_type();
    j["vocab_size"] = vocab_size;
    j["n_embd"] = hidden_size;
    j["n_layer"] = num_hidden_layers;
    j["n_head"] = num_attention_heads;
    j["n_positions"] = max_position_embeddings;
    if (is_gpt2()) j["n_ctx"] = max_position_embeddings;
    if (is_gpt_bigcode()) j["multi_query"] = num_key_value_heads == 1;
    j["n_inner"] = intermediate_size;
    if (is_gptj()) j["rotary_dim"] = rotary_dim();
    j["activation_function"] = activation == "gelu" ? "gelu" : is_gpt_bigcode() ? "gelu_pytorch_tanh" : "gelu_new";
    j["layer_norm_epsilon"] = rms_norm_eps;
    j["tie_word_embeddings"] = tie_word_embeddings;
    if (is_gpt_bigcode()) j["scale_attn_weights"] = true;
    if (is_gpt2()) {
      j["scale_attn_weights"] = true;
      j["scale_attn_by_inverse_layer_idx"] = false;
      j["reorder_and_upcast_attn"] = false;
    }
    j["resid_pdrop"] = j["embd_pdrop"] = j["attn_pdrop"] = 0.0;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  if (is_opt()) {  // OPTConfig's keys
    j["architectures"] = {architecture};
    j["model_type"] = "opt";
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = hidden_size;
    j["ffn_dim"] = intermediate_size;
    j["num_hidden_layers"] = num_hidden_layers;
    j["num_attention_heads"] = num_attention_heads;
    j["max_position_embeddings"] = max_position_embeddings;
    j["word_embed_proj_dim"] = hidden_size;
    j["do_layer_norm_before"] = true;
    j["_remove_final_layer_norm"] = false;
    j["layer_norm_elementwise_affine"] = true;
    j["activation_function"] = activation == "gelu_pytorch_tanh" ? "gelu_new" : activation;
    j["enable_bias"] = qkv_bias;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["dropout"] = j["attention_dropout"] = j["activation_dropout"] = j["layerdrop"] = 0.0;
    j["init_std"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  if (is_starcoder2()) {  // Starcoder2Config's keys
    llama_sizes(j);
    j["max_position_embeddings"] = max_position_embeddings;
    j["rope_theta"] = rope_theta;
    j["rope_scaling"] = scaling_json();
    j["sliding_window"] = sliding_window > 0 ? nlohmann::ordered_json(sliding_window) : nlohmann::ordered_json(nullptr);
    j["norm_epsilon"] = rms_norm_eps;
    j["hidden_act"] = activation;
    j["use_bias"] = qkv_bias;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["attention_dropout"] = j["residual_dropout"] = j["embedding_dropout"] = 0.0;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  if (is_falcon()) {  // FalconConfig's keys
    j["architectures"] = {architecture};
    j["model_type"] = "falcon";
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = hidden_size;
    j["ffn_hidden_size"] = intermediate_size;
    j["num_hidden_layers"] = num_hidden_layers;
    j["num_attention_heads"] = num_attention_heads;
    j["num_kv_heads"] = falcon_new_decoder ? num_key_value_heads : num_key_value_heads == 1 ? num_attention_heads : num_key_value_heads;
    j["new_decoder_architecture"] = falcon_new_decoder;
    j["multi_query"] = !falcon_new_decoder && num_key_value_heads == 1;
    j["parallel_attn"] = parallel_residual;
    if (falcon_new_decoder) j["num_ln_in_parallel_attn"] = shared_input_norm ? 1 : 2;
    j["alibi"] = false;
    j["bias"] = qkv_bias;
    j["max_position_embeddings"] = max_position_embeddings;
    j["rope_theta"] = rope_theta;
    j["rope_scaling"] = scaling_json();
    j["layer_norm_epsilon"] = rms_norm_eps;
    j["activation"] = activation == "gelu_pytorch_tanh" ? "gelu_new" : activation;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["attention_dropout"] = j["hidden_dropout"] = 0.0;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  if (is_gpt_neox() || is_phi() || is_stablelm()) {  // GPTNeoXConfig's / PhiConfig's / StableLmConfig's keys (4.x)
    j["architectures"] = {architecture};
    j["model_type"] = model_type();
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = hidden_size;
    j["intermediate_size"] = intermediate_size;
    j["num_hidden_layers"] = num_hidden_layers;
    j["num_attention_heads"] = num_attention_heads;
    if (!is_gpt_neox()) j["num_key_value_heads"] = num_key_value_heads;
    j["max_position_embeddings"] = max_position_embeddings;
    j[is_gpt_neox() ? "rotary_pct" : "partial_rotary_factor"] = partial_rotary_factor;
    j[is_gpt_neox() ? "rotary_emb_base" : "rope_theta"] = rope_theta;
    j["rope_scaling"] = scaling_json();
    j["layer_norm_eps"] = rms_norm_eps;
    j["hidden_act"] = activation == "gelu_pytorch_tanh" ? "gelu_new" : activation;
    if (is_gpt_neox() || is_stablelm()) {
      j["use_parallel_residual"] = parallel_residual;
      j[is_gpt_neox() ? "attention_bias" : "use_qkv_bias"] = qkv_bias;
      if (is_stablelm()) j["qk_layernorm"] = false;
      j["attention_dropout"] = j["hidden_dropout"] = 0.0;
    } else {
      j["qk_layernorm"] = false;
      j["resid_pdrop"] = j["embd_pdrop"] = j["attention_dropout"] = 0.0;
    }
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  if (is_cohere()) {  // CohereConfig's keys
    llama_sizes(j);
    j["logit_scale"] = logit_scale;
    if (head_dim != hidden_size / num_attention_heads || hidden_size % num_attention_heads != 0) j["head_dim"] = head_dim;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = max_position_embeddings;
    j["layer_norm_eps"] = rms_norm_eps;
    j["rope_theta"] = rope_theta;
    j["rope_scaling"] = scaling_json();
    j["attention_bias"] = false;
    j["use_qk_norm"] = false;
    j["attention_dropout"] = 0.0;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    return finish(j);
  }
  llama_sizes(j);
  const bool gemma = is_gemma() || is_gemma2() || is_gemma3();
  // (The Gemma configs' default head_dim is 256, not hidden_size / heads.)
  if (is_qwen3() || is_qwen3_moe() || gemma || head_dim != hidden_size / num_attention_heads ||
      hidden_size % num_attention_heads != 0)
    j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.is_default())
    j["rope_scaling"] = nullptr;
  else if (rope_scaling.type == "longrope")  // Phi3Config 4.x accepts exactly these three keys
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", rope_scaling.short_factor},
                         {"long_factor", rope_scaling.long_factor}};
  else
    j["rope_scaling"] = rope_scaling.to_json(max_position_embeddings);
  if (partial_rotary_factor != 1.0) j["partial_rotary_factor"] = partial_rotary_factor;
  j["rms_norm_eps"] = rms_norm_eps;
  if (gemma) {
    // GemmaConfig reads hidden_activation (hidden_act only when it is null); Gemma 2/3's
    // configs have hidden_activation alone.
    if (is_gemma()) j["hidden_act"] = activation;
    j["hidden_activation"] = activation;
  } else {
    j["hidden_act"] = "silu";
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (is_qwen2() || is_qwen3() || is_qwen2_moe() || is_qwen3_moe()) {
    j["use_sliding_window"] = sliding_window > 0;
    j["sliding_window"] = sliding_window > 0 ? sliding_window : max_position_embeddings;
    j["max_window_layers"] = sliding_window > 0 ? full_attention_layers : num_hidden_layers;
  }
  if (is_qwen3() || is_qwen3_moe()) j["attention_bias"] = false;
  if (is_mistral() || is_phi3() || is_mixtral()) {
    if (sliding_window > 0) j["sliding_window"] = sliding_window;  // MistralConfig / Phi3Config have no bias fields
    else j["sliding_window"] = nullptr;
    if (is_phi3())
      j["original_max_position_embeddings"] = rope_scaling.type == "longrope"
                                                  ? rope_scaling.original_max_position_embeddings
                                                  : max_position_embeddings;
  } else if (is_olmo2() || is_olmo3()) {
    j["attention_bias"] = false;  // Olmo2Config / Olmo3Config have no mlp_bias
    if (is_olmo3()) {
      // Olmo3Config: every layer's type spelled out (its default slides all but every fourth).
      nlohmann::ordered_json types = nlohmann::ordered_json::array();
      for (int64_t i = 0; i < num_hidden_layers; ++i)
        types.push_back(layer_is_full(i) ? "full_attention" : "sliding_attention");
      j["sliding_window"] = sliding_window > 0 ? sliding_window : max_position_embeddings;
      j["layer_types"] = types;
    }
  } else if (gemma) {
    j["attention_bias"] = false;
    if (!is_gemma()) {
      // Gemma 2/3: the attention scale query_pre_attn_scalar^-1/2, the soft-caps (null: none),
      // and the sliding layers: every layer's type spelled out (transformers >= 4.53), and
      // the older configs' fields (Gemma 2: every other layer from layer 0; Gemma 3: all
      // but every sliding_window_pattern-th), a window of max_position_embeddings (never
      // binding) when no layer slides.
      if (query_pre_attn_scalar == std::floor(query_pre_attn_scalar) && query_pre_attn_scalar < 1e15)
        j["query_pre_attn_scalar"] = int64_t(query_pre_attn_scalar);  // as the Hub's configs write it
      else
        j["query_pre_attn_scalar"] = query_pre_attn_scalar;
      j["attn_logit_softcapping"] = attn_logit_softcapping > 0 ? nlohmann::ordered_json(attn_logit_softcapping) : nullptr;
      j["final_logit_softcapping"] =
          final_logit_softcapping > 0 ? nlohmann::ordered_json(final_logit_softcapping) : nullptr;
      j["sliding_window"] = sliding_window > 0 ? sliding_window : max_position_embeddings;
      if (is_gemma3()) {
        // (No full layer after layer 0: a pattern longer than the model.)
        j["sliding_window_pattern"] =
            sliding_window == 0 ? 1 : full_attention_interval > 0 ? full_attention_interval : num_hidden_layers + 1;
        j["rope_local_base_freq"] = rope_local_theta > 0 ? rope_local_theta : rope_theta;
      }
      nlohmann::ordered_json types = nlohmann::ordered_json::array();
      for (int64_t i = 0; i < num_hidden_layers; ++i)
        types.push_back(layer_is_full(i) ? "full_attention" : "sliding_attention");
      j["layer_types"] = types;
    }
  } else if (is_olmoe()) {
    j["attention_bias"] = false;  // (OlmoeConfig has no mlp_bias)
    j["clip_qkv"] = nullptr;
  } else if (!is_qwen2() && !is_qwen3() && !is_qwen2_moe() && !is_qwen3_moe()) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  if (is_moe()) {  // the mixture-of-experts keys of MixtralConfig / OlmoeConfig / Qwen2MoeConfig / Qwen3MoeConfig
    j[is_mixtral() ? "num_local_experts" : "num_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    if (!is_mixtral()) j["norm_topk_prob"] = norm_topk_prob;
    if (is_qwen2_moe()) {
      j["shared_expert_intermediate_size"] = shared_expert_intermediate_size;
      j["qkv_bias"] = true;
    }
    if (is_qwen3_moe() || is_qwen2_moe()) {
      j["moe_intermediate_size"] = moe_intermediate_size;
      j["decoder_sparse_step"] = decoder_sparse_step;
      j["mlp_only_layers"] = mlp_only_layers;
    }
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = is_olmoe() ? 0.01 : 0.001;  // (the config classes' defaults; training only)
  }
  if (is_granite()) {
    j["embedding_multiplier"] = embedding_multiplier;
    j["logits_scaling"] = logits_scaling;
    j["residual_multiplier"] = residual_multiplier;
    j["attention_multiplier"] = attention_multiplier;
  }
  return finish(j);
}

}  // namespace lol::hf
