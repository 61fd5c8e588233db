// The grouped operators of one routed depth (all experts in one call per operator) and
// the token dispatch around them, against the per-expert / composed forms they replace:
// outputs and gradients of inputs and every parameter, in float64 and float32, with
// groups of uneven size (one of them empty), on 1 and 2 intra-op threads (the grouped
// GEMMs run groups concurrently on 2).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "core/task_parallel.h"
#include "lol/dispatch.h"
#include "lol/router_inputs.h"
#include "nn/block.h"
#include "nn/linear.h"
#include "nn/rmsnorm.h"
#include "nn/segments.h"
#include "util/error.h"
#include "model/op_test_util.h"

namespace {

using lol_test::expect_all_close;
using lol_test::max_abs_diff;

std::atomic<double> benchmark_sink_{0};  // keeps the tasks' products from being optimised away

double grouped_tolerance(torch::ScalarType t) { return t == torch::kFloat64 ? 1e-12 : 3e-5; }

torch::Tensor grad_or_zeros(const torch::Tensor& p) {
  return p.grad().defined() ? p.grad().clone() : torch::zeros_like(p);
}

void clear_grads(const std::vector<torch::Tensor>& ts) {
  for (auto t : ts) t.mutable_grad() = torch::Tensor();
}

/// Output, then the gradient of every tensor of `wrt` after backward of sum(out * w).
std::vector<torch::Tensor> out_and_grads(const torch::Tensor& out, const torch::Tensor& w,
                                         const std::vector<torch::Tensor>& wrt) {
  clear_grads(wrt);
  (out * w).sum().backward();
  std::vector<torch::Tensor> r{out.detach().clone()};
  for (const auto& t : wrt) r.push_back(grad_or_zeros(t));
  clear_grads(wrt);
  return r;
}

/// Runs f at 1 and at 2 intra-op threads, restoring the count.
template <typename F>
void at_one_and_two_threads(const F& f) {
  const int before = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    f(t);
  }
  at::set_num_threads(before);
}

class GroupedOps : public ::testing::TestWithParam<torch::ScalarType> {};

/// The GPU's code path on the CPU while in scope (as LOL_CPU_KERNELS=0).
struct CpuKernelsOff {
  const bool was = lol::cpu_kernels_enabled();
  CpuKernelsOff() { lol::set_cpu_kernels_enabled(false); }
  ~CpuKernelsOff() { lol::set_cpu_kernels_enabled(was); }
};

// Equal groups off the CPU kernels (a GPU) run as one batched product: equal to one
// product per group, with and without biases, and with one weight in two groups.
TEST_P(GroupedOps, GroupedLinearEqualGroupsAsOneBatchedProduct) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(38);
  const std::vector<int64_t> sizes{5, 5, 5};
  for (bool bias : {false, true}) {
    std::vector<torch::Tensor> ws, bs, params;
    for (int g = 0; g < 2; ++g) {
      ws.push_back(torch::randn({7, 6}, opt).requires_grad_(true));
      params.push_back(ws.back());
      if (bias) {
        bs.push_back(torch::randn({7}, opt).requires_grad_(true));
        params.push_back(bs.back());
      }
    }
    ws.insert(ws.begin() + 1, ws[0]);  // groups: weight 0, weight 0 again, weight 1
    if (bias) bs.insert(bs.begin() + 1, bs[0]);
    auto x = torch::randn({15, 6}, opt).requires_grad_(true);
    auto w = torch::randn({15, 7}, opt);
    std::vector<torch::Tensor> wrt{x};
    wrt.insert(wrt.end(), params.begin(), params.end());
    std::vector<torch::Tensor> parts;
    for (size_t g = 0; g < 3; ++g)
      parts.push_back(torch::nn::functional::linear(x.narrow(0, 5 * int64_t(g), 5), ws[g], bias ? bs[g] : torch::Tensor()));
    auto ref = out_and_grads(torch::cat(parts), w, wrt);
    CpuKernelsOff kernels_off;
    expect_all_close(out_and_grads(lol::nn::grouped_linear(x, ws, bs, sizes), w, wrt), ref, grouped_tolerance(dt),
                     bias ? "batched, bias" : "batched");
  }
}

