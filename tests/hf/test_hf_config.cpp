// config.json parsing (Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM, MistralForCausalLM): real-model configs,
// defaults, refusal of features the dense model does not implement, round trip.
#include "hf/hf_config.h"
#include "hf/hf_model.h"
#include "hf_test_util.h"

namespace lol::hf::test {
namespace {

// Qwen2.5-0.5B-Instruct's config.json (transformers 4.43), also the benchmark's shape.
const std::string kQwen25 = read_text(std::string(LOL_SOURCE_DIR) + "/tests/hf/data/qwen2.5-0.5b-instruct.config.json");

// A TinyLlama-style Llama config (no tie, GQA 32/4, float32).
const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5632, "max_position_embeddings": 2048,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "float32", "vocab_size": 32000})";

// Qwen3-0.6B's config.json (the fields of the Hugging Face Hub file, transformers 4.51):
// head_dim 128 with hidden_size 1024 and 16 heads (not hidden / heads).
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

HfConfig parse(const nlohmann::json& j) { return HfConfig::from_json(j, "dir/config.json"); }

// Mistral-7B-Instruct-v0.3's config.json (the fields of the Hub file, transformers 4.42).
const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0", "use_cache": true, "vocab_size": 32768})";

// Mistral: Llama's computation; every layer attends within sliding_window tokens
// (v0.1: 4096 under 32768 positions; MistralConfig's default is 4096 too; null or a
// window of max_position_embeddings is full attention); num_key_value_heads defaults to 8.
TEST(HfConfig, Mistral) {
  auto j = nlohmann::json::parse(kMistral);
  const HfConfig c = parse(j);
  EXPECT_TRUE(c.is_mistral());
  EXPECT_EQ(c.model_type(), "mistral");
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);
  // Mistral-7B-v0.3: 7,248,023,552 parameters (the published 7.25B): 32 x (q, o 4096x4096 +
  // k, v 4096x1024 + MLP 3x4096x14336 + norms 2x4096) + embedding and lm_head 32768x4096 + norm.
  EXPECT_EQ(parameter_count(c), 7248023552);
  const auto back = parse(nlohmann::json::parse(c.to_json().dump()));
  EXPECT_EQ(back.architecture, kMistralArch);
  EXPECT_EQ(c.to_json()["sliding_window"], nullptr);
  EXPECT_EQ(c.sliding_window, 0);
  j["sliding_window"] = 4096;  // Mistral-7B-v0.1
  const HfConfig v01 = parse(j);
  EXPECT_EQ(v01.sliding_window, 4096);
  EXPECT_EQ(v01.full_attention_layers, 0);
  EXPECT_EQ(v01.to_json()["sliding_window"], 4096);
  EXPECT_EQ(parse(nlohmann::json::parse(v01.to_json().dump())).sliding_window, 4096);
  const auto dense = to_dense_config(v01);
  EXPECT_EQ(dense.attention, "sliding");
  EXPECT_EQ(dense.window, 4096);
  EXPECT_EQ(dense.n_full_prelude, 0);
  EXPECT_EQ(parameter_count(v01), parameter_count(c));
  j["sliding_window"] = 32768;
  EXPECT_EQ(parse(j).sliding_window, 0) << "a window of max_position_embeddings never binds";
  j.erase("sliding_window");
  EXPECT_EQ(parse(j).sliding_window, 4096) << "MistralConfig's default";
  j["sliding_window"] = 0;
  expect_input_error([&] { parse(j); }, {"dir/config.json", "sliding_window", "expected a positive number"});
  j["sliding_window"] = nullptr;
  j.erase("num_key_value_heads");
  EXPECT_EQ(parse(j).num_key_value_heads, 8);
  j["model_type"] = "llama";
  expect_input_error([&] { parse(j); }, {"model_type", "\"mistral\" for MistralForCausalLM"});
  EXPECT_EQ(architecture_from_name("mistral"), kMistralArch);
}

// Phi-3-mini-4k-instruct's config.json (the fields of the Hub file, transformers 4.40).
const char* kPhi3 = R"({
  "architectures": ["Phi3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1,
  "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
  "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true,
  "vocab_size": 32064})";

