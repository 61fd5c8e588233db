// FLOPs accounting (issue 9): matmul FLOPs counted on the operators a forward actually
// runs (aten::mm/addmm/bmm seen through RecordFunction) equal the formulas of
// baselines/flops.h; parameter counts equal the modules'.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <ATen/record_function.h>

#include <filesystem>
#include <functional>
#include <mutex>

#include "baseline_test_util.h"
#include "baselines/dense_model.h"
#include "baselines/flops.h"
#include "baselines/looped_config.h"
#include "baselines/looped_model.h"
#include "baselines/moe_model.h"
#include "lol/model.h"
#include "lol/windows.h"
#include "nn/block_cost.h"
#include "training/run_config.h"

using namespace lol::baselines;

namespace {

// Totals over every thread: grouped expert products run on the intra-op threads
// (lol::run_tasks), which inherit the thread-local callback but would each count into
// their own copy of a thread_local total (seen on 16 cores: 65% of the MoE products).
std::mutex g_mutex;
double g_linear = 0, g_attention = 0;

double numel_prod(const c10::IValue& v, std::initializer_list<int> dims) {
  const auto& t = v.toTensor();
  double p = 1;
  for (int d : dims) p *= double(t.size(d));
  return p;
}

/// Counts 2 x multiply-adds of matrix products: mm/addmm (linear layers, LM head), bmm
/// (attention scores and values on padded segments) and the CPU attention kernel
/// (lol::segment_attention: 4 H hd per causal (query, key) pair, its last input).
std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  const auto in = fn.inputs();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (name == "aten::mm") {
    g_linear += 2 * numel_prod(in[0], {0, 1}) * double(in[1].toTensor().size(1));
  } else if (name == "aten::addmm") {
    g_linear += 2 * numel_prod(in[1], {0, 1}) * double(in[2].toTensor().size(1));
  } else if (name == "aten::bmm") {
    g_attention += 2 * numel_prod(in[0], {0, 1, 2}) * double(in[1].toTensor().size(2));
  } else if (name == "lol::segment_attention") {
    g_attention += 4 * numel_prod(in[0], {1, 2}) * double(in[3].toInt());
  }
  return nullptr;
}

struct Counter {
  at::CallbackHandle handle;
  Counter() {
    g_linear = g_attention = 0;
    handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_op).needsInputs(true));
  }
  ~Counter() { at::removeCallback(handle); }
};

/// Attention actually computed for one document of n tokens on the CPU: full and
/// strided layers run the segment kernel, 4 (H hd) per causal (query, key) pair of each
/// segment; sliding layers run masked_attention on the padded n x n square.
double executed_attention(int64_t n, const LayerAttention& a, int64_t width) {
  if (a.kind == AttentionKind::Sliding) return 4.0 * double(width) * double(n) * double(n);
  if (a.kind == AttentionKind::Full) return 4.0 * double(width) * double(n) * double(n + 1) / 2.0;
  double pairs = 0;
  for (const auto& r : lol::window_ranges(n, a.depth, a.window, a.stride)) {
    const double L = double(r.second - r.first);
    pairs += L * (L + 1) / 2;
  }
  return 4.0 * double(width) * pairs;
}

