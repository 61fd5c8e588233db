// Cached decoding of the dense model: logits of chunked prefill + one-token steps
// equal DenseModelImpl::forward on the whole sequence (float64 tensor path and the
// fused float32 kernels), for several rows at different lengths; generation equals
// a greedy loop over full forwards and does not depend on the batch size.
#include "hf_test_util.h"
#include "inference/dense_generate.h"
#include "inference/dense_session.h"

namespace lol::hf::test {
namespace {

baselines::DenseConfig tiny_dense(bool qkv_bias, bool tied) {
  baselines::DenseConfig c;
  c.vocab_size = 53;
  c.d_model = 32;
  c.n_layers = 3;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 48;
  c.max_seq_len = 96;
  c.qkv_bias = qkv_bias;
  c.tie_word_embeddings = tied;
  c.rope_theta = 500.0;
  c.norm_eps = 1e-6;
  return c;
}

std::vector<int64_t> tokens_of(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int64_t((seed * 131 + uint64_t(i) * 37 + uint64_t(i * i) * 7) % uint64_t(vocab)));
  return t;
}

void check_cached_equals_full(torch::ScalarType dtype, bool cpu_kernels, double tol) {
  // Llama (no bias), Qwen2 (q/k/v biases), Qwen3: q_norm / k_norm with a head_dim (12)
  // other than d_model / n_heads (8), and Mistral v0.1 / Qwen2 sliding windows: layers
  // 1 and 2 attend within 7 tokens (sequences of 29-40), layer 0 fully.
  // Gemma 3 (arch 4): sandwich norms, GeGLU (tanh), scaled embeddings, q/k norms, layers
  // 0 and 2 sliding within 7 with their own RoPE base, layer 1 full (interval 2), and
  // Gemma 2's attention / final logit soft-capping.
  // Gemma (arch 5): exact-GELU gate and scaled embeddings, full attention.
  // GPT-2 (arch 6): LayerNorms with biases, learned positions (no RoPE), an ungated tanh-GELU
  // MLP, biases on every projection (block_step's path: the fused kernels decline it).
  for (int arch : {0, 1, 2, 3, 4, 5, 6}) {
    for (bool tied : {true, false}) {
      const bool bias = arch == 1, qwen3 = arch == 2, sliding = arch == 3 || arch == 4, gemma3 = arch == 4;
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (bias ? " bias" : "") + (qwen3 ? " qk_norm head_dim 12" : "") +
                   (sliding ? " sliding 7" : "") + (gemma3 ? " gemma3" : "") + (arch == 5 ? " gemma" : "") + (arch == 6 ? " gpt2" : "") +
                   (tied ? " tied" : " untied") + (cpu_kernels ? " kernels" : " tensors"));
      auto cfg = tiny_dense(bias, tied);
      if (qwen3 || gemma3) {
        cfg.qk_norm = true;
        cfg.head_dim = 12;
      }
      if (sliding) {
        cfg.attention = "sliding";
        cfg.window = 7;
        cfg.n_full_prelude = 1;
      }
      if (gemma3) {
        cfg.n_full_prelude = 0;
        cfg.full_attention_interval = 2;
        cfg.rope_local_theta = 37.0;
        cfg.sandwich_norm = true;
        cfg.attn_logit_softcap = 2.0;  // Gemma 2's soft-capping, binding at these scales
        cfg.final_logit_softcap = 3.0;
        cfg.activation = "gelu_pytorch_tanh";
        cfg.scale_embeddings = true;
      }
      if (arch == 5) {
        cfg.activation = "gelu";
        cfg.scale_embeddings = true;
      }
      if (arch == 6) {
        cfg.norm = "layernorm";
        cfg.mlp = "plain";
        cfg.positions = "learned";
        cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = true;
        cfg.activation = "gelu_pytorch_tanh";
      }
      auto m = random_dense(cfg, 7, dtype);
      inference::DenseSessionOptions so;
      so.batch_size = 3;
      so.cpu_kernels = cpu_kernels;
      inference::DenseDecodeSession s(m, so);
      const std::vector<std::vector<int64_t>> seqs = {tokens_of(40, 53, 1), tokens_of(29, 53, 2), tokens_of(33, 53, 3)};
      std::vector<torch::Tensor> got(3);
      // Row 0: chunks 5, 11, then single tokens; row 1: whole prompt of 9, then single
      // tokens; row 2 starts later (reset after a first sequence).
      s.feed({{2, tokens_of(6, 53, 9)}});
      s.reset(2);
      auto first = s.feed({{0, {seqs[0].begin(), seqs[0].begin() + 5}}, {1, {seqs[1].begin(), seqs[1].begin() + 9}}}, true);
      got[0] = first.narrow(0, 0, 5);
      got[1] = first.narrow(0, 5, 9);
      auto second = s.feed({{0, {seqs[0].begin() + 5, seqs[0].begin() + 16}}, {2, {seqs[2].begin(), seqs[2].begin() + 3}}}, true);
      got[0] = torch::cat({got[0], second.narrow(0, 0, 11)});
      got[2] = second.narrow(0, 11, 3);
      std::vector<size_t> at = {16, 9, 3};
      while (at[0] < seqs[0].size() || at[1] < seqs[1].size() || at[2] < seqs[2].size()) {
        std::vector<inference::DenseRowInput> in;
        std::vector<int64_t> rows;
        for (int64_t r = 0; r < 3; ++r)
          if (at[r] < seqs[r].size()) {
            in.push_back({r, {seqs[r][at[r]++]}});
            rows.push_back(r);
          }
        auto l = s.feed(in);
        for (size_t j = 0; j < rows.size(); ++j) got[rows[j]] = torch::cat({got[rows[j]], l.narrow(0, int64_t(j), 1)});
      }
      for (int64_t r = 0; r < 3; ++r) {
        EXPECT_EQ(s.length(r), int64_t(seqs[r].size()));
        const auto ref = full_logits(m, seqs[r]);
        const double err = (got[r].to(torch::kFloat64) - ref).abs().max().item<double>();
        EXPECT_LT(err, tol) << "row " << r;
        EXPECT_GT(ref.std().item<double>(), 0.5);  // logits are far from constant
        if (sliding && !gemma3 && r == 0) {
          // The window binds: with the same weights and full attention, the logits agree
          // on the first 7 positions and differ after them.
          auto full_cfg = cfg;
          full_cfg.attention = "full";
          full_cfg.window = 0;
          full_cfg.n_full_prelude = 0;

          auto full = random_dense(full_cfg, 7, dtype);
          const auto f = full_logits(full, seqs[r]);
          EXPECT_LT((f.narrow(0, 0, 7) - ref.narrow(0, 0, 7)).abs().max().item<double>(), tol);
          EXPECT_GT((f.narrow(0, 7, 20) - ref.narrow(0, 7, 20)).abs().max().item<double>(), 0.1);
        }
      }
    }
  }
}

