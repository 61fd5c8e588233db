// Shared fixtures of the LayerRoute tests: a tiny Qwen2-layout dense model and a
// temporary directory.
#pragma once
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "baselines/dense_model.h"
#include "layerroute/data.h"
#include "layerroute/gated_model.h"
#include "../common/test_files.h"

namespace lol::layerroute::test {

using ::lol_test::TempDir;

/// A Qwen2.5 tool-use conversation (tools block, tool calls with object and string
/// arguments, consecutive tool results in one user turn), as one JSONL line.
inline const char* const kToolCallSample = R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "a": [true, null, 2.5], "s": "é\n"}}}]},
      {"role": "tool", "content": "42"},
      {"role": "tool", "content": "43"},
      {"role": "assistant", "content": "Let me check.", "tool_calls": [{"type": "function", "function": {"name": "g", "arguments": "{\"y\":2}"}}, {"name": "h", "arguments": {}}]},
      {"role": "tool", "content": "ok"},
      {"role": "assistant", "content": "done"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})";

inline baselines::DenseConfig tiny_config(int64_t layers = 6) {
  baselines::DenseConfig c;
  c.vocab_size = 61;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 48;
  c.n_layers = layers;
  c.max_seq_len = 128;
  c.qkv_bias = true;
  c.rope_theta = 10000;
  return c;
}

inline baselines::DenseModel tiny_base(uint64_t seed = 3, int64_t layers = 6) {
  baselines::DenseModel m(tiny_config(layers));
  m->reset_parameters(seed);
  m->eval();
  return m;
}

/// Random tokens [B, T] and doc ids with row r holding lengths[r] tokens (rest padding).
inline void random_batch(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed, torch::Tensor& tokens,
                         torch::Tensor& docs) {
  int64_t T = 0;
  for (auto l : lengths) T = std::max(T, l);
  const int64_t B = int64_t(lengths.size());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  tokens = torch::randint(vocab, {B, T}, gen, torch::kInt64);
  docs = torch::zeros({B, T}, torch::kInt64);
  for (int64_t r = 0; r < B; ++r)
    if (lengths[r] < T) {
      docs[r].slice(0, lengths[r]).fill_(-1);
      tokens[r].slice(0, lengths[r]).fill_(0);
    }
}

/// Fills every LoRA B (and A) and the gate weights with seeded random values.
/// Base weights large enough for attention to decide the tokens: norm weights
/// 1 + norm_scale N(0, 1), the others 0.4 N(0, 1), drawn from `seed`; eval mode.
inline void randomize_base(baselines::DenseModelImpl& base, uint64_t seed, double norm_scale) {
  torch::NoGradGuard ng;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& p : base.named_parameters())
    p.value().copy_(p.key().find("norm") != std::string::npos ? 1.0 + norm_scale * torch::randn(p.value().sizes(), gen)
                                                              : 0.4 * torch::randn(p.value().sizes(), gen));
  base.eval();
}

inline void randomize_adapters(GatedModelImpl& m, uint64_t seed, double gate_scale = 1.0) {
  torch::NoGradGuard ng;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& [name, t] : m.lora->peft_tensors()) t.copy_(torch::randn(t.sizes(), gen) * 0.05);
  m.gates->weight.copy_(torch::randn(m.gates->weight.sizes(), gen) * gate_scale);
}

/// Copy task: `n` examples of a random prompt (ids 1..50, min_len + rng % len_range
/// tokens) followed by `answer_len` copies of its first token; loss on the answer only.
inline std::vector<Example> copy_task(int64_t n, uint64_t seed, int64_t min_len, int64_t len_range, int64_t answer_len) {
  std::mt19937_64 rng(seed);
  std::vector<Example> out;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    const int64_t len = min_len + int64_t(rng() % uint64_t(len_range));
    for (int64_t t = 0; t < len; ++t) e.tokens.push_back(int32_t(1 + rng() % 50));
    e.prompt_len = len;
    for (int64_t t = 0; t < answer_len; ++t) e.tokens.push_back(e.tokens[0]);
    e.loss_mask.assign(e.tokens.size(), 0);
    for (size_t t = size_t(len); t < e.tokens.size(); ++t) e.loss_mask[t] = 1;
    out.push_back(e);
  }
  return out;
}

}  // namespace lol::layerroute::test
