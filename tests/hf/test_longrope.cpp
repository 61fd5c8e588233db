// LongRoPE (Phi-3-128k, Phi-3.5, Phi-4-mini) and partial rotary embeddings (Phi-4-mini's
// partial_rotary_factor 0.75): frequencies against transformers' formulas written out
// here, the rotation of the leading dimensions against a direct transcription, config
// parsing and refusals, export, and the per-call choice of the factor list in cached
// decoding (transformers' longrope_frequency_update: the call's largest position + 1;
// Phi3ForCausalLM's recomputation when a sequence first passes the original length).
#include <cmath>

#include "core/runtime.h"
#include "hf/hf_config.h"
#include "hf/hf_model.h"
#include "hf_test_util.h"
#include "inference/dense_session.h"
#include "nn/rope.h"

namespace lol::hf::test {
namespace {

nn::RopeScaling longrope(std::vector<double> short_f, std::vector<double> long_f, int64_t original, double factor) {
  nn::RopeScaling s;
  s.type = "longrope";
  s.short_factor = std::move(short_f);
  s.long_factor = std::move(long_f);
  s.original_max_position_embeddings = original;
  s.factor = factor;
  return s;
}

/// transformers: inv_freq = 1.0 / (ext_factors * base ** (arange(0, dim, 2).float() / dim)), float32.
torch::Tensor ref_longrope_inv(int64_t dim, double theta, const std::vector<double>& ext) {
  auto base = torch::pow(torch::tensor(theta, torch::kFloat32), torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / double(dim));
  return 1.0 / (torch::tensor(std::vector<float>(ext.begin(), ext.end())) * base);
}

TEST(LongRope, FrequenciesAndAttentionFactorFollowTransformers) {
  const std::vector<double> sf = {1.0, 1.1, 1.5, 2.25}, lf = {1.0, 3.0, 9.5, 40.0};
  const auto s = longrope(sf, lf, 16, 96.0 / 16.0);
  // seq_len <= original: short factors; beyond: long ones (and 0 = no length: short).
  EXPECT_TRUE(nn::rope_frequencies(8, 500.0, s, 16).inv_freq.equal(ref_longrope_inv(8, 500.0, sf)));
  EXPECT_TRUE(nn::rope_frequencies(8, 500.0, s).inv_freq.equal(ref_longrope_inv(8, 500.0, sf)));
  EXPECT_TRUE(nn::rope_frequencies(8, 500.0, s, 17).inv_freq.equal(ref_longrope_inv(8, 500.0, lf)));
  EXPECT_FALSE(s.uses_long_factors(16));
  EXPECT_TRUE(s.uses_long_factors(17));
  // Attention factor sqrt(1 + ln(factor) / ln(original)); 1 for factor <= 1; as given.
  const double want = std::sqrt(1 + std::log(6.0) / std::log(16.0));
  EXPECT_DOUBLE_EQ(s.cos_sin_factor(), want);
  EXPECT_DOUBLE_EQ(longrope(sf, lf, 16, 1.0).cos_sin_factor(), 1.0);
  auto given = s;
  given.attention_factor = 1.25;
  EXPECT_DOUBLE_EQ(given.cos_sin_factor(), 1.25);
  // cos / sin tables: float32 angles times the factor.
  auto [c, sn] = nn::rope_tables(8, 500.0, s, 40, 40);
  auto angles = torch::outer(torch::arange(40, torch::kInt64).to(torch::kFloat32), ref_longrope_inv(8, 500.0, lf));
  EXPECT_TRUE(c.equal(angles.cos() * want));
  EXPECT_TRUE(sn.equal(angles.sin() * want));
  // The factor lists must hold one value per frequency.
  expect_input_error([&] { nn::rope_frequencies(10, 500.0, s, 5); }, {"short_factor", "has 4 values", "= 5"});
  expect_input_error([&] { nn::RoPE(16, 500.0, s, 6); }, {"has 4 values", "= 3"});
  expect_input_error([&] { nn::RoPE(16, 500.0, {}, 7); }, {"rotary dimension 7", "even"});
  // Round trip through lol's own config format; describe() names the switch.
  const auto back = nn::RopeScaling::from_json(nlohmann::json::parse(s.to_json(96).dump()), "c", "rope_scaling", 96, false);
  EXPECT_EQ(back, s);
  EXPECT_NE(s.describe().find("long beyond 16 positions"), std::string::npos) << s.describe();
  // An absent factor is Phi-3's ratio max_position_embeddings / original.
  auto j = nlohmann::json::parse(R"({"rope_type": "longrope", "short_factor": [1, 2], "long_factor": [3, 4],
                                     "original_max_position_embeddings": 32})");
  EXPECT_DOUBLE_EQ(nn::RopeScaling::from_json(j, "c", "rope_scaling", 128, false).factor, 4.0);
}

/// x [N, heads, hd] rotated on its first r dimensions as transformers' Phi3 apply_rotary_pos_emb.
torch::Tensor ref_partial(const torch::Tensor& x, const torch::Tensor& pos, int64_t r, double theta) {
  auto inv = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), torch::arange(0, r, 2, torch::kInt64).to(torch::kFloat32) / double(r));
  auto f = torch::outer(pos.to(torch::kFloat32), inv);
  auto emb = torch::cat({f, f}, -1);
  auto cos = emb.cos().to(x.scalar_type()).unsqueeze(1), sin = emb.sin().to(x.scalar_type()).unsqueeze(1);
  auto rot = x.narrow(-1, 0, r), pass = x.narrow(-1, r, x.size(-1) - r);
  auto halves = rot.chunk(2, -1);
  return torch::cat({rot * cos + torch::cat({-halves[1], halves[0]}, -1) * sin, pass}, -1);
}

