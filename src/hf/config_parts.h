// Pieces of HfConfig::from_json (hf_config.h) shared by its files: the error helpers
// and the parsers of the config.json files of the LayerNorm architectures (GPT-2,
// GPT-BigCode, GPT-NeoX, Phi, StableLM, Falcon, GPT-J, StarCoder2), whose keys are not Llama's (hf_config_gpt.cpp). LibTorch-free.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "hf/hf_config.h"
#include "nn/activation.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::hf::config_parts {

inline std::string field(const std::string& key) { return "field '" + key + "'"; }

/// Throws the standard "unsupported feature" error:
/// "<where>: field '<key>' = <value>: not supported (<why>)".
[[noreturn]] inline void unsupported(const std::string& where, const std::string& key, const std::string& value,
                                     const std::string& why) {
  throw InputError(where + ": " + field(key) + " = " + value + ": not supported (" + why + ")");
}

/// The ACT2FN name `name` of a gated MLP's gate (Gemma's hidden_activation, StableLM's
/// hidden_act) as nn::activation_name writes it: silu / swish, the GELU forms; "relu" (an
/// activation lol implements for OPT's ungated MLP only) and any other name are InputErrors
/// naming `key`.
inline std::string gate_activation(const std::string& where, const std::string& key, const std::string& name) {
  if (name == "relu")
    throw InputError(where + ": " + field(key) + " = \"relu\": expected silu, gelu_pytorch_tanh (gelu_new, gelu_fast) or gelu");
  return nn::activation_name(nn::activation_from_name(name, where + ": " + field(key)));
}

/// A number as JSON writes it (1e-05, 10000.0).
inline std::string num_text(double v) { return nlohmann::json(v).dump(); }

/// The stored dtype into c.torch_dtype: transformers < 4.56 writes torch_dtype, newer
/// versions dtype; null or absent: unchanged. InputError for another dtype name.
inline void read_torch_dtype(util::JsonFields& f, const nlohmann::json& j, const std::string& where, HfConfig& c) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!f.has(key) || j[key].is_null()) continue;
    f.get(key, c.torch_dtype);
    if (c.torch_dtype != "float32" && c.torch_dtype != "bfloat16" && c.torch_dtype != "float16")
      throw InputError(where + ": " + field(key) + " = \"" + c.torch_dtype +
                       "\": expected \"float32\", \"bfloat16\" or \"float16\"");
  }
}

inline void require_positive(const std::string& where, const std::string& key, int64_t v) {
  if (v < 1) throw InputError(where + ": " + field(key) + " = " + std::to_string(v) + ": expected >= 1");
}

/// GPT2LMHeadModel's config.json (GPT2Config's keys and defaults): see kGpt2Arch.
HfConfig gpt2_config(const nlohmann::json& j, const std::string& where);
/// OPTForCausalLM's config.json (OPTConfig's keys and defaults): see kOptArch.
HfConfig opt_config(const nlohmann::json& j, const std::string& where);
/// GPTBigCodeForCausalLM's config.json (GPTBigCodeConfig's keys and defaults): see kGptBigCodeArch.
HfConfig gpt_bigcode_config(const nlohmann::json& j, const std::string& where);
/// GPTNeoXForCausalLM's config.json (GPTNeoXConfig's keys and defaults, transformers 4.x's
/// rotary_pct / rotary_emb_base and 5's rope_parameters): see kGptNeoXArch.
HfConfig gpt_neox_config(const nlohmann::json& j, const std::string& where);
/// PhiForCausalLM's config.json (PhiConfig's keys and defaults): see kPhiArch.
HfConfig phi_config(const nlohmann::json& j, const std::string& where);
/// StableLmForCausalLM's config.json (StableLmConfig's keys and defaults): see kStableLmArch.
HfConfig stablelm_config(const nlohmann::json& j, const std::string& where);
/// FalconForCausalLM's config.json (FalconConfig's keys and defaults; RefinedWeb's legacy
/// keys refused unless restated): see kFalconArch.
HfConfig falcon_config(const nlohmann::json& j, const std::string& where);
/// GPTJForCausalLM's config.json (GPTJConfig's keys and defaults): see kGptJArch.
HfConfig gptj_config(const nlohmann::json& j, const std::string& where);
/// Starcoder2ForCausalLM's config.json (Starcoder2Config's keys and defaults): see kStarcoder2Arch.
HfConfig starcoder2_config(const nlohmann::json& j, const std::string& where);

}  // namespace lol::hf::config_parts
