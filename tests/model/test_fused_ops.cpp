// The CPU kernels behind nn::Attention (segment attention), nn::RMSNorm, nn::RoPE and
// nn::MLP (SwiGLU) against the composed LibTorch formulas they replace: outputs and
// gradients (inputs and parameters) in float64 and float32, on segment layouts with
// uneven lengths, rows in no segment, grouped kv heads and hidden keys (including a
// query with no visible key).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/index_tensor.h"
#include "core/runtime.h"
#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"
#include "nn/segments.h"
#include "nn/vec_math.h"
#include "model/op_test_util.h"

namespace {

using lol_test::expect_all_close;
using lol_test::max_abs_diff;

using lol::nn::SegmentLayout;

double fused_tolerance(torch::ScalarType t) { return t == torch::kFloat64 ? 1e-12 : 2e-5; }

/// Segments over 23 rows: lengths 5, 1, 7 and 6 in scrambled row order; rows 3, 11, 20
/// and 22 are in no segment.
SegmentLayout test_layout() {
  std::vector<std::vector<int64_t>> segs{{0, 1, 2, 4, 5}, {6}, {7, 8, 9, 10, 12, 13, 14}, {21, 19, 18, 17, 16, 15}};
  return SegmentLayout::build(segs, 23, torch::kCPU);
}

/// Segments longer than the kernel's register tiles (4 queries, 16 keys): over 70 rows,
/// lengths 37 (rows 0..36, every third one moved to the end), 21 (rows 38..58 reversed),
/// 3 and 1; rows 37, 59, 60, 61, 65 and 69 are in no segment.
SegmentLayout long_layout() {
  std::vector<int64_t> a, b;
  for (int64_t r = 0; r < 37; ++r)
    if (r % 3 != 0) a.push_back(r);
  for (int64_t r = 0; r < 37; r += 3) a.push_back(r);
  for (int64_t r = 58; r >= 38; --r) b.push_back(r);
  std::vector<std::vector<int64_t>> segs{a, b, {62, 63, 64}, {66}};
  return SegmentLayout::build(segs, 70, torch::kCPU);
}

/// Attention with the composed path: projections, padded segments, masked_attention.
torch::Tensor composed_attention(lol::nn::AttentionImpl& a, const torch::Tensor& x, const torch::Tensor& pos,
                                 const SegmentLayout& L, const torch::Tensor& visible, lol::nn::RoPE& rope) {
  torch::Tensor q, k, v;
  a.project(x, pos, rope, q, k, v);
  auto qp = L.to_padded(q).permute({0, 2, 1, 3}).contiguous();
  auto kp = L.to_padded(k).permute({0, 2, 1, 3}).contiguous();
  auto vp = L.to_padded(v).permute({0, 2, 1, 3}).contiguous();
  torch::Tensor vis;
  if (visible.defined()) vis = L.to_padded(visible.to(torch::kUInt8)).to(torch::kBool);
  auto o = lol::nn::masked_attention(qp, kp, vp, lol::nn::segment_causal_mask(L.slot_valid, vis));
  auto flat = L.from_padded(o.permute({0, 2, 1, 3}).contiguous());
  return a.o_proj(flat.view({x.size(0), -1}));
}

/// Output and gradients of x and every parameter after backward of sum(out * w).
std::vector<torch::Tensor> out_and_grads(torch::nn::Module& m, const torch::Tensor& x, const torch::Tensor& out,
                                         const torch::Tensor& w) {
  for (auto& p : m.parameters()) p.mutable_grad() = torch::Tensor();
  (out * w).sum().backward();
  std::vector<torch::Tensor> r{out.detach().clone(), x.grad().clone()};
  for (auto& p : m.parameters()) r.push_back(p.grad().clone());
  x.mutable_grad() = torch::Tensor();
  return r;
}

class FusedOps : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(FusedOps, SegmentAttentionEqualsPaddedMaskedAttention) {
  const auto dt = GetParam();
  torch::manual_seed(3);
  // Head dims 8 (the kernel's runtime-head_dim loops) and 32 (a specialised one); short
  // segments and segments longer than the register tiles.
  for (bool long_segments : {false, true}) {
    const auto L = long_segments ? long_layout() : test_layout();
    const int64_t N = L.n_tokens;
    // Hidden keys; the first row of each list opens a segment: its query sees no key.
    const std::vector<int64_t> hidden = long_segments ? std::vector<int64_t>{1, 5, 9, 30, 33, 58, 57, 62, 36}
                                                      : std::vector<int64_t>{0, 5, 9, 10, 21, 16};
    for (int64_t hd : {8, 32}) {
      for (int64_t kv_heads : {4, 2, 1}) {
        for (bool hide : {false, true}) {
          lol::nn::AttentionShape s{16, 4, kv_heads, hd, /*qkv_bias=*/kv_heads == 2};
          lol::nn::Attention attn(s);
          attn->to(dt);
          lol::nn::RoPE rope(hd, 10000.0);
          auto x = torch::randn({N, 16}, torch::TensorOptions(dt)).requires_grad_(true);
          auto pos = torch::randint(0, 40, {N}, torch::kInt64);
          torch::Tensor visible;
          if (hide) {
            visible = torch::ones({N}, torch::kBool);
            for (int64_t r : hidden) visible[r] = false;
          }
          auto w = torch::randn({N, 16}, torch::TensorOptions(dt));
          auto direct = out_and_grads(*attn, x, attn->forward(x, pos, L, visible, rope), w);
          auto composed = out_and_grads(*attn, x, composed_attention(*attn, x, pos, L, visible, rope), w);
          const std::string what = std::string(long_segments ? "long" : "short") + " segments, head_dim " +
                                   std::to_string(hd) + ", kv heads " + std::to_string(kv_heads) +
                                   (hide ? ", hidden keys" : "");
          expect_all_close(direct, composed, fused_tolerance(dt), what);
          if (hide) {  // the query without a visible key gives exactly o_proj(0)
            auto zero_row = attn->o_proj(torch::zeros({1, 4 * hd}, torch::TensorOptions(dt)));
            EXPECT_EQ(max_abs_diff(direct[0][hidden[0]], zero_row[0]), 0.0) << what;
          }
        }
      }
    }
  }
}

TEST_P(FusedOps, RMSNormEqualsFormula) {
  const auto dt = GetParam();
  torch::manual_seed(4);
  lol::nn::RMSNorm norm(24, 1e-6);
  norm->to(dt);
  {
    torch::NoGradGuard ng;
    norm->weight.copy_(torch::randn({24}, torch::TensorOptions(dt)));
  }
  auto x = torch::randn({3, 5, 24}, torch::TensorOptions(dt)).requires_grad_(true);
  auto w = torch::randn({3, 5, 24}, torch::TensorOptions(dt));
  auto fused = out_and_grads(*norm, x, norm->forward(x), w);
  auto formula = norm->weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6));
  auto ref = out_and_grads(*norm, x, formula, w);
  expect_all_close(fused, ref, fused_tolerance(dt), "rmsnorm");
}