// The decoder keeps RMSNorm statistics in float32 in every dtype (inference/ops.h,
// cpu_decode.h), the model's forward keeps float64 in float64: differences ~1e-6.
TEST(DenseSession, CachedEqualsFullForwardFloat64) { check_cached_equals_full(torch::kFloat64, false, 3e-5); }
TEST(DenseSession, CachedEqualsFullForwardFloat64Kernels) { check_cached_equals_full(torch::kFloat64, true, 3e-5); }
TEST(DenseSession, CachedEqualsFullForwardFloat32Kernels) { check_cached_equals_full(torch::kFloat32, true, 2e-4); }
TEST(DenseSession, CachedEqualsFullForwardFloat32Tensors) { check_cached_equals_full(torch::kFloat32, false, 2e-4); }

TEST(DenseSession, GenerateEqualsGreedyFullForward) {
  auto m = random_dense(tiny_dense(true, true), 3, torch::kFloat64);
  const std::vector<std::vector<int64_t>> prompts = {tokens_of(7, 53, 4), tokens_of(12, 53, 5), tokens_of(3, 53, 6),
                                                     tokens_of(9, 53, 7)};
  inference::GenerateOptions o;
  o.max_new_tokens = 10;
  std::vector<std::vector<int64_t>> ref;
  for (const auto& p : prompts) {
    auto seq = p;
    for (int i = 0; i < 10; ++i) seq.push_back(full_logits(m, seq)[-1].argmax().item<int64_t>());
    ref.emplace_back(seq.begin() + int64_t(p.size()), seq.end());
  }
  for (int64_t batch : {1, 3}) {
    for (int64_t chunk : {0, 4}) {
      o.batch_size = batch;
      o.prefill_chunk = chunk;
      auto gens = inference::generate_dense(m, prompts, o);
      ASSERT_EQ(gens.size(), prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(gens[i].tokens, ref[i]) << "prompt " << i << " batch " << batch << " chunk " << chunk;
        EXPECT_FALSE(gens[i].stopped);
      }
    }
  }
  // A stop token ends a sequence right after it is generated.
  o.batch_size = 2;
  o.stop_tokens = {ref[1][3]};
  auto gens = inference::generate_dense(m, prompts, o);
  const auto first_stop = std::find(ref[1].begin(), ref[1].end(), ref[1][3]) - ref[1].begin();
  EXPECT_EQ(gens[1].tokens, std::vector<int64_t>(ref[1].begin(), ref[1].begin() + first_stop + 1));
  EXPECT_TRUE(gens[1].stopped);
  // Sampling is reproducible per prompt, whatever the batch.
  o.stop_tokens.clear();
  o.sampling.temperature = 1.0;
  o.sampling.top_k = 10;
  o.seed = 42;
  o.batch_size = 1;
  auto a = inference::generate_dense(m, prompts, o);
  o.batch_size = 4;
  auto b = inference::generate_dense(m, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens);
}

TEST(DenseSession, InputErrors) {
  auto m = random_dense(tiny_dense(false, true), 1, torch::kFloat32);
  inference::DenseSessionOptions so;
  so.batch_size = 2;
  so.max_len = 8;
  inference::DenseDecodeSession s(m, so);
  expect_input_error([&] { s.feed({{0, {1, 53}}}); }, {"token id 53", "vocab_size = 53"});
  expect_input_error([&] { s.feed({{2, {1}}}); }, {"row 2"});
  expect_input_error([&] { s.feed({{0, {1}}, {0, {2}}}); }, {"given twice"});
  expect_input_error([&] { s.feed({{1, std::vector<int64_t>(9, 1)}}); }, {"would reach 9", "max_len 8"});
  expect_input_error([&] { s.step({1}); }, {"1 tokens for a batch of 2"});
  expect_input_error([&] { inference::generate_dense(s, {{}}, {}); }, {"prompt 0 is empty"});
  inference::GenerateOptions o;
  o.max_new_tokens = 5;
  expect_input_error([&] { inference::generate_dense(s, {{1, 2, 3, 4}}, o); }, {"exceed max_len 8"});
  auto c = tiny_dense(false, true);
  c.attention = "strided";
  c.window = 8;
  c.stride = 4;
  expect_input_error([&] { baselines::DenseModel strided(c);
    inference::DenseDecodeSession bad(strided); }, {"strided", "full causal and sliding-window"});
}

}  // namespace
}  // namespace lol::hf::test
