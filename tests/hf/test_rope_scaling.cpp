// RoPE frequency scaling of Hugging Face checkpoints (nn/rope_scaling.h): the
// frequencies of linear, llama3, yarn and dynamic scaling against an independent
// float64 transcription of transformers' formulas (modeling_rope_utils.py), the
// config.json forms that carry them (rope_scaling of transformers 4, rope_parameters of
// transformers 5), refused settings, and the logits of tiny scaled checkpoints (full
// forward and cached decoding) against the reference forward.
#include <cmath>

#include "hf/hf_config.h"
#include "hf/hf_model.h"
#include "hf_test_util.h"
#include "inference/dense_session.h"
#include "nn/rope.h"

namespace lol::hf::test {
namespace {

constexpr double kPi = 3.14159265358979323846;

// ---- the reference: transformers' formulas, scalar float64 -------------------------

std::vector<double> ref_default(int64_t hd, double theta) {
  std::vector<double> f;
  for (int64_t j = 0; j < hd; j += 2) f.push_back(1.0 / std::pow(theta, double(j) / double(hd)));
  return f;
}

std::vector<double> ref_llama3(int64_t hd, double theta, double factor, double low, double high, double old_len) {
  std::vector<double> out;
  for (double f : ref_default(hd, theta)) {
    const double wavelen = 2 * kPi / f;
    if (wavelen < old_len / high) {
      out.push_back(f);
    } else if (wavelen > old_len / low) {
      out.push_back(f / factor);
    } else {
      const double s = (old_len / wavelen - low) / (high - low);
      out.push_back((1 - s) * f / factor + s * f);
    }
  }
  return out;
}

std::vector<double> ref_yarn(int64_t hd, double theta, double factor, double old_len, double beta_fast,
                             double beta_slow, bool truncate) {
  auto dim_of = [&](double rotations) {
    return double(hd) * std::log(old_len / (rotations * 2 * kPi)) / (2 * std::log(theta));
  };
  double lo = dim_of(beta_fast), hi = dim_of(beta_slow);
  if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
  lo = std::max(lo, 0.0);
  hi = std::min(hi, double(hd - 1));
  if (lo == hi) hi += 0.001;
  std::vector<double> out;
  const auto f = ref_default(hd, theta);
  for (size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::min(1.0, std::max(0.0, (double(i) - lo) / (hi - lo)));
    out.push_back(f[i] / factor * ramp + f[i] * (1 - ramp));
  }
  return out;
}

void expect_close(const torch::Tensor& got, const std::vector<double>& want, double rel = 3e-6) {
  ASSERT_EQ(got.numel(), int64_t(want.size()));
  EXPECT_EQ(got.scalar_type(), torch::kFloat32);
  auto g = got.to(torch::kFloat64);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(g[int64_t(i)].item<double>(), want[i], rel * want[i]) << "frequency " << i;
}

nn::RopeScaling parse_scaling(const std::string& text, int64_t max_pos = 131072) {
  return nn::RopeScaling::from_json(nlohmann::json::parse(text), "config.json", "rope_scaling", max_pos, true);
}

TEST(RopeScaling, Llama3FrequenciesOfLlama31AndItsThreeBands) {
  // Llama 3.1 8B: head_dim 128, rope_theta 500000, factor 8, low/high 1/4, original 8192.
  const auto s = parse_scaling(R"({"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192, "rope_type": "llama3"})");
  const auto f = nn::rope_frequencies(128, 500000.0, s);
  expect_close(f.inv_freq, ref_llama3(128, 500000.0, 8, 1, 4, 8192));
  EXPECT_EQ(f.attention_factor, 1.0);
  // Wavelengths below 8192 / 4 keep their frequency (j < 29), above 8192 divide it by 8
  // (j >= 35), the six between are interpolated.
  const auto plain = nn::rope_frequencies(128, 500000.0).inv_freq;
  int kept = 0, divided = 0, between = 0;
  for (int64_t j = 0; j < 64; ++j) {
    const float p = plain[j].item<float>(), g = f.inv_freq[j].item<float>();
    if (g == p) ++kept;
    else if (g == p / 8.0f) ++divided;
    else if (g < p && g > p / 8.0f) ++between;
  }
  EXPECT_EQ(kept, 29);
  EXPECT_EQ(divided, 29);
  EXPECT_EQ(between, 6);
  // Llama 3.2 1B / 3B: factor 32, head_dim 64.
  const auto s32 = parse_scaling(R"({"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"})");
  expect_close(nn::rope_frequencies(64, 500000.0, s32).inv_freq, ref_llama3(64, 500000.0, 32, 1, 4, 8192));
}

TEST(RopeScaling, YarnFrequenciesAndAttentionFactor) {
  // Qwen2.5's documented long-context setting: factor 4, original 32768 (head_dim 128, base 1e6).
  const auto q = parse_scaling(R"({"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"})", 32768);
  auto f = nn::rope_frequencies(128, 1e6, q);
  expect_close(f.inv_freq, ref_yarn(128, 1e6, 4, 32768, 32, 1, true));
  EXPECT_NEAR(f.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
  // Dimensions 0..23 extrapolate (unchanged), 40.. interpolate (a quarter of the frequency).
  const auto plain = nn::rope_frequencies(128, 1e6).inv_freq;
  for (int64_t j = 0; j < 64; ++j) {
    const double p = plain[j].item<double>(), g = f.inv_freq[j].item<double>();
    if (j <= 23) EXPECT_EQ(g, p) << j;
    if (j >= 40) EXPECT_NEAR(g, p / 4, 1e-6 * p) << j;
    if (j > 23 && j < 40) EXPECT_TRUE(g < p && g > p / 4) << j;
  }
  // Without truncation, other betas, and without original_max_position_embeddings
  // (transformers 5: max_position_embeddings).
  const auto u = parse_scaling(R"({"rope_type": "yarn", "factor": 8, "beta_fast": 16, "beta_slow": 2, "truncate": false})", 4096);
  EXPECT_EQ(u.original_max_position_embeddings, 4096);
  EXPECT_EQ(parse_scaling(R"({"rope_type": "yarn", "factor": 2, "original_max_position_embeddings": 2048.0})")
                .original_max_position_embeddings,
            2048);
  expect_close(nn::rope_frequencies(64, 10000.0, u).inv_freq, ref_yarn(64, 10000.0, 8, 4096, 16, 2, false));
  EXPECT_NEAR(nn::rope_frequencies(64, 10000.0, u).attention_factor, 0.1 * std::log(8.0) + 1.0, 1e-15);
  // The attention factor: given; or DeepSeek's mscale ratio; 1 for factor <= 1.
  EXPECT_EQ(parse_scaling(R"({"rope_type": "yarn", "factor": 4, "attention_factor": 0.75})").cos_sin_factor(), 0.75);
  const double ms = (0.1 * 0.8 * std::log(40.0) + 1) / (0.1 * 0.5 * std::log(40.0) + 1);
  EXPECT_NEAR(parse_scaling(R"({"rope_type": "yarn", "factor": 40, "mscale": 0.8, "mscale_all_dim": 0.5})").cos_sin_factor(), ms,
              1e-15);
  EXPECT_EQ(parse_scaling(R"({"rope_type": "yarn", "factor": 1.0})").cos_sin_factor(), 1.0);
  // truncate null is transformers' None: no truncation, as false.
  const auto tn = parse_scaling(R"({"rope_type": "yarn", "factor": 8, "beta_fast": 16, "beta_slow": 2, "truncate": null})", 4096);
  EXPECT_FALSE(tn.truncate);
  EXPECT_TRUE(nn::rope_frequencies(64, 10000.0, tn).inv_freq.equal(nn::rope_frequencies(64, 10000.0, u).inv_freq));
  // factor null with original given: the ratio max_position_embeddings / original (transformers 5).
  EXPECT_EQ(parse_scaling(R"({"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 4096})", 16384).factor,
            4.0);
}

TEST(RopeScaling, LinearAndDynamic) {
  const auto plain = nn::rope_frequencies(64, 10000.0).inv_freq;
  const auto lin = nn::rope_frequencies(64, 10000.0, parse_scaling(R"({"type": "linear", "factor": 2.0})")).inv_freq;
  EXPECT_TRUE(lin.equal(plain / 2.0));
  // Dynamic NTK is plain RoPE within max_position_embeddings; positions beyond are refused.
  const auto dyn = parse_scaling(R"({"rope_type": "dynamic", "factor": 2.0})", 100);
  EXPECT_TRUE(nn::rope_frequencies(64, 10000.0, dyn).inv_freq.equal(plain));
  EXPECT_EQ(dyn.position_limit(), 100);
  nn::RoPE rope(8, 10000.0, dyn);
  auto x = torch::randn({3, 2, 8});
  EXPECT_NO_THROW(rope.apply(x, torch::tensor({0, 50, 99}, torch::kInt64)));
  expect_input_error([&] { rope.apply(x, torch::tensor({0, 50, 100}, torch::kInt64)); },
                     {"\"dynamic\"", "101 positions", "max_position_embeddings = 100"});
  // The tables of the unscaled RoPE are unchanged by this code: the default equals the
  // formula transformers uses (1 / theta^(2j/hd) in float32).
  auto direct = 1.0 / torch::pow(torch::tensor(10000.0, torch::kFloat32),
                                 torch::arange(0, 64, 2, torch::kInt64).to(torch::kFloat32) / 64.0);
  EXPECT_TRUE(plain.equal(direct));
}

TEST(RopeScaling, RefusedSettingsNameTheField) {
  struct Bad {
    std::string json;
    std::vector<std::string> says;
  };
  const std::vector<Bad> bad = {
      {R"({"rope_type": "su", "short_factor": [1], "long_factor": [1]})", {"rope_scaling.rope_type", "su", "not supported"}},
      {R"({"rope_type": "longrope", "short_factor": [1, 2]})", {"rope_scaling.long_factor", "missing"}},
      {R"({"rope_type": "longrope", "short_factor": [1, 0], "long_factor": [1, 2]})", {"rope_scaling.short_factor[1]", "[1e-6, 1e6]"}},
      {R"({"rope_type": "longrope", "short_factor": [1, 2], "long_factor": [1e-300, 2]})", {"rope_scaling.long_factor[0]", "[1e-6, 1e6]"}},
      {R"({"rope_type": "longrope", "short_factor": [1], "long_factor": [1], "attention_factor": 1e30})",
       {"rope_scaling", "attention factor 1e+30 (given)", "(0, 1e6]"}},
      {R"({"type": "su", "short_factor": [1], "long_factor": [1]})", {"rope_scaling.type", "su", "not supported"}},
      {R"({"rope_type": "longrope", "short_factor": 1, "long_factor": [1]})", {"rope_scaling.short_factor", "list of numbers"}},
      {R"({"rope_type": "longrope", "short_factor": [1], "long_factor": [1], "beta_fast": 2})",
       {"rope_scaling.beta_fast", "not used", "longrope"}},
      {R"({"rope_type": "llama3", "factor": 8.0})", {"rope_scaling.low_freq_factor", "missing"}},
      {R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4})",
       {"rope_scaling.high_freq_factor", "> low_freq_factor = 4"}},
      {R"({"rope_type": "linear"})", {"rope_scaling.factor", "missing"}},
      {R"({"rope_type": "linear", "factor": 0})", {"rope_scaling.factor", "(0, 1e6]"}},
      {R"({"rope_type": "linear", "factor": "2"})", {"rope_scaling.factor", "finite number"}},
      {R"({"rope_type": "linear", "factor": 2, "low_freq_factor": 1})", {"rope_scaling.low_freq_factor", "not used", "linear"}},
      {R"({"rope_type": "yarn", "factor": 4, "truncate": 1})", {"rope_scaling.truncate", "true, false or null"}},
      {R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
           "original_max_position_embeddings": null})",
       {"rope_scaling.original_max_position_embeddings", "= null"}},
      {R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0.5})",
       {"rope_scaling.original_max_position_embeddings", "integer"}},
      {R"({"rope_type": "default", "factor": 2})", {"rope_scaling.factor", "not used", "default"}},
      {R"({"rope_type": "linear", "type": "yarn", "factor": 2})", {"rope_scaling.type", "differs"}},
      {R"({"rope_type": "yarn", "factor": 2, "partial_rotary_factor": 0.5})", {"rope_scaling.partial_rotary_factor", "not supported"}},
      {R"([2])", {"rope_scaling", "expected an object"}}};
  for (const auto& b : bad) {
    SCOPED_TRACE(b.json);
    expect_input_error([&] { parse_scaling(b.json); }, b.says);
  }
}

