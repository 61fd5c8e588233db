// Micro-benchmarks of LoL's hot pieces at the shapes of the `lol bench train`
// presets (issue 12): window gather/scatter (nn::SegmentLayout), causal window mask
// construction, masked attention over windows (forward, and forward + backward), one
// attention layer with the CPU segment kernel against the composed path it replaced,
// the router (router inputs kernel against the composed formula, linear, softmax, biased
// top-1), the token dispatch ops against index_select / index_add, one routed depth's
// experts as one grouped call against one dense block, the
// weight gradient of one expert used at every routed depth (nn::linear's accumulation in
// the GEMM against autograd's sums) and whole LoL forward / forward+backward passes.
// Arg 0 = tiny preset shapes, 1 = small.
//
//   OMP_WAIT_POLICY=PASSIVE ./build/lol_bench --benchmark_filter=LoL
//
// (This file re-executes the binary with OMP_WAIT_POLICY=PASSIVE when it is unset,
// as the lol CLI does: libgomp's spin-waiting distorts timings on few cores.)
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/runtime.h"
#include "lol/dispatch.h"
#include "lol/model.h"
#include "lol/router_inputs.h"
#include "lol/windows.h"
#include "nn/attention.h"
#include "nn/block.h"
#include "nn/linear.h"
#include "nn/segments.h"
#include "training/train_benchmark.h"

// OMP_WAIT_POLICY / OPENBLAS_THREAD_TIMEOUT defaults before libgomp and OpenBLAS
// initialise (core/runtime.h); the micro-benchmarks' main() is benchmark_main's.
LOL_THREAD_POOL_DEFAULTS_PREINIT;

namespace {

/// Threads and allocator (core/runtime.h), before the first benchmark runs.
const bool kRuntime = [] {
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

/// Windows of routed depth 2 over B rows of T tokens as lol::RouterWindows.
lol::RouterWindows router_windows(const Shape& s) {
  const auto ranges = lol::window_ranges(s.T, 2, s.cfg.window, s.cfg.stride);
  lol::RouterWindows w;
  for (int64_t r = 0; r < s.B; ++r) {
    const int64_t first = int64_t(w.start.size());
    for (size_t k = 0; k < ranges.size(); ++k) {
      w.start.push_back(r * s.T + ranges[k].first);
      w.len.push_back(ranges[k].second - ranges[k].first);
      w.k.push_back(int64_t(k));
      w.doc_first_window.push_back(first);
    }
  }
  return w;
}

/// Router of one routed depth as in LoLModelImpl::forward, forward + backward: router
/// inputs (window means, running means of the earlier windows), linear, softmax, the
/// selected window's probability. range(1) = 0: lol::router_inputs (one CPU node);
/// 1: lol::router_inputs_composed (the LibTorch formula it replaced).
void LoL_Router(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  const auto win = router_windows(s);
  auto x = torch::randn({s.B * s.T, c.d_model}).requires_grad_(true);
  auto e = torch::randn({c.d_model}).requires_grad_(true);
  auto w = torch::randn({c.library_size, c.d_model}).requires_grad_(true);
  auto bias = torch::zeros({c.library_size});
  const bool kernel = st.range(1) == 0;
  for (auto _ : st) {
    auto r = kernel ? lol::router_inputs(x, e, win) : lol::router_inputs_composed(x, e, win);
    auto probs = torch::softmax(torch::matmul(r, w.t()), -1);
    auto sel = (probs.detach() + bias).argmax(-1);
    probs.gather(1, sel.unsqueeze(1)).sum().backward();
    benchmark::DoNotOptimize(x.grad());
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * s.B * s.T);
  st.SetLabel(std::string(st.range(0) == 0 ? "tiny" : "small") + (kernel ? " kernel" : " composed"));
}

/// Token dispatch of one routed depth, forward + backward: gather the rows in a
/// scrambled (expert) order, then s + alpha (E(s) - s) back. range(1) = 0:
/// lol::gather_rows + lol::routed_residual; 1: index_select + index_add (what they replaced).
void LoL_Dispatch(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  const int64_t N = s.B * s.T, G = N / c.window;
  std::vector<int64_t> idx(static_cast<size_t>(N)), win(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) idx[size_t(i)] = (i * 7919) % N;  // a permutation (N is a power of 2)
  for (int64_t i = 0; i < N; ++i) win[size_t(i)] = i / c.window;
  auto it = torch::tensor(idx, torch::kInt64), wt = torch::tensor(win, torch::kInt64);
  auto x = torch::randn({N, c.d_model}).requires_grad_(true);
  auto alpha = torch::rand({G}).requires_grad_(true);
  auto w = torch::randn({N, c.d_model});
  const bool fused = st.range(1) == 0;
  for (auto _ : st) {
    auto xs = fused ? lol::gather_rows(x, idx) : x.index_select(0, it);
    auto delta = xs * 0.5;  // stands in for the experts
    auto out = fused ? lol::routed_residual(x, idx, win, alpha, delta)
                     : x.index_add(0, it, alpha.index_select(0, wt).unsqueeze(1) * delta);
    (out * w).sum().backward();
    benchmark::DoNotOptimize(x.grad());
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * N);
  st.SetLabel(std::string(st.range(0) == 0 ? "tiny" : "small") + (fused ? " dispatch ops" : " index ops"));
}

/// The expert computation of one routed depth, forward + backward, on the windows of
/// depth 2: range(1) = 0: LoL's grouped call, the rows split evenly over the library's L
/// experts (nn::grouped_block_delta, FiLM on); 1: one block on every row (the dense
/// strided-window reference's depth). The ratio is the routed core's per-depth overhead
/// in the experts themselves (router and dispatch excluded).
void LoL_RoutedDepth(benchmark::State& st) {
  const Shape s = shape(st.range(0));
  const auto& c = s.cfg;
  const int64_t N = s.B * s.T;
  auto L = window_layout(s, 2);
  const bool grouped = st.range(1) == 0;
  const int64_t G = grouped ? c.library_size : 1;
  std::vector<lol::nn::Block> blocks;
  std::vector<lol::nn::BlockImpl*> ptrs;
  for (int64_t e = 0; e < G; ++e) {
    blocks.emplace_back(lol::block_shape(c));
    ptrs.push_back(blocks.back().get());
  }
  lol::nn::FiLM film(c.d_model);
  lol::nn::RoPE rope(c.head_dim(), c.rope_theta);
  // Whole rows per expert, so that every window lies inside one expert's rows.
  std::vector<int64_t> sizes(size_t(G), (s.B / G) * s.T);
  sizes.back() += N - (s.B / G) * s.T * G;
  auto x = torch::randn({N, c.d_model}).requires_grad_(true);
  auto pos = torch::arange(N, torch::kInt64) % s.T;
  lol::nn::BlockContext ctx{&pos, &L, nullptr, &rope, grouped ? film.get() : nullptr};
  for (auto _ : st) {
    auto d = lol::nn::grouped_block_delta(ptrs, sizes, x, ctx);
    d.sum().backward();
    benchmark::DoNotOptimize(x.grad());
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * N);
  st.SetLabel(std::string(st.range(0) == 0 ? "tiny" : "small") +
              (grouped ? " grouped, " + std::to_string(G) + " experts" : " one block"));
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
BENCHMARK(LoL_Router)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_Dispatch)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_RoutedDepth)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_ExpertWeightGrad)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(LoL_ModelForward)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(LoL_ModelForwardBackward)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
