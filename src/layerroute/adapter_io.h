// Files of a trained LayerRoute adapter directory (issue 11):
//   adapter_model.safetensors  LoRA matrices under PEFT names (lora.h), float32
//   adapter_config.json        PEFT's LoraConfig fields (peft_type LORA, r, lora_alpha,
//                              target_modules, base_model_name_or_path, ...)
//   gates.safetensors          "gates.weight" [n_layers, d_model], "gates.bias" [n_layers], float32
//   layerroute.json            {"base": base model dir, "lora": {...}, "gates": {...}, "extra": {...}}
// A base model directory is either a Hugging Face Qwen2/Llama folder (hf/hf_model.h)
// or a project dense checkpoint (config.json with "architecture": "dense").
//
// A merged folder (`lol layerroute merge`, save_merged) is a Hugging Face folder whose
// weights have the adapters folded in, plus
//   gates.safetensors          as above
//   layerroute_gates.json      {"gates": {...}, "merged_from": adapter dir, "extra": the adapter's}
// It loads as a gated model on its own (load_gated_model(dir)): base = the folder,
// fresh adapters with B = 0 (they add exactly zero), the stored gates.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/dense_model.h"
#include "hf/hf_export.h"
#include "layerroute/gated_model.h"
#include "tokenizers/tokenizer.h"

namespace lol::layerroute {

/// Loads a base model directory (see above) in float32 on CPU, eval mode. InputError
/// naming the directory's files when it is neither kind or is malformed.
baselines::DenseModel load_base_model(const std::string& dir);

/// Writes the four files into `dir` (created; files replaced atomically). `base_dir`
/// is recorded in layerroute.json and adapter_config.json, made absolute when it names
/// an existing relative path (the adapter then loads from any working directory).
void save_adapter(const GatedModelImpl& m, const std::string& dir, const std::string& base_dir,
                  const nlohmann::json& extra = nlohmann::json::object());

/// Reads adapter_model.safetensors and gates.safetensors of `dir` into `m` (strict,
/// bit-exact). InputError naming the file and tensor on any mismatch.
void load_adapter_weights(GatedModelImpl& m, const std::string& dir);

/// Reads gates.safetensors of `dir` into `m` (strict, bit-exact). InputError naming the
/// file and tensor on a missing / extra tensor, a shape mismatch or non-finite values.
void load_gate_weights(GatedModelImpl& m, const std::string& dir);

/// Folds `m`'s adapters into its base weights (m.base is modified) and writes the merged
/// folder `out_dir`: hf::export_hf(m.base, tok, out_dir, eo) + gates.safetensors +
/// layerroute_gates.json recording `merged_from` and the adapter's layerroute.json
/// "extra" (its training's --system, --max-len, --loss-tokens, seed: eval --adapter
/// reads them from a merged folder as from the adapter). Throws what export_hf throws.
void save_merged(GatedModelImpl& m, const tokenizers::Tokenizer* tok, const std::string& out_dir,
                 const hf::ExportOptions& eo, const std::string& merged_from,
                 const nlohmann::json& extra = nlohmann::json::object());

struct AdapterInfo {
  std::string base_dir;  ///< as recorded in layerroute.json; a merged folder: the folder itself
  LoraConfig lora;
  GateConfig gates;
  nlohmann::json extra;
  bool merged = false;   ///< `dir` is a merged folder (no adapter files, adapters folded in)
  std::string base_fingerprint;  ///< base_weights_fingerprint at training time ("" in older adapters)
};

/// A fingerprint of a base model's weights ("fnv1a64:" + 16 hex digits): FNV-1a over
/// each parameter's name, shape, and its first and last 4096 float32 values. Tells
/// another base of the same shapes from the one an adapter was trained on (it does not
/// prove equality). Reads the weights on any device.
std::string base_weights_fingerprint(const baselines::DenseModelImpl& base);
/// Parses dir/layerroute.json (strict), or dir/layerroute_gates.json of a merged
/// folder. InputError when neither exists or the file is malformed.
AdapterInfo read_adapter_info(const std::string& dir);

/// Base model (base_dir, or the recorded one when base_dir is empty) + adapter `dir`.
/// For a merged folder the base is the folder itself; InputError if base_dir names
/// another one (the adapters would be applied twice).
/// `note`, when given, receives a warning (else "") when layerroute.json records a base
/// fingerprint and the loaded base's differs: the adapter was trained on other weights.
GatedModel load_gated_model(const std::string& dir, const std::string& base_dir = "", std::string* note = nullptr);

}  // namespace lol::layerroute