// ---- config.json ---------------------------------------------------------------------

nlohmann::json llama32_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

TEST(RopeScaling, ConfigFormsOfTransformers4And5) {
  const auto c = HfConfig::from_json(llama32_config(), "config.json");
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.describe(),
            "llama3 (factor 32, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192)");
  // transformers 5: the same in rope_parameters, with the base inside.
  auto v5 = llama32_config();
  v5["rope_parameters"] = v5["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  const auto c5 = HfConfig::from_json(v5, "config.json");
  EXPECT_EQ(c5.rope_scaling, c.rope_scaling);
  EXPECT_EQ(c5.rope_theta, 500000.0);
  // Written back and read again: the same setting (and the dense model's config keeps it).
  const auto again = HfConfig::from_json(nlohmann::json::parse(c.to_json().dump()), "again");
  EXPECT_EQ(again.rope_scaling, c.rope_scaling);
  const auto dense = to_dense_config(c);
  EXPECT_EQ(dense.rope_scaling, c.rope_scaling);
  EXPECT_EQ(baselines::DenseConfig::from_json(dense.to_json(), "dense").rope_scaling, c.rope_scaling);
  EXPECT_EQ(from_dense_config(dense, kLlamaArch, "float32").rope_scaling, c.rope_scaling);
  // A plain model writes no rope_scaling in lol's own config.
  EXPECT_FALSE(to_dense_config(HfConfig::from_json(tiny_config_json(TinyShape{}), "tiny")).to_json().contains("rope_scaling"));
  // Refused: two different settings, two bases, a partial rotary factor at the top level.
  auto both = llama32_config();
  both["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_input_error([&] { HfConfig::from_json(both, "config.json"); },
                     {"config.json", "rope_scaling", "differs from field 'rope_parameters'"});
  auto theta = v5;
  theta["rope_theta"] = 10000.0;
  expect_input_error([&] { HfConfig::from_json(theta, "config.json"); },
                     {"rope_parameters.rope_theta", "differs from field 'rope_theta'"});
  // A top-level original_max_position_embeddings (transformers 5 uses it, 4.x not): only when equal.
  auto top = llama32_config();
  top["original_max_position_embeddings"] = 8192;
  EXPECT_EQ(HfConfig::from_json(top, "config.json").rope_scaling, c.rope_scaling);
  top["original_max_position_embeddings"] = 4096;
  expect_input_error([&] { HfConfig::from_json(top, "config.json"); },
                     {"field 'original_max_position_embeddings' = 4096", "rope_scaling.original_max_position_embeddings' = 8192"});
  auto partial = llama32_config();
  partial["partial_rotary_factor"] = 0.5;
  expect_input_error([&] { HfConfig::from_json(partial, "config.json"); }, {"partial_rotary_factor", "not supported"});
}

