// Operator calls of one training forward + backward on the GPU's code path (issue 12).
// A GPU step of the presets is bound by the host's time to dispatch and launch each
// operator (docs/benchmarks.md, "Where a GPU step's time goes"), so the number of
// operator calls is what a change to that path must lower. This runs the path on the
// CPU (the fused CPU kernels off, as LOL_CPU_KERNELS=0 does) and counts every operator
// LibTorch's dispatcher records (RecordFunction), forward and backward:
//   arg 0: preset (0 = tiny, 1 = small);
//   arg 1: model (0 = LoL with the preset's library size, 1 = LoL with a library of one
//          expert: routing and dispatch without grouping, 2 = the equal-depth dense
//          strided-window model).
// Counters per iteration: calls (all), calls_no_views (without select / as_strided /
// resolve_conj: the CPU's batched matmul dispatches one select per matrix, a GPU's does
// not), gemm (mm, addmm, addmm_, bmm, baddbmm) and item (reads of a scalar: host
// synchronisations on a GPU). Counts, not timings: they do not depend on the machine.
// With GPU_PATH_OPS=1 each run also prints its calls per pass by operator name to stderr.
//
// GpuPath_DecodeStep counts the same for one cached decoding step (DecodeSession::step,
// one token per row) of the small preset's LoL model after a prompt of 256 tokens:
//   arg 0: rows (batch). Counters per step as above, plus copies (aten::copy_, which on a
//   GPU include the host-to-device index uploads).
//
//   ./build/lol_bench --benchmark_filter=GpuPath_OperatorCalls
#include <benchmark/benchmark.h>

#include <ATen/record_function.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include <torch/torch.h>

#include "core/runtime.h"
#include "inference/decode_session.h"
#include "lol/model.h"
#include "training/dense_window_model.h"
#include "training/train_benchmark.h"

namespace {

struct OpCounts {
  std::atomic<int64_t> calls{0}, views{0}, gemm{0}, item{0}, copies{0};
  std::mutex mutex;
  std::map<std::string, int64_t> by_name;  // filled only with GPU_PATH_OPS=1
  bool by_name_on = false;
};
OpCounts* g_counts = nullptr;  // set only while a counted iteration runs

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction& fn) {
  OpCounts* c = g_counts;
  if (!c) return nullptr;
  const std::string name = fn.name();
  c->calls++;
  if (name == "aten::select" || name == "aten::as_strided" || name == "aten::resolve_conj") c->views++;
  if (name == "aten::mm" || name == "aten::addmm" || name == "aten::addmm_" || name == "aten::bmm" ||
      name == "aten::baddbmm")
    c->gemm++;
  if (name == "aten::_local_scalar_dense") c->item++;
  if (name == "aten::copy_") c->copies++;
  if (c->by_name_on) {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->by_name[name]++;
  }
  return nullptr;
}