// FiLM inside the norm (paper Appendix A): scale * RMSNorm(x) + shift in one node, with
// gradients for x, the norm weight, the scale and the shift.
TEST_P(FusedOps, RMSNormWithFiLMEqualsFormula) {
  const auto dt = GetParam();
  torch::manual_seed(14);
  const auto opt = torch::TensorOptions(dt);
  lol::nn::RMSNorm norm(24, 1e-6);
  norm->to(dt);
  {
    torch::NoGradGuard ng;
    norm->weight.copy_(torch::randn({24}, opt));
  }
  auto gamma = torch::randn({24}, opt).requires_grad_(true);
  auto beta = torch::randn({24}, opt).requires_grad_(true);
  auto x = torch::randn({3, 5, 24}, opt).requires_grad_(true);
  auto w = torch::randn({3, 5, 24}, opt);
  auto run = [&](const torch::Tensor& out) {
    for (auto* t : {&x, &gamma, &beta, &norm->weight}) t->mutable_grad() = torch::Tensor();
    (out * w).sum().backward();
    auto copy = [](const torch::Tensor& g) { return g.defined() ? g.clone() : g; };
    return std::vector<torch::Tensor>{out.detach().clone(), x.grad().clone(), norm->weight.grad().clone(),
                                      copy(gamma.grad()), copy(beta.grad())};
  };
  auto fused = run(norm->modulated(x, gamma, beta));
  auto formula = gamma * (norm->weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6))) + beta;
  expect_all_close(fused, run(formula), fused_tolerance(dt), "rmsnorm + FiLM");
  // Scale only and shift only.
  auto only_scale = run(norm->modulated(x, gamma, torch::Tensor()));
  EXPECT_LT(max_abs_diff(only_scale[0], formula - beta), fused_tolerance(dt));
  EXPECT_FALSE(beta.grad().defined());
  auto only_shift = run(norm->modulated(x, torch::Tensor(), beta));
  EXPECT_LT(max_abs_diff(only_shift[0], norm->forward(x) + beta), fused_tolerance(dt));
  EXPECT_FALSE(gamma.grad().defined());
}

