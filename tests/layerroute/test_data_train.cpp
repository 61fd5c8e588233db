// Data (ChatML rendering, assistant-only loss mask, tool calls, Q/A pairs), the
// training loop (only gates + LoRA move; lambda drives the gates) and KV-cached gated
// generation (equal to the full forward; closed layers keep no cache).
#include <fstream>

#include "core/module_io.h"
#include "layerroute/decode.h"
#include "layerroute/eval.h"
#include "layerroute/train.h"
#include "layerroute_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "util/error.h"

namespace lol::layerroute::test {
namespace {

tokenizers::ByteTokenizer chat_tokenizer() { return tokenizers::ByteTokenizer({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}); }

TEST(LayerRouteData, AssistantOnlyLossMaskAndToolCalls) {
  auto tok = chat_tokenizer();
  auto j = nlohmann::json::parse(R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "content": "42"},
      {"role": "assistant", "content": "ok"}], "source": "glaive"})");
  auto s = parse_sample(j, "t:1");
  ASSERT_EQ(s.turns.size(), 4u);
  EXPECT_EQ(s.turns[1].content, "\n<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":1}}\n</tool_call>");
  EXPECT_EQ(s.turns[2].role, "user");
  EXPECT_EQ(s.turns[2].content, "<tool_response>\n42\n</tool_response>");
  auto e = tokenize_sample(s, tok, 0, "SYS");
  EXPECT_EQ(e.source, "glaive");
  std::string all = tok.decode(e.tokens), masked;
  std::vector<int32_t> m;
  for (size_t i = 0; i < e.tokens.size(); ++i)
    if (e.loss_mask[i]) m.push_back(e.tokens[i]);
  masked = tok.decode(m);
  EXPECT_EQ(all.rfind("<|im_start|>system\nSYS<|im_end|>", 0), 0u);
  EXPECT_EQ(masked, s.turns[1].content + "<|im_end|>" + "ok<|im_end|>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>(e.tokens.begin(), e.tokens.begin() + e.prompt_len)).substr(all.size() > 0 ? 0 : 0),
            all.substr(0, all.rfind("ok<|im_end|>")));
  // Batch: targets count exactly on masked tokens (position t predicts t+1).
  auto b = make_batch({&e});
  EXPECT_EQ(b.n_targets, int64_t(m.size()));
}

TEST(LayerRouteData, QuestionAnswerAndErrorsNameTheLine) {
  auto s = parse_sample(nlohmann::json::parse(R"({"question": "1+1?", "answer": "2"})"), "f:3");
  ASSERT_EQ(s.turns.size(), 2u);
  EXPECT_EQ(s.turns[1].role, "assistant");
  auto sg = parse_sample(nlohmann::json::parse(R"({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]})"), "f:4");
  EXPECT_EQ(sg.turns[0].role, "user");
  try {
    parse_sample(nlohmann::json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), "f.jsonl:7");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("f.jsonl:7"), std::string::npos);
  }
  EXPECT_THROW(parse_sample(nlohmann::json::parse(R"({"messages": [{"role": "robot", "content": "x"}]})"), "f:1"), InputError);
  EXPECT_THROW(parse_sample(nlohmann::json::parse(R"({"text": "x"})"), "f:1"), InputError);
}

TEST(LayerRouteTrain, OnlyGatesAndLoraMoveAndLambdaClosesGates) {
  auto data = test::copy_task(16, 1, 6, 6, 4);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 5);
  auto before = module_state(*m->base);
  LayerRouteTrainable tr(m, "");
  TrainOptions o;
  o.steps = 12;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.lr = 3e-2;
  o.lambda = 5.0;
  o.progress = false;
  std::vector<TrainLog> logs;
  o.log_every = 1;
  auto last = train_layerroute(tr, data, o, [&](const TrainLog& l) { logs.push_back(l); });
  ASSERT_EQ(logs.size(), 12u);
  EXPECT_EQ(last.step, 12);
  auto after = module_state(*m->base);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i].second, after[i].second)) << before[i].first;
  bool lora_moved = false;
  for (auto& [n, t] : m->lora->peft_tensors())
    if (n.find("lora_B") != std::string::npos) lora_moved = lora_moved || t.abs().max().item<float>() > 0;
  EXPECT_TRUE(lora_moved);
  EXPECT_LT(logs.back().gate_mean, logs.front().gate_mean) << "the gate penalty pushes sigma down";
  EXPECT_EQ(last.layer_sigma.size(), 6u);
  EXPECT_FALSE(m->is_training());
}

