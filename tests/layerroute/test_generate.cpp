// Sampled gated generation (layerroute/decode.h GatedGenerateOptions) against a
// full-forward reference with the same engine, stop tokens, and `lol layerroute
// generate` end to end on a merged folder; OLMo 2-layout (output norms only, q/k norms
// across heads), Gemma-layout, Granite and other bases through the gated forward,
// generation and merge.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "baselines/flops.h"
#include "core/tensor_io.h"
#include "hf/hf_model.h"
#include "inference/sampling.h"
#include "layerroute/adapter_io.h"
#include "layerroute/cost.h"
#include "layerroute/decode.h"
#include "layerroute_test_util.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "util/error.h"

namespace lol::layerroute {
namespace {

using test::randomize_adapters;
using test::randomize_base;
using test::tiny_base;

/// The tokens that full forwards of `m` with the gates of `open` held pick, step by
/// step, with the repetition penalty and sampling of `o` and engine sequence_rng(seed, 0).
std::vector<int64_t> reference_tokens(GatedModelImpl& m, const std::vector<uint8_t>& open,
                                      const std::vector<int64_t>& prompt, const GatedGenerateOptions& o) {
  torch::NoGradGuard ng;
  GatedModel fixed(m.base, m.lora->config(), GateConfig{}, 0);
  auto pa = m.lora->peft_tensors(), pb = fixed->lora->peft_tensors();
  for (size_t k = 0; k < pa.size(); ++k) pb[k].second.copy_(pa[k].second);
  fixed->gates->weight.zero_();
  for (size_t i = 0; i < open.size(); ++i) fixed->gates->bias[int64_t(i)] = open[i] ? 10.0f : -10.0f;
  auto rng = inference::sequence_rng(o.seed, 0);
  std::vector<int64_t> seq = prompt, out;
  for (int64_t t = 0; t < o.max_new_tokens; ++t) {
    auto logits = fixed->forward(torch::tensor(seq).unsqueeze(0), torch::Tensor(), GatedOptions{}).logits[0][-1];
    // transformers' repetition penalty: gather the scores of every id seen, z/p or z*p, scatter back.
    auto ids = torch::tensor(seq);
    auto z = logits.gather(0, ids);
    const double p = o.sampling.repetition_penalty;
    logits = logits.scatter(0, ids, torch::where(z > 0, z / p, z * p)).contiguous();
    const int64_t id = inference::sample_token(logits.data_ptr<float>(), logits.numel(), o.sampling, rng);
    out.push_back(id);
    seq.push_back(id);
    if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), id) != o.stop_tokens.end()) break;
  }
  return out;
}

/// A gated model over `base` whose forward with every gate open and no LoRA is checked to
/// be the base's own on `tokens` [1, T]; its adapters then randomized from `adapter_seed`
/// (gate scale 2). `adapted`: the open forward's logits with LoRA (targets of `lc`).
struct AdaptedBase {
  GatedModel m{nullptr};
  torch::Tensor base_logits, adapted;
};
AdaptedBase adapt_base(baselines::DenseModel base, const torch::Tensor& tokens, uint64_t adapter_seed,
                       const LoraConfig& lc = {}) {
  GatedOptions open;
  open.mode = GateMode::Open;
  AdaptedBase a;
  a.m = GatedModel(base, lc, GateConfig{}, 6);
  torch::NoGradGuard ng;
  a.base_logits = base->forward(tokens);
  // (float32: the gated forward adds each block's output to the residual as x + (y - x),
  // whose rounding grows with |x|: within 1e-5 of the logits' scale, at least 1e-5;
  // measured 1.4e-5 at scale 7.6 on a tied Gemma base with AVX-512 OpenBLAS, 2026-12-07)
  const double scale = std::max(1.0, a.base_logits.abs().max().item<double>());
  EXPECT_LT((a.m->forward(tokens, torch::Tensor(), open).logits - a.base_logits).abs().max().item<double>(), 1e-5 * scale)
      << "logits up to " << scale;
  randomize_adapters(*a.m, adapter_seed, 2.0);
  a.adapted = a.m->forward(tokens, torch::Tensor(), open).logits;
  EXPECT_GT((a.adapted - a.base_logits).abs().max().item<double>(), 1e-3) << "LoRA should change the logits";
  return a;
}