int64_t count_params(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

// The shared weight counts (nn/block_cost.h) against the modules nn::Block builds:
// dense, with Qwen2 q/k/v biases, and MoE FFNs of several E, k and expert widths.
TEST(Flops, BlockCostEqualsModuleParameters) {
  struct Case {
    bool bias;
    int64_t experts, top_k, ffn;
  };
  for (const Case& k : {Case{false, 0, 1, 24}, Case{true, 0, 1, 24}, Case{false, 3, 2, 40}, Case{true, 4, 1, 8},
                        Case{false, 2, 2, 16}}) {
    lol::nn::BlockShape s;
    s.attn.d_model = 16;
    s.attn.n_heads = 4;
    s.attn.n_kv_heads = 2;
    s.attn.head_dim = 6;
    s.attn.qkv_bias = k.bias;
    s.ffn_hidden = k.ffn;
    s.moe.n_experts = k.experts;
    s.moe.top_k = k.top_k;
    lol::nn::Block b(s);
    const std::string what = "bias " + std::to_string(k.bias) + " E " + std::to_string(k.experts);
    EXPECT_EQ(lol::nn::block_parameters(s), count_params(*b)) << what;
    EXPECT_EQ(lol::nn::attention_weights(s) + lol::nn::attention_biases(s), count_params(*b->self_attn)) << what;
    if (k.experts == 0) {
      EXPECT_EQ(lol::nn::ffn_weights(s), count_params(*b->mlp)) << what;
      EXPECT_EQ(lol::nn::ffn_active_weights(s), lol::nn::ffn_weights(s)) << what;
    } else {
      EXPECT_EQ(lol::nn::ffn_weights(s), count_params(*b->moe)) << what;
      const int64_t expert = count_params(*b->moe->experts[0]);
      EXPECT_EQ(lol::nn::swiglu_weights(s), expert) << what;
      EXPECT_EQ(lol::nn::ffn_active_weights(s), lol::nn::ffn_weights(s) - (k.experts - k.top_k) * expert) << what;
    }
  }
}

TEST(Flops, CountedMatmulsEqualFormulaDense) {
  for (const std::string att : {"full", "sliding", "strided"}) {
    auto c = btest::tiny_dense(att);
    c.n_layers = 4;
    c.n_full_prelude = att == "full" ? 0 : 1;
    DenseModel m(c);
    const int64_t B = 2, T = 11;
    auto tok = btest::random_tokens(B, T, c.vocab_size, 1);
    const auto cm = cost_model(c);
    const auto r = flops_report(cm, T);
    torch::NoGradGuard ng;
    Counter count;
    m->forward(tok);
    EXPECT_DOUBLE_EQ(g_linear, r.linear_flops * B * T) << att;
    double attn = 0;
    for (const auto& l : cm.layers) attn += B * executed_attention(T, l.attention, l.attn_width);
    EXPECT_DOUBLE_EQ(g_attention, attn) << att;
    EXPECT_EQ(cm.parameters, count_params(*m)) << att;
  }
}

TEST(Flops, CountedMatmulsEqualFormulaLoopedAndMoE) {
  LoopedConfig lc;
  static_cast<TransformerShape&>(lc) = btest::tiny_dense();
  lc.n_prelude = 1;
  lc.n_recur = 2;
  lc.n_coda = 1;
  lc.recurrence = 3;
  LoopedModel lm(lc);
  lm->eval();
  const int64_t B = 2, T = 9;
  auto tok = btest::random_tokens(B, T, lc.vocab_size, 2);
  torch::NoGradGuard ng;
  for (int64_t R : {1, 3, 5}) {
    lm->set_inference_recurrence(R);
    const auto r = flops_report(cost_model(lc, R), T);
    Counter count;
    lm->forward(tok);
    EXPECT_DOUBLE_EQ(g_linear, r.linear_flops * B * T) << R;
    EXPECT_DOUBLE_EQ(g_attention, B * (lc.n_prelude + R * lc.n_recur + lc.n_coda) * 4.0 * 16 * T * (T + 1) / 2) << R;
  }
  EXPECT_EQ(cost_model(lc, 3).parameters, count_params(*lm));

  MoEConfig mc;
  static_cast<TransformerShape&>(mc) = btest::tiny_dense();
  mc.n_prelude = 1;
  mc.core_depth = 2;
  mc.n_coda = 1;
  mc.n_experts = 3;
  mc.top_k = 2;
  mc.expert_ffn_hidden = 40;
  mc.window = 4;
  mc.stride = 2;
  MoEModel mm(mc);
  const auto cm = cost_model(mc);
  const auto r = flops_report(cm, T);
  Counter count;
  mm->forward(tok);
  EXPECT_DOUBLE_EQ(g_linear, r.linear_flops * B * T);
  double attn = 0;
  for (const auto& l : cm.layers) attn += B * executed_attention(T, l.attention, l.attn_width);
  EXPECT_DOUBLE_EQ(g_attention, attn);
  EXPECT_EQ(cm.parameters, count_params(*mm));
  int64_t expert = 0;
  for (const auto& p : mm->moe_layer(0).experts[0]->parameters()) expert += p.numel();
  EXPECT_EQ(cm.active_parameters, cm.parameters - mc.core_depth * (mc.n_experts - mc.top_k) * expert);
}

TEST(Flops, LoLParametersAndReportArithmetic) {
  lol::LoLConfig c;
  c.vocab_size = 31;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 24;
  c.library_size = 5;
  c.core_depth = 3;
  c.window = 4;
  c.stride = 2;
  for (bool untied : {false, true}) {
    c.untied_router = untied;
    c.tie_embeddings = !untied;
    lol::LoLModel m(c);
    const auto cm = cost_model(c, c.core_depth);
    EXPECT_EQ(cm.parameters, m->num_parameters());
    EXPECT_EQ(cm.active_parameters, m->active_parameters_per_token());
  }
  // Report arithmetic: training = 3 x forward; FLOPs-to-parameters ratio.
  const auto r = flops_report(cost_model(c, 2), 16);
  EXPECT_DOUBLE_EQ(r.train_flops, 3 * r.forward_flops);
  EXPECT_DOUBLE_EQ(r.forward_flops, r.linear_flops + r.attention_flops);
  EXPECT_DOUBLE_EQ(r.flops_per_parameter, r.forward_flops / double(r.parameters));
  EXPECT_LT(flops_report(cost_model(c, 1), 16).forward_flops, r.forward_flops);
  EXPECT_THROW(flops_report(cost_model(c, 2), 0), lol::InputError);
  // from JSON by architecture
  EXPECT_EQ(cost_model_from_json(c.to_json(), "x").parameters, cost_model(c, c.core_depth).parameters);
  EXPECT_THROW(cost_model_from_json({{"architecture", "rwkv"}}, "x"), lol::InputError);
}

TEST(BaselinePresets, HaveACostModel) {
  // Every preset in configs/ (LoL and baselines, configs/compare/ included) has a cost
  // model: what `lol compare` needs to train it to a FLOPs budget.
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(LOL_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".json") continue;
    auto m = lol::training::RunConfig::load(e.path().string()).model;
    if (!m.contains("vocab_size")) m["vocab_size"] = 64;
    lol::baselines::CostModel cm;
    ASSERT_NO_THROW(cm = lol::baselines::cost_model_from_json(m, e.path().string())) << e.path();
    EXPECT_GT(cm.parameters, 0) << e.path();
    ++n;
  }
  EXPECT_GE(n, 10);
}