TEST(LongRope, PartialRotaryRotatesTheLeadingDimensionsOnly) {
  for (auto dt : {torch::kFloat64, torch::kFloat32}) {
    for (bool kernels : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(dt)) + (kernels ? " kernel" : " composed"));
      const bool was = cpu_kernels_enabled();
      set_cpu_kernels_enabled(kernels);
      torch::manual_seed(3);
      auto x = torch::randn({5, 3, 8}, torch::TensorOptions(dt)).requires_grad_(true);
      auto pos = torch::tensor({0, 4, 9, 33, 2}, torch::kInt64);
      nn::RoPE rope(8, 77.0, {}, 6);
      auto out = rope.apply(x, pos);
      auto want = ref_partial(x.detach(), pos, 6, 77.0);
      EXPECT_LT((out - want).abs().max().item<double>(), dt == torch::kFloat64 ? 1e-12 : 1e-6);
      EXPECT_TRUE(out.narrow(-1, 6, 2).equal(x.narrow(-1, 6, 2))) << "the last 2 dimensions pass unchanged";
      // The backward is the inverse rotation on the leading dims and the identity on the rest.
      auto w = torch::randn_like(out);
      (out * w).sum().backward();
      auto xr = x.detach().clone().requires_grad_(true);
      (ref_partial(xr, pos, 6, 77.0) * w).sum().backward();
      EXPECT_LT((x.grad() - xr.grad()).abs().max().item<double>(), dt == torch::kFloat64 ? 1e-12 : 1e-6);
      set_cpu_kernels_enabled(was);
    }
  }
}

// Phi-3.5-mini-instruct's config.json fields that matter here (its factor lists: 48
// values each, shortened to a pattern of the same length), and Phi-4-mini's partial
// rotary factor with 128-dim heads (48 frequencies: 96 rotated dimensions).
nlohmann::json phi35_config() {
  nlohmann::json j = {{"architectures", {"Phi3ForCausalLM"}}, {"model_type", "phi3"}, {"hidden_size", 3072},
                      {"intermediate_size", 8192}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
                      {"num_key_value_heads", 32}, {"max_position_embeddings", 131072},
                      {"original_max_position_embeddings", 4096}, {"rope_theta", 10000.0}, {"rms_norm_eps", 1e-5},
                      {"sliding_window", 262144}, {"tie_word_embeddings", false}, {"vocab_size", 32064}};
  std::vector<double> sf, lf;
  for (int i = 0; i < 48; ++i) {
    sf.push_back(1.0 + 0.02 * i);
    lf.push_back(1.0 + 1.5 * i);
  }
  j["rope_scaling"] = {{"long_factor", lf}, {"short_factor", sf}, {"type", "longrope"}};
  return j;
}