/// Cached gated generation of 12 tokens after `prompt` picks the tokens of full forwards
/// (reference_tokens): greedy with the gates open and learned, then sampled (temperature 1,
/// repetition penalty 1.3) with seeds 1..`seeds`: sampling follows the probabilities closely,
/// where a greedy pick can hide a wrong position encoding.
void expect_generation_follows_forward(GatedModelImpl& m, const std::vector<int64_t>& prompt, uint64_t seeds) {
  GatedGenerateOptions o;
  o.max_new_tokens = 12;
  for (GateMode mode : {GateMode::Open, GateMode::Learned}) {
    const auto g = generate_gated(m, prompt, 12, mode, true);
    ASSERT_EQ(g.tokens.size(), 12u);
    EXPECT_EQ(g.tokens, reference_tokens(m, g.open, prompt, o)) << int(mode);
  }
  o.sampling.temperature = 1.0;
  o.sampling.repetition_penalty = 1.3;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    o.seed = seed;
    const auto g = generate_gated(m, prompt, o);
    EXPECT_EQ(g.tokens, reference_tokens(m, g.open, prompt, o)) << "seed " << seed;
  }
}

/// Merges `a` into a folder of `architecture` (save_merged) and checks that the folder,
/// read back, computes the adapted forward on `tokens`; `read` receives its config,
/// `inspect` (if given) the folder before it is removed.
void expect_merge_computes_adapted(AdaptedBase& a, const std::string& architecture, const torch::Tensor& tokens,
                                   hf::HfConfig* read = nullptr,
                                   const std::function<void(const std::string&)>& inspect = {}) {
  test::TempDir dir("merge");
  hf::ExportOptions eo;
  eo.architecture = architecture;
  save_merged(*a.m, nullptr, dir.path() + "/merged", eo, "adapter");
  if (inspect) inspect(dir.path() + "/merged");
  auto merged = hf::load_hf_model(dir.path() + "/merged", torch::kFloat32, torch::kCPU, read);
  torch::NoGradGuard ng;
  EXPECT_LT((merged->forward(tokens) - a.adapted).abs().max().item<double>(), 1e-4);
}

TEST(LayerRouteGenerate, SampledTokensEqualFullForwardReference) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 6);
  randomize_adapters(*m, 41, 2.0);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11};
  GatedGenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.temperature = 1.3;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.95;
  o.sampling.repetition_penalty = 1.7;
  std::vector<int64_t> streamed;
  o.on_token = [&](int64_t t) { streamed.push_back(t); };
  std::set<std::vector<int64_t>> distinct;
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    streamed.clear();
    const auto g = generate_gated(*m, prompt, o);
    ASSERT_EQ(g.tokens.size(), 8u);
    EXPECT_FALSE(g.stopped);
    EXPECT_EQ(streamed, g.tokens);
    EXPECT_EQ(g.tokens, reference_tokens(*m, g.open, prompt, o)) << "seed " << seed;
    EXPECT_EQ(generate_gated(*m, prompt, o).tokens, g.tokens) << "same seed, same tokens";
    distinct.insert(g.tokens);
  }
  EXPECT_GT(distinct.size(), 1u) << "different seeds should sample differently at temperature 1.3";

  // A stop token ends generation after it is emitted (and is returned).
  o.seed = 1;
  const auto full = generate_gated(*m, prompt, o);
  o.stop_tokens = {full.tokens[3], 100000};
  const auto stopped = generate_gated(*m, prompt, o);
  const auto first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[3]) - full.tokens.begin();
  ASSERT_EQ(int64_t(stopped.tokens.size()), first + 1);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_TRUE(std::equal(stopped.tokens.begin(), stopped.tokens.end(), full.tokens.begin()));

  // Greedy with the defaults is the timing protocol's generation.
  GatedGenerateOptions greedy;
  greedy.max_new_tokens = 5;
  EXPECT_EQ(generate_gated(*m, prompt, greedy).tokens, generate_gated(*m, prompt, 5, GateMode::Learned, true).tokens);
  // 0 new tokens: the prefill alone, with the same gate decisions.
  GatedGenerateOptions none;
  none.max_new_tokens = 0;
  const auto prefill = generate_gated(*m, prompt, none);
  EXPECT_TRUE(prefill.tokens.empty());
  EXPECT_FALSE(prefill.stopped);
  EXPECT_EQ(prefill.open, generate_gated(*m, prompt, greedy).open);
  none.max_new_tokens = -1;
  EXPECT_THROW(generate_gated(*m, prompt, none), InputError);
  GatedGenerateOptions bad;
  bad.sampling.top_p = 1.5;
  EXPECT_THROW(generate_gated(*m, prompt, bad), InputError);
}

