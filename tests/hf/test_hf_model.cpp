// Loading tiny Hugging Face checkpoints (written by the tests in transformers'
// layout) into the dense model: the logits equal an independent reference forward
// of the stored tensors, for single-file and sharded folders, F32/BF16/F16 storage,
// tied and untied embeddings, Qwen2 and Llama; strict name/shape/value checks.
#include "hf/hf_model.h"
#include "hf_test_util.h"

namespace lol::hf::test {
namespace {

std::vector<int64_t> seeded_tokens(int64_t vocab, int64_t n, uint64_t seed) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int64_t((seed * 7919 + uint64_t(i) * 104729 + uint64_t(i * i)) % uint64_t(vocab)));
  return t;
}

torch::Tensor model_logits(baselines::DenseModel& m, const std::vector<int64_t>& tokens) {
  torch::NoGradGuard ng;
  return m->forward(torch::tensor(tokens, torch::kInt64).unsqueeze(0)).squeeze(0).to(torch::kFloat64);
}

TEST(HfModel, LogitsMatchReferenceForEveryLayout) {
  struct Case {
    std::string arch;
    bool tied;
    torch::ScalarType store;
    int shards;
    int64_t head_dim = 0;
  };
  const std::vector<Case> cases = {{"Qwen2ForCausalLM", true, torch::kFloat32, 1},
                                   {"Qwen2ForCausalLM", false, torch::kBFloat16, 3},
                                   {"LlamaForCausalLM", false, torch::kFloat32, 2},
                                   {"LlamaForCausalLM", true, torch::kFloat16, 1},
                                   {"LlamaForCausalLM", true, torch::kFloat32, 1, 12},
                                   {"Qwen3ForCausalLM", true, torch::kFloat32, 1, 8},
                                   {"Qwen3ForCausalLM", false, torch::kBFloat16, 2, 12},
                                   {"MistralForCausalLM", false, torch::kBFloat16, 2}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.arch + (c.tied ? " tied " : " untied ") + c10::toString(c.store) + " shards " +
                 std::to_string(c.shards) + " head_dim " + std::to_string(c.head_dim));
    TinyShape s;
    s.arch = c.arch;
    s.tied = c.tied;
    s.head_dim = c.head_dim;
    s.rope_theta = c.arch == "Qwen2ForCausalLM" ? 1e6 : 10000.0;
    TempDir d("model");
    write_tiny_checkpoint(d.path(), s, 11, c.store, c.shards);
    HfConfig cfg;
    auto m = load_hf_model(d.path(), torch::kFloat64, c10::Device(c10::kCPU), &cfg);
    EXPECT_EQ(cfg.architecture, c.arch);
    EXPECT_FALSE(m->is_training());
    EXPECT_EQ(m->embed_tokens->weight.scalar_type(), torch::kFloat64);
    EXPECT_EQ(bool(m->lm_head), !c.tied);
    const auto tokens = seeded_tokens(s.vocab, 23, 3);
    const auto ref = reference_logits(s, rounded(tiny_weights(s, 11), c.store), tokens);
    const auto got = model_logits(m, tokens);
    EXPECT_LT((got - ref).abs().max().item<double>(), 1e-9);
    // A perturbed reference is far away: the comparison can fail.
    EXPECT_GT((got - reference_logits(s, rounded(tiny_weights(s, 12), c.store), tokens)).abs().max().item<double>(), 0.1);
  }
}

TEST(HfModel, ComputeDtypeIsSelectable) {
  TinyShape s;
  TempDir d("dtype");
  write_tiny_checkpoint(d.path(), s, 5, torch::kBFloat16);
  for (auto dt : {torch::kFloat32, torch::kBFloat16, torch::kFloat64}) {
    auto m = load_hf_model(d.path(), dt);
    EXPECT_EQ(m->embed_tokens->weight.scalar_type(), dt);
    // BF16 storage is exact in every compute dtype.
    const auto w = tiny_weights(s, 5)[0].second.to(torch::kBFloat16).to(torch::kFloat64);
    EXPECT_TRUE(torch::equal(m->embed_tokens->weight.to(torch::kFloat64), w));
  }
  EXPECT_EQ(parse_dtype_name("bf16"), torch::kBFloat16);
  expect_input_error([] { parse_dtype_name("int8", "--dtype"); }, {"--dtype", "int8", "bfloat16"});
}

/// Writes a folder whose tensors are `edit`ed before saving; returns the load error.
void expect_load_error(const std::function<void(NamedTensors&)>& edit, const std::vector<std::string>& needles,
                       TinyShape s = {}) {
  TempDir d("bad");
  write_text(d / "config.json", tiny_config_json(s).dump());
  auto w = tiny_weights(s, 3);
  edit(w);
  write_hf_weights(d.path(), w, torch::kFloat32);
  auto n = needles;
  n.push_back(d / "");  // errors name the folder or the file in it
  n.back().pop_back();
  expect_input_error([&] { load_hf_model(d.path()); }, n);
}

NamedTensors::iterator find(NamedTensors& w, const std::string& name) {
  return std::find_if(w.begin(), w.end(), [&](const auto& p) { return p.first == name; });
}