// Two routed depths with the same experts share one stack per weight kind
// (nn::WeightStacks): outputs and gradients equal stacking per call; a list is stacked
// once per order and grad mode.
TEST_P(GroupedOps, SharedWeightStacksEqualStackingPerCall) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(39);
  const std::vector<int64_t> sizes{4, 4};
  std::vector<torch::Tensor> ws{torch::randn({6, 6}, opt).requires_grad_(true),
                                torch::randn({6, 6}, opt).requires_grad_(true)};
  std::vector<torch::Tensor> bs{torch::randn({6}, opt).requires_grad_(true), torch::randn({6}, opt).requires_grad_(true)};
  std::vector<torch::Tensor> ns{(1 + 0.1 * torch::randn({6}, opt)).requires_grad_(true),
                                (1 + 0.1 * torch::randn({6}, opt)).requires_grad_(true)};
  auto x = torch::randn({8, 6}, opt).requires_grad_(true);
  auto w = torch::randn({8, 6}, opt);
  std::vector<torch::Tensor> wrt{x, ws[0], ws[1], bs[0], bs[1], ns[0], ns[1]};
  CpuKernelsOff kernels_off;
  auto two_depths = [&](lol::nn::WeightStacks* stacks) {
    auto h = x;
    for (int depth = 0; depth < 2; ++depth) {
      auto n = lol::nn::rms_norm(h, ns, sizes, torch::Tensor(), torch::Tensor(), 1e-6, stacks);
      h = h + lol::nn::grouped_linear(n, ws, bs, sizes, stacks);
    }
    return h;
  };
  auto ref = out_and_grads(two_depths(nullptr), w, wrt);
  lol::nn::WeightStacks stacks;
  expect_all_close(out_and_grads(two_depths(&stacks), w, wrt), ref, grouped_tolerance(dt), "shared stacks");
  EXPECT_EQ(stacks.size(), 3u);  // weights, biases, norms: once each for both depths
  EXPECT_TRUE(stacks.stack(ws).is_same(stacks.stack(ws)));
  EXPECT_FALSE(stacks.stack({ws[1], ws[0]}).is_same(stacks.stack(ws)));  // another order
  EXPECT_EQ(stacks.size(), 4u);
  torch::NoGradGuard no_grad;  // a stack made with grad mode on is not reused without it
  EXPECT_FALSE(stacks.stack(ws).requires_grad());
  EXPECT_EQ(stacks.size(), 5u);
}

TEST_P(GroupedOps, GroupedLinearEqualsOneLinearPerGroup) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(31);
  const std::vector<int64_t> sizes{5, 0, 9, 3};
  for (bool bias : {false, true}) {
    std::vector<torch::nn::Linear> layers;
    std::vector<torch::Tensor> params;
    for (size_t g = 0; g < sizes.size(); ++g) {
      layers.emplace_back(torch::nn::LinearOptions(6, 7).bias(bias));
      layers.back()->to(dt);
      for (auto& p : layers.back()->parameters()) params.push_back(p);
    }
    std::vector<const torch::nn::LinearImpl*> ptrs;
    for (auto& l : layers) ptrs.push_back(l.get());
    auto x = torch::randn({17, 6}, opt).requires_grad_(true);
    auto w = torch::randn({17, 7}, opt);
    std::vector<torch::Tensor> wrt{x};
    wrt.insert(wrt.end(), params.begin(), params.end());
    std::vector<torch::Tensor> parts;
    int64_t off = 0;
    for (size_t g = 0; g < sizes.size(); ++g) {
      parts.push_back(layers[g]->forward(x.narrow(0, off, sizes[g])));
      off += sizes[g];
    }
    auto ref = out_and_grads(torch::cat(parts), w, wrt);
    at_one_and_two_threads([&](int t) {
      auto got = out_and_grads(lol::nn::grouped_linear(x, ptrs, sizes), w, wrt);
      expect_all_close(got, ref, grouped_tolerance(dt), "bias " + std::to_string(bias) + ", threads " + std::to_string(t));
    });
    // The same weight in two groups (the serial path): its gradient sums both.
    std::vector<torch::Tensor> ws{layers[0]->weight, layers[2]->weight, layers[0]->weight, layers[3]->weight};
    std::vector<torch::Tensor> bs;
    if (bias) bs = {layers[0]->bias, layers[2]->bias, layers[0]->bias, layers[3]->bias};
    std::vector<torch::Tensor> parts2;
    off = 0;
    for (size_t g = 0; g < sizes.size(); ++g) {
      parts2.push_back(torch::nn::functional::linear(x.narrow(0, off, sizes[g]), ws[g], bias ? bs[g] : torch::Tensor()));
      off += sizes[g];
    }
    auto ref2 = out_and_grads(torch::cat(parts2), w, wrt);
    at_one_and_two_threads([&](int) {
      expect_all_close(out_and_grads(lol::nn::grouped_linear(x, ws, bs, sizes), w, wrt), ref2, grouped_tolerance(dt),
                       "repeated weight");
    });
  }
}