// ---- tiny checkpoints: logits against the reference forward -----------------------

struct ScaledCase {
  std::string name;
  nlohmann::json rope_scaling;
  std::vector<double> inv;
  double attention_factor;
};

std::vector<ScaledCase> scaled_cases(const TinyShape& s) {
  const int64_t hd = s.hidden / s.heads;
  std::vector<ScaledCase> c;
  // Original 64 positions: head_dim 8 has one kept, one interpolated and two divided frequencies.
  c.push_back({"llama3",
               {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                {"original_max_position_embeddings", 64}},
               ref_llama3(hd, s.rope_theta, 8, 1, 4, 64), 1.0});
  c.push_back({"yarn", {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}},
               ref_yarn(hd, s.rope_theta, 4, 32, 32, 1, true), 0.1 * std::log(4.0) + 1});
  std::vector<double> lin = ref_default(hd, s.rope_theta);
  for (double& f : lin) f /= 2.5;
  c.push_back({"linear", {{"rope_type", "linear"}, {"factor", 2.5}}, lin, 1.0});
  return c;
}

/// A tiny checkpoint of `t` (weights of `seed`) written, loaded in float64, and its
/// logits [n, vocab] on n tokens.
struct LoadedTiny {
  baselines::DenseModel model{nullptr};
  std::vector<int64_t> tokens;
  torch::Tensor logits;
};
LoadedTiny load_and_run(const TinyShape& t, uint64_t seed, int64_t n) {
  TempDir d("rope_scaled");
  write_tiny_checkpoint(d.path(), t, seed, torch::kFloat32);
  LoadedTiny r;
  r.model = load_hf_model(d.path(), torch::kFloat64);
  for (int64_t i = 0; i < n; ++i) r.tokens.push_back((i * 17 + 5) % t.vocab);
  torch::NoGradGuard ng;
  r.logits = r.model->forward(torch::tensor(r.tokens, torch::kInt64).unsqueeze(0)).squeeze(0);
  return r;
}

