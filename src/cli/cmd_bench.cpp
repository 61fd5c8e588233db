// `lol bench matmul` (fp32 matmul GFLOP/s: the machine's practical peak) and
// `lol bench train` (training tokens/s, counted GFLOP/s, share of the matmul peak,
// peak memory; issue 12). `lol bench generate` lives in cmd_generate.cpp; all share
// the `bench` sub-command created by bench_command().
#include <algorithm>
#include <array>
#include <iomanip>
#include <iostream>
#include <memory>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "core/environment.h"
#include "core/runtime.h"
#include "training/train_benchmark.h"

namespace lol::cli {

CLI::App* bench_command(CLI::App& app) {
  for (auto* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->get_name() == "bench") return s;
  auto* b = app.add_subcommand("bench", "Benchmarks (prints measured throughput)");
  b->require_subcommand(1);
  return b;
}

namespace {

struct MatmulArgs {
  int64_t n = 2048;
  double seconds = 2.0;
  int threads = 0;
  std::string device = "cpu";
  bool json = false;
};

struct TrainBenchArgs {
  std::string preset = "tiny", arch = "lol", device = "cpu", optimizer_grouping = "auto";
  int64_t steps = 10, warmup = 2, peak_n = 1024, profile = 0, profile_top = 25;
  uint64_t seed = 0;
  double peak_gflops = 0;
  int threads = 0;
  bool json = false;
};

/// The result and the environment it was measured in (core/environment.h, under "runtime").
nlohmann::json matmul_json(const training::MatmulBenchResult& r, const c10::Device& device) {
  return {{"n", r.n},           {"threads", r.threads}, {"repeats", r.repeats},         {"median_s", r.median_s},
          {"best_s", r.best_s}, {"gflops", r.gflops},   {"best_gflops", r.best_gflops}, {"runtime", runtime_environment(device)}};
}

void run_matmul(const MatmulArgs& a) {
  training::set_benchmark_threads(a.threads);
  const auto device = parse_device(a.device);
  auto r = training::bench_matmul(a.n, a.seconds, device);
  if (a.json) {
    std::cout << matmul_json(r, device).dump(1) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(1) << "fp32 mm " << r.n << "x" << r.n << "x" << r.n << ", "
            << r.threads << " threads, " << r.repeats << " products: " << r.gflops << " GFLOP/s median, "
            << r.best_gflops << " best (" << std::setprecision(2) << 1000.0 * r.median_s << " ms each); "
            << kernels_summary(runtime_environment(device)) << "\n";
}

/// The operator table of `--profile N`: LibTorch operators by self time per step.
void print_profile(const training::TrainBenchResult& r, int64_t top) {
  double self_sum = 0, calls = 0;
  for (const auto& p : r.profile) {
    self_sum += p.self_us;
    calls += p.calls;
  }
  std::cout << "\nprofile (LibTorch legacy profiler, per step; the profiled steps took " << std::setprecision(1)
            << r.profiled_step_us / 1000.0 << " ms each, profiler overhead included; " << std::setprecision(0)
            << calls << " operator calls per step)\n";
  std::cout << std::left << std::setw(44) << "operator" << std::right << std::setw(10) << "calls" << std::setw(12)
            << "self ms" << std::setw(9) << "self %" << std::setw(12) << "total ms" << "\n";
  for (int64_t i = 0; i < int64_t(r.profile.size()) && i < top; ++i) {
    const auto& p = r.profile[size_t(i)];
    std::cout << std::left << std::setw(44) << p.name.substr(0, 43) << std::right << std::setprecision(0)
              << std::setw(10) << p.calls << std::setprecision(2) << std::setw(12) << p.self_us / 1000.0
              << std::setprecision(1) << std::setw(9) << (self_sum > 0 ? 100.0 * p.self_us / self_sum : 0.0)
              << std::setprecision(2) << std::setw(12) << p.total_us / 1000.0 << "\n";
  }
}

nlohmann::json train_json(const training::TrainBenchResult& r, const TrainBenchArgs& a, double peak,
                          const nlohmann::json& peak_j) {
  nlohmann::json j = {{"preset", r.preset.name},
                      {"arch", r.arch},
                      {"device", a.device},
                      {"parameters", r.parameters},
                      {"threads", r.threads},
                      {"batch", r.preset.batch},
                      {"seq_len", r.preset.seq_len},
                      {"steps", r.steps},
                      {"optimizer_grouping", a.optimizer_grouping},
                      {"step_s", r.step_s},
                      {"fwd_bwd_s", r.fwd_bwd_s},
                      {"optimizer_s", r.optimizer_s},
                      {"tokens_per_s", r.tokens_per_s},
                      {"fwd_bwd_tokens_per_s", r.fwd_bwd_tokens_per_s},
                      {"gflop_per_step", {{"linear", r.flops.linear / 1e9},
                                          {"attention", r.flops.attention / 1e9},
                                          {"optimizer", r.flops.optimizer / 1e9},
                                          {"total", r.flops.total() / 1e9}}},
                      {"gflops", r.gflops_per_s},
                      {"matmul_peak_gflops", peak},
                      {"matmul_peak", peak_j},
                      {"peak_share", peak > 0 ? r.gflops_per_s / peak : 0.0},
                      {"first_loss", r.first_loss},
                      {"last_loss", r.last_loss},
                      {"peak_rss_mib", double(r.peak_rss_bytes) / (1 << 20)},
                      {"runtime", runtime_environment(parse_device(a.device))}};
  if (!r.profile.empty()) {
    auto& pj = j["profile"] = {{"profiled_step_ms", r.profiled_step_us / 1000.0}, {"operators", nlohmann::json::array()}};
    for (const auto& p : r.profile)
      pj["operators"].push_back({{"name", p.name}, {"calls", p.calls}, {"self_ms", p.self_us / 1000.0},
                                 {"total_ms", p.total_us / 1000.0}});
  }
  return j;
}

void print_train(const training::TrainBenchResult& r, const TrainBenchArgs& a, double peak) {
  const auto& c = r.preset.model;
  std::cout << std::fixed << std::setprecision(1);
  std::cout << "preset " << r.preset.name << " (" << r.arch << "): " << r.parameters << " parameters, d_model "
            << c.d_model << ", prelude/core/coda " << c.n_prelude << "/" << c.core_depth << "/" << c.n_coda << ", L "
            << c.library_size << ", W " << c.window << ", S " << c.stride << "; batch " << r.preset.batch << " x seq "
            << r.preset.seq_len << "; " << r.threads << " threads, " << a.device << "; "
            << kernels_summary(runtime_environment(parse_device(a.device))) << "\n";
  std::cout << "step (median of " << r.steps << "): " << std::setprecision(2) << 1000.0 * r.step_s << " ms = fwd+bwd "
            << 1000.0 * r.fwd_bwd_s << " ms + optimizer " << 1000.0 * r.optimizer_s << " ms ("
            << a.optimizer_grouping << " grouping)\n"
            << std::setprecision(1);
  std::cout << "tokens/s: " << r.tokens_per_s << " (full step), " << r.fwd_bwd_tokens_per_s << " (fwd+bwd only)\n";
  std::cout << "counted GFLOP per step: " << std::setprecision(3) << r.flops.total() / 1e9 << " (linear "
            << r.flops.linear / 1e9 << ", attention " << r.flops.attention / 1e9 << ", Muon "
            << r.flops.optimizer / 1e9 << ")\n"
            << std::setprecision(1);
  std::cout << "GFLOP/s: " << r.gflops_per_s;
  if (peak > 0) std::cout << " = " << 100.0 * r.gflops_per_s / peak << "% of the fp32 matmul peak " << peak << " GFLOP/s";
  std::cout << "\npeak RSS: " << double(r.peak_rss_bytes) / (1 << 20) << " MiB; loss " << std::setprecision(3)
            << r.first_loss << " -> " << r.last_loss << "\n";
}

/// Lowest, median and highest of `v` (not empty).
std::array<double, 3> spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return {v.front(), v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]), v.back()};
}