TEST_P(GroupedOps, GroupedLinearSecondOrderGradients) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(32);
  auto w0 = torch::randn({4, 3}, opt).requires_grad_(true), w1 = torch::randn({4, 3}, opt).requires_grad_(true);
  auto x = torch::randn({7, 3}, opt).requires_grad_(true);
  auto second = [&](bool grouped) {
    clear_grads({w0, w1});
    auto y = grouped ? lol::nn::grouped_linear(x, {w0, w1}, {}, {3, 4})
                     : torch::cat({x.narrow(0, 0, 3).matmul(w0.t()), x.narrow(0, 3, 4).matmul(w1.t())});
    auto g = torch::autograd::grad({torch::tanh(y).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    g.pow(2).sum().backward();
    return std::vector<torch::Tensor>{w0.grad().clone(), w1.grad().clone()};
  };
  at_one_and_two_threads([&](int) { expect_all_close(second(true), second(false), grouped_tolerance(dt), "create_graph"); });
}

TEST_P(GroupedOps, GroupedRMSNormWithFiLMEqualsOneNormPerGroup) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(33);
  const std::vector<int64_t> sizes{4, 300, 0, 7};  // 300 rows: several backward chunks
  const int64_t N = 311, d = 24;
  std::vector<torch::Tensor> weights;
  for (size_t g = 0; g < sizes.size(); ++g) weights.push_back(torch::randn({d}, opt).requires_grad_(true));
  auto gamma = torch::randn({d}, opt).requires_grad_(true), beta = torch::randn({d}, opt).requires_grad_(true);
  auto x = torch::randn({N, d}, opt).requires_grad_(true);
  auto w = torch::randn({N, d}, opt);
  std::vector<torch::Tensor> wrt{x, gamma, beta};
  wrt.insert(wrt.end(), weights.begin(), weights.end());
  for (int film = 0; film < 2; ++film) {
    const auto scale = film ? gamma : torch::Tensor(), shift = film ? beta : torch::Tensor();
    std::vector<torch::Tensor> parts;
    int64_t off = 0;
    for (size_t g = 0; g < sizes.size(); ++g) {
      auto xg = x.narrow(0, off, sizes[g]);
      auto y = weights[g] * (xg * torch::rsqrt(xg.pow(2).mean(-1, true) + 1e-6));
      parts.push_back(film ? gamma * y + beta : y);
      off += sizes[g];
    }
    auto ref = out_and_grads(torch::cat(parts), w, wrt);
    at_one_and_two_threads([&](int t) {
      auto got = out_and_grads(lol::nn::rms_norm(x, weights, sizes, scale, shift, 1e-6), w, wrt);
      expect_all_close(got, ref, grouped_tolerance(dt), "film " + std::to_string(film) + ", threads " + std::to_string(t));
    });
  }
  EXPECT_THROW(lol::nn::rms_norm(x, weights, {4, 300, 0, 6}, {}, {}, 1e-6), lol::InputError);
  EXPECT_THROW(lol::nn::rms_norm(x, weights, {311}, {}, {}, 1e-6), lol::InputError);
}