TEST(LongRope, Phi3ConfigsParseExportAndRefuse) {
  auto parse = [](const nlohmann::json& j) { return HfConfig::from_json(j, "dir/config.json"); };
  auto j = phi35_config();
  const HfConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_NEAR(c.rope_scaling.cos_sin_factor(), std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-15);
  EXPECT_DOUBLE_EQ(c.rope_scaling.long_factor[47], 1.0 + 1.5 * 47);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  // Phi3Config's rope_scaling.factor is replaced by the ratio, its original defaults to
  // 4096, and the legacy type "su" is longrope.
  auto k = j;
  k["rope_scaling"]["factor"] = 2.0;
  k.erase("original_max_position_embeddings");
  k["rope_scaling"]["type"] = "su";
  EXPECT_EQ(parse(k).rope_scaling, c.rope_scaling);
  k["rope_scaling"]["type"] = "yarn";  // renamed as well (transformers 4.x and 5)
  EXPECT_EQ(parse(k).rope_scaling, c.rope_scaling);
  k["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};  // Phi3Config accepts no other type
  expect_input_error([&] { parse(k); }, {"dir/config.json", "rope_scaling", "\"linear\"", "longrope only"});
  // Round trip through the exported config.json (Phi3Config's three-key form).
  const auto out = c.to_json();
  EXPECT_EQ(out["rope_scaling"].size(), 3u) << out["rope_scaling"].dump();
  EXPECT_EQ(out["original_max_position_embeddings"], 4096);
  EXPECT_EQ(parse(nlohmann::json::parse(out.dump())).rope_scaling, c.rope_scaling);

  // Phi-4-mini: head_dim 128, partial_rotary_factor 0.75 -> 96 rotated dimensions.
  auto p = j;
  p["hidden_size"] = 3072;
  p["num_attention_heads"] = 24;
  p["num_key_value_heads"] = 8;
  p["partial_rotary_factor"] = 0.75;
  const HfConfig m = parse(p);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_DOUBLE_EQ(m.partial_rotary_factor, 0.75);
  EXPECT_EQ(to_dense_config(m).rotary_dim(), 96);
  EXPECT_EQ(m.to_json()["partial_rotary_factor"], 0.75);
  // Refusals: lists of the wrong length for the rotary dimension, an odd or empty
  // rotary dimension, a partial factor outside Phi-3, the original in two places.
  auto bad = p;
  bad["partial_rotary_factor"] = 0.5;
  expect_input_error([&] { parse(bad); }, {"dir/config.json", "rope_scaling.short_factor", "has 48 values", "= 32"});
  bad = p;
  bad["rope_scaling"] = nullptr;
  bad["partial_rotary_factor"] = 27.0 / 128.0;
  expect_input_error([&] { parse(bad); }, {"partial_rotary_factor", "even and >= 2"});
  bad["partial_rotary_factor"] = 0.0;
  expect_input_error([&] { parse(bad); }, {"partial_rotary_factor", "(0, 1]"});
  bad["partial_rotary_factor"] = nullptr;  // transformers: int(head_dim * None) fails
  expect_input_error([&] { parse(bad); }, {"partial_rotary_factor", "= null", "(0, 1]"});
  bad = j;
  bad["rope_scaling"]["original_max_position_embeddings"] = 8192;
  expect_input_error([&] { parse(bad); }, {"rope_scaling.original_max_position_embeddings", "8192", "4096"});
  bad = j;
  bad["original_max_position_embeddings"] = 1;  // ln(1) = 0 divides (transformers: ZeroDivisionError)
  expect_input_error([&] { parse(bad); }, {"original_max_position_embeddings", "attention factor inf", "(0, 1e6]"});
  bad["rope_scaling"]["attention_factor"] = 1.5;  // given: no division
  EXPECT_DOUBLE_EQ(parse(bad).rope_scaling.cos_sin_factor(), 1.5);
  bad = j;
  bad["original_max_position_embeddings"] = nullptr;
  expect_input_error([&] { parse(bad); }, {"original_max_position_embeddings", "integer"});
  auto llama = j;
  llama["architectures"] = {"LlamaForCausalLM"};
  llama["model_type"] = "llama";
  llama["rope_scaling"] = nullptr;
  llama["partial_rotary_factor"] = 0.5;
  expect_input_error([&] { parse(llama); }, {"partial_rotary_factor", "not supported"});

  // Export: Phi-3 keeps both; another architecture refuses them.
  auto dense = to_dense_config(m);
  const auto h = from_dense_config(dense, kPhi3Arch, "float32").to_json();
  EXPECT_EQ(h["partial_rotary_factor"], 0.75);
  EXPECT_EQ(h["original_max_position_embeddings"], 4096);
  EXPECT_EQ(h["rope_scaling"]["type"], "longrope");
  expect_input_error([&] { from_dense_config(dense, kLlamaArch, "float32"); }, {"partial_rotary_factor", "Phi-3"});
  dense.partial_rotary_factor = 1.0;  // 64 frequencies: the lists no longer fit
  expect_input_error([&] { dense.validate("model/config.json"); },
                     {"model/config.json", "rope_scaling.short_factor", "has 48 values", "= 64"});
}

// ---- cached decoding: the factor list is chosen per call ------------------------------

baselines::DenseConfig tiny_phi4(const std::vector<double>& sf, const std::vector<double>& lf) {
  baselines::DenseConfig c;
  c.vocab_size = 53;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 40;
  c.max_seq_len = 96;
  c.rope_theta = 500.0;
  c.norm_eps = 1e-6;
  c.partial_rotary_factor = 0.75;  // head_dim 8 -> 6 rotated dimensions, 3 frequencies
  c.rope_scaling = longrope(sf, lf, 16, 96.0 / 16.0);
  return c;
}

/// Logits of `t` fed as one call of `first` tokens, then one token per call.
torch::Tensor cached_logits(baselines::DenseModel& m, const std::vector<int64_t>& t, size_t first, bool kernels) {
  inference::DenseSessionOptions so;
  so.cpu_kernels = kernels;
  inference::DenseDecodeSession s(m, so);
  std::vector<torch::Tensor> out = {s.feed({{0, {t.begin(), t.begin() + int64_t(first)}}}, true)};
  for (size_t i = first; i < t.size(); ++i) out.push_back(s.step({t[i]}));
  return torch::cat(out).to(torch::kFloat64);
}

TEST(LongRope, CachedDecodingSwitchesToTheLongFactorsAsTransformers) {
  const std::vector<double> sf = {1.0, 1.3, 2.0}, lf = {1.5, 6.0, 20.0};
  std::vector<int64_t> t;
  for (int64_t i = 0; i < 30; ++i) t.push_back((i * 17 + 5) % 53);
  const std::vector<int64_t> prefix(t.begin(), t.begin() + 16);
  for (auto dt : {torch::kFloat64, torch::kFloat32}) {
    const double tol = dt == torch::kFloat64 ? 1e-9 : 2e-4;
    auto m = random_dense(tiny_phi4(sf, lf), 11, dt);
    // The same weights with only the short (or only the long) factors.
    auto m_short = random_dense(tiny_phi4(sf, sf), 11, dt);
    auto m_long = random_dense(tiny_phi4(lf, lf), 11, dt);
    const auto full = full_logits(m, t), full_long = full_logits(m_long, t);
    EXPECT_LT((full - full_long).abs().max().item<double>(), tol) << "30 > 16 positions: the long factors";
    EXPECT_LT((full_logits(m, prefix) - full_logits(m_short, prefix)).abs().max().item<double>(), tol)
        << "16 positions: the short factors";
    EXPECT_GT((full.narrow(0, 0, 16) - full_logits(m_short, prefix)).abs().max().item<double>(), 1e-2)
        << "the two lists give different logits";
    for (bool kernels : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(dt)) + (kernels ? " kernels" : " tensors"));
      // One call of 30 tokens: the long factors for all, as the full forward.
      EXPECT_LT((cached_logits(m, t, 30, kernels) - full).abs().max().item<double>(), tol);
      // A prompt of 10, then one token per call: calls up to position 15 use the short
      // factors (equal to the short-only model); the call of position 16 recomputes the
      // row with the long factors (Phi3ForCausalLM's generation drops its cache there),
      // so from then on the logits are the full forward's.
      const auto stepped = cached_logits(m, t, 10, kernels);
      const auto short_ref = full_logits(m_short, prefix);
      EXPECT_LT((stepped.narrow(0, 0, 16) - short_ref).abs().max().item<double>(), tol);
      EXPECT_LT((stepped.narrow(0, 16, 14) - full.narrow(0, 16, 14)).abs().max().item<double>(), tol);
      // A chunk that crosses: 10 tokens, then 10 more with all_logits -> the 10 new
      // tokens' logits of the 20-token full forward (long), and the session goes on.
      inference::DenseSessionOptions so;
      so.cpu_kernels = kernels;
      so.batch_size = 2;
      inference::DenseDecodeSession s(m, so);
      s.feed({{1, {t.begin(), t.begin() + 3}}});
      s.feed({{0, {t.begin(), t.begin() + 10}}});
      auto chunk = s.feed({{1, {t.begin() + 3, t.begin() + 5}}, {0, {t.begin() + 10, t.begin() + 20}}}, true);
      ASSERT_EQ(chunk.size(0), 12);
      EXPECT_LT((chunk.narrow(0, 2, 10).to(torch::kFloat64) - full.narrow(0, 10, 10)).abs().max().item<double>(), tol);
      EXPECT_LT((chunk.narrow(0, 0, 2).to(torch::kFloat64) - short_ref.narrow(0, 3, 2)).abs().max().item<double>(), tol)
          << "the other row is not replayed";
      EXPECT_EQ(s.length(0), 20);
      auto next = s.feed({{0, {t[20]}}});
      EXPECT_LT((next.to(torch::kFloat64) - full.narrow(0, 20, 1)).abs().max().item<double>(), tol);
      // A bad input later in the same call leaves the rows as they were.
      expect_input_error([&] { s.feed({{1, {t[5]}}, {0, {999}}}); }, {"999"});
      EXPECT_EQ(s.length(1), 5);
      EXPECT_EQ(s.length(0), 21);
    }
  }
}

}  // namespace
}  // namespace lol::hf::test