// nn::linear accumulates the weight gradient of every use into weight.grad itself (one
// GEMM with beta = 1 per use): the same gradients as autograd's own sum, across uses in
// one graph, across backward calls, for frozen weights, under autograd::grad (which must
// not touch .grad) and with create_graph (second-order gradients).
TEST_P(FusedOps, LinearAccumulatesWeightGradientsOfEveryUse) {
  const auto dt = GetParam();
  torch::manual_seed(15);
  const auto opt = torch::TensorOptions(dt);
  torch::nn::Linear lin(torch::nn::LinearOptions(6, 6).bias(true));
  lin->to(dt);
  auto x1 = torch::randn({4, 3, 6}, opt).requires_grad_(true);
  auto x2 = torch::randn({5, 6}, opt).requires_grad_(true);
  auto w1 = torch::randn({4, 3, 6}, opt), w2 = torch::randn({5, 6}, opt);
  // Three uses of the same weight, one of them on the output of another.
  auto loss_of = [&](bool fused) {
    auto f = [&](const torch::Tensor& x) { return fused ? lol::nn::linear(x, lin) : lin->forward(x); };
    return (f(torch::tanh(f(x1))) * w1).sum() + (f(x2) * w2).sum();
  };
  auto grads = [&]() {
    return std::vector<torch::Tensor>{x1.grad().clone(), x2.grad().clone(), lin->weight.grad().clone(),
                                      lin->bias.grad().clone()};
  };
  auto clear = [&]() {
    for (auto* t : {&x1, &x2, &lin->weight, &lin->bias}) t->mutable_grad() = torch::Tensor();
  };
  clear();
  auto out_fused = lol::nn::linear(x1, lin);
  EXPECT_LT(max_abs_diff(out_fused, lin->forward(x1)), fused_tolerance(dt));
  loss_of(false).backward();
  auto ref = grads();
  clear();
  loss_of(true).backward();
  expect_all_close(grads(), ref, fused_tolerance(dt), "one backward");
  // A second backward adds to the existing gradients (gradient accumulation).
  loss_of(true).backward();
  std::vector<torch::Tensor> twice;
  for (const auto& g : ref) twice.push_back(2 * g);
  expect_all_close(grads(), twice, 2 * fused_tolerance(dt), "two backward calls");

  // autograd::grad returns the input gradient and leaves every .grad alone.
  clear();
  auto gx = torch::autograd::grad({loss_of(true)}, {x2})[0];
  EXPECT_LT(max_abs_diff(gx, ref[1]), fused_tolerance(dt));
  EXPECT_FALSE(lin->weight.grad().defined());
  EXPECT_FALSE(lin->bias.grad().defined());

  // create_graph: d/dW of |dL/dx2|^2 through the returned (not accumulated) gradient.
  auto second = [&](bool fused) {
    clear();
    auto g = torch::autograd::grad({loss_of(fused)}, {x2}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    g.pow(2).sum().backward();
    return lin->weight.grad().clone();
  };
  EXPECT_LT(max_abs_diff(second(true), second(false)), fused_tolerance(dt));

  // A frozen weight gets no gradient; the inputs still do.
  clear();
  lin->weight.requires_grad_(false);
  lin->bias.requires_grad_(false);
  loss_of(true).backward();
  EXPECT_FALSE(lin->weight.grad().defined());
  EXPECT_LT(max_abs_diff(x2.grad(), ref[1]), fused_tolerance(dt));
}

TEST_P(FusedOps, RoPEEqualsRotateHalfFormula) {
  const auto dt = GetParam();
  torch::manual_seed(5);
  const int64_t hd = 12;
  lol::nn::RoPE rope(hd, 500.0);
  auto x = torch::randn({9, 3, hd}, torch::TensorOptions(dt)).requires_grad_(true);
  auto pos = torch::tensor({0, 1, 2, 7, 300, 5, 5, 1000, 3}, torch::kInt64);
  auto w = torch::randn({9, 3, hd}, torch::TensorOptions(dt));
  auto out = rope.apply(x, pos);
  (out * w).sum().backward();
  auto g = x.grad().clone();
  x.mutable_grad() = torch::Tensor();
  // HF: inv_freq_j = theta^(-2j/hd) and the angles in float32.
  auto inv = 1.0 / torch::pow(torch::tensor(500.0f), torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd));
  auto ang = torch::outer(pos.to(torch::kFloat32), inv);
  auto c = torch::cat({ang.cos(), ang.cos()}, -1).to(dt).unsqueeze(1);
  auto s = torch::cat({ang.sin(), ang.sin()}, -1).to(dt).unsqueeze(1);
  auto halves = x.chunk(2, -1);
  auto rot = torch::cat({-halves[1], halves[0]}, -1);
  auto ref = x * c + rot * s;
  (ref * w).sum().backward();
  EXPECT_LT(max_abs_diff(out, ref), fused_tolerance(dt));
  EXPECT_LT(max_abs_diff(g, x.grad()), fused_tolerance(dt));
  // A position bound only spares a GPU the read of max(pos): the CPU kernel always reads
  // the positions, so a bound below them (a caller's bug) still rotates correctly here.
  torch::NoGradGuard ng;
  EXPECT_LT(max_abs_diff(rope.apply(x, pos, 1001), out), fused_tolerance(dt));
  EXPECT_LT(max_abs_diff(lol::nn::RoPE(hd, 500.0).apply(x, pos, 2), out), fused_tolerance(dt));
  // The composed path (a GPU's) sizes its tables from a bound that holds and rotates as the
  // kernel does; a bound that does not hold fails in its checked index_select on the CPU.
  const bool kernels = lol::cpu_kernels_enabled();
  lol::set_cpu_kernels_enabled(false);
  auto composed = lol::nn::RoPE(hd, 500.0).apply(x, pos, 1001);
  bool threw = false;
  try {
    lol::nn::RoPE(hd, 500.0).apply(x, pos, 2);
  } catch (const c10::Error&) {
    threw = true;
  }
  lol::set_cpu_kernels_enabled(kernels);
  EXPECT_LT(max_abs_diff(composed, out), fused_tolerance(dt));
  EXPECT_TRUE(threw) << "positions up to 1000 in a table sized for 2";
}