void run_train_bench(const TrainBenchArgs& a) {
  training::set_benchmark_threads(a.threads);
  training::TrainBenchOptions o;
  o.preset = a.preset;
  o.arch = a.arch;
  o.steps = a.steps;
  o.warmup = a.warmup;
  o.profile_steps = a.profile;
  o.optimizer_grouping = a.optimizer_grouping;
  o.seed = a.seed;
  o.device = parse_device(a.device);
  const bool both = a.arch == "both";
  training::TrainBenchPair pair;
  training::TrainBenchResult r;
  if (both)
    pair = training::bench_train_pair(o);
  else
    r = training::bench_train(o);
  double peak = a.peak_gflops;
  nlohmann::json peak_j = nullptr;
  if (peak <= 0 && a.peak_n > 0) {
    auto m = training::bench_matmul(a.peak_n, 1.0, o.device);
    peak = m.gflops;
    peak_j = matmul_json(m, o.device);
  }
  if (!both) {
    if (a.json) {
      std::cout << train_json(r, a, peak, peak_j).dump(1) << "\n";
      return;
    }
    print_train(r, a, peak);
    if (!r.profile.empty()) print_profile(r, a.profile_top);
    return;
  }
  const auto step = spread(pair.step_ratios), fb = spread(pair.fwd_bwd_ratios);
  if (a.json) {
    nlohmann::json j = {{"lol", train_json(pair.lol, a, peak, peak_j)},
                        {"dense", train_json(pair.dense, a, peak, peak_j)},
                        {"step_ratio", pair.step_ratio},
                        {"fwd_bwd_ratio", pair.fwd_bwd_ratio},
                        {"step_ratios", pair.step_ratios},
                        {"fwd_bwd_ratios", pair.fwd_bwd_ratios}};
    std::cout << j.dump(1) << "\n";
    return;
  }
  print_train(pair.lol, a, peak);
  print_train(pair.dense, a, peak);
  std::cout << std::setprecision(3) << "LoL / dense, " << pair.step_ratios.size()
            << " interleaved pairs (peak RSS above is the process's, both models): step median " << step[1] << " (min "
            << step[0] << ", max " << step[2] << "), fwd+bwd median " << fb[1] << " (min " << fb[0] << ", max "
            << fb[2] << ")\n";
}

}  // namespace