// Phi-3: Llama's function with fused weights (hf_model), every layer sliding within
// sliding_window (default none), Phi3Config's rms_norm_eps default 1e-5.
TEST(HfConfig, Phi3) {
  auto j = nlohmann::json::parse(kPhi3);
  const HfConfig c = parse(j);
  EXPECT_TRUE(c.is_phi3());
  EXPECT_EQ(c.model_type(), "phi3");
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.sliding_window, 2047);
  EXPECT_EQ(c.full_attention_layers, 0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  // Phi-3-mini: 3,821,079,552 parameters (the published 3.8B): 32 x (qkv 3072x9216 + o
  // 3072x3072 + gate_up 3072x16384 + down 8192x3072 + norms 2x3072) + embedding and
  // lm_head 32064x3072 + norm.
  EXPECT_EQ(parameter_count(c), 3821079552);
  const auto back = parse(nlohmann::json::parse(c.to_json().dump()));
  EXPECT_TRUE(back.is_phi3());
  EXPECT_EQ(back.sliding_window, 2047);
  EXPECT_EQ(architecture_from_name("phi3"), kPhi3Arch);
  j.erase("sliding_window");
  EXPECT_EQ(parse(j).sliding_window, 0) << "Phi3Config's default: no window";
  j.erase("rms_norm_eps");
  EXPECT_DOUBLE_EQ(parse(j).rms_norm_eps, 1e-5);
  // longrope and partial_rotary_factor: tests/hf/test_longrope.cpp.
  j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  expect_input_error([&] { parse(j); }, {"dir/config.json", "rope_scaling.short_factor", "has 1 values", "48"});
  j["rope_scaling"] = nullptr;
  j["model_type"] = "llama";
  expect_input_error([&] { parse(j); }, {"model_type", "\"phi3\" for Phi3ForCausalLM"});
}

// Qwen3: q_norm / k_norm, no q/k/v biases, head_dim as given (Qwen3Config's default 128
// when absent; null is hidden / heads), attention_bias refused (it adds an o_proj bias).
TEST(HfConfig, Qwen3) {
  auto j = nlohmann::json::parse(kQwen3);
  const HfConfig c = parse(j);
  EXPECT_TRUE(c.is_qwen3());
  EXPECT_FALSE(c.is_qwen2());
  EXPECT_EQ(c.model_type(), "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  // Qwen3-0.6B: 596,049,920 parameters (0.44B without the tied embedding), transformers'
  // num_parameters(): 28 x (q 1024x2048 + k, v 1024x1024 + o 2048x1024 + MLP 3x1024x3072
  // + norms 2x1024 + q/k norms 2x128) + embedding 151936x1024 + final norm 1024.
  EXPECT_EQ(parameter_count(c), 596049920);
  j.erase("head_dim");
  EXPECT_EQ(parse(j).head_dim, 128);  // Qwen3Config's default, not 1024 / 16
  j["head_dim"] = nullptr;
  EXPECT_EQ(parse(j).head_dim, 64);
  j["head_dim"] = 128;
  j.erase("num_key_value_heads");
  j["num_attention_heads"] = 64;
  EXPECT_EQ(parse(j).num_key_value_heads, 32);
  j["num_attention_heads"] = 16;
  expect_input_error([&] { parse(j); }, {"num_key_value_heads' is missing, and Qwen3Config's default is 32"});
  j["num_attention_heads"] = 16;
  j["num_key_value_heads"] = 8;
  j["attention_bias"] = true;
  expect_input_error([&] { parse(j); }, {"dir/config.json", "attention_bias", "o_proj bias"});
  j["attention_bias"] = false;
  j["model_type"] = "qwen2";
  expect_input_error([&] { parse(j); }, {"model_type", "\"qwen3\" for Qwen3ForCausalLM"});
  j["model_type"] = "qwen3";
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 20;
  EXPECT_EQ(parse(j).sliding_window, 4096);  // layers 20..27 slide
  EXPECT_EQ(parse(j).full_attention_layers, 20);
  j["architectures"] = {"Qwen4ForCausalLM"};
  expect_input_error([&] { parse(j); },
                     {"Qwen4ForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"});
}

TEST(HfConfig, Qwen25Instruct) {
  const HfConfig c = parse(nlohmann::json::parse(kQwen25));
  EXPECT_TRUE(c.is_qwen2());
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias);  // Qwen2 always has q/k/v biases
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, std::vector<int64_t>{151643});
  EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{151645});
}

