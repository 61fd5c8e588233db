// Flags and inputs shared by the `lol layerroute` subcommands (cmd_layerroute.cpp:
// train, eval; cmd_layerroute_tools.cpp: merge, render, generate). Internal to the CLI.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "layerroute/chat_format.h"
#include "layerroute/data.h"
#include "layerroute/gated_model.h"
#include "tokenizers/tokenizer.h"

namespace lol::cli::layerroute_cmd {

/// --tokenizer, --system, --max-len and --loss-tokens of train, eval and render.
struct DataArgs {
  std::string tokenizer, system = "auto", loss_tokens = "assistant";
  int64_t max_len = 512;
  CLI::Option* max_len_flag = nullptr;  ///< to tell a given --max-len from the default
  CLI::Option* system_flag = nullptr;   ///< to tell a given --system from the default
  CLI::Option* tokenizer_flag = nullptr;
  CLI::Option* loss_tokens_flag = nullptr;
  /// Where max_len came from when no --max-len gave it (eval --adapter: the training's
  /// record, e.g. "ADAPTER/layerroute.json extra.max_len"); "" = the flag or its default.
  std::string max_len_origin;
};

/// Adds DataArgs' flags to `c`.
void add_data_flags(CLI::App* c, DataArgs& d);

/// max_len as messages name it: "--max-len N", or "max_len N (recorded in FILE ...)"
/// when it was not given by the flag, so that no message names a flag the user never gave.
std::string max_len_words(const DataArgs& d);

/// --tokenizer as recorded in an adapter's layerroute.json: its absolute path, or null
/// (the base folder's).
nlohmann::json tokenizer_record(const DataArgs& d);

/// --base as LayerRoute loads it: a model folder as given, or the checkpoint a `lol
/// train` run directory names (its `latest`; a note on stderr says which), as eval,
/// export and info take run directories. Throws InputError (naming --base) for a
/// directory that is neither, and layerroute::require_dense_base's refusal of a LoL /
/// MoE / looped checkpoint, before any tokenizer is looked for. "" stays "".
std::string resolve_base(const std::string& base);

/// Where the chat template of the tokenizer `tokenizer` (--tokenizer; "": the base
/// folder's) is read from, for messages (hf::chat_template_source of its folder).
std::string template_where(const std::string& base, const std::string& tokenizer);

/// A tokenizer and the format LayerRoute renders samples in with it.
struct ChatTokenizer {
  std::unique_ptr<tokenizers::Tokenizer> tok;
  layerroute::ChatFormat format;  ///< points at *tok
};

/// The tokenizer of --tokenizer or the base folder, and its chat format
/// (layerroute::chat_format_for with --system: ChatML for Qwen2/Qwen2.5-style
/// tokenizers, as the paper trains, else the folder's chat template). Throws InputError
/// for a tokenizer with neither, or with more ids than the base model's vocabulary.
ChatTokenizer open_tokenizer(const std::string& base, const DataArgs& d);

/// The samples of the JSONL file `path` tokenized as training sees them; samples that
/// keep no assistant token within max_len are left out (a note says how many). Throws
/// InputError when none is left.
std::vector<layerroute::Example> load_examples(const std::string& path, const ChatTokenizer& t, const DataArgs& d);

/// layerroute::load_gated_model, with a warning on stderr when `base` has other weights
/// than the adapter was trained on (its recorded base fingerprint).
layerroute::GatedModel load_gated_model_noting_base(const std::string& adapter, const std::string& base);

/// `lol layerroute merge|render|generate` (cmd_layerroute_tools.cpp).
void register_merge_cmd(CLI::App* lr);
void register_render_cmd(CLI::App* lr);
void register_generate_cmd(CLI::App* lr);

}  // namespace lol::cli::layerroute_cmd
