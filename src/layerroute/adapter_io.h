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
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/dense_model.h"
#include "hf/hf_export.h"
#include "layerroute/gated_model.h"
#include "tokenizers/tokenizer.h"

namespace lol::layerroute {

/// Loads a base model directory (see above) in float32 on CPU, eval mode. InputError
/// naming the directory's files when it is neither kind or is malformed, and the
/// require_dense_base refusals.
baselines::DenseModel load_base_model(const std::string& dir);

/// Throws InputError when `dir`'s config.json is a project checkpoint of another
/// architecture than "dense" (LoL, MoE, looped, ...; a config.json without
/// "architecture", "architectures" or "model_type" is a LoL checkpoint, as lol's
/// loaders read it): "LayerRoute needs a dense model (...); DIR is a LoL checkpoint"; and
/// when a Hugging Face folder's or dense checkpoint's config is refused by its parser or
/// has layers or blocks the gated decoder does not run (require_layerroute_base, naming
/// config.json), before any data is read. A directory
/// without config.json passes (the loader names it). InputError for a config.json that
/// does not parse.
void require_dense_base(const std::string& dir);

/// Writes the four files into `dir` (created): all four are staged first, then the old
/// layerroute.json is removed and the new files renamed into place, layerroute.json last
/// (a failed write keeps the previous adapter; an interrupted rename leaves no
/// layerroute.json, so no folder mixes new weights with an old manifest). `base_dir`
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
  std::string file;      ///< the file read: DIR/layerroute.json, or a merged folder's DIR/layerroute_gates.json
  std::string base_dir;  ///< as recorded in layerroute.json; a merged folder: the folder itself
  LoraConfig lora;
  GateConfig gates;
  nlohmann::json extra;
  bool merged = false;   ///< `dir` is a merged folder (no adapter files, adapters folded in)
  std::string base_fingerprint;  ///< base_weights_fingerprint at training time ("" in older adapters)
  /// The Hugging Face class whose module names and row order adapter_model.safetensors
  /// uses (peft_layout.h); "dense" for a lol dense base and for adapters written before it
  /// was recorded (Llama's names and lol's rows for every base).
  std::string peft_architecture = "dense";
};

/// A fingerprint of a base model's weights ("fnv1a64:" + 16 hex digits): FNV-1a over
/// each parameter's name, shape, and its first and last 4096 float32 values. Tells
/// another base of the same shapes from the one an adapter was trained on (it does not
/// prove equality). Reads the weights on any device.
std::string base_weights_fingerprint(const baselines::DenseModelImpl& base);
/// Parses dir/layerroute.json (strict), or dir/layerroute_gates.json of a merged
/// folder. InputError when neither exists or the file is malformed.
AdapterInfo read_adapter_info(const std::string& dir);

/// The training options an adapter's "extra" records (layerroute train, a protocol
/// seed, a merged folder's copy of its adapter's), each absent when not recorded (older
/// adapters; then eval --adapter and generate use their own defaults).
struct TrainingRecord {
  std::optional<std::string> system;       ///< --system ("auto": the chat template's default)
  std::optional<std::string> tokenizer;    ///< --tokenizer, absolute (null in the file: the base's)
  std::optional<std::string> loss_tokens;  ///< --loss-tokens: "assistant" or "all"
  std::optional<int64_t> max_len;          ///< --max-len, in [kMinMaxLen, kMaxMaxLen]
  std::optional<uint64_t> seed;            ///< extra.seed (a protocol seed), else extra.train.seed
};
constexpr int64_t kMinMaxLen = 8, kMaxMaxLen = int64_t(1) << 20;  ///< --max-len's range

/// Reads info.extra's system, tokenizer, loss_tokens, max_len, seed and train.seed.
/// A field that is present but malformed (a seed that is not a non-negative integer, a
/// max_len outside [kMinMaxLen, kMaxMaxLen], a system that is not a string, ...) throws
/// InputError naming info.file, the field ("extra.train.seed") and the expected type or
/// range: these values choose the held-out samples and how they are cut and rendered,
/// so falling back to a default would change the results silently.
TrainingRecord training_record(const AdapterInfo& info);

/// Base model (base_dir, or the recorded one when base_dir is empty) + adapter `dir`.
/// For a merged folder the base is the folder itself; InputError if base_dir names
/// another one (the adapters would be applied twice).
/// `note`, when given, receives a warning (else "") when layerroute.json records a base
/// fingerprint and the loaded base's differs: the adapter was trained on other weights.
GatedModel load_gated_model(const std::string& dir, const std::string& base_dir = "", std::string* note = nullptr);

}  // namespace lol::layerroute
