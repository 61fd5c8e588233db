#include "training/train_benchmark.h"

#include <sys/resource.h>

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/csrc/autograd/profiler.h>  // the legacy profiler (profiler_legacy.h until LibTorch 1.13)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "core/runtime.h"
#include "lol/model.h"
#include "lol/windows.h"
#include "nn/block_cost.h"
#include "training/batcher.h"
#include "training/dense_window_model.h"
#include "training/optimizer.h"
#include "training/train_step.h"
#include "util/clock.h"
#include "util/error.h"

namespace lol::training {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void sync(const c10::Device& dev) {
  if (dev.is_cuda()) torch::cuda::synchronize(dev.index() < 0 ? -1 : dev.index());
}

/// Aggregates LibTorch's legacy profiler events by operator name: push/pop ranges are
/// paired per thread with a stack, self time = own time minus the nested ranges'.
std::vector<OpProfile> aggregate_profile(const torch::autograd::profiler::thread_event_lists& lists,
                                         int64_t steps) {
  using torch::autograd::profiler::EventKind;
  using torch::autograd::profiler::LegacyEvent;
  struct Acc {
    double calls = 0, self = 0, total = 0;
  };
  std::map<std::string, Acc> by_name;
  for (const auto& events : lists) {
    struct Open {
      const LegacyEvent* ev;
      double children = 0;
    };
    std::vector<Open> stack;
    for (const auto& e : events) {
      if (e.kind() == EventKind::PushRange) {
        stack.push_back({&e, 0.0});
      } else if (e.kind() == EventKind::PopRange && !stack.empty()) {
        Open o = stack.back();
        stack.pop_back();
        const double us = o.ev->cpuElapsedUs(e);
        auto& a = by_name[o.ev->name()];
        a.calls += 1;
        a.total += us;
        a.self += us - o.children;
        if (!stack.empty()) stack.back().children += us;
      }
    }
  }
  std::vector<OpProfile> out;
  const double n = double(std::max<int64_t>(steps, 1));
  for (const auto& [name, a] : by_name) out.push_back({name, a.calls / n, a.self / n, a.total / n});
  std::sort(out.begin(), out.end(), [](const OpProfile& x, const OpProfile& y) { return x.self_us > y.self_us; });
  return out;
}

/// Forward FLOPs of one block over `rows` tokens, linear layers only.
double block_linear_flops(const LoLConfig& c, double rows) {
  return 2.0 * rows * double(nn::block_active_matmul_weights(block_shape(c)));
}

/// Forward FLOPs of attention over one segment of n tokens: QK^T and PV over the
/// causal triangle of n (n + 1) / 2 (query, key) pairs, what the CPU kernel computes
/// (nn/attention.cpp).
double segment_attention_flops(const LoLConfig& c, double n) {
  return 4.0 * double(c.n_heads) * double(c.head_dim()) * n * (n + 1.0) / 2.0;
}

/// A synthetic batch: uniform random tokens, one document per row, all next-token targets.
TrainBatch synthetic_batch(int64_t B, int64_t T, int64_t vocab, std::mt19937_64& rng) {
  std::vector<std::vector<int32_t>> tok(B, std::vector<int32_t>(T));
  for (auto& r : tok)
    for (auto& t : r) t = int32_t(rng() % uint64_t(vocab));
  std::vector<std::vector<int64_t>> doc(B, std::vector<int64_t>(T, 0));
  std::vector<std::vector<uint8_t>> loss(B, std::vector<uint8_t>(T, 1)), router(B, std::vector<uint8_t>(T, 0));
  return assemble_batch(tok, doc, loss, router, std::vector<int64_t>(B, 0));
}

}  // namespace

TrainBenchPreset train_bench_preset(const std::string& name) {
  TrainBenchPreset p;
  p.name = name;
  LoLConfig& c = p.model;
  if (name == "tiny") {
    c.vocab_size = 512;
    c.d_model = 64;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.ffn_hidden = 172;
    c.n_prelude = 1;
    c.n_coda = 1;
    c.library_size = 4;
    c.core_depth = 4;
    c.window = 16;
    c.stride = 8;
    p.seq_len = 128;
    p.batch = 8;
  } else if (name == "small") {
    c.vocab_size = 2048;
    c.d_model = 256;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.ffn_hidden = 688;
    c.n_prelude = 2;
    c.n_coda = 2;
    c.library_size = 8;
    c.core_depth = 8;
    c.window = 64;
    c.stride = 32;
    p.seq_len = 512;
    p.batch = 8;
  } else {
    throw InputError("--preset: unknown preset '" + name + "' (expected tiny or small)");
  }
  c.max_seq_len = std::max<int64_t>(1024, p.seq_len);
  c.validate("preset " + name);
  return p;
}

