// The multi-seed reproducibility protocol (paper 4, "Reproducibility protocol", and
// tables 1, 2, 4): for each seed, fresh gates and adapters initialised from the seed,
// training with the seed's batch order, evaluation on held-out samples selected by
// the same seed; then tables over seeds: converged gate mean/std per layer, speedup,
// perplexity deltas, executed layers and non-triviality.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layerroute/eval.h"
#include "layerroute/train.h"

namespace lol::layerroute {

struct ProtocolOptions {
  std::string base_dir;     ///< base model (HF folder or project dense checkpoint)
  std::string out_dir;      ///< seed-<s>/ adapter directories + protocol.json
  int64_t seeds = 3;
  uint64_t first_seed = 0;  ///< seeds first_seed .. first_seed + seeds - 1
  int64_t eval_samples = 100;  ///< held-out samples per seed (seeded selection; 0 = all)
  LoraConfig lora;
  GateConfig gates;
  TrainOptions train;
  EvalOptions eval;
  /// Seeds whose out_dir/seed-<s>/ already holds an adapter of an earlier protocol run
  /// with the same seed, step count, LoRA and gate configs are loaded and only
  /// evaluated again (their recorded training time and last step are kept); InputError
  /// when the recorded run does not match. For re-measuring without retraining.
  bool reuse_trained = false;
  /// Allows a non-empty out_dir without reuse_trained: every seed is trained again and
  /// its seed-<s>/ replaced (eval --seeds --overwrite). See check_protocol_out_dir.
  bool overwrite = false;
  /// --max-len the samples were cut to; recorded as `max_len` in each seed's
  /// layerroute.json `extra`, so that `eval --adapter` cuts alike (0 = not recorded).
  int64_t max_len = 0;
  /// The tokens the loss counted (`--loss-tokens`); recorded as `loss_tokens` in each
  /// seed's `extra` (eval --adapter counts alike; --reuse refuses another).
  LossTokens loss_tokens = LossTokens::Assistant;
  /// Data options recorded in each seed's `extra` as `layerroute train` records them
  /// (the CLI's "system" and "tokenizer"), so that `eval --adapter seed-S` and
  /// `generate` render samples alike; --reuse refuses a record that holds another value
  /// (records without the key, before session 29, are not checked).
  nlohmann::json data_record = nlohmann::json::object();
};

struct SeedResult {
  uint64_t seed = 0;
  TrainLog last;        ///< last training step
  double train_seconds = 0;
  EvalReport report;
};

/// Throws InputError naming out_dir when it is a file, or a non-empty directory and
/// neither reuse_trained nor overwrite is set (training would replace an earlier
/// protocol's seed-<s>/ adapters and protocol.json: the message lists what it holds and
/// says to pass --reuse or --overwrite), or when both are set. An absent or empty
/// out_dir passes; so does out_dir "" (nothing is written).
void check_protocol_out_dir(const ProtocolOptions& opt);

/// Runs the protocol. `on_seed` (optional) is called after each seed. InputError for
/// empty data or bad options, and check_protocol_out_dir's refusals (before any work).
std::vector<SeedResult> run_protocol(const ProtocolOptions& opt, const std::vector<Example>& train,
                                     const std::vector<Example>& heldout,
                                     const std::function<void(const SeedResult&)>& on_seed = {});

/// Markdown tables: per-seed summary, per-layer gate mean/std over seeds (with the
/// band and non-triviality), and the means over seeds; the first line names which tokens
/// the perplexities count (`loss_tokens`, the run's --loss-tokens). A seed whose timed
/// gated runs executed no layer has no layer-ratio realized/ideal ("n/a"; the mean is
/// over the other seeds).
std::string protocol_tables(const std::vector<SeedResult>& results, LossTokens loss_tokens);

nlohmann::json to_json(const SeedResult& r);

}  // namespace lol::layerroute