// The composed path (a GPU's: one gather, x C + roll(x) S, and the transpose in the
// backward) computes HF's formula x cos + rotate_half(x) sin bit for bit, forward and
// gradient: the signed table only moves exact negations.
TEST_P(FusedOps, ComposedRoPEIsHfFormulaBitForBit) {
  const auto dt = GetParam();
  torch::manual_seed(6);
  const int64_t hd = 16;
  auto x = torch::randn({7, 3, hd}, torch::TensorOptions(dt)).requires_grad_(true);
  auto pos = torch::tensor({0, 1, 5, 5, 200, 3, 77}, torch::kInt64);
  auto w = torch::randn({7, 3, hd}, torch::TensorOptions(dt));
  const bool kernels = lol::cpu_kernels_enabled();
  lol::set_cpu_kernels_enabled(false);
  auto out = lol::nn::RoPE(hd, 10000.0).apply(x, pos);
  lol::set_cpu_kernels_enabled(kernels);
  (out * w).sum().backward();
  auto g = x.grad().clone();
  x.mutable_grad() = torch::Tensor();
  auto [c0, s0] = lol::nn::rope_tables(hd, 10000.0, {}, 256);
  auto c = torch::cat({c0, c0}, -1).index_select(0, pos).to(dt).unsqueeze(1);
  auto s = torch::cat({s0, s0}, -1).index_select(0, pos).to(dt).unsqueeze(1);
  auto halves = x.chunk(2, -1);
  auto ref = x * c + torch::cat({-halves[1], halves[0]}, -1) * s;
  (ref * w).sum().backward();
  EXPECT_TRUE(out.equal(ref)) << max_abs_diff(out, ref);
  EXPECT_TRUE(g.equal(x.grad())) << max_abs_diff(g, x.grad());
  // The fused CPU kernel reads the same table's halves.
  torch::NoGradGuard ng;
  EXPECT_LT(max_abs_diff(lol::nn::RoPE(hd, 10000.0).apply(x, pos), ref), fused_tolerance(dt));
}

