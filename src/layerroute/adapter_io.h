// Files of a trained LayerRoute adapter directory (issue 11):
//   adapter_model.safetensors  LoRA matrices under PEFT names (lora.h), float32
//   adapter_config.json        PEFT's LoraConfig fields (peft_type LORA, r, lora_alpha,
//                              target_modules, base_model_name_or_path, ...)
//   gates.safetensors          "gates.weight" [n_layers, d_model], "gates.bias" [n_layers], float32
//   layerroute.json            {"base": base model dir, "lora": {...}, "gates": {...}, "extra": {...}}
// A base model directory is either a Hugging Face Qwen2/Llama folder (hf/hf_model.h)
// or a project dense checkpoint (config.json with "architecture": "dense").
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/dense_model.h"
#include "layerroute/gated_model.h"

namespace lol::layerroute {

/// Loads a base model directory (see above) in float32 on CPU, eval mode. InputError
/// naming the directory's files when it is neither kind or is malformed.
baselines::DenseModel load_base_model(const std::string& dir);

/// Writes the four files into `dir` (created; files replaced atomically). `base_dir`
/// is recorded in layerroute.json and adapter_config.json.
void save_adapter(const GatedModelImpl& m, const std::string& dir, const std::string& base_dir,
                  const nlohmann::json& extra = nlohmann::json::object());

/// Reads adapter_model.safetensors and gates.safetensors of `dir` into `m` (strict,
/// bit-exact). InputError naming the file and tensor on any mismatch.
void load_adapter_weights(GatedModelImpl& m, const std::string& dir);

struct AdapterInfo {
  std::string base_dir;  ///< as recorded in layerroute.json
  LoraConfig lora;
  GateConfig gates;
  nlohmann::json extra;
};
/// Parses dir/layerroute.json (strict).
AdapterInfo read_adapter_info(const std::string& dir);

/// Base model (base_dir, or the recorded one when base_dir is empty) + adapter `dir`.
GatedModel load_gated_model(const std::string& dir, const std::string& base_dir = "");

}  // namespace lol::layerroute