TEST(HfModel, StrictValidation) {
  // Missing tensor (a Qwen2 bias).
  expect_load_error([](NamedTensors& w) { w.erase(find(w, "model.layers.1.self_attn.k_proj.bias")); },
                    {"missing tensor 'model.layers.1.self_attn.k_proj.bias'", "Qwen2ForCausalLM"});
  // Unexpected tensor.
  expect_load_error([](NamedTensors& w) { w.emplace_back("model.layers.2.mlp.up_proj.weight", torch::zeros({40, 32})); },
                    {"model.layers.2.mlp.up_proj.weight", "unexpected tensor", "2 layers"});
  // Shape mismatch names the config fields.
  expect_load_error([](NamedTensors& w) { find(w, "model.layers.0.mlp.gate_proj.weight")->second = torch::zeros({41, 32}); },
                    {"model.layers.0.mlp.gate_proj.weight", "[41, 32]", "[40, 32]", "intermediate_size"});
  // Non-finite values.
  expect_load_error(
      [](NamedTensors& w) { find(w, "model.norm.weight")->second[3] = std::numeric_limits<double>::quiet_NaN(); },
      {"model.norm.weight", "NaN"});
  // Integer dtype.
  expect_load_error([](NamedTensors& w) { find(w, "model.norm.weight")->second = torch::ones({32}, torch::kInt64); },
                    {"model.norm.weight", "I64", "F32"});
  // Tied config with a different lm_head.weight; an equal one is accepted.
  expect_load_error([](NamedTensors& w) { w.emplace_back("lm_head.weight", torch::zeros({61, 32})); },
                    {"lm_head.weight", "tie_word_embeddings"});
  TinyShape s;
  TempDir d("tiedhead");
  write_text(d / "config.json", tiny_config_json(s).dump());
  auto w = tiny_weights(s, 3);
  w.emplace_back("lm_head.weight", w[0].second.clone());
  w.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::ones({4}));  // old Llama buffers: ignored
  write_hf_weights(d.path(), w, torch::kFloat32);
  EXPECT_NO_THROW(load_hf_model(d.path()));
  // Untied config without lm_head.weight.
  TinyShape u;
  u.tied = false;
  expect_load_error([](NamedTensors& w) { w.erase(find(w, "lm_head.weight")); }, {"missing tensor 'lm_head.weight'"}, u);
  // Qwen3: q_norm / k_norm are required and [head_dim]; Qwen2 has none.
  TinyShape q3;
  q3.arch = "Qwen3ForCausalLM";
  q3.head_dim = 12;
  expect_load_error([](NamedTensors& w) { w.erase(find(w, "model.layers.1.self_attn.k_norm.weight")); },
                    {"missing tensor 'model.layers.1.self_attn.k_norm.weight'", "[12]", "Qwen3ForCausalLM"}, q3);
  expect_load_error([](NamedTensors& w) { find(w, "model.layers.0.self_attn.q_norm.weight")->second = torch::ones({8}); },
                    {"model.layers.0.self_attn.q_norm.weight", "[8]", "[12]", "(head_dim)"}, q3);
  expect_load_error([](NamedTensors& w) { w.emplace_back("model.layers.0.self_attn.q_norm.weight", torch::ones({8})); },
                    {"model.layers.0.self_attn.q_norm.weight", "unexpected tensor"});
}

// A config.json that declares a far larger model than its weight files is refused before
// anything is allocated (it allocated the whole model first: 128 GB for vocab_size 2e9,
// exit 4, or the kernel's out-of-memory kill); parameter_count is the model's.
TEST(HfModel, ConfigFarLargerThanItsWeightsIsRefusedBeforeAllocating) {
  for (bool tied : {true, false}) {
    TinyShape s;
    s.tied = tied;
    const auto cfg = HfConfig::from_json(tiny_config_json(s), "config.json");
    baselines::DenseModel m(to_dense_config(cfg));
    int64_t n = 0;
    for (const auto& p : m->parameters()) n += p.numel();
    EXPECT_EQ(parameter_count(cfg), n) << "tied " << tied;
  }
  TinyShape s;
  TempDir d("bigconfig");
  auto big = tiny_config_json(s);
  big["vocab_size"] = int64_t(2000000000);
  write_text(d / "config.json", big.dump());
  write_hf_weights(d.path(), tiny_weights(s, 3), torch::kFloat32);
  expect_input_error([&] { load_hf_model(d.path()); },
                     {d.path() + "/config.json: declares 6.4e+10 parameters besides lm_head", "vocab_size 2000000000"});
  // A damaged weight file (a header length past its end) is named, not config.json.
  write_text(d / "config.json", tiny_config_json(s).dump());
  std::string bytes(10, '\0');
  bytes[7] = 0x40;  // header length 2^62
  write_text(d / "model.safetensors", bytes);
  expect_input_error([&] { load_hf_model(d.path()); },
                     {d.path() + "/model.safetensors: not a safetensors file", "exceeds the file's 10 bytes"});
}

TEST(HfModel, DenseConfigConversion) {
  TinyShape s;
  const HfConfig h = HfConfig::from_json(tiny_config_json(s), "c");
  const auto c = to_dense_config(h);
  EXPECT_EQ(c.d_model, 32);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.max_seq_len, 128);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.attention, "full");
  HfConfig back = from_dense_config(c, kQwen2Arch, "float32");
  back.bos_token_id = h.bos_token_id;
  back.eos_token_id = h.eos_token_id;
  EXPECT_EQ(back.to_json().dump(), h.to_json().dump());
  // Sliding windows map to Qwen2's fields; what Hugging Face cannot express is refused.
  auto sliding = c;
  sliding.attention = "sliding";
  sliding.window = 16;
  EXPECT_EQ(from_dense_config(sliding, kQwen2Arch, "float32").sliding_window, 16);
  sliding.attention = "strided";
  sliding.stride = 8;
  expect_input_error([&] { from_dense_config(sliding, kQwen2Arch, "float32"); }, {"strided", "full causal or sliding"});
  expect_input_error([&] { from_dense_config(c, kLlamaArch, "float32"); }, {"qkv_bias", "LlamaForCausalLM"});
}

}  // namespace
}  // namespace lol::hf::test