// The layout's gather and scatter tables share one buffer (one upload to a GPU) and the
// valid slots are derived from the gather table.
TEST(SegmentLayout, TablesMatchTheSegments) {
  const auto L = test_layout();
  ASSERT_EQ(L.n_seg, 4);
  ASSERT_EQ(L.max_len, 7);
  ASSERT_EQ(L.gather.numel(), 28);
  ASSERT_EQ(L.scatter.numel(), 23);
  const std::vector<std::vector<int64_t>> segs{{0, 1, 2, 4, 5}, {6}, {7, 8, 9, 10, 12, 13, 14}, {21, 19, 18, 17, 16, 15}};
  std::vector<int64_t> slot_of(23, 28);
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t j = 0; j < 7; ++j) {
      const int64_t slot = s * 7 + j;
      const bool valid = j < int64_t(segs[size_t(s)].size());
      EXPECT_EQ(L.slot_valid[s][j].item<bool>(), valid) << "slot " << slot;
      EXPECT_EQ(L.gather[slot].item<int64_t>(), valid ? segs[size_t(s)][size_t(j)] : 23) << "slot " << slot;
      if (valid) slot_of[size_t(segs[size_t(s)][size_t(j)])] = slot;
    }
  for (int64_t r = 0; r < 23; ++r) EXPECT_EQ(L.scatter[r].item<int64_t>(), slot_of[size_t(r)]) << "row " << r;
}

TEST(IndexTensors, OneUploadSplitIntoTheLists) {
  const std::vector<int64_t> a{3, 1, 4}, empty, b{1, 5, 9, 2};
  const auto t = lol::index_tensors({&a, &empty, &b}, torch::kCPU);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_TRUE(torch::equal(t[0], torch::tensor(a, torch::kInt64)));
  EXPECT_EQ(t[1].numel(), 0);
  EXPECT_TRUE(torch::equal(t[2], torch::tensor(b, torch::kInt64)));
  EXPECT_EQ(t[2].scalar_type(), torch::kInt64);
}

TEST_P(FusedOps, SwiGLUEqualsFormula) {
  const auto dt = GetParam();
  torch::manual_seed(6);
  lol::nn::MLP mlp(10, 14);
  mlp->to(dt);
  auto x = torch::randn({2, 7, 10}, torch::TensorOptions(dt)).requires_grad_(true);
  auto w = torch::randn({2, 7, 10}, torch::TensorOptions(dt));
  auto fused = out_and_grads(*mlp, x, mlp->forward(x), w);
  auto formula = mlp->down_proj(torch::silu(mlp->gate_proj(x)) * mlp->up_proj(x));
  auto ref = out_and_grads(*mlp, x, formula, w);
  expect_all_close(fused, ref, fused_tolerance(dt), "swiglu");
}