StepFlops count_model_flops(const LoLConfig& c, int64_t batch, int64_t seq, int64_t active_depth, bool dense_core) {
  StepFlops f;
  const double N = double(batch) * double(seq);
  const double n_full = double(c.n_prelude + c.n_coda);
  const int64_t depths = dense_core ? c.core_depth : active_depth;
  double fwd_linear = (n_full + double(depths)) * block_linear_flops(c, N);
  fwd_linear += 2.0 * N * double(c.d_model) * double(c.vocab_size);  // LM head
  double fwd_attn = n_full * double(batch) * segment_attention_flops(c, double(seq));
  for (int64_t l = 1; l <= depths; ++l) {
    const auto ranges = window_ranges(seq, l, c.window, c.stride);
    for (const auto& r : ranges) fwd_attn += double(batch) * segment_attention_flops(c, double(r.second - r.first));
    if (!dense_core)  // router on every window's input
      fwd_linear += 2.0 * double(batch) * double(ranges.size()) * double(c.d_model) * double(c.library_size);
  }
  f.linear = 3.0 * fwd_linear;
  f.attention = 3.0 * fwd_attn;
  return f;
}

double count_muon_flops(const std::vector<GroupedParam>& params, int64_t ns_steps) {
  double f = 0;
  for (const auto& p : params) {
    if (p.group != ParamGroup::Muon || !p.tensor.grad().defined() || p.tensor.dim() != 2) continue;
    const double m = double(std::min(p.tensor.size(0), p.tensor.size(1)));
    const double n = double(std::max(p.tensor.size(0), p.tensor.size(1)));
    f += double(ns_steps) * (4.0 * m * m * n + 2.0 * m * m * m);
  }
  return f;
}

MatmulBenchResult bench_matmul(int64_t n, double min_seconds, const c10::Device& device) {
  if (n < 1) throw InputError("--n: matrix size " + std::to_string(n) + ": expected >= 1");
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(0);
  auto a = at::randn({n, n}, gen).to(device);
  auto b = at::randn({n, n}, gen).to(device);
  auto c = torch::empty({n, n}, a.options());
  for (int i = 0; i < 2; ++i) torch::mm_out(c, a, b);
  sync(device);
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 || util::seconds_since(start) < min_seconds) {
    const auto t0 = Clock::now();
    torch::mm_out(c, a, b);
    sync(device);
    times.push_back(util::seconds_since(t0));
  }
  MatmulBenchResult r;
  r.n = n;
  r.threads = at::get_num_threads();
  r.repeats = int64_t(times.size());
  r.median_s = median(times);
  r.best_s = *std::min_element(times.begin(), times.end());
  const double flops = 2.0 * double(n) * double(n) * double(n);
  r.gflops = flops / r.median_s / 1e9;
  r.best_gflops = flops / r.best_s / 1e9;
  return r;
}

namespace {

/// The --optimizer-grouping value as Optimizer::Grouping; throws InputError otherwise.
Optimizer::Grouping optimizer_grouping(const std::string& g) {
  if (g == "auto") return Optimizer::Grouping::Auto;
  if (g == "per-parameter") return Optimizer::Grouping::PerParameter;
  if (g == "batched") return Optimizer::Grouping::Batched;
  throw InputError("--optimizer-grouping: '" + g + "': expected auto, per-parameter or batched");
}

void check_bench_options(const TrainBenchOptions& o) {
  if (o.steps < 1) throw InputError("--steps: " + std::to_string(o.steps) + ": expected >= 1");
  if (o.warmup < 0) throw InputError("--warmup: " + std::to_string(o.warmup) + ": expected >= 0");
  if (o.profile_steps < 0) throw InputError("--profile: " + std::to_string(o.profile_steps) + ": expected >= 0");
  optimizer_grouping(o.optimizer_grouping);
}

/// One architecture's benchmark: the preset's model, an Optimizer with the default
/// OptimConfig (Muon + AdamW), warmup + steps synthetic batches (built before timing),
/// and the times of the timed steps.
class StepRunner {
 public:
  StepRunner(const TrainBenchOptions& o, const std::string& arch) : o_(o) {
    if (arch != "lol" && arch != "dense")
      throw InputError("--arch: unknown architecture '" + arch +
                       "' (expected lol or dense; --arch both runs the two side by side)");
    r_.preset = train_bench_preset(o.preset);
    r_.arch = arch;
    const auto& cfg = r_.preset.model;
    const int64_t B = r_.preset.batch, T = r_.preset.seq_len;
    torch::manual_seed(o.seed);
    if (arch == "lol")
      model_ = make_model(cfg.to_json(), "preset " + o.preset, cfg.vocab_size, T, o.seed);
    else
      model_ = std::make_unique<DenseWindowTrainable>(DenseWindowModel(cfg, o.seed));
    model_->module().to(o.device);
    model_->module().train();
    params_ = model_->grouped_parameters();
    opt_ = std::make_unique<Optimizer>(params_, oc_);
    grouping_ = optimizer_grouping(o.optimizer_grouping);
    std::mt19937_64 rng(o.seed + 1);
    for (int64_t i = 0; i < o.warmup + o.steps; ++i) batches_.push_back(synthetic_batch(B, T, cfg.vocab_size, rng));
    r_.parameters = model_->num_parameters();
    r_.threads = at::get_num_threads();
    r_.steps = o.steps;
    r_.tokens_per_step = B * T;
    r_.flops = count_model_flops(cfg, B, T, model_->active_depth(), arch == "dense");
  }