/// The GPU's path and the counting callback while in scope (also when a pass throws).
struct GpuPathScope {
  const bool kernels = lol::cpu_kernels_enabled();
  at::CallbackHandle handle = 0;
  GpuPathScope() {
    lol::set_cpu_kernels_enabled(false);
    handle = at::addGlobalCallback(at::RecordFunctionCallback(count_op).scopes(
        {at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
  ~GpuPathScope() {
    g_counts = nullptr;
    at::removeCallback(handle);
    lol::set_cpu_kernels_enabled(kernels);
  }
};

/// Sets the counters of `counts` per iteration and, with GPU_PATH_OPS=1, prints the calls
/// by operator name.
void report(benchmark::State& st, OpCounts& counts, int64_t iterations, const std::string& label) {
  const double n = double(std::max<int64_t>(iterations, 1));
  st.counters["calls"] = double(counts.calls) / n;
  st.counters["calls_no_views"] = double(counts.calls - counts.views) / n;
  st.counters["gemm"] = double(counts.gemm) / n;
  st.counters["item"] = double(counts.item) / n;
  st.counters["copies"] = double(counts.copies) / n;
  st.SetLabel(label);
  if (counts.by_name_on) {  // every operator's calls per iteration, to stderr
    std::fprintf(stderr, "# %s: calls per iteration by operator\n", label.c_str());
    for (const auto& [op, k] : counts.by_name) std::fprintf(stderr, "%8.1f %s\n", double(k) / n, op.c_str());
  }
}

bool by_name_requested() {
  const char* v = std::getenv("GPU_PATH_OPS");
  return v && std::string(v) == "1";
}

void GpuPath_OperatorCalls(benchmark::State& st) {
  auto p = lol::training::train_bench_preset(st.range(0) == 0 ? "tiny" : "small");
  const int64_t B = p.batch, T = p.seq_len, which = st.range(1);
  auto cfg = p.model;
  if (which == 1) cfg.library_size = 1;
  torch::manual_seed(0);
  auto tokens = torch::randint(cfg.vocab_size, {B, T}, torch::kInt64);
  lol::LoLModel lol_model{nullptr};
  lol::training::DenseWindowModel dense{nullptr};
  lol::LoLBatch batch;
  if (which == 2) {
    dense = lol::training::DenseWindowModel(cfg);
  } else {
    lol_model = lol::LoLModel(cfg);
    lol_model->train();
    batch.tokens = tokens;
    batch.router_only = torch::zeros({B, T}, torch::kBool);  // as the trainer passes it
  }
  GpuPathScope scope;
  // Each counted pass starts without gradients, as a training step's does after zero_grad.
  auto pass = [&] {
    for (auto& t : which == 2 ? dense->parameters() : lol_model->parameters()) t.mutable_grad() = torch::Tensor();
    auto logits = which == 2 ? dense->forward(tokens) : lol_model->forward(batch).logits;
    logits.mean().backward();
  };
  pass();  // warm-up: tables and caches built once
  OpCounts counts;
  counts.by_name_on = by_name_requested();
  int64_t iterations = 0;
  for (auto _ : st) {
    g_counts = &counts;
    pass();
    g_counts = nullptr;
    ++iterations;
  }
  static const char* kModel[] = {"LoL", "LoL, library of 1", "dense strided-window"};
  report(st, counts, iterations,
         std::string(st.range(0) == 0 ? "tiny " : "small ") + kModel[which] + ", fwd+bwd, GPU path on the CPU");
}

void GpuPath_DecodeStep(benchmark::State& st) {
  const int64_t B = st.range(0), context = 256;
  auto cfg = lol::training::train_bench_preset("small").model;
  torch::manual_seed(0);
  lol::LoLModel model(cfg);
  model->eval();
  GpuPathScope scope;
  lol::inference::SessionOptions so;
  so.batch_size = B;
  so.max_len = context + 64;
  so.record_trace = false;
  so.cpu_kernels = false;
  lol::inference::DecodeSession sess(model, so);
  std::vector<lol::inference::RowInput> prompts(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    prompts[size_t(b)].row = b;
    for (int64_t i = 0; i < context; ++i) prompts[size_t(b)].tokens.push_back((7 * i + 3 * b) % cfg.vocab_size);
  }
  sess.feed(prompts);
  std::vector<int64_t> next(static_cast<size_t>(B), 1);
  sess.step(next);  // warm-up
  OpCounts counts;
  counts.by_name_on = by_name_requested();
  int64_t iterations = 0;
  for (auto _ : st) {
    g_counts = &counts;
    sess.step(next);
    g_counts = nullptr;
    ++iterations;
  }
  report(st, counts, iterations,
         "small LoL, decoding step of " + std::to_string(B) + " row(s) after " + std::to_string(context) +
             " tokens, GPU path on the CPU");
}

}  // namespace

BENCHMARK(GpuPath_OperatorCalls)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(GpuPath_DecodeStep)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(16);