// num_key_value_heads as transformers reads it: null is the query heads; a missing key
// is Qwen2Config's default 32 (refused for Qwen2.5-0.5B's 14 query heads, which 32 does
// not divide) or LlamaConfig's None (the query heads).
TEST(HfConfig, MissingKeyValueHeadsTakeEachConfigClassDefault) {
  auto j = nlohmann::json::parse(kQwen25);
  j["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parse(j).num_key_value_heads, 14);
  j.erase("num_key_value_heads");
  expect_input_error([&] { parse(j); }, {"dir/config.json", "num_key_value_heads' is missing, and Qwen2Config's default "
                                                            "is 32: expected a divisor of num_attention_heads = 14"});
  j["num_attention_heads"] = 32;
  j["hidden_size"] = 2048;
  EXPECT_EQ(parse(j).num_key_value_heads, 32);
  auto l = nlohmann::json::parse(kLlama);
  l.erase("num_key_value_heads");
  EXPECT_EQ(parse(l).num_key_value_heads, 32);  // the query heads
  l["num_attention_heads"] = 16;
  EXPECT_EQ(parse(l).num_key_value_heads, 16);
}

TEST(HfConfig, LlamaAndDefaults) {
  HfConfig c = parse(nlohmann::json::parse(kLlama));
  EXPECT_FALSE(c.is_qwen2());
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  // Optional fields take transformers' defaults.
  auto j = nlohmann::json::parse(kLlama);
  for (const char* k : {"num_key_value_heads", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "torch_dtype",
                        "eos_token_id", "bos_token_id", "hidden_act", "model_type"})
    j.erase(k);
  c = parse(j);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "");
  EXPECT_TRUE(c.eos_token_id.empty());
  // Lists of EOS ids and newer transformers' "dtype" key.
  j["eos_token_id"] = {2, 7};
  j["dtype"] = "float16";
  c = parse(j);
  EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(c.torch_dtype, "float16");
  // An explicit head_dim (hidden_size not a multiple of the heads).
  j["hidden_size"] = 2050;
  expect_input_error([&] { parse(j); }, {"dir/config.json", "hidden_size", "num_attention_heads"});
  j["head_dim"] = 64;
  EXPECT_EQ(parse(j).head_dim, 64);
}

// Which layers slide: Qwen2's use_sliding_window from max_window_layers on (transformers'
// defaults 28 and 4096), null or a window of max_position_embeddings: none;
// transformers' layer_types decides when given (full layers first, then sliding ones).
TEST(HfConfig, SlidingWindowLayers) {
  auto j = nlohmann::json::parse(kQwen25);
  j["use_sliding_window"] = true;  // max_window_layers = 21 < 24: layers 21..23 slide
  j["sliding_window"] = 4096;
  auto c = parse(j);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.full_attention_layers, 21);
  auto back = parse(nlohmann::json::parse(c.to_json().dump()));
  EXPECT_EQ(back.sliding_window, 4096);
  EXPECT_EQ(back.full_attention_layers, 21);
  EXPECT_EQ(c.to_json()["use_sliding_window"], true);
  EXPECT_EQ(c.to_json()["max_window_layers"], 21);
  EXPECT_EQ(to_dense_config(c).n_full_prelude, 21);
  j["max_window_layers"] = 24;  // no layer slides
  EXPECT_EQ(parse(j).sliding_window, 0);
  // transformers' defaults: max_window_layers 28, sliding_window 4096.
  j.erase("max_window_layers");
  EXPECT_EQ(parse(j).sliding_window, 0) << "24 layers < 28: none slides";
  j["num_hidden_layers"] = 30;
  EXPECT_EQ(parse(j).full_attention_layers, 28);
  j.erase("sliding_window");
  EXPECT_EQ(parse(j).sliding_window, 4096);
  j["sliding_window"] = nullptr;  // null: no layer slides
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["sliding_window"] = 32768;  // a window of max_position_embeddings never binds
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["use_sliding_window"] = false;
  j["sliding_window"] = 8;
  j["max_window_layers"] = 0;
  EXPECT_EQ(parse(j).sliding_window, 0) << "use_sliding_window false: no layer slides";
  // layer_types: a sliding layer needs a window; full layers after sliding ones are
  // not laid out by the dense model.
  j = nlohmann::json::parse(kQwen25);
  j["layer_types"] = std::vector<std::string>(23, "full_attention");
  j["layer_types"].push_back("sliding_attention");
  expect_input_error([&] { parse(j); }, {"dir/config.json", "layer_types[23]", "sliding_attention", "needs a window"});
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  c = parse(j);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.full_attention_layers, 23) << "layer_types decides over max_window_layers (21)";
  j["layer_types"][10] = "sliding_attention";
  // 10 full layers, a sliding one, then full ones: no period P fits the full layers after it.
  expect_input_error([&] { parse(j); }, {"layer_types[12]", "full_attention", "every P-th", "P = 12"});
  j["layer_types"][10] = "chunked_attention";
  expect_input_error([&] { parse(j); }, {"layer_types[10]", "chunked_attention"});
  j["layer_types"] = std::vector<std::string>(3, "full_attention");
  expect_input_error([&] { parse(j); }, {"layer_types", "num_hidden_layers = 24"});
  j["layer_types"] = std::vector<std::string>(24, "full_attention");
  EXPECT_EQ(parse(j).sliding_window, 0);
  // Interleaved (a full layer every 3rd, from the first): read as full_attention_interval.
  for (int i = 0; i < 24; ++i) j["layer_types"][size_t(i)] = (i + 1) % 3 == 0 ? "full_attention" : "sliding_attention";
  c = parse(j);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.full_attention_interval, 3);
  EXPECT_EQ(c.full_attention_layers, 0);
  j["layer_types"][5] = "sliding_attention";
  expect_input_error([&] { parse(j); }, {"layer_types[5]", "sliding_attention", "every P-th", "P = 3"});
  // Leading full layers, then every P-th full (what `export --arch olmo3` writes for a
  // dense model with n_full_prelude and full_attention_interval): 0, 1 full, then 3, 7, ...
  // (P = 4; P = 2 fits layer 3 too but not layer 5).
  for (int i = 0; i < 24; ++i)
    j["layer_types"][size_t(i)] = i < 2 || (i + 1) % 4 == 0 ? "full_attention" : "sliding_attention";
  c = parse(j);
  EXPECT_EQ(c.full_attention_layers, 2);
  EXPECT_EQ(c.full_attention_interval, 4);
  const auto d = to_dense_config(c);
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(d.layer_attention(i).kind == baselines::AttentionKind::Full, j["layer_types"][size_t(i)] == "full_attention") << i;
}