TEST(RopeScaling, ScaledCheckpointLogitsMatchTheReference) {
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM"}) {
    TinyShape s;
    s.arch = arch;
    s.rope_theta = 10000.0;
    for (const auto& sc : scaled_cases(s)) {
      SCOPED_TRACE(std::string(arch) + " " + sc.name);
      TinyShape t = s;
      t.rope_scaling = sc.rope_scaling;
      t.ref_inv_freq = sc.inv;
      t.ref_attention_factor = sc.attention_factor;
      auto [m, tokens, got] = load_and_run(t, 21, 60);
      const auto w = tiny_weights(t, 21);
      EXPECT_LT((got - reference_logits(t, w, tokens)).abs().max().item<double>(), 2e-5);
      // The unscaled model computes something else: the comparison can fail.
      EXPECT_GT((got - reference_logits(s, w, tokens)).abs().max().item<double>(), 1e-3);
      // Cached decoding (prefill of 20, then one token at a time) equals the full forward.
      inference::DenseSessionOptions so;
      so.batch_size = 1;
      inference::DenseDecodeSession session(m, so);
      auto l = session.feed({{0, {tokens.begin(), tokens.begin() + 20}}}, true);
      for (size_t i = 20; i < tokens.size(); ++i) l = torch::cat({l, session.feed({{0, {tokens[i]}}})});
      EXPECT_LT((l.to(torch::kFloat64) - got).abs().max().item<double>(), 3e-5);
    }
  }
}

TEST(RopeScaling, DynamicCheckpointIsPlainWithinItsLengthAndRefusesBeyond) {
  TinyShape s;
  s.arch = "LlamaForCausalLM";
  TinyShape t = s;
  t.rope_scaling = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  const auto run = load_and_run(t, 4, 30);
  auto m = run.model;
  const auto& tokens = run.tokens;
  const auto& got = run.logits;
  EXPECT_LT((got - reference_logits(s, tiny_weights(s, 4), tokens)).abs().max().item<double>(), 1e-9);
  inference::DenseSessionOptions so;
  so.max_len = s.max_pos + 1;
  expect_input_error([&] { inference::DenseDecodeSession session(m, so); }, {"dynamic", "max_position_embeddings = 128"});
}

}  // namespace
}  // namespace lol::hf::test
