// Training throughput benchmark (issue 12): `lol bench train` and `lol bench matmul`.
//
// bench_train() runs full optimizer steps of the real trainer components on
// synthetic random-token batches (one document per row, every next token a target):
// forward_backward() and clip_gradients() (train_step.h, the code run_training runs),
// Optimizer::step (Muon for hidden matrices + AdamW, paper Appendix A) and the
// model's after_optimizer_step() (LoL: loss-free balancing update). It reports
// tokens/s and the FLOPs actually computed per step, counted from the shapes run
// (count_step_flops), which bench_matmul() turns into a share of the machine's
// measured fp32 matmul peak.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "lol/config.h"
#include "training/trainable.h"

namespace lol::training {

/// Model and batch shape of a benchmark preset (issue 12):
///  - "tiny":  d 64, 4 heads (4 kv), ffn 172, prelude 1, coda 1, L 4, D 4, W 16, S 8,
///             vocab 512, seq 128, batch 8 (0.33M parameters);
///  - "small": d 256, 8 heads (4 kv), ffn 688, prelude 2, coda 2, L 8, D 8, W 64, S 32,
///             vocab 2048, seq 512, batch 8 (9.2M parameters).
/// The issue fixes everything but the vocabulary; 512 / 2048 reproduce the parameter
/// counts of the PyTorch reference (shared/notes/performance-anchors.md).
struct TrainBenchPreset {
  std::string name;
  LoLConfig model;
  int64_t seq_len = 0;  ///< T: tokens per row
  int64_t batch = 0;    ///< B: rows per step
};
/// Throws InputError for names other than "tiny" and "small".
TrainBenchPreset train_bench_preset(const std::string& name);

/// FLOPs of one training step, split by kind. Forward FLOPs are counted from the
/// shapes run (a multiply-add = 2 FLOPs); backward counts twice the forward.
struct StepFlops {
  double linear = 0;     ///< projections, MLPs, router(s), tied LM head: 3 * 2 * rows * in * out
  double attention = 0;  ///< 3 * 4 * heads * head_dim * n (n + 1) / 2 per attention segment of n tokens
                         ///< (QK^T and PV over the causal triangle the CPU kernel computes; padding excluded)
  double optimizer = 0;  ///< Muon Newton-Schulz: steps * (4 m^2 n + 2 m^3) per updated [m, n] matrix (m <= n)
  double total() const { return linear + attention + optimizer; }
};

/// Model FLOPs (linear + attention) of one forward+backward of a batch of `batch`
/// rows of `seq` tokens, one document per row, no prompt window. `dense_core` =
/// false: LoL with `active_depth` routed depths (one expert per window, plus the
/// router on every window); true: the dense strided-window reference
/// (dense_window_model.h) with core_depth blocks. Windows per depth come from
/// lol::window_ranges (section 3.2.1), full-attention layers use one segment per row.
StepFlops count_model_flops(const LoLConfig& c, int64_t batch, int64_t seq, int64_t active_depth, bool dense_core);

/// Newton-Schulz FLOPs of one Muon step over the Muon-group parameters of `params`
/// that currently hold a gradient.
double count_muon_flops(const std::vector<GroupedParam>& params, int64_t ns_steps);

struct MatmulBenchResult {
  int64_t n = 0;          ///< matrices are [n, n] float32
  int threads = 0;        ///< at::get_num_threads() during the run
  int64_t repeats = 0;    ///< timed products
  double median_s = 0;    ///< seconds per product (median)
  double best_s = 0;      ///< fastest product
  double gflops = 0;      ///< 2 n^3 / median_s / 1e9
  double best_gflops = 0; ///< 2 n^3 / best_s / 1e9
};

/// Times C = A B (torch::mm_out, float32, [n, n] random matrices) on `device` after
/// two warm-up products, repeating for at least `min_seconds` and 3 products.
/// Throws InputError when n < 1.
MatmulBenchResult bench_matmul(int64_t n, double min_seconds, const c10::Device& device);

struct TrainBenchOptions {
  std::string preset = "tiny";  ///< see train_bench_preset
  std::string arch = "lol";     ///< "lol" or "dense" (equal-depth dense strided-window reference)
  int64_t steps = 10;           ///< timed optimizer steps
  int64_t warmup = 2;           ///< untimed steps before them (allocator, caches)
  uint64_t seed = 0;            ///< weights and token streams
  c10::Device device = c10::Device(c10::kCPU);
  int64_t profile_steps = 0;    ///< extra steps run under LibTorch's profiler after the timed ones (0 = none)
  /// "auto" (the trainer's: per parameter on the CPU, batched on a GPU), "per-parameter"
  /// or "batched" (Optimizer::Grouping): the optimizer's host cost, measured both ways.
  std::string optimizer_grouping = "auto";
};

/// One LibTorch operator's share of the profiled steps (LibTorch's legacy CPU profiler,
/// aggregated by operator name; times in microseconds per profiled step).
struct OpProfile {
  std::string name;
  double calls = 0;    ///< calls per step
  double self_us = 0;  ///< time inside the operator minus its profiled children
  double total_us = 0; ///< time inside the operator, children included
};

struct TrainBenchResult {
  TrainBenchPreset preset;
  std::string arch;
  int64_t parameters = 0;
  int threads = 0;
  int64_t steps = 0;
  int64_t tokens_per_step = 0;       ///< batch * seq
  double step_s = 0;                 ///< median seconds per full step
  double fwd_bwd_s = 0;              ///< median seconds of forward + loss + backward
  double optimizer_s = 0;            ///< median seconds of clipping + optimizer + balancing update
  double tokens_per_s = 0;           ///< tokens_per_step / step_s
  double fwd_bwd_tokens_per_s = 0;   ///< tokens_per_step / fwd_bwd_s (what the PyTorch reference reports)
  StepFlops flops;                   ///< counted FLOPs of one step
  double gflops_per_s = 0;           ///< flops.total() / step_s / 1e9
  double first_loss = 0, last_loss = 0;  ///< loss of the first warm-up and the last timed step
  int64_t peak_rss_bytes = 0;        ///< process peak resident memory (getrusage) after the run
  std::vector<OpProfile> profile;    ///< by self time, descending (empty unless profile_steps > 0)
  double profiled_step_us = 0;       ///< wall time per profiled step (profiler overhead included)
};

/// Builds the preset's model (LoL via make_model, or DenseWindowTrainable), an
/// Optimizer with the default OptimConfig (Muon + AdamW), and runs warmup + steps
/// optimizer steps on fresh synthetic batches (built before timing). Throws
/// InputError for an unknown preset or arch, steps < 1 or warmup < 0.
TrainBenchResult bench_train(const TrainBenchOptions& opt);

/// LoL and its equal-depth dense strided-window reference measured side by side, for
/// issue 12's routing-overhead target (LoL step <= 1.15x dense). Both models are built
/// and warmed up as bench_train builds them (same seed, same synthetic batches), then
/// their timed steps run interleaved in pairs, the order alternating (LoL first in even
/// pairs, dense first in odd ones), so that a change in the machine's load (other
/// processes on shared cores) reaches both alike; separate processes run minutes apart
/// (docs/benchmarks.md, session 9: the same binary moved 45.9-59.1 ms per step).
struct TrainBenchPair {
  TrainBenchResult lol, dense;          ///< medians over each one's timed steps
  std::vector<double> step_ratios;      ///< per pair: LoL step seconds / dense step seconds
  std::vector<double> fwd_bwd_ratios;   ///< per pair: the same for forward + backward only
  double step_ratio = 0;                ///< median of step_ratios
  double fwd_bwd_ratio = 0;             ///< median of fwd_bwd_ratios
};

/// Runs the pair (opt.arch is ignored). Throws InputError as bench_train, and when
/// opt.profile_steps > 0 (profile one architecture at a time).
TrainBenchPair bench_train_pair(const TrainBenchOptions& opt);

/// Sets the intra-op thread count (init_runtime) and, when the process uses
/// OpenBLAS, its own thread pool (openblas_set_num_threads), which
/// at::set_num_threads does not bound. n <= 0: all available cores.
void set_benchmark_threads(int n);

/// Peak resident set size of this process in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

}  // namespace lol::training
