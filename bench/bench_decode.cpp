// Micro-benchmark of the product that bounds batch-1 decoding: one token's state times a
// weight matrix (inference::blas::rows_times_wt, n = 1 row: BLAS gemv), reported as the
// bytes of weights streamed per second. A decode step reads every weight once, so
// (weight bytes) / (this rate) is the floor of a step's time (docs/benchmarks.md,
// "Hugging Face models").
//   build/lol_bench --benchmark_filter=Decode_WeightStream
// Arg: 0 = Qwen2.5-0.5B LM head [151936, 896] (545 MB, far beyond the caches),
//      1 = its MLP down projection [896, 4864] (17 MB).
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include "core/runtime.h"
#include "inference/blas.h"

namespace {

void Decode_WeightStream(benchmark::State& st) {
  lol::init_runtime();
  const int64_t out = st.range(0) == 0 ? 151936 : 896, in = st.range(0) == 0 ? 896 : 4864;
  auto w = torch::rand({out, in}), x = torch::rand({in}), y = torch::empty({out});
  for (auto _ : st) {
    lol::inference::blas::rows_times_wt(x.data_ptr<float>(), 1, in, w.data_ptr<float>(), out, y.data_ptr<float>());
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * out * in * 4);
  st.SetLabel(std::to_string(out) + "x" + std::to_string(in) + " float32, " + std::to_string(at::get_num_threads()) +
              " threads");
}

}  // namespace

BENCHMARK(Decode_WeightStream)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