// A Phi-3-style base (partial rotary, longrope with original length 10): generation that
// passes 10 tokens recomputes the sequence with the long factors (as transformers'
// Phi3ForCausalLM), so every token equals the full forward's choice.
TEST(LayerRouteGenerate, LongRopeSwitchRecomputesAsAFullForward) {
  auto c = test::tiny_config(3);
  c.partial_rotary_factor = 0.5;  // head_dim 8: 4 rotated dimensions, 2 frequencies
  c.rope_theta = 50;
  c.rope_scaling.type = "longrope";
  c.rope_scaling.short_factor = {1.0, 1.5};
  c.rope_scaling.long_factor = {3.0, 40.0};
  c.rope_scaling.original_max_position_embeddings = 10;
  c.rope_scaling.factor = 128.0 / 10.0;
  baselines::DenseModel base(c);
  randomize_base(*base, 5, 0.1);  // weights large enough for attention (and so RoPE) to decide the tokens
  GatedModel m(base, LoraConfig{}, GateConfig{}, 6);
  randomize_adapters(*m, 43, 2.0);  // gates decided from the prompt, LoRA active
  GatedGenerateOptions o;
  o.max_new_tokens = 12;
  for (const std::vector<int64_t>& prompt : {std::vector<int64_t>{5, 9, 13, 2, 7, 30, 11}, std::vector<int64_t>{3, 4, 8, 1, 2, 6, 9, 12, 15, 17, 19, 23}}) {
    const auto g = generate_gated(*m, prompt, o);
    ASSERT_EQ(g.tokens.size(), 12u);
    EXPECT_EQ(g.tokens, reference_tokens(*m, g.open, prompt, o)) << "prompt of " << prompt.size();
  }
}

