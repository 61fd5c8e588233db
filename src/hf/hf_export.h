// Writing a project-trained dense model as a Hugging Face folder (issue 10:
// `lol export --hf`): config.json, generation_config.json, model.safetensors (or
// shards + model.safetensors.index.json) and the tokenizer files, in the layout
// transformers' save_pretrained produces, so that load_hf_model and
// AutoModelForCausalLM.from_pretrained read it back.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "baselines/dense_model.h"
#include "hf/hf_config.h"
#include "tokenizers/tokenizer.h"

namespace lol::hf {

struct ExportOptions {
  std::string architecture = kQwen2Arch;   ///< a k...Arch name of hf_config.h (from_dense_config decides which fit)
  c10::ScalarType dtype = c10::kFloat;     ///< stored dtype of the weights (F32, BF16 or F16)
  int64_t max_shard_bytes = 0;             ///< > 0: split into shards of at most this size (a larger tensor gets its own)
  bool overwrite = false;                  ///< allow an existing non-empty out_dir
  bool save_tokenizer = true;              ///< false: `tok` sets bos/eos_token_id only (no tokenizer files)
  /// A Hugging Face folder the model was derived from (`layerroute merge`: the base).
  /// When it holds a Hugging Face config.json, its bos/eos_token_id are kept, its
  /// generation_config.json (stop ids, sampling defaults) and tokenizer files
  /// (kTokenizerFiles) are copied verbatim, and `tok` is not saved.
  std::string derived_from;
  /// Folders the model was read from (the checkpoint or run, an adapter; derived_from is
  /// included): out_dir may not be one of them, even with `overwrite`.
  std::vector<std::string> read_from;
};

/// The tokenizer files of a Hugging Face folder that export_hf copies from
/// ExportOptions::derived_from.
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                                  "vocab.json", "merges.txt", "added_tokens.json"};

/// Writes `m` (any device/dtype; not modified) to `out_dir`. Qwen2 always has q/k/v
/// biases: a bias-free model gets zero biases (the same function). `tok` (may be
/// null) is saved with Tokenizer::save and sets bos/eos_token_id; its vocabulary must
/// fit the model's. Throws InputError when the model cannot be expressed in the
/// architecture (from_dense_config), the tokenizer needs more ids than vocab_size,
/// the dtype is not a float type safetensors stores, out_dir is a file or one of the
/// folders read (ExportOptions::read_from), or out_dir exists and is not empty without
/// `overwrite`; with it, out_dir must not hold a lol checkpoint, run or LayerRoute
/// adapter (only an earlier export is replaced: its weights, tokenizer files,
/// generation_config.json and merged gates are removed first). Returns the config written.
HfConfig export_hf(baselines::DenseModelImpl& m, const tokenizers::Tokenizer* tok, const std::string& out_dir,
                   const ExportOptions& opt = {});

}  // namespace lol::hf
