// Measurements of `lol layerroute eval` (paper section 5, issue 11), on held-out samples:
//  - perplexity over assistant tokens of the backbone alone (no LoRA, all layers), of
//    the adapted model with every gate open, and of the gated model (closed layers
//    skipped); the deltas gated - backbone (paper's quality claim) and gated - open;
//  - gate statistics of the gated forward: per layer mean sigma ("converged gate
//    value"), share of samples open, and non-triviality: the share of samples whose
//    decision changes when the input term w_i . h is zeroed (paper 5.4);
//  - executed layers per sample and the ideal speedups they imply: the plain layer
//    ratio L / executed, and the shape-counted one (cost.h: open-arm FLOPs over
//    gated-arm FLOPs, the LM head and gate scores included as work skipping cannot
//    remove);
//  - wall-clock speedup of greedy generation (decode.h, gates decided at prefill)
//    against every gate forced open, measured in the same process: for each timing
//    sample and repeat, one open and one gated run back to back (order alternating),
//    ratio t_open / t_gated per pair, median over all pairs. Realized / ideal is taken
//    pair by pair (each pair's ratio over the ideal of that sample's executed layers)
//    and its median reported, for both ideals. A run with every gate closed measures
//    the fixed time (embedding, final norm, LM head, sampling) and gives a third,
//    measured ideal that accounts for it.
// Generation timing runs on a copy of the backbone with the adapters merged, so
// adapted and forced-open runs use identical kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layerroute/data.h"
#include "layerroute/gated_model.h"

namespace lol::layerroute {

struct EvalOptions {
  int64_t batch_size = 4;       ///< samples per forward for perplexity / gate statistics
  int64_t timing_samples = 16;  ///< samples used for wall-clock timing (0 = none)
  int64_t repeats = 3;          ///< timed pairs per timing sample
  int64_t new_tokens = 32;      ///< generated tokens per timed run
  int64_t max_prompt = 256;     ///< prompts are cut to their last max_prompt tokens
  GateMode mode = GateMode::Learned;
};

/// Perplexities of one evaluation source (the Example::source label; paper Table 3 is
/// per evaluation split).
struct SourceReport {
  std::string source;
  int64_t samples = 0;
  double ppl_base = 0, ppl_open = 0, ppl_gated = 0;
  double executed_mean = 0;  ///< executed layers per sample (perplexity forward)
  double ppl_gated_prompt = 0;  ///< gated, gates decided from the prompt (EvalReport::ppl_gated_prompt)
  double executed_mean_prompt = 0;  ///< executed layers per sample with prompt-decided gates
};

struct EvalReport {
  int64_t n_layers = 0, samples = 0, timing_pairs = 0;
  std::vector<SourceReport> sources;  ///< per source, in order of first appearance; empty with fewer than 2 sources
  double ppl_base = 0, ppl_open = 0, ppl_gated = 0;
  /// Perplexity of the gated model with each sample's gates decided from its prompt
  /// tokens only, as generation decides them (decode.h): the quality of the decisions
  /// the speed measurement runs: generate_gated's prefill over the prompt tokens the
  /// timed generation keeps (the last EvalOptions::max_prompt, capped by max_seq_len -
  /// new_tokens) decides, then the whole sample is scored under those decisions
  /// (GatedOptions::forced_open). ppl_gated pools over the whole sample, answer included,
  /// as training does. Equal to ppl_gated for forced gates.
  double ppl_gated_prompt = 0;
  double executed_mean_prompt = 0;  ///< executed layers per sample with prompt-decided gates
  std::vector<double> layer_sigma;   ///< [L] mean sigma over samples
  std::vector<double> layer_open;    ///< [L] share of samples whose gate is open
  /// [L] share of samples whose decision flips without w_i . h (paper 5.4); NaN for
  /// forced gates (GateMode Open / Closed: no decision is made; null in to_json)
  std::vector<double> nontrivial;
  double executed_mean = 0;          ///< executed layers per sample (perplexity forward)
  double ideal_speedup = 0;          ///< n_layers / executed_mean (infinity when no layer runs; null in to_json)
  double decode_executed_mean = 0;   ///< executed layers per timed generation (prefill decisions)
  double decode_ideal_speedup = 0;   ///< median over pairs of n_layers / executed (plain layer ratio)
  double flops_ideal_speedup = 0;    ///< median over pairs of open FLOPs / gated FLOPs (cost.h)
  double ideal_speedup_fixed = 0;    ///< (t_closed + L t_layer) / (t_closed + E t_layer) from the measured medians
  double speedup = 0;                ///< median over pairs of t_open / t_gated
  /// Median over pairs of (t_open / t_gated) / (n_layers / executed), over the pairs
  /// whose gated run executed a layer; NaN when none did (null in to_json, "n/a" printed).
  double realized_over_ideal = 0;
  double realized_over_ideal_flops = 0;  ///< median over pairs of (t_open / t_gated) / (FLOPs ratio)
  double flops_fixed_share = 0;      ///< share of the forced-open run's FLOPs outside the layers (LM head)
  double t_open_ms = 0, t_gated_ms = 0, t_closed_ms = 0;  ///< medians per run
  std::vector<double> pair_ratios;      ///< t_open / t_gated per pair
  std::vector<int64_t> pair_executed;   ///< executed layers of the gated run of each pair
  nlohmann::json to_json() const;
};

/// The held-out samples to evaluate (paper section 4: "100 held-out samples (50 from
/// each of two evaluation sources)", selection seeded by the run's seed). With two or
/// more distinct `source` labels: n / k samples from each of the k sources (the first
/// n mod k sources, in order of first appearance, one more; a source with fewer takes
/// all it has), each source's drawn by a seeded permutation of its samples, and the
/// result interleaved source by source (a0 b0 a1 b1 ...: the first timing samples mix
/// the sources). Otherwise the first n of a seeded permutation. n <= 0 or n >= size:
/// every sample, in that order.
std::vector<Example> select_heldout(const std::vector<Example>& heldout, int64_t n, uint64_t seed);

/// Runs every measurement above on `samples` (examples with a loss mask). InputError
/// for an empty sample set.
EvalReport evaluate_layerroute(GatedModelImpl& m, const std::vector<Example>& samples, const EvalOptions& opt);

/// Median of a non-empty vector (mean of the two middle values for even sizes).
double median(std::vector<double> v);

}  // namespace lol::layerroute