TEST(LayerRouteGenerate, CommandStreamsTheGatedModelsTokens) {
  GatedModel m(tiny_base(4), LoraConfig{}, GateConfig{}, 12);
  randomize_adapters(*m, 41, /*gate_scale=*/3.0);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7};
  const auto expect = generate_gated(*m, prompt, 6, GateMode::Learned, true);
  test::TempDir d("lr_generate");
  const std::string dir = d.path() + "/merged";
  save_merged(*m, nullptr, dir, hf::ExportOptions{}, "some/adapter");  // folds the adapters into m's base
  int64_t open = 0;
  for (auto o : expect.open) open += o;
  ASSERT_GT(open, 0);
  ASSERT_LT(open, int64_t(expect.open.size())) << "some gate must be closed";
  const std::string lol = std::string(LOL_BINARY) + " layerroute generate --adapter " + reftest::quote(dir);
  tokenizers::ByteTokenizer({"<|endoftext|>"}).save(d.path() + "/tok");
  std::string long_prompt;  // 128 tokens: no room left in max_seq_len 128
  for (int i = 0; i < 128; ++i) long_prompt += "7 ";
  // Processes run side by side (each is mostly LibTorch start-up).
  const std::vector<std::string> bad = {"--gates sometimes", "--top-p 2", "--max-new 16777217", "--tokens '5 9999'",
                                        "--tokens '" + long_prompt + "'", "--tokens ' , '"};
  std::vector<std::string> args = {
      "--tokens '5 9 13 2 7' --max-new 6 --no-stop --ids", "--prompt hi", "--tokens '5 9' --ids",
      // Byte ids of "12" (49, 50) fit the tiny model's 61-id vocabulary.
      "--prompt '12' --tokenizer " + reftest::quote(d.path() + "/tok") +
          " --max-new 3 --gates open --temperature 0.8 --seed 4",
      // 0: the gates are decided and the prompt run, no token chosen.
      "--tokens '5 9 13 2 7' --max-new 0",
      // A prompt that fills the context, with no new token asked for.
      "--tokens '" + long_prompt + "' --max-new 0"};
  for (const auto& b : bad) args.push_back((b.find("--tokens") == 0 ? "" : "--tokens 5 ") + b);
  args.push_back("--tokens '5 9' --ids --max-new 1 --tokenizer byte");  // "byte" as lol generate takes it
  std::vector<std::future<reftest::RunResult>> runs;
  for (const auto& a : args)
    runs.push_back(
        std::async(std::launch::async, [&lol, a] { return reftest::run_cmd("LOL_NUM_THREADS=1 " + lol + " " + a); }));
  std::vector<reftest::RunResult> r;
  for (auto& f : runs) r.push_back(f.get());
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  std::string want;
  for (auto t : expect.tokens) want += (want.empty() ? "" : " ") + std::to_string(t);
  // stdout (the ids, one line) comes first: stderr is written after generation ends.
  EXPECT_EQ(r[0].out.substr(0, r[0].out.find('\n')), want) << r[0].out;
  EXPECT_NE(r[0].out.find("\ngates learned: " + std::to_string(open) + " of " + std::to_string(expect.open.size()) +
                          " layers run (skipped: "),
            std::string::npos)
      << r[0].out;
  // Text needs a tokenizer: the merged folder has none, and the message says what to pass.
  EXPECT_EQ(r[1].code, 2) << r[1].out;
  EXPECT_NE(r[1].out.find("no tokenizer.json (needed for text prompts; pass --tokenizer or use --tokens)"),
            std::string::npos)
      << r[1].out;
  // The default --max-new 128 does not fit: reduced to the room left, as hf generate does.
  EXPECT_EQ(r[2].code, 0) << r[2].out;
  EXPECT_NE(r[2].out.find("note: --max-new 128 reduced to 126 (the model's max_seq_len is 128, the prompt has 2 tokens)"),
            std::string::npos)
      << r[2].out;
  EXPECT_EQ(r[3].code, 0) << r[3].out;
  const std::string all = std::to_string(expect.open.size());
  EXPECT_NE(r[3].out.find("gates open: " + all + " of " + all + " layers run\n"), std::string::npos) << r[3].out;
  const std::vector<std::string> says = {"--gates = 'sometimes': expected learned, bias-only, open or closed",
                                         "top_p 2: expected 0 <= top_p <= 1", "--max-new: Value 16777217 not in range",
                                         "--tokens: id 9999 at position 1: expected 0 <= id < vocab_size = 61",
                                         "the prompt has 128 tokens and the model's context (max_seq_len) is 128: "
                                         "no room for a new token",
                                         "--tokens ' , ': no ids (expected ids separated by spaces or commas)"};
  EXPECT_EQ(r[4].code, 0) << r[4].out;
  EXPECT_EQ(r[4].out.substr(0, r[4].out.find("gates")), "\n") << "no token printed: " << r[4].out;
  EXPECT_NE(r[4].out.find("gates learned: " + std::to_string(open) + " of "), std::string::npos) << r[4].out;
  EXPECT_NE(r[4].out.find("prompt 5 tokens in "), std::string::npos) << r[4].out;
  EXPECT_NE(r[4].out.find("; 0 new tokens (max new tokens)"), std::string::npos) << r[4].out;
  EXPECT_EQ(r[5].code, 0) << r[5].out;
  EXPECT_NE(r[5].out.find("prompt 128 tokens in "), std::string::npos) << r[5].out;
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(r[6 + i].code, 2) << bad[i] << ": " << r[6 + i].out;
    EXPECT_NE(r[6 + i].out.find(says[i]), std::string::npos) << bad[i] << ": " << r[6 + i].out;
  }
  EXPECT_EQ(r.back().code, 0) << r.back().out;
}

// An OLMo 2-layout base: the gated forward with every gate open and no LoRA is the base's
// own forward (nn::Block); with LoRA it is the forward of the merged Olmo2ForCausalLM
// folder (LoRA on q_proj / k_proj before the q/k norms, as the merge folds it); and cached
// gated generation picks the full forward's tokens.
TEST(LayerRouteGenerate, OlmoLayoutBaseRunsMergesAndGenerates) {
  auto c = test::tiny_config(4);
  c.qkv_bias = false;
  c.qk_norm = c.qk_norm_across_heads = true;
  c.sandwich_norm = true;
  c.input_norms = false;
  baselines::DenseModel base(c);
  randomize_base(*base, 7, 0.3);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8};
  const auto tokens = torch::tensor(prompt).unsqueeze(0);
  auto a = adapt_base(base, tokens, 43);
  auto& m = a.m;
  GatedGenerateOptions o;
  o.max_new_tokens = 10;
  for (GateMode mode : {GateMode::Open, GateMode::Learned}) {
    o.sampling.temperature = 0;
    const auto g = generate_gated(*m, prompt, 10, mode, true);
    ASSERT_EQ(g.tokens.size(), 10u);
    EXPECT_EQ(g.tokens, reference_tokens(*m, g.open, prompt, o)) << int(mode);
  }

  EXPECT_EQ(hf::default_architecture(c), hf::kOlmo2Arch);
  expect_merge_computes_adapted(a, hf::kOlmo2Arch, tokens);
}