TEST(HfConfig, RopeParametersOfTransformers5) {
  auto j = nlohmann::json::parse(kQwen25);
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  EXPECT_DOUBLE_EQ(parse(j).rope_theta, 1e6);
  j["rope_theta"] = 1000000.0;  // both, equal
  EXPECT_DOUBLE_EQ(parse(j).rope_theta, 1e6);
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}};  // no base given: transformers' default
  EXPECT_DOUBLE_EQ(parse(j).rope_theta, 10000.0);
}

TEST(HfConfig, UnsupportedFeaturesAreRefused) {
  struct Case {
    std::string base;
    const char* patch;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {kQwen25, R"({"rms_norm_eps": 1e30})", {"rms_norm_eps", "expected 0 < rms_norm_eps < 1"}},
      // RoPE scaling types that are not implemented (test_rope_scaling.cpp: the implemented ones).
      {kLlama, R"({"rope_scaling": {"rope_type": "longrope", "factor": 8.0}})", {"rope_scaling.short_factor", "missing"}},
      {kLlama, R"({"rope_scaling": {"rope_type": "longrope", "short_factor": [1], "long_factor": [2]}})",
       {"rope_scaling", "longrope", "not supported", "Phi-3"}},
      {kLlama, R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})", {"rope_scaling.low_freq_factor", "missing"}},
      // transformers >= 5: rope_parameters instead of rope_scaling / rope_theta.
      {kQwen25, R"({"rope_parameters": {"rope_type": "su", "factor": 4.0, "rope_theta": 1000000.0}})",
       {"rope_parameters", "su", "not supported"}},
      {kQwen25, R"({"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5}})",
       {"rope_parameters.partial_rotary_factor", "not supported"}},
      {kQwen25, R"({"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})",
       {"rope_parameters.rope_theta", "differs", "rope_theta"}},
      {kQwen25, R"({"rope_parameters": [1]})", {"rope_parameters", "expected an object"}},
      {kLlama, R"({"hidden_act": "gelu"})", {"hidden_act", "gelu", "SiLU"}},
      {kLlama, R"({"attention_bias": true})", {"attention_bias", "o_proj"}},
      {kLlama, R"({"mlp_bias": true})", {"mlp_bias"}},
      {kQwen25, R"({"quantization_config": {"quant_method": "gptq"}})", {"quantization_config", "quantized"}},
      {kQwen25, R"({"architectures": ["BloomForCausalLM"]})", {"architectures", "BloomForCausalLM", "Qwen2ForCausalLM", "Gemma3ForCausalLM", "GPTNeoXForCausalLM", "PhiForCausalLM", "FalconForCausalLM", "GPTJForCausalLM"}},
      {kQwen25, R"({"architectures": []})", {"architectures", "exactly one"}},
      {kQwen25, R"({"model_type": "llama"})", {"model_type", "qwen2"}},
      {kQwen25, R"({"hidden_size": "896"})", {"hidden_size", "expected an integer"}},
      {kQwen25, R"({"num_key_value_heads": 3})", {"num_key_value_heads", "divisor", "14"}},
      {kQwen25, R"({"vocab_size": 0})", {"vocab_size", ">= 1"}},
      {kQwen25, R"({"torch_dtype": "float8"})", {"torch_dtype", "float8"}},
      {kQwen25, R"({"eos_token_id": "x"})", {"eos_token_id", "token id"}},
      {kLlama, R"({"head_dim": 63})", {"head_dim", "even"}},
      // Sizes beyond the dense model's limits are named by their config.json field.
      {kQwen25, R"({"num_hidden_layers": 1000000})", {"'num_hidden_layers' = 1000000", "<= 4096"}},
      {kLlama, R"({"hidden_size": 4194304, "head_dim": 64})", {"'hidden_size' = 4194304", "<= 1048576"}},
  };
  for (const auto& c : cases) {
    auto j = nlohmann::json::parse(c.base);
    j.merge_patch(nlohmann::json::parse(c.patch));
    auto needles = c.needles;
    needles.push_back("dir/config.json");
    expect_input_error([&] { parse(j); }, needles);
  }
  auto j = nlohmann::json::parse(kQwen25);
  j.erase("intermediate_size");
  expect_input_error([&] { parse(j); }, {"intermediate_size", "missing"});
  // rope_scaling of type "default" computes plain RoPE.
  j = nlohmann::json::parse(kLlama);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_NO_THROW(parse(j));
  // "swish" is SiLU in transformers' ACT2FN (it was refused as "not SiLU").
  j = nlohmann::json::parse(kLlama);
  j["hidden_act"] = "swish";
  EXPECT_NO_THROW(parse(j));
}