// Each field within its range, but their product beyond what the 64-bit parameter and
// FLOP counts hold: refused naming the configuration (lol info printed wrapped counts,
// active parameters larger than all parameters).
TEST(Flops, ConfigurationsBeyond2To53ParametersAreRefused) {
  auto expect_refused = [](const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "accepted";
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("more than 2^53"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cfg: about "), std::string::npos) << e.what();
    }
  };
  const nlohmann::json big_shape = {{"vocab_size", 1000}, {"d_model", 1048576}, {"n_heads", 16}, {"n_kv_heads", 16},
                                    {"ffn_hidden", 16777216}, {"max_seq_len", 1024}};
  auto moe = big_shape;
  moe.update({{"architecture", "moe"}, {"n_prelude", 0}, {"core_depth", 4096}, {"n_coda", 0}, {"n_experts", 4096}, {"top_k", 1}});
  expect_refused([&] { MoEConfig::from_json(moe, "cfg"); });
  auto dense = big_shape;
  dense.update({{"architecture", "dense"}, {"n_layers", 4096}});
  expect_refused([&] { DenseConfig::from_json(dense, "cfg"); });
  auto looped = big_shape;
  looped.update({{"architecture", "looped"}, {"n_recur", 64}, {"recurrence", 64}});
  expect_refused([&] { LoopedConfig::from_json(looped, "cfg"); });
  auto lol = big_shape;
  lol.update({{"library_size", 4096}, {"core_depth", 8}, {"window", 8}, {"stride", 4}});
  expect_refused([&] { lol::LoLConfig::from_json(lol, "cfg"); });
  // A large but countable model passes (d 8192, 80 layers: about 54e9 parameters).
  auto ok = dense;
  ok.update({{"d_model", 8192}, {"n_heads", 64}, {"n_kv_heads", 8}, {"ffn_hidden", 28672}, {"n_layers", 80}});
  EXPECT_NO_THROW(DenseConfig::from_json(ok, "cfg"));
}