// Gemma-layout bases (GeGLU, embeddings times sqrt(d); Gemma 2: sandwich norms,
// soft-capped attention and logits, every other layer sliding; Gemma 3: per-head q/k
// norms, the sliding layers' own RoPE base, linear-scaled RoPE on the full ones): with
// every gate open and no LoRA the gated forward is the base's own; cached gated
// generation picks the full forward's tokens; the merge is a folder of the matching Gemma
// architecture computing the adapted forward.
TEST(LayerRouteGenerate, GemmaLayoutBasesRunGenerateAndMerge) {
  for (int version : {1, 2, 3}) {
    SCOPED_TRACE("Gemma " + std::to_string(version));
    auto c = test::tiny_config(4);
    c.qkv_bias = false;
    c.activation = "gelu_pytorch_tanh";
    c.scale_embeddings = true;
    // (Tied, the scaled embeddings dominate these tiny random models' logits: each token
    // repeats itself whatever the attention computes.)
    c.tie_word_embeddings = version == 1;
    if (version >= 2) {
      c.sandwich_norm = true;
      c.attention = "sliding";
      c.window = 4;
      c.full_attention_interval = 2;
    }
    if (version == 2) {
      c.attn_logit_softcap = 3.0;
      c.final_logit_softcap = 5.0;
      // As loaded from a folder with query_pre_attn_scalar 24 (head_dim 8): q_proj holds the
      // scale sqrt(8 / 24), so q_proj's LoRA update is scaled too, and the merge unfolds it.
      c.query_pre_attn_scalar = 24;
    }
    if (version == 3) {
      c.query_pre_attn_scalar = 12;  // (folded into q_norm, after q_proj's LoRA)
      c.qk_norm = true;
      c.rope_local_theta = 500;
      c.rope_scaling.type = "linear";
      c.rope_scaling.factor = 4.0;
    }
    baselines::DenseModel base(c);
    randomize_base(*base, 11, 0.3);
    const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8, 21};
    const auto tokens = torch::tensor(prompt).unsqueeze(0);
    auto a = adapt_base(base, tokens, 47);
    auto& m = a.m;
    torch::NoGradGuard ng;
    if (version == 3) {  // the sliding layers' own RoPE base matters here (a decoder using the full layers' would fail)
      auto one_rope = c;
      one_rope.rope_local_theta = 0;
      baselines::DenseModel other(one_rope);
      for (auto& p : other->named_parameters()) p.value().copy_(base->named_parameters()[p.key()]);
      EXPECT_GT((other->forward(tokens) - a.base_logits).abs().max().item<double>(), 1e-2);
    }
    expect_generation_follows_forward(*m, prompt, 4);

    const std::string arch = version == 1 ? hf::kGemmaArch : version == 2 ? hf::kGemma2Arch : hf::kGemma3Arch;
    EXPECT_EQ(hf::default_architecture(c), arch);
    // The merged q_proj is PEFT's fold on the Hugging Face model's q_proj: W + scale B A,
    // W the folded weight divided by the fold (Gemma 2), whatever the loader folded.
    auto& q0 = base->layers[0]->as<nn::Block>()->self_attn->q_proj->weight;
    const double fold = version == 2 ? c.query_fold() : 1.0;
    torch::Tensor want_q0;
    for (const auto& [name, t] : m->lora->peft_tensors())
      if (name.find("layers.0.self_attn.q_proj.lora_A") != std::string::npos) want_q0 = t;
    for (const auto& [name, t] : m->lora->peft_tensors())
      if (name.find("layers.0.self_attn.q_proj.lora_B") != std::string::npos)
        want_q0 = q0.detach().to(torch::kFloat64) / fold +
                  m->lora->config().scale() * torch::matmul(t.to(torch::kFloat64), want_q0.to(torch::kFloat64));
    expect_merge_computes_adapted(a, arch, tokens, nullptr, [&](const std::string& dir) {
      for (const auto& [name, t] : load_tensors(dir + "/model.safetensors"))
        if (name == "model.layers.0.self_attn.q_proj.weight")
          EXPECT_LT((t.to(torch::kFloat64) - want_q0).abs().max().item<double>(), 1e-5);
    });
  }
}