// Other devices and dtypes take the composed formula (one weight row per input row): in
// bfloat16 on the CPU it matches the float32 kernel to bfloat16 precision.
TEST(GroupedOpsComposed, GroupedRMSNormComposedPathMatchesKernel) {
  torch::manual_seed(37);
  const std::vector<int64_t> sizes{3, 0, 5, 4};
  std::vector<torch::Tensor> w32, w16;
  for (size_t g = 0; g < sizes.size(); ++g) {
    w32.push_back(torch::randn({8}));
    w16.push_back(w32.back().to(torch::kBFloat16));
  }
  auto x = torch::randn({12, 8}), gamma = torch::randn({8}), beta = torch::randn({8});
  auto want = lol::nn::rms_norm(x, w32, sizes, gamma, beta, 1e-6);
  auto got = lol::nn::rms_norm(x.to(torch::kBFloat16), w16, sizes, gamma.to(torch::kBFloat16),
                               beta.to(torch::kBFloat16), 1e-6);
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_LT(max_abs_diff(got, want), 0.05 * (want.abs().max().item<double>() + 1.0));
}

// One routed depth's experts in one call per operator equal each expert's own block on
// its rows, with the windows (attention segments) inside each expert's rows.
TEST_P(GroupedOps, GroupedBlockDeltaEqualsEachExpertsBlock) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(34);
  lol::nn::BlockShape shape;
  shape.attn = {16, 4, 2, 4, /*qkv_bias=*/true};
  shape.ffn_hidden = 20;
  std::vector<lol::nn::Block> blocks;
  std::vector<torch::Tensor> params;
  for (int e = 0; e < 3; ++e) {
    blocks.emplace_back(shape);
    blocks.back()->to(dt);
    torch::NoGradGuard ng;
    for (auto& p : blocks.back()->parameters()) {
      if (p.dim() == 1) p.add_(0.3 * torch::randn_like(p));  // norm weights and biases away from 1 / 0
      params.push_back(p);
    }
  }
  lol::nn::FiLM film(16);
  film->to(dt);
  {
    torch::NoGradGuard ng;
    for (auto& p : film->parameters()) p.add_(0.2 * torch::randn_like(p));
  }
  for (auto& p : film->parameters()) params.push_back(p);
  const int64_t N = 23;
  lol::nn::RoPE rope(4, 10000.0);
  auto pos = torch::randint(0, 30, {N}, torch::kInt64);
  auto visible = torch::rand({N}) > 0.2;
  auto x = torch::randn({N, 16}, opt).requires_grad_(true);
  auto w = torch::randn({N, 16}, opt);
  std::vector<torch::Tensor> wrt{x};
  wrt.insert(wrt.end(), params.begin(), params.end());
  // Groups of 9, 0 and 14 rows (windows of 4 + 5 and 6 + 3 + 5 rows), then of 20, 1 and 2.
  // Off the CPU kernels (the GPU's path) the first runs as 3 padded groups of 14 rows, the
  // second (3 x 20 rows would be more than twice the 23) one expert at a time.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<std::vector<int64_t>>>> configs{
      {{9, 0, 14}, {{4, 5}, {}, {6, 3, 5}}}, {{20, 1, 2}, {{6, 8, 6}, {1}, {2}}}};
  for (const auto& config : configs) {
  const std::vector<int64_t>& sizes = config.first;
  const std::vector<std::vector<int64_t>>& windows = config.second;
  // Reference: each block on its own rows with its own layout.
  std::vector<torch::Tensor> parts;
  std::vector<int64_t> all_rows(N), all_offsets{0};
  for (int64_t i = 0; i < N; ++i) all_rows[size_t(i)] = i;
  int64_t off = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] == 0) continue;
    std::vector<int64_t> rows(static_cast<size_t>(sizes[g])), offs{0};
    for (int64_t i = 0; i < sizes[g]; ++i) rows[size_t(i)] = i;
    for (auto len : windows[g]) {
      offs.push_back(offs.back() + len);
      all_offsets.push_back(all_offsets.back() + len);
    }
    auto layout = lol::nn::SegmentLayout::from_csr(rows, offs, sizes[g], torch::kCPU);
    auto pg = pos.narrow(0, off, sizes[g]), vg = visible.narrow(0, off, sizes[g]);
    lol::nn::BlockContext ctx{&pg, &layout, &vg, &rope, film.get()};
    parts.push_back(blocks[g]->delta(x.narrow(0, off, sizes[g]), ctx));
    off += sizes[g];
  }
  auto ref = out_and_grads(torch::cat(parts), w, wrt);
  auto layout = lol::nn::SegmentLayout::from_csr(all_rows, all_offsets, N, torch::kCPU);
  lol::nn::BlockContext ctx{&pos, &layout, &visible, &rope, film.get()};
  std::vector<lol::nn::BlockImpl*> ptrs;
  for (auto& b : blocks) ptrs.push_back(b.get());
  const std::string what = "groups of " + std::to_string(sizes[0]) + ", " + std::to_string(sizes[1]) + ", " +
                           std::to_string(sizes[2]);
  at_one_and_two_threads([&](int t) {
    auto got = out_and_grads(lol::nn::grouped_block_delta(ptrs, sizes, x, ctx), w, wrt);
    expect_all_close(got, ref, 10 * grouped_tolerance(dt), what + ", threads " + std::to_string(t));
  });
  CpuKernelsOff kernels_off;
  auto got = out_and_grads(lol::nn::grouped_block_delta(ptrs, sizes, x, ctx), w, wrt);
  expect_all_close(got, ref, 10 * grouped_tolerance(dt), what + ", the GPU's path");
  }
}