void register_bench(CLI::App& app) {
  auto ma = std::make_shared<MatmulArgs>();
  auto* m = bench_command(app)->add_subcommand("matmul", "fp32 matrix product GFLOP/s (the practical peak)");
  // 3 fp32 matrices of n^2: n = 32768 needs 12 GiB.
  m->add_option("--n", ma->n, "Matrix size n (n x n times n x n)")->capture_default_str()->check(CLI::Range(1, 32768));
  m->add_option("--seconds", ma->seconds, "Minimum timed duration")->capture_default_str()->check(finite_range(0, 86400));
  m->add_option("--threads", ma->threads, "CPU threads, intra-op and OpenBLAS (default: all available)");
  m->add_option("--device", ma->device, "cpu | cuda[:N]")->capture_default_str();
  m->add_flag("--json", ma->json, "Print JSON");
  m->callback([ma] { run_matmul(*ma); });

  auto ta = std::make_shared<TrainBenchArgs>();
  auto* t = bench_command(app)->add_subcommand(
      "train", "Training steps on synthetic batches: tokens/s, counted GFLOP/s, share of the matmul peak, memory");
  t->add_option("--preset", ta->preset, "tiny | small (shapes in docs/benchmarks.md)")->capture_default_str();
  t->add_option("--arch", ta->arch, "lol | dense (equal-depth dense strided-window reference) | both (the two interleaved step by step: the LoL/dense ratio)")->capture_default_str();
  t->add_option("--steps", ta->steps, "Timed optimizer steps")->capture_default_str();
  t->add_option("--warmup", ta->warmup, "Untimed steps first")->capture_default_str();
  t->add_option("--seed", ta->seed, "Weights and token seed")->capture_default_str();
  t->add_option("--peak-n", ta->peak_n, "Matrix size of the matmul peak measured afterwards (0 = skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 32768));
  t->add_option("--peak-gflops", ta->peak_gflops, "Use this matmul peak instead of measuring it (GFLOP/s > 0)")
      ->check(finite_range(1e-9, 1e12));
  t->add_option("--threads", ta->threads, "CPU threads, intra-op and OpenBLAS (default: all available)");
  t->add_option("--profile", ta->profile,
                "Run N more steps under LibTorch's profiler and print the operators by self time")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--profile-top", ta->profile_top, "Rows of the --profile table")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  t->add_option("--device", ta->device, "cpu | cuda[:N]")->capture_default_str();
  t->add_option("--optimizer-grouping", ta->optimizer_grouping,
                "auto (per parameter on the CPU, batched on a GPU) | per-parameter | batched: how the "
                "optimizer groups its multi-tensor updates")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "per-parameter", "batched"}));
  t->add_flag("--json", ta->json, "Print JSON");
  t->callback([ta] { run_train_bench(*ta); });
}

}  // namespace lol::cli