TEST(HfConfig, ToJsonRoundTrip) {
  for (const std::string& text : {kQwen25, std::string(kLlama), std::string(kQwen3)}) {
    const HfConfig a = parse(nlohmann::json::parse(text));
    const auto j = a.to_json();
    EXPECT_EQ(j["rope_scaling"], nullptr);
    const HfConfig b = HfConfig::from_json(nlohmann::json::parse(j.dump()), "written");
    EXPECT_EQ(b.architecture, a.architecture);
    EXPECT_EQ(b.vocab_size, a.vocab_size);
    EXPECT_EQ(b.hidden_size, a.hidden_size);
    EXPECT_EQ(b.intermediate_size, a.intermediate_size);
    EXPECT_EQ(b.num_hidden_layers, a.num_hidden_layers);
    EXPECT_EQ(b.num_attention_heads, a.num_attention_heads);
    EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
    EXPECT_EQ(b.rope_theta, a.rope_theta);
    EXPECT_EQ(b.rms_norm_eps, a.rms_norm_eps);
    EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
    EXPECT_EQ(b.qkv_bias, a.qkv_bias);
    EXPECT_EQ(b.qk_norm, a.qk_norm);
    EXPECT_EQ(b.torch_dtype, a.torch_dtype);
    EXPECT_EQ(b.bos_token_id, a.bos_token_id);
    EXPECT_EQ(b.eos_token_id, a.eos_token_id);
  }
}

TEST(HfConfig, LoadDirNamesTheFile) {
  TempDir d("cfg");
  expect_input_error([&] { HfConfig::load_dir(d.path()); }, {d / "config.json", "cannot open"});
  write_text(d / "config.json", "{\"architectures\": [");
  expect_input_error([&] { HfConfig::load_dir(d.path()); }, {d / "config.json", "not valid JSON"});
  write_text(d / "config.json", kQwen25);
  EXPECT_EQ(HfConfig::load_dir(d.path()).hidden_size, 896);
}

}  // namespace
}  // namespace lol::hf::test
