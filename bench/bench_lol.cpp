// Micro-benchmarks of LoL's hot pieces at the shapes of the `lol bench train`
// presets (issue 12): window gather/scatter (nn::SegmentLayout), causal window mask
// construction, masked attention over windows (forward, and forward + backward), one
// attention layer with the CPU segment kernel against the composed path it replaced,
// the router (window means, prefix means, linear, softmax, biased top-1), the weight
// gradient of one expert used at every routed depth (nn::linear's accumulation in the
// GEMM against autograd's sums) and whole LoL forward / forward+backward passes.
// Arg 0 = tiny preset shapes, 1 = small.
//
//   OMP_WAIT_POLICY=PASSIVE ./build/lol_bench --benchmark_filter=LoL
//
// (This file re-executes the binary with OMP_WAIT_POLICY=PASSIVE when it is unset,
// as the lol CLI does: libgomp's spin-waiting distorts timings on few cores.)
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/runtime.h"
#include "lol/model.h"
#include "lol/windows.h"
#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/segments.h"
#include "training/train_benchmark.h"

namespace {

/// Re-executes with OMP_WAIT_POLICY=PASSIVE (argv read back from /proc/self/cmdline).
const bool kPassiveOpenMP = [] {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t i = 0; i < all.size();) {
    size_t j = all.find('\0', i);
    if (j == std::string::npos) j = all.size();
    args.push_back(all.substr(i, j - i));
    i = j + 1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  lol::ensure_passive_thread_pools(int(args.size()), argv.data());
  lol::init_runtime();
  return true;
}();

struct Shape {
  lol::LoLConfig cfg;
  int64_t B, T;
};

Shape shape(int64_t which) {
  auto p = lol::training::train_bench_preset(which == 0 ? "tiny" : "small");
  return {p.model, p.batch, p.seq_len};
}

/// Windows of routed depth `depth` over B rows of T tokens, as attention segments.
lol::nn::SegmentLayout window_layout(const Shape& s, int64_t depth) {
  std::vector<int64_t> rows(s.B * s.T), off{0};
  for (int64_t i = 0; i < s.B * s.T; ++i) rows[i] = i;
  const auto ranges = lol::window_ranges(s.T, depth, s.cfg.window, s.cfg.stride);
  for (int64_t r = 0; r < s.B; ++r)
    for (const auto& w : ranges) off.push_back(r * s.T + w.second);
  return lol::nn::SegmentLayout::from_csr(rows, off, s.B * s.T, torch::kCPU);
}

void set_label(benchmark::State& st, const Shape& s) {
  st.SetLabel((st.range(0) == 0 ? "tiny" : "small") + std::string(" N=") + std::to_string(s.B * s.T));
}

void LoL_WindowLayoutBuild(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(window_layout(s, 2));
  set_label(st, s);
}

void LoL_WindowGather(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  auto L = window_layout(s, 2);
  auto x = torch::randn({s.B * s.T, s.cfg.n_heads, s.cfg.head_dim()});
  for (auto _ : st) benchmark::DoNotOptimize(L.to_padded(x));
  st.SetBytesProcessed(int64_t(st.iterations()) * x.numel() * 4);
  set_label(st, s);
}

void LoL_WindowScatter(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  auto L = window_layout(s, 2);
  auto y = torch::randn({L.n_seg, L.max_len, s.cfg.n_heads, s.cfg.head_dim()});
  for (auto _ : st) benchmark::DoNotOptimize(L.from_padded(y));
  st.SetBytesProcessed(int64_t(st.iterations()) * y.numel() * 4);
  set_label(st, s);
}

void LoL_WindowMask(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  auto L = window_layout(s, 2);
  for (auto _ : st) benchmark::DoNotOptimize(lol::nn::segment_causal_mask(L.slot_valid, torch::Tensor()));
  set_label(st, s);
}

void attention_bench(benchmark::State& st, bool backward) {
  const Shape s = shape(st.range(0));
  auto L = window_layout(s, 2);
  const auto& c = s.cfg;
  auto opts = torch::TensorOptions().requires_grad(backward);
  auto q = torch::randn({L.n_seg, c.n_heads, L.max_len, c.head_dim()}, opts);
  auto k = torch::randn({L.n_seg, c.n_kv_heads, L.max_len, c.head_dim()}, opts);
  auto v = torch::randn({L.n_seg, c.n_kv_heads, L.max_len, c.head_dim()}, opts);
  auto mask = lol::nn::segment_causal_mask(L.slot_valid, torch::Tensor());
  for (auto _ : st) {
    auto o = lol::nn::masked_attention(q, k, v, mask);
    if (backward) o.sum().backward();
    benchmark::DoNotOptimize(o);
  }
  // QK^T and PV over the padded squares (what is computed), x3 with backward.
  const double f = 4.0 * double(L.n_seg * c.n_heads * L.max_len * L.max_len * c.head_dim()) * (backward ? 3 : 1);
  st.counters["GFLOP/s"] = benchmark::Counter(f * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  set_label(st, s);
}
void LoL_WindowAttention(benchmark::State& st) { attention_bench(st, false); }
void LoL_WindowAttentionBackward(benchmark::State& st) { attention_bench(st, true); }

/// One attention layer (projections, RoPE, attention over the windows of routed depth 2,
/// o_proj), forward + backward. range(1) = 0: nn::Attention's forward (the CPU segment
/// kernel over the flat rows); 1: the composed path it replaced (padded segments,
/// causal mask, masked_attention, scatter back). The difference is the attention itself.
void LoL_AttentionLayer(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  auto L = window_layout(s, 2);
  lol::nn::Attention attn(lol::nn::AttentionShape{c.d_model, c.n_heads, c.n_kv_heads, c.head_dim(), false});
  lol::nn::RoPE rope(c.head_dim(), c.rope_theta);
  const int64_t N = s.B * s.T;
  auto x = torch::randn({N, c.d_model}).requires_grad_(true);
  auto pos = torch::arange(N, torch::kInt64) % s.T;
  for (auto _ : st) {
    torch::Tensor o;
    if (st.range(1) == 0) {
      o = attn->forward(x, pos, L, torch::Tensor(), rope);
    } else {
      torch::Tensor q, k, v;
      attn->project(x, pos, rope, q, k, v);
      auto qp = L.to_padded(q).permute({0, 2, 1, 3}).contiguous();
      auto kp = L.to_padded(k).permute({0, 2, 1, 3}).contiguous();
      auto vp = L.to_padded(v).permute({0, 2, 1, 3}).contiguous();
      auto a = lol::nn::masked_attention(qp, kp, vp, lol::nn::segment_causal_mask(L.slot_valid, torch::Tensor()));
      o = attn->o_proj(L.from_padded(a.permute({0, 2, 1, 3}).contiguous()).view({N, -1}));
    }
    o.sum().backward();
    benchmark::DoNotOptimize(o);
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * N);
  st.SetLabel(std::string(st.range(0) == 0 ? "tiny" : "small") + (st.range(1) == 0 ? " kernel" : " composed"));
}

/// Router of one routed depth as in LoLModelImpl::forward: window means (index_add),
/// float64 prefix means of earlier windows, linear, softmax, biased argmax.
void LoL_Router(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  const auto ranges = lol::window_ranges(s.T, 2, c.window, c.stride);
  const int64_t per_row = int64_t(ranges.size()), G = s.B * per_row;
  std::vector<int64_t> win(s.B * s.T), first(G), kk(G), lens(G);
  for (int64_t r = 0; r < s.B; ++r)
    for (int64_t k = 0; k < per_row; ++k) {
      const int64_t g = r * per_row + k;
      first[g] = r * per_row;
      kk[g] = k;
      lens[g] = ranges[k].second - ranges[k].first;
      for (int64_t t = ranges[k].first; t < ranges[k].second; ++t) win[r * s.T + t] = g;
    }
  auto i64 = [](const std::vector<int64_t>& v) { return torch::tensor(v, torch::kInt64); };
  auto win_t = i64(win), first_t = i64(first), k_t = i64(kk);
  auto len_t = i64(lens).to(torch::kFloat32).unsqueeze(1);
  auto x = torch::randn({s.B * s.T, c.d_model});
  auto w = torch::randn({c.library_size, c.d_model});
  auto bias = torch::zeros({c.library_size});
  torch::NoGradGuard ng;
  for (auto _ : st) {
    auto mu = torch::zeros({G, c.d_model}).index_add(0, win_t, x) / len_t;
    auto csum = torch::cat({torch::zeros({1, c.d_model}, torch::kFloat64), mu.to(torch::kFloat64).cumsum(0)}, 0);
    auto r = ((csum.narrow(0, 0, G) - csum.index_select(0, first_t)) / k_t.clamp_min(1).to(torch::kFloat64).unsqueeze(1))
                 .to(torch::kFloat32);
    auto probs = torch::softmax(torch::matmul(r, w.t()), -1);
    benchmark::DoNotOptimize((probs + bias).argmax(-1));
  }
  set_label(st, s);
}

/// One expert's down_proj used at every routed depth, each time on its share of the
/// tokens (B*T/L rows): forward + backward of the weight gradient only, through
/// nn::linear (arg 1 = 0: each use's dW added into weight.grad by the GEMM) or
/// torch::nn::Linear (arg 1 = 1: autograd computes each use's dW and sums them).
void LoL_ExpertWeightGrad(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  torch::nn::Linear lin(torch::nn::LinearOptions(c.ffn_hidden, c.d_model).bias(false));
  const int64_t rows = s.B * s.T / c.library_size;
  std::vector<torch::Tensor> xs, gs;
  for (int64_t d = 0; d < c.core_depth; ++d) {
    xs.push_back(torch::randn({rows, c.ffn_hidden}));
    gs.push_back(torch::randn({rows, c.d_model}));
  }
  const bool fused = st.range(1) == 0;
  for (auto _ : st) {
    lin->weight.mutable_grad() = torch::Tensor();
    torch::Tensor loss;
    for (size_t d = 0; d < xs.size(); ++d) {
      auto y = fused ? lol::nn::linear(xs[d], lin) : lin->forward(xs[d]);
      auto l = (y * gs[d]).sum();
      loss = loss.defined() ? loss + l : l;
    }
    loss.backward();
    benchmark::DoNotOptimize(lin->weight.grad());
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * rows * c.core_depth);
  st.SetLabel(std::string(st.range(0) == 0 ? "tiny" : "small") + (fused ? " nn::linear" : " autograd sums"));
}

void lol_forward(benchmark::State& st, bool backward) {
  const Shape s = shape(st.range(0));
  lol::LoLModel m(s.cfg);
  m->train();
  lol::LoLBatch b;
  b.tokens = torch::randint(s.cfg.vocab_size, {s.B, s.T}, torch::kInt64);
  for (auto _ : st) {
    torch::AutoGradMode g(backward);
    auto out = m->forward(b).logits;
    if (backward) out.mean().backward();
    benchmark::DoNotOptimize(out);
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * s.B * s.T);
  set_label(st, s);
}
void LoL_ModelForward(benchmark::State& st) { lol_forward(st, false); }
void LoL_ModelForwardBackward(benchmark::State& st) { lol_forward(st, true); }

}  // namespace

BENCHMARK(LoL_WindowLayoutBuild)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_WindowGather)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_WindowScatter)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_WindowMask)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_WindowAttention)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_WindowAttentionBackward)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_AttentionLayer)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_Router)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_ExpertWeightGrad)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_ModelForward)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(LoL_ModelForwardBackward)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