// vec::exp, the softmax's and SwiGLU's float exponential: within a few ulp of std::exp
// on [-87, 88], clamped (finite, non-negative) outside, NaN in -> NaN out (a NaN score
// must reach the loss: training stops on it, tests/robustness/test_nonfinite.cpp).
TEST(VecMath, FloatExpMatchesStdExpClampsAndPropagatesNaN) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(double(x));
    worst = std::max(worst, std::abs(double(lol::nn::vec::exp<float>(x)) - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, -1e30f, -200.0f, -87.5f}) {
    const float e = lol::nn::vec::exp<float>(x);
    EXPECT_GE(e, 0.0f) << x;
    EXPECT_LT(e, 2e-38f) << x;
  }
  for (float x : {88.5f, 1e30f, inf}) EXPECT_TRUE(std::isfinite(lol::nn::vec::exp<float>(x))) << x;
  EXPECT_TRUE(std::isnan(lol::nn::vec::exp<float>(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(lol::nn::vec::sigmoid<float>(std::numeric_limits<float>::quiet_NaN())));
  for (float x : {-30.0f, -3.0f, 0.0f, 0.5f, 7.0f, 100.0f})
    EXPECT_NEAR(lol::nn::vec::sigmoid<float>(x), 1.0 / (1.0 + std::exp(-double(x))), 1e-7) << x;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedOps, ::testing::Values(torch::kFloat64, torch::kFloat32),
                         [](const auto& info) { return info.param == torch::kFloat64 ? "f64" : "f32"; });

}  // namespace

// at::parallel_for's OpenMP region is compiled in the caller: the kernels must be built
// with OpenMP (CMakeLists.txt) or every one of them runs on the main thread. The
// sanitizer build (fuzz/CMakeLists.txt, clang) builds them serial on purpose.
TEST(KernelThreads, KernelsSplitTheirTasksOverTheIntraOpThreads) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  const int got = lol::nn::kernel_threads(64);
  const int one_task = lol::nn::kernel_threads(1);
  at::set_num_threads(before);
#ifdef LOL_KERNELS_OPENMP
  EXPECT_EQ(got, 2) << "the src/nn kernels were compiled without OpenMP: at::parallel_for runs serially";
#else
  EXPECT_EQ(got, 1) << "serial build expected (LOL_KERNELS_OPENMP undefined)";
#endif
  EXPECT_EQ(one_task, 1);
}

// bfloat16 (and float16) compute: the mask fill must be finite in the tensor's own dtype
// (float's lowest() overflows bfloat16, "value cannot be converted to type at::BFloat16
// without overflow"); the result follows the float32 attention within bfloat16 rounding.
TEST(MaskedAttention, BFloat16MatchesFloat32WithinRounding) {
  torch::manual_seed(3);
  const int64_t S = 2, H = 4, Hkv = 2, L = 6, hd = 8;
  auto q = torch::randn({S, H, L, hd}), k = torch::randn({S, Hkv, L, hd}), v = torch::randn({S, Hkv, L, hd});
  auto allowed = torch::ones({L, L}, torch::kBool).tril().expand({S, L, L}).clone();
  allowed[1][5].fill_(false);  // the last query row of segment 1 sees nothing: exactly 0
  auto ref = lol::nn::masked_attention(q, k, v, allowed);
  auto bf = lol::nn::masked_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16), allowed);
  ASSERT_EQ(bf.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::isfinite(bf).all().item<bool>());
  EXPECT_LT((bf.to(torch::kFloat32) - ref).abs().max().item<double>(), 0.05);
  EXPECT_EQ(bf[1].select(1, 5).abs().max().item<double>(), 0.0);
}