// A Granite base (embeddings times embedding_multiplier, the attention scale folded into
// q_proj, residual_multiplier into o_proj and down_proj, logits divided by logits_scaling):
// the open gated forward is the base's own; cached gated generation picks the full
// forward's tokens; LoRA on the folded projections is PEFT's on the Hugging Face model's
// (the merged q_proj, o_proj and down_proj are W + scale B A with W the unfolded weight),
// and the merge is a GraniteForCausalLM folder with the base's multipliers computing the
// adapted forward.
TEST(LayerRouteGenerate, GraniteBaseRunsGeneratesAndMerges) {
  auto c = test::tiny_config(4);
  c.qkv_bias = false;
  c.embedding_multiplier = 3.0;
  c.logits_scaling = 2.5;
  c.residual_multiplier = 0.4;     // as loaded: folded into o_proj and down_proj
  c.attention_multiplier = 0.09;   // as loaded: folded into q_proj (times sqrt(8))
  baselines::DenseModel base(c);
  randomize_base(*base, 13, 0.3);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8, 21};
  const auto tokens = torch::tensor(prompt).unsqueeze(0);
  LoraConfig lc;
  lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  auto a = adapt_base(base, tokens, 53, lc);
  auto& m = a.m;
  expect_generation_follows_forward(*m, prompt, 3);

  EXPECT_EQ(hf::default_architecture(c), hf::kGraniteArch);
  torch::NoGradGuard ng;
  const auto peft = m->lora->peft_tensors();
  auto peft_update = [&](const std::string& target) {  // layer 0's scale B A, float64
    torch::Tensor A, B;
    for (const auto& [name, t] : peft) {
      if (name.find("layers.0.") == std::string::npos || name.find("." + target + ".") == std::string::npos) continue;
      (name.find("lora_A") != std::string::npos ? A : B) = t.to(torch::kFloat64);
    }
    return m->lora->config().scale() * torch::matmul(B, A);
  };
  // PEFT's fold of the unfolded weight, taken before the merge (which folds the adapters
  // into the base's own weights).
  auto* block = base->layers[0]->as<nn::Block>();
  auto want = [&](const std::string& target, const torch::Tensor& w, double fold) {
    return w.detach().to(torch::kFloat64) / fold + peft_update(target);
  };
  const std::vector<std::tuple<std::string, std::string, torch::Tensor>> folded = {
      {"q_proj", "self_attn.q_proj", want("q_proj", block->self_attn->q_proj->weight, c.query_fold())},
      {"o_proj", "self_attn.o_proj", want("o_proj", block->self_attn->o_proj->weight, 0.4)},
      {"down_proj", "mlp.down_proj", want("down_proj", block->mlp->down_proj->weight, 0.4)}};
  hf::HfConfig read;
  expect_merge_computes_adapted(a, hf::kGraniteArch, tokens, &read, [&](const std::string& dir) {
    const auto file = load_tensors(dir + "/model.safetensors");
    const std::map<std::string, torch::Tensor> stored(file.begin(), file.end());
    for (const auto& [target, name, merged] : folded) {
      ASSERT_TRUE(stored.count("model.layers.0." + name + ".weight")) << name;
      EXPECT_LT((stored.at("model.layers.0." + name + ".weight").to(torch::kFloat64) - merged).abs().max().item<double>(),
                1e-5)
          << target;
    }
  });
  EXPECT_TRUE(read.is_granite());
  EXPECT_EQ(read.embedding_multiplier, 3.0);
  EXPECT_EQ(read.logits_scaling, 2.5);
  EXPECT_EQ(read.residual_multiplier, 0.4);
  EXPECT_EQ(read.attention_multiplier, 0.09);
}