/// Windows over 40 rows: a document of 3 windows in rows 0..12, one of 1 window (rows
/// 20..22), one of 4 windows (rows 25..38); rows 13..19, 23, 24 and 39 are padding.
lol::RouterWindows test_windows() {
  lol::RouterWindows w;
  w.start = {0, 5, 9, 20, 25, 27, 31, 36};
  w.len = {5, 4, 4, 3, 2, 4, 5, 3};
  w.k = {0, 1, 2, 0, 0, 1, 2, 3};
  w.doc_first_window = {0, 0, 0, 3, 4, 4, 4, 4};
  return w;
}

TEST_P(GroupedOps, RouterInputsKernelEqualsComposedFormula) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(35);
  const auto win = test_windows();
  auto s = torch::randn({40, 12}, opt).requires_grad_(true);
  auto e = torch::randn({12}, opt).requires_grad_(true);
  auto w = torch::randn({8, 12}, opt);
  auto ref = out_and_grads(lol::router_inputs_composed(s, e, win), w, {s, e});
  at_one_and_two_threads([&](int) {
    expect_all_close(out_and_grads(lol::router_inputs(s, e, win), w, {s, e}), ref, grouped_tolerance(dt), "router inputs");
  });
  // The formula itself, for window 2 (k = 2) and window 0 of the last document.
  auto r = lol::router_inputs(s, e, win).detach();
  auto mu0 = s.narrow(0, 0, 5).mean(0), mu1 = s.narrow(0, 5, 4).mean(0);
  EXPECT_LT(max_abs_diff(r[2], (mu0 + mu1) / 2), grouped_tolerance(dt));
  EXPECT_LT(max_abs_diff(r[4], 0.5 * (e + s[25])), grouped_tolerance(dt));

  auto bad = win;
  bad.k[1] = 2;  // the document's windows must be numbered 0, 1, 2, ...
  EXPECT_THROW(lol::router_inputs(s, e, bad), lol::InputError);
  bad = win;
  bad.len[7] = 5;  // past the last row
  EXPECT_THROW(lol::router_inputs(s, e, bad), lol::InputError);
}

