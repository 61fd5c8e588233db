// The run configuration of `lol train` (a JSON file, strict: unknown keys and
// out-of-range values are InputErrors naming the file, section and key).
//
//   {"model": {architecture fields, e.g. LoLConfig} | "init_from": "DIR",
//    "data": {"dir", "seq_len", "batch_size", "packing": "pad"|"pack", "train_split", "valid_split"},
//    "optim": {"type": "muon"|"adamw", "lr", "muon_lr", "betas", "eps", "weight_decay",
//              "momentum", "nesterov", "ns_steps", "ns_dtype"},
//    "schedule": {"type": "cosine"|"wsd"|"constant", "warmup_steps", "min_lr_ratio",
//                 "decay_fraction", "decay_shape": "linear"|"1-sqrt"},
//    "grow": {"start", "fraction", "shape"},
//    "train": {"steps", "grad_accum", "clip", "eval_every", "eval_batches", "save_every",
//              "keep_last", "log_every", "seed", "device", "threads", "out", "on_nonfinite",
//              "progress"}}
// See docs/training.md for every field's meaning and default.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::training {

struct DataConfig {
  std::string dir;                 ///< dataset directory (dataset.json + shards)
  int64_t seq_len = 0;             ///< row length; 0 = longest sequence (pad) -- required for pack
  int64_t batch_size = 8;          ///< rows per micro-batch
  std::string packing = "pad";     ///< "pad": one example per row; "pack": documents concatenated
  std::string train_split = "train";
  std::string valid_split = "valid";
};

struct OptimConfig {
  std::string type = "muon";     ///< "muon" (Muon + AdamW, paper Appendix A) or "adamw" (AdamW only)
  double lr = 3e-3;              ///< peak AdamW learning rate
  double muon_lr = -1;           ///< peak Muon learning rate (before the 0.2 sqrt(max(A,B)) factor); < 0 = lr
  double beta1 = 0.9, beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;     ///< decoupled, for the Muon and adamw_decay groups
  double momentum = 0.95;        ///< Muon momentum
  bool nesterov = true;
  int64_t ns_steps = 5;          ///< Newton-Schulz iterations
  std::string ns_dtype = "float32";  ///< "float32" or "bfloat16"
  double effective_muon_lr() const { return muon_lr < 0 ? lr : muon_lr; }
};

struct ScheduleConfig {
  std::string type = "cosine";     ///< "cosine", "wsd" (warmup-stable-decay) or "constant"
  int64_t warmup_steps = 0;        ///< linear warmup from lr/warmup to lr
  double min_lr_ratio = 0.1;       ///< final lr / peak lr (cosine, wsd)
  double decay_fraction = 0.2;     ///< wsd: fraction of the steps spent in the cooldown
  std::string decay_shape = "1-sqrt";  ///< wsd cooldown: "linear" or "1-sqrt"
};

struct GrowConfig {
  int64_t start = 1;        ///< active core depth at step 0 (clamped to the model's depth)
  double fraction = 0.75;   ///< growing lasts this fraction of training (0 = no growing), paper 4.2
  /// The curve f(x), x = step / growing steps, that the depth follows (paper 4.2 names
  /// "a 1-sqrt schedule" without a formula): "1-sqrt" f = 1 - sqrt(1 - x) (slow start:
  /// the reversed 1-sqrt cooldown), "sqrt" f = sqrt(x) (fast start), "linear" f = x.
  std::string shape = "1-sqrt";
};

struct TrainConfig {
  int64_t steps = 1000;
  int64_t grad_accum = 1;         ///< micro-batches per optimizer step
  double clip = 1.0;              ///< global gradient-norm clip (0 = off)
  int64_t eval_every = 0;         ///< 0 = only at the end
  int64_t eval_batches = 0;       ///< validation micro-batches per evaluation (0 = whole split)
  int64_t save_every = 0;         ///< 0 = only at the end
  int64_t keep_last = 3;          ///< checkpoints kept
  int64_t log_every = 1;          ///< metrics.jsonl line every N steps
  int64_t seed = 0;
  std::string device = "cpu";
  int64_t threads = 0;            ///< 0 = runtime default
  std::string out;                ///< run directory (required)
  std::string on_nonfinite = "stop";  ///< "stop" or "skip"
  bool progress = true;           ///< progress bar on stderr
};

struct RunConfig {
  nlohmann::json model;       ///< architecture section (null when init_from is set)
  std::string init_from;      ///< plain model directory to start from
  /// Where the configuration came from (the file's path, as from_json's `where`), to name
  /// it in errors about the model section, which is checked when the model is built.
  std::string source = "run config";
  /// The --set overrides applied by load() ("section.key=value"), to name them in errors.
  std::vector<std::string> overrides;
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  GrowConfig grow;
  TrainConfig train;

  /// Parses and validates (strict). `where` names the source (file path) in errors.
  static RunConfig from_json(const nlohmann::json& j, const std::string& where);
  /// Reads a JSON file, applies `overrides` ("section.key=value"), then from_json.
  static RunConfig load(const std::string& path, const std::vector<std::string>& overrides = {});
  /// The fully resolved configuration (every field, defaults included).
  nlohmann::json to_json() const;
  /// `message` (an error about this configuration, "SOURCE:section: field 'key' ..." or
  /// "SOURCE:section: unknown field 'key'") with " (the value comes from --set ...)" added
  /// when an override set that key; else unchanged.
  std::string attribute(const std::string& message) const;
};

/// Applies one "--set" override "a.b.c=value" to `j`. The value is parsed as JSON
/// when it is valid JSON (numbers, true/false, null, quoted strings, arrays, objects),
/// else taken as a plain string. Throws InputError naming the override when it has
/// no '=' or an empty key, or when it descends into a non-object. Unknown keys are
/// caught by RunConfig::from_json afterwards.
void apply_override(nlohmann::json& j, const std::string& assignment);

}  // namespace lol::training
