// Helpers shared by CLI commands that take a model.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/strategy_eval.h"
#include "dataset/shards.h"
#include "lol/model.h"
#include "tokenizers/tokenizer.h"

namespace lol::cli {

/// A checkpoint directory (has config.json), or a training run directory whose
/// `latest` file names the newest checkpoint. Throws InputError otherwise. Prints a
/// note on stderr when the checkpoint is a LoL model saved while its routed core was
/// still growing (lol::saved_active_depth < core_depth): load_lol runs it at that depth.
std::string resolve_model_dir(const std::string& dir);

/// The checkpoint directory `dir` names, without resolve_model_dir's checks and note:
/// `dir` itself when it holds config.json (any model folder, a Hugging Face one too),
/// else the checkpoint a run directory's `latest` names (its newest checkpoint when a
/// run was killed before writing `latest`). Throws InputError otherwise.
std::string find_model_dir(const std::string& dir);

/// The "architecture" field of `model_dir`/config.json (lol, dense, looped, moe), "lol"
/// when it is absent or not a string (LoL checkpoints may omit it). Throws InputError
/// when config.json is missing or not JSON.
std::string model_architecture(const std::string& model_dir);

/// For a command given a baseline checkpoint (`model_dir` of architecture `arch`, not
/// "lol"): throws InputError naming `flag` when `given` (a routing option: routing
/// options apply to LoL models only).
void refuse_routing_option(bool given, const std::string& flag, const std::string& model_dir, const std::string& arch);

/// Throws InputError naming `flag` when `out` (an output file about to be written) is
/// one of the files of `model_dir` (the checkpoint being read) or, for a checkpoint of
/// a training run (RUN/checkpoints/NAME), one of the run's own files (latest, run.json,
/// metrics.jsonl, environment.jsonl, trainer_state.json) or any file under
/// RUN/checkpoints: writing it would destroy the model or the run (`forward --out
/// CK/model.safetensors`, `eval lm --out RUN/latest`). Also when `out` is an existing
/// directory. A new file is fine, inside the run too (`--out RUN/eval.json`).
void require_output_outside_model(const std::string& out, const std::string& model_dir, const std::string& flag);

/// Throws InputError naming `flag` when `out` is an existing file inside `dataset_dir`
/// (the dataset being read: dataset.json, its JSONL and shard files).
void require_output_outside_dataset(const std::string& out, const std::string& dataset_dir, const std::string& flag);

/// Throws InputError naming both flags when `out` (an output file about to be written)
/// is the same file as `in` (an input of the command, e.g. --data): nothing is read
/// back from a file being replaced.
void require_output_is_not_input(const std::string& out, const std::string& in, const std::string& out_flag,
                                 const std::string& in_flag);

/// Throws InputError when `tok` has more ids than `model_vocab` (the vocab_size read from
/// `vocab_source`, e.g. "DIR/config.json"): its ids beyond the model's vocabulary mean it
/// belongs to another model. `what` names the tokenizer ("DIR/tokenizer.json",
/// "--tokenizer T"). Fewer ids are fine (Qwen2 pads its embeddings).
void require_tokenizer_fits(const tokenizers::Tokenizer& tok, int64_t model_vocab, const std::string& what,
                            const std::string& vocab_source);

/// The tokenizer a checkpoint was trained with: <dir>/tokenizer.json (every checkpoint
/// of a run on text data carries one), else the tokenizer of the dataset named by
/// config.json "extra" (dataset_dir + tokenizer; checkpoints written before tokenizers
/// were saved with them). nullptr when neither exists (task models keep a word
/// vocabulary in extra.vocab instead). Throws InputError for a file that does not parse.
std::unique_ptr<tokenizers::Tokenizer> training_tokenizer(const std::string& dir);

/// The tokenizer to use with the model in `dir`: `flag` (--tokenizer: "byte", a
/// tokenizer.json file or a directory) when given, else training_tokenizer(dir); nullptr
/// when neither. Throws InputError naming --tokenizer when its vocabulary differs from
/// the training tokenizer's (the first differing id and both strings: ids would mean
/// other text), or when any tokenizer's largest id is >= `model_vocab` (the model's
/// vocab_size; 0 skips the check).
std::unique_ptr<tokenizers::Tokenizer> model_tokenizer(const std::string& dir, const std::string& flag,
                                                       int64_t model_vocab);

/// Checks that the model in `model_dir` (config.json "extra": the task and vocabulary of
/// its training data; `vocab_size`) can read `ds`: the same task and task vocabulary when
/// both are recorded, no dataset token id beyond the model's vocab_size, and for a text
/// corpus (dataset.json "tokenizer") the vocabulary of the model's training tokenizer.
/// Throws InputError naming `data_flag` (e.g. "--data DIR") and both values otherwise.
void require_model_reads_dataset(const std::string& model_dir, const nlohmann::json& model_extra,
                                 int64_t model_vocab, const data::Dataset& ds, const std::string& data_flag);

/// RoutingPath::load(file), checked against the model it will steer: the same
/// library_size, and no more routed depths than the model runs (`active_depth`; 0 skips
/// this check, for commands that choose the depth themselves).
/// Throws InputError naming the file, the field and the model's value.
RoutingPath load_routing_path_for(const std::string& file, int64_t library_size, int64_t active_depth);

/// Throws InputError when `model` (loaded from `dir`) runs no routed depth (a checkpoint
/// saved at active_depth 0 while growing from grow.start 0): `what` (e.g. "routing
/// analysis") has no routing to read. `hint` is appended (e.g. "pass --depth D").
void require_routed_depth(const LoLModel& model, const std::string& dir, const std::string& what,
                          const std::string& hint = "");

/// The generator used for evaluations: the exact full-recompute reference, or with
/// `cached` the KV-cached batched decoder of src/inference (experimental, issue 6).
analysis::GenerateFn default_generator(bool cached);

}  // namespace lol::cli