  /// Runs optimizer step i (0 .. warmup + steps - 1; the first `warmup` are untimed):
  /// forward + loss + backward, then clipping, optimizer and balancing update. Returns
  /// the step's seconds.
  double step(int64_t i) {
    const bool timed = i >= o_.warmup;
    double fb = 0, os = 0;
    const StepTotals tot = run_step(batches_[size_t(i)], fb, os, i == o_.warmup);
    if (i == 0) r_.first_loss = tot.loss();
    r_.last_loss = tot.loss();
    if (timed) {
      fb_t_.push_back(fb);
      opt_t_.push_back(os);
      step_t_.push_back(fb + os);
    }
    return fb + os;
  }
  double last_fwd_bwd() const { return fb_t_.back(); }

  /// Runs `steps` more steps under LibTorch's legacy profiler (not timed).
  void profile(int64_t steps) {
    namespace prof = torch::autograd::profiler;
    prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < steps; ++i) {
      double fb = 0, os = 0;
      run_step(batches_[size_t(o_.warmup + i % o_.steps)], fb, os, false);
    }
    r_.profiled_step_us = 1e6 * util::seconds_since(t0) / double(steps);
    r_.profile = aggregate_profile(prof::disableProfilerLegacy(), steps);
  }

  /// The medians of the timed steps so far and what follows from them.
  TrainBenchResult result() {
    r_.step_s = median(step_t_);
    r_.fwd_bwd_s = median(fb_t_);
    r_.optimizer_s = median(opt_t_);
    r_.tokens_per_s = double(r_.tokens_per_step) / r_.step_s;
    r_.fwd_bwd_tokens_per_s = double(r_.tokens_per_step) / r_.fwd_bwd_s;
    r_.gflops_per_s = r_.flops.total() / r_.step_s / 1e9;
    r_.peak_rss_bytes = peak_rss_bytes();
    return r_;
  }

 private:
  StepTotals run_step(const TrainBatch& batch, double& fb, double& os, bool count_optimizer_flops) {
    const auto t0 = Clock::now();
    const StepTotals tot = forward_backward(*model_, {batch}, o_.device);
    sync(o_.device);
    fb = util::seconds_since(t0);
    if (count_optimizer_flops) r_.flops.optimizer = count_muon_flops(params_, oc_.ns_steps);  // needs the gradients
    const auto t1 = Clock::now();
    clip_gradients(params_, clip_);
    opt_->step(1.0, grouping_);
    opt_->zero_grad();
    model_->after_optimizer_step();
    sync(o_.device);
    os = util::seconds_since(t1);
    return tot;
  }

  TrainBenchOptions o_;
  TrainBenchResult r_;
  std::unique_ptr<TrainableModel> model_;
  std::vector<GroupedParam> params_;
  OptimConfig oc_;  // defaults: Muon + AdamW
  std::unique_ptr<Optimizer> opt_;
  Optimizer::Grouping grouping_ = Optimizer::Grouping::Auto;
  const double clip_ = TrainConfig().clip;
  std::vector<TrainBatch> batches_;
  std::vector<double> step_t_, fb_t_, opt_t_;
};

}  // namespace

TrainBenchResult bench_train(const TrainBenchOptions& o) {
  check_bench_options(o);
  StepRunner run(o, o.arch);
  for (int64_t i = 0; i < o.warmup + o.steps; ++i) run.step(i);
  auto r = run.result();
  if (o.profile_steps > 0) {
    run.profile(o.profile_steps);
    const auto p = run.result();
    r.profile = p.profile;
    r.profiled_step_us = p.profiled_step_us;
  }
  return r;
}

TrainBenchPair bench_train_pair(const TrainBenchOptions& o) {
  check_bench_options(o);
  if (o.profile_steps > 0) throw InputError("--profile: not available with --arch both (profile one architecture)");
  StepRunner lol(o, "lol"), dense(o, "dense");
  for (int64_t i = 0; i < o.warmup; ++i) {
    lol.step(i);
    dense.step(i);
  }
  TrainBenchPair p;
  for (int64_t k = 0; k < o.steps; ++k) {
    const int64_t i = o.warmup + k;
    double tl = 0, td = 0;
    if (k % 2 == 0) {
      tl = lol.step(i);
      td = dense.step(i);
    } else {
      td = dense.step(i);
      tl = lol.step(i);
    }
    p.step_ratios.push_back(tl / td);
    p.fwd_bwd_ratios.push_back(lol.last_fwd_bwd() / dense.last_fwd_bwd());
  }
  p.lol = lol.result();
  p.dense = dense.result();
  p.step_ratio = median(p.step_ratios);
  p.fwd_bwd_ratio = median(p.fwd_bwd_ratios);
  return p;
}

void set_benchmark_threads(int n) { init_runtime(n <= 0 ? available_cores() : n); }

int64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

}  // namespace lol::training