TEST(LayerRouteDecode, GenerationMatchesFullForwardAndSkipsCache) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 6);
  randomize_adapters(*m, 41, 2.0);
  std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11};
  for (GateMode mode : {GateMode::Open, GateMode::Learned}) {
    auto g = generate_gated(*m, prompt, 6, mode, true);
    ASSERT_EQ(g.tokens.size(), 6u);
    // Reference: the gated forward on the prompt decides the same gates; greedy steps
    // with those decisions held (forced via a model whose gate biases encode them).
    torch::NoGradGuard ng;
    GatedOptions go;
    go.mode = mode;
    auto ref = m->forward(torch::tensor(prompt).unsqueeze(0), torch::Tensor(), go);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(bool(g.open[size_t(i)]), ref.open[0][i].item<bool>()) << i;
    GatedModel fixed(m->base, LoraConfig{}, GateConfig{}, 0);
    for (auto& [n, t] : m->lora->peft_tensors()) (void)n;
    auto pa = m->lora->peft_tensors(), pb = fixed->lora->peft_tensors();
    for (size_t k = 0; k < pa.size(); ++k) pb[k].second.copy_(pa[k].second);
    fixed->gates->weight.zero_();
    for (int64_t i = 0; i < 6; ++i) fixed->gates->bias[i] = g.open[size_t(i)] ? 10.0f : -10.0f;
    std::vector<int64_t> seq = prompt;
    for (size_t t = 0; t < g.tokens.size(); ++t) {
      auto out = fixed->forward(torch::tensor(seq).unsqueeze(0), torch::Tensor(), GatedOptions{});
      EXPECT_EQ(out.logits[0][-1].argmax().item<int64_t>(), g.tokens[t]) << "step " << t;
      seq.push_back(g.tokens[t]);
    }
    int64_t open = 0;
    for (auto o : g.open) open += o;
    EXPECT_EQ(g.executed_layers, open);
    EXPECT_EQ(g.cache_bytes, open * 2 * 2 * 13 * 8 * 4);  // K and V [Hkv=2, P+new=13, hd=8] float32 per open layer
  }
  auto c = generate_gated(*m, prompt, 3, GateMode::Closed, true);
  EXPECT_EQ(c.executed_layers, 0);
  EXPECT_EQ(c.cache_bytes, 0);
  EXPECT_THROW(generate_gated(*m, prompt, 200, GateMode::Open, true), InputError);
}

TEST(LayerRouteEval, ReportIsConsistent) {
  auto data = test::copy_task(6, 3, 6, 6, 4);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  randomize_adapters(*m, 43, 2.0);
  EvalOptions o;
  o.timing_samples = 2;
  o.repeats = 2;
  o.new_tokens = 4;
  auto r = evaluate_layerroute(*m, data, o);
  EXPECT_EQ(r.samples, 6);
  EXPECT_EQ(r.timing_pairs, 4);
  EXPECT_EQ(r.pair_ratios.size(), 4u);
  EXPECT_GT(r.ppl_gated, 1.0);
  EXPECT_NEAR(r.ideal_speedup, 6.0 / r.executed_mean, 1e-9);
  double open_sum = 0;
  for (double x : r.layer_open) open_sum += x;
  EXPECT_NEAR(open_sum, r.executed_mean, 1e-9);
  for (int64_t i = 0; i < 6; ++i) {
    const bool bias_open = m->gates->bias[i].item<float>() > 0;
    // A flip is a sample whose decision differs from the bias-only one.
    EXPECT_NEAR(r.nontrivial[size_t(i)], bias_open ? 1.0 - r.layer_open[size_t(i)] : r.layer_open[size_t(i)], 1e-9);
  }
  // Realized / ideal is taken pair by pair against that pair's executed layers.
  ASSERT_EQ(r.pair_executed.size(), 4u);
  std::vector<double> plain, over;
  for (size_t k = 0; k < 4; ++k) {
    plain.push_back(6.0 / double(r.pair_executed[k]));
    over.push_back(r.pair_ratios[k] * double(r.pair_executed[k]) / 6.0);
  }
  EXPECT_NEAR(r.decode_ideal_speedup, median(plain), 1e-12);
  EXPECT_NEAR(r.realized_over_ideal, median(over), 1e-12);
  // The FLOP-based ideal counts the LM head and gate scores, which skipping keeps.
  EXPECT_LT(r.flops_ideal_speedup, r.decode_ideal_speedup);
  EXPECT_GT(r.flops_ideal_speedup, 1.0);
  EXPECT_GT(r.flops_fixed_share, 0.0);
  EXPECT_LT(r.flops_fixed_share, 1.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 2.0, 3.0}), 2.5);
}

TEST(LayerRouteEval, SamplesLongerThanTheBaseAreRefusedNamingMaxLen) {
  // tiny_base has 128 positions; sample 2 gets 140 tokens.
  auto data = test::copy_task(4, 5, 6, 6, 4);
  data[2].tokens.resize(140, 7);
  data[2].loss_mask.resize(140, 1);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      if (pass == 0) {
        evaluate_layerroute(*m, data, EvalOptions{});
      } else {
        LayerRouteTrainable tr(m, "");
        TrainOptions o;
        o.steps = 1;
        o.progress = false;
        train_layerroute(tr, data, o, nullptr);
      }
      ADD_FAILURE() << "pass " << pass << ": expected an InputError";
    } catch (const InputError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(pass == 0 ? "layerroute eval" : "layerroute train"), std::string::npos) << w;
      EXPECT_NE(w.find("sample 2 has 140 tokens, more than the base model's 128 positions"), std::string::npos) << w;
      EXPECT_NE(w.find("--max-len 128"), std::string::npos) << w;
    }
  }
}

}  // namespace
}  // namespace lol::layerroute::test