// GPT-2-layout bases (LayerNorms with biases, learned positions and no RoPE, an ungated
// MLP, biases on every projection): the open gated forward is the base's own; cached gated
// generation (positions embedded at every step) picks the full forward's tokens; the
// merge is a GPT2LMHeadModel folder computing the adapted forward; gate_proj is no target.
TEST(LayerRouteGenerate, Gpt2LayoutBaseRunsGeneratesAndMerges) {
  for (const std::string act : {"gelu_pytorch_tanh", "relu"}) {  // GPT-2's, OPT's (merged as OPTForCausalLM)
    SCOPED_TRACE(act);
    auto c = test::tiny_config(4);
    c.norm = "layernorm";
    c.mlp = "plain";
    c.positions = "learned";
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.n_kv_heads = c.n_heads;
    c.activation = act;
    c.norm_eps = 1e-5;  // (OPT's LayerNorms: OPTConfig has no epsilon)
    baselines::DenseModel base(c);
    randomize_base(*base, 13, 0.3);
    const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8, 21};
    const auto tokens = torch::tensor(prompt).unsqueeze(0);
    LoraConfig lc;
    lc.targets = {"q_proj", "v_proj", "o_proj", "up_proj", "down_proj"};
    auto a = adapt_base(base, tokens, 53, lc);
    expect_generation_follows_forward(*a.m, prompt, 3);
    const std::string arch = act == "relu" ? hf::kOptArch : hf::kGpt2Arch;
    EXPECT_EQ(hf::default_architecture(c), arch);
    expect_merge_computes_adapted(a, arch, tokens);
    LoraConfig gate_target;
    gate_target.targets = {"gate_proj"};
    EXPECT_THROW(GatedModel(base, gate_target, GateConfig{}, 6), InputError);
  }
}

// GPT-NeoX-layout bases (Pythia: LayerNorms, partial RoPE, an ungated MLP, biases, parallel
// blocks whose MLP reads the block input; the sequential variant) and Phi's (parallel
// blocks with one input_layernorm, grouped-query attention, an lm_head bias) and StableLM's
// (Phi's parallel blocks with a gated MLP and no o_proj / MLP biases), Falcon's (parallel
// blocks with two norms, grouped-query attention, whole-head RoPE), GPT-J's (Phi's blocks
// without attention biases; merged as GPT-J, whose interleaved rotary rows the export
// restores) and StarCoder2's (sequential blocks sliding on every layer): the open gated forward is the base's own (the parallel layout matters: the
// same weights as sequential blocks compute other logits); cached gated generation picks
// the full forward's tokens; the merge is a folder of the matching architecture computing
// the adapted forward.
TEST(LayerRouteGenerate, LayerNormArchitectureBasesRunGenerateAndMerge) {
  for (const std::string layout :
       {"neox parallel", "neox sequential", "phi", "stablelm", "falcon", "gptj", "starcoder2", "cohere"}) {
    SCOPED_TRACE(layout);
    const bool phi = layout == "phi", falcon = layout == "falcon", gptj = layout == "gptj",
               starcoder2 = layout == "starcoder2", cohere = layout == "cohere";
    const bool stablelm = layout == "stablelm" || cohere;  // (Cohere: StableLM's parallel blocks, no biases)
    auto c = test::tiny_config(4);
    c.norm = "layernorm";
    c.mlp = stablelm ? "gated" : "plain";
    c.qkv_bias = !gptj && !cohere;
    c.o_bias = !stablelm && !gptj;
    c.mlp_bias = !stablelm;
    if (!phi && !stablelm && !falcon && !starcoder2) c.n_kv_heads = c.n_heads;
    c.activation = phi || gptj ? "gelu_pytorch_tanh" : stablelm ? "silu" : "gelu";
    c.partial_rotary_factor = falcon || starcoder2 || cohere ? 1.0 : 0.5;
    if (cohere) c.logit_scale = 0.3;
    c.parallel_residual = layout != "neox sequential" && !starcoder2;
    if (starcoder2) {  // every layer attends within 4 tokens
      c.attention = "sliding";
      c.window = 4;
    }
    c.shared_input_norm = phi || stablelm || gptj;
    c.lm_head_bias = phi || gptj;
    if (phi || gptj) c.tie_word_embeddings = false;
    baselines::DenseModel base(c);
    randomize_base(*base, 17, 0.3);
    if (cohere) {  // as loaded from a Cohere folder: LayerNorms without a bias
      torch::NoGradGuard ng;
      for (auto& p : base->named_parameters())
        if (p.key().find("norm.bias") != std::string::npos) p.value().zero_();
    }
    const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8, 21};
    const auto tokens = torch::tensor(prompt).unsqueeze(0);
    LoraConfig lc;
    lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"};
    if (stablelm) lc.targets.push_back("gate_proj");
    auto a = adapt_base(base, tokens, 59, lc);
    if (layout == "neox parallel") {
      torch::NoGradGuard ng;
      auto seq = c;
      seq.parallel_residual = false;
      baselines::DenseModel other(seq);
      for (auto& p : other->named_parameters()) p.value().copy_(base->named_parameters()[p.key()]);
      EXPECT_GT((other->forward(tokens) - a.base_logits).abs().max().item<double>(), 1e-2);
    }
    expect_generation_follows_forward(*a.m, prompt, 3);
    const std::string arch = phi || gptj ? hf::kPhiArch
                             : cohere    ? hf::kCohereArch
                             : stablelm  ? hf::kStableLmArch
                             : falcon    ? hf::kFalconArch  // (grouped-query: GPT-NeoX cannot hold it)
                             : starcoder2 ? hf::kStarcoder2Arch
                                          : hf::kGptNeoXArch;
    EXPECT_EQ(hf::default_architecture(c), arch);
    hf::HfConfig read;
    expect_merge_computes_adapted(a, gptj ? hf::kGptJArch : arch, tokens, &read);
    EXPECT_EQ(read.architecture, gptj ? hf::kGptJArch : arch);
    EXPECT_EQ(hf::to_dense_config(read).parallel_residual, c.parallel_residual);
    EXPECT_EQ(read.rotary_dim(), c.rotary_dim());
  }
}