TEST_P(GroupedOps, DispatchEqualsIndexOperations) {
  const auto dt = GetParam();
  const auto opt = torch::TensorOptions(dt);
  torch::manual_seed(36);
  for (bool padded : {false, true}) {
    const int64_t rows = 12;
    std::vector<int64_t> idx{7, 2, 3, 11, 0, 5, 6, 1, 4, 8, 9, 10}, win{2, 0, 0, 3, 1, 1, 2, 0, 1, 2, 3, 3};
    if (padded) {  // rows 8, 9 and 10 are not dispatched
      idx.resize(9);
      win.resize(9);
    }
    const int64_t n = int64_t(idx.size());
    auto s = torch::randn({rows, 6}, opt).requires_grad_(true);
    auto alpha = torch::rand({4}, opt).requires_grad_(true);
    auto delta = torch::randn({n, 6}, opt).requires_grad_(true);
    auto w = torch::randn({rows, 6}, opt), wg = torch::randn({n, 6}, opt);
    auto it = torch::tensor(idx, torch::kInt64), wt = torch::tensor(win, torch::kInt64);
    auto ref = out_and_grads(s.index_add(0, it, alpha.index_select(0, wt).unsqueeze(1) * delta), w, {s, alpha, delta});
    auto ref_gather = out_and_grads(s.index_select(0, it), wg, {s});
    at_one_and_two_threads([&](int) {
      auto got = out_and_grads(lol::routed_residual(s, idx, win, alpha, delta), w, {s, alpha, delta});
      expect_all_close(got, ref, grouped_tolerance(dt), padded ? "residual, padded" : "residual");
      expect_all_close(out_and_grads(lol::gather_rows(s, idx), wg, {s}), ref_gather, grouped_tolerance(dt),
                       padded ? "gather, padded" : "gather");
    });
    // The GPU's path (index operations on device index tensors the caller uploaded), run
    // on the CPU with the fused kernels off.
    std::vector<torch::Tensor> got, got_gather;
    {
      CpuKernelsOff kernels_off;
      got = out_and_grads(lol::routed_residual(s, idx, win, alpha, delta, it, wt), w, {s, alpha, delta});
      got_gather = out_and_grads(lol::gather_rows(s, idx, it), wg, {s});
    }
    expect_all_close(got, ref, grouped_tolerance(dt), "residual, device indices");
    expect_all_close(got_gather, ref_gather, grouped_tolerance(dt), "gather, device indices");
    EXPECT_THROW(lol::gather_rows(s, idx, it.narrow(0, 0, n - 1)), lol::InputError);
    EXPECT_THROW(lol::routed_residual(s, idx, win, alpha, delta, it, wt.narrow(0, 0, n - 1)), lol::InputError);
  }
  auto s = torch::randn({4, 3}, opt);
  EXPECT_THROW(lol::gather_rows(s, {0, 2, 0}), lol::InputError);
  EXPECT_THROW(lol::gather_rows(s, {4}), lol::InputError);
  EXPECT_THROW(lol::routed_residual(s, {1}, {2}, torch::ones({2}, opt), torch::ones({1, 3}, opt)), lol::InputError);
}

// lol::run_tasks (the grouped GEMMs' and the optimizer's scheduler): every task with a
// positive cost runs exactly once, on 1 and 2 threads, serially or not; an exception in a
// task reaches the caller and OpenBLAS's thread count is restored.
TEST(RunTasks, EveryTaskOnceExceptionsPropagateBlasThreadsRestored) {
  const std::vector<int64_t> costs{5, 0, 3, 9, 1, 0, 7, 2, 2};
  EXPECT_EQ(lol::longest_first(costs), (std::vector<int64_t>{3, 6, 0, 2, 7, 8, 4}));
  const int blas_before = lol::blas_threads();
  at_one_and_two_threads([&](int t) {
    for (bool concurrent : {false, true}) {
      std::vector<std::atomic<int>> runs(costs.size());
      lol::run_tasks(costs, concurrent, [&](int64_t i) {
        runs[size_t(i)]++;
        // GEMMs inside tasks, as the grouped linear runs them.
        auto a = torch::randn({64, 64});
        benchmark_sink_ = at::mm(a, a).sum().item<double>();
      });
      for (size_t i = 0; i < costs.size(); ++i)
        EXPECT_EQ(runs[i].load(), costs[i] > 0 ? 1 : 0) << "task " << i << ", threads " << t;
      EXPECT_THROW(lol::run_tasks(costs, concurrent,
                                  [&](int64_t i) {
                                    if (i == 6) throw lol::InputError("task 6");
                                  }),
                   std::exception);
      EXPECT_EQ(lol::blas_threads(), blas_before);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GroupedOps, ::testing::Values(torch::kFloat64, torch::kFloat32),
                         [](const auto& info) { return info.param == torch::kFloat64 ? "f64" : "f32"; });

}  // namespace