// Sliding-window bases (Mistral v0.1 / Phi-3-mini-4k: every layer; Qwen2's
// use_sliding_window: layers after the full ones): with every gate open and no LoRA the
// gated forward is the base's own; cached gated generation picks the full forward's
// tokens across many window lengths; the merge is a Mistral folder computing the adapted
// forward; the generation cost counts each query's W keys.
TEST(LayerRouteGenerate, SlidingWindowBasesRunGenerateAndMerge) {
  for (int64_t prelude : {0, 1}) {
    SCOPED_TRACE("full prelude " + std::to_string(prelude));
    auto c = test::tiny_config(4);
    c.qkv_bias = prelude > 0;  // Qwen2 for the full prelude, Mistral without
    c.attention = "sliding";
    c.window = 4;
    c.n_full_prelude = prelude;
    baselines::DenseModel base(c);
    randomize_base(*base, 9, 0.2);
    const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11, 4, 8, 21, 17};
    const auto tokens = torch::tensor(prompt).unsqueeze(0);
    auto a = adapt_base(base, tokens, 43);
    auto& m = a.m;
    torch::NoGradGuard ng;
    auto full = c;
    full.attention = "full";
    full.n_full_prelude = 0;
    baselines::DenseModel unwindowed(full);
    for (auto& p : unwindowed->named_parameters()) p.value().copy_(base->named_parameters()[p.key()]);
    EXPECT_GT((unwindowed->forward(tokens) - a.base_logits).abs().max().item<double>(), 1e-3) << "the window binds";
    GatedGenerateOptions o;
    o.max_new_tokens = 12;
    for (GateMode mode : {GateMode::Open, GateMode::Learned}) {
      const auto g = generate_gated(*m, prompt, 12, mode, true);
      ASSERT_EQ(g.tokens.size(), 12u);
      EXPECT_EQ(g.tokens, reference_tokens(*m, g.open, prompt, o)) << int(mode);
      // Each open layer's pairs: sliding layers see min(position + 1, W) keys.
      const auto cost = generation_cost(c, int64_t(prompt.size()), 12, g.open, false);
      const auto cm = baselines::cost_model(c);
      double want = 0;
      const int64_t T = int64_t(prompt.size()) + 11;
      for (int64_t i = 0; i < c.n_layers; ++i) {
        if (!g.open[size_t(i)]) continue;
        double pairs = 0;
        for (int64_t q = 0; q < T; ++q) pairs += double(i < prelude ? q + 1 : std::min<int64_t>(q + 1, c.window));
        want += 2.0 * double(cm.layers[size_t(i)].matmul_params) * double(T) +
                4.0 * double(cm.layers[size_t(i)].attn_width) * pairs;
      }
      EXPECT_DOUBLE_EQ(cost.layer_flops, want);
    }

    hf::HfConfig read;
    expect_merge_computes_adapted(a, prelude > 0 ? hf::kQwen2Arch : hf::kMistralArch, tokens, &read);
    EXPECT_EQ(read.sliding_window, 4);
    EXPECT_EQ(read.full_attention_layers, prelude);
  }
}

}  // namespace
}  // namespace lol::layerroute
