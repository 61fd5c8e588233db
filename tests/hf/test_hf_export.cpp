// Export of dense models as Hugging Face folders: reload through load_hf_model gives
// identical logits (F32, single and sharded, tied/untied, Qwen2, Qwen3 and Llama), BF16
// export equals the BF16-rounded model, tokenizer files and ids, refusals.
#include <filesystem>

#include "core/tensor_io.h"
#include "hf/hf_export.h"
#include "hf/hf_files.h"
#include "hf/hf_model.h"
#include "hf_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"

namespace lol::hf::test {
namespace {

baselines::DenseModel small_dense(bool tied, bool bias, uint64_t seed, bool qk_norm = false, int64_t window = 0,
                                  int64_t full_prelude = 0, int64_t full_coda = 0) {
  baselines::DenseConfig c;
  if (window > 0) {
    c.attention = "sliding";
    c.window = window;
    c.n_full_prelude = full_prelude;
    c.n_full_coda = full_coda;
  }
  c.qk_norm = qk_norm;
  if (qk_norm) c.head_dim = 12;  // Qwen3 models' head_dim is often not d_model / heads
  c.vocab_size = 300;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 1;
  c.ffn_hidden = 40;
  c.max_seq_len = 64;
  c.qkv_bias = bias;
  c.tie_word_embeddings = tied;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-5;
  baselines::DenseModel m(c);
  m->reset_parameters(seed);
  torch::NoGradGuard ng;
  for (auto& p : m->named_parameters())  // norms away from 1 so that they matter
    if (p.key().find("norm") != std::string::npos) p.value().add_(0.1 * torch::randn(p.value().sizes()));
  m->eval();
  return m;
}

torch::Tensor logits(baselines::DenseModel& m, const std::vector<int64_t>& t) {
  c10::InferenceMode g;
  return m->forward(torch::tensor(t, torch::kInt64).unsqueeze(0));
}

const std::vector<int64_t> kTokens = {5, 17, 299, 3, 3, 42, 100, 7, 256, 1, 9};

TEST(HfExport, ReloadGivesIdenticalLogits) {
  struct Case {
    bool tied, bias;
    const char* arch;
    int64_t shard_bytes;
  };
  for (const Case& c : {Case{true, false, kQwen2Arch, 0}, Case{false, true, kQwen2Arch, 20000},
                        Case{false, false, kLlamaArch, 0}, Case{true, false, kLlamaArch, 30000},
                        Case{true, false, kQwen3Arch, 0}, Case{false, false, kQwen3Arch, 20000},
                        Case{false, false, kMistralArch, 0}, Case{true, false, kPhi3Arch, 0},
                        Case{false, false, kPhi3Arch, 20000}}) {
    SCOPED_TRACE(std::string(c.arch) + (c.tied ? " tied" : " untied") + (c.bias ? " bias" : "") + " shard " +
                 std::to_string(c.shard_bytes));
    const bool qwen3 = std::string(c.arch) == kQwen3Arch;
    auto m = small_dense(c.tied, c.bias, 3, qwen3);
    TempDir d("export");
    ExportOptions o;
    o.architecture = c.arch;
    o.max_shard_bytes = c.shard_bytes;
    export_hf(*m, nullptr, d.path(), o);
    const WeightFiles files = find_weight_files(d.path());
    EXPECT_EQ(files.sharded(), c.shard_bytes > 0);
    if (files.sharded()) {
      EXPECT_GT(files.shards.size(), 2u);
      for (const auto& s : files.shards)  // only tensors larger than the limit may exceed it
        EXPECT_LE(int64_t(std::filesystem::file_size(d / s)), c.shard_bytes + 300 * 32 * 4 + 4096);
    }
    HfConfig h;
    auto back = load_hf_model(d.path(), torch::kFloat32, c10::Device(c10::kCPU), &h);
    EXPECT_EQ(h.architecture, c.arch);
    EXPECT_EQ(h.tie_word_embeddings, c.tied);
    EXPECT_TRUE(torch::equal(logits(back, kTokens), logits(m, kTokens)));
    // The file holds what transformers expects: Qwen2 always has q/k/v biases (zeros here
    // when the model has none), Llama none.
    const auto cfg = nlohmann::json::parse(read_text(d / "config.json"));
    EXPECT_EQ(cfg["architectures"][0], c.arch);
    EXPECT_EQ(cfg["torch_dtype"], "float32");
    EXPECT_EQ(back->named_parameters().contains("model.layers.0.self_attn.q_proj.bias"), std::string(c.arch) == kQwen2Arch);
    EXPECT_EQ(back->named_parameters().contains("model.layers.1.self_attn.k_norm.weight"), qwen3);
    const bool mistral = std::string(c.arch) == kMistralArch, phi3 = std::string(c.arch) == kPhi3Arch;
    EXPECT_EQ(cfg["model_type"], qwen3                                  ? "qwen3"
                                 : std::string(c.arch) == kQwen2Arch ? "qwen2"
                                 : mistral                           ? "mistral"
                                 : phi3                              ? "phi3"
                                                                     : "llama");
    if (mistral || phi3) EXPECT_TRUE(cfg["sliding_window"].is_null());
    if (phi3) {
      // transformers' Phi3 layout: q, k, v rows in one qkv_proj; gate then up rows in one
      // gate_up_proj; no separate projections.
      NamedTensors all;
      for (const auto& s : files.shards)
        for (auto& nt : load_tensors(d / s)) all.push_back(nt);
      std::map<std::string, torch::Tensor> stored(all.begin(), all.end());
      auto param = [&](const std::string& n) { return m->named_parameters()[n].detach(); };
      for (int64_t l = 0; l < 2; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        ASSERT_TRUE(stored.count(p + "self_attn.qkv_proj.weight"));
        EXPECT_FALSE(stored.count(p + "self_attn.q_proj.weight"));
        EXPECT_FALSE(stored.count(p + "mlp.gate_proj.weight"));
        const auto qkv = stored.at(p + "self_attn.qkv_proj.weight");
        EXPECT_EQ(qkv.sizes(), (std::vector<int64_t>{(4 + 2 * 1) * 8, 32}));
        EXPECT_TRUE(torch::equal(qkv.narrow(0, 0, 32), param(p + "self_attn.q_proj.weight")));
        EXPECT_TRUE(torch::equal(qkv.narrow(0, 32, 8), param(p + "self_attn.k_proj.weight")));
        EXPECT_TRUE(torch::equal(qkv.narrow(0, 40, 8), param(p + "self_attn.v_proj.weight")));
        const auto gu = stored.at(p + "mlp.gate_up_proj.weight");
        EXPECT_TRUE(torch::equal(gu.narrow(0, 0, 40), param(p + "mlp.gate_proj.weight")));
        EXPECT_TRUE(torch::equal(gu.narrow(0, 40, 40), param(p + "mlp.up_proj.weight")));
      }
    }
    if (qwen3) {
      EXPECT_EQ(cfg["head_dim"], 12);
      EXPECT_EQ(cfg["attention_bias"], false);
    }
  }
}

// A sliding-window dense model (the paper's sliding baseline) exports as Mistral (every
// layer slides) or Qwen2 / Qwen3 (max_window_layers full layers first) and reloads with
// identical logits; Llama (no window) and full layers after sliding ones are refused.
TEST(HfExport, SlidingWindowModelsExportAsMistralAndQwen2) {
  struct Case {
    const char* arch;
    int64_t full_prelude;
  };
  for (const Case& c : {Case{kMistralArch, 0}, Case{kQwen2Arch, 1}, Case{kQwen3Arch, 0}}) {
    SCOPED_TRACE(c.arch);
    const bool qwen3 = std::string(c.arch) == kQwen3Arch;
    auto m = small_dense(true, false, 4, qwen3, 4, c.full_prelude);
    TempDir d("export_sliding");
    ExportOptions o;
    o.architecture = c.arch;
    export_hf(*m, nullptr, d.path(), o);
    HfConfig h;
    auto back = load_hf_model(d.path(), torch::kFloat32, c10::Device(c10::kCPU), &h);
    EXPECT_EQ(h.sliding_window, 4);
    EXPECT_EQ(h.full_attention_layers, c.full_prelude);
    EXPECT_EQ(back->config().attention, "sliding");
    EXPECT_TRUE(torch::equal(logits(back, kTokens), logits(m, kTokens)));  // 11 tokens: the window binds
    const auto cfg = nlohmann::json::parse(read_text(d / "config.json"));
    EXPECT_EQ(cfg["sliding_window"], 4);
    if (std::string(c.arch) != kMistralArch) {
      EXPECT_EQ(cfg["use_sliding_window"], true);
      EXPECT_EQ(cfg["max_window_layers"], c.full_prelude);
    }
  }
  auto full = small_dense(true, false, 4), sliding = small_dense(true, false, 4, false, 4);
  EXPECT_FALSE(torch::equal(logits(full, kTokens), logits(sliding, kTokens)));
  TempDir d("export_sliding_refused");
  ExportOptions o;
  o.architecture = kLlamaArch;
  expect_input_error([&] { export_hf(*small_dense(true, false, 4, false, 4), nullptr, d / "a", o); },
                     {"sliding", "LlamaForCausalLM", "has no sliding window"});
  o.architecture = kQwen2Arch;
  expect_input_error([&] { export_hf(*small_dense(true, false, 4, false, 4, 0, 1), nullptr, d / "b", o); },
                     {"n_full_coda = 1", "before the sliding ones"});
  o.architecture = kMistralArch;
  expect_input_error([&] { export_hf(*small_dense(true, false, 4, false, 4, 1), nullptr, d / "c", o); },
                     {"n_full_prelude = 1", "slides every layer"});
}

// A Phi-3 folder missing a fused tensor is told so by the fused tensor's name.
TEST(HfExport, Phi3MissingFusedTensorIsNamed) {
  auto m = small_dense(false, false, 5);
  TempDir d("phi3_missing");
  ExportOptions o;
  o.architecture = kPhi3Arch;
  export_hf(*m, nullptr, d.path(), o);
  auto tensors = load_tensors(d / "model.safetensors");
  for (const char* gone : {"model.layers.1.self_attn.qkv_proj.weight", "model.layers.0.mlp.gate_up_proj.weight"}) {
    NamedTensors kept;
    for (const auto& nt : tensors)
      if (nt.first != gone) kept.push_back(nt);
    save_tensors(d / "model.safetensors", kept);
    expect_input_error([&] { load_hf_model(d.path()); }, {std::string("missing tensor '") + gone + "'", "fused"});
  }
}

TEST(HfExport, Bfloat16ExportIsTheRoundedModel) {
  auto m = small_dense(true, false, 4);
  TempDir d("bf16");
  ExportOptions o;
  o.dtype = torch::kBFloat16;
  export_hf(*m, nullptr, d.path(), o);
  EXPECT_EQ(nlohmann::json::parse(read_text(d / "config.json"))["torch_dtype"], "bfloat16");
  auto back = load_hf_model(d.path(), torch::kFloat32);
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.copy_(p.to(torch::kBFloat16).to(torch::kFloat32));
  }
  EXPECT_TRUE(torch::equal(logits(back, kTokens), logits(m, kTokens)));
}

TEST(HfExport, TokenizerFilesAndIds) {
  auto m = small_dense(true, false, 5);
  tokenizers::ByteTokenizer tok(std::vector<std::string>{});
  tok.add_token({"<|endoftext|>", -1});
  tok.add_token({"<|im_start|>", -1});
  tok.add_token({"<|im_end|>", -1});
  tok.set_eos_token("<|endoftext|>");
  TempDir d("tok");
  const HfConfig h = export_hf(*m, &tok, d.path());
  EXPECT_EQ(h.eos_token_id, std::vector<int64_t>{256});
  EXPECT_TRUE(h.bos_token_id.empty());
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(d / f)) << f;
  auto back = tokenizers::load_tokenizer(d.path());
  EXPECT_EQ(back->eos_id(), std::optional<int32_t>(256));
  EXPECT_EQ(back->encode("<|im_start|>hi"), tok.encode("<|im_start|>hi"));
  EXPECT_EQ(nlohmann::json::parse(read_text(d / "generation_config.json"))["eos_token_id"], 256);
  EXPECT_EQ(HfConfig::load_dir(d.path()).eos_token_id, std::vector<int64_t>{256});
}

// A derived model (layerroute merge) keeps its source folder's generation settings,
// token ids and tokenizer files byte for byte, so the merged folder generates as the
// base does in transformers.
TEST(HfExport, DerivedFolderKeepsItsSourcesGenerationSettingsAndTokenizer) {
  auto m = small_dense(true, false, 5);
  tokenizers::ByteTokenizer tok(std::vector<std::string>{});
  tok.add_token({"<|endoftext|>", -1});
  tok.add_token({"<|im_end|>", -1});
  tok.set_eos_token("<|endoftext|>");
  TempDir src("derived_src"), out("derived_out");
  const HfConfig first = export_hf(*m, &tok, src.path());
  auto cfg = nlohmann::json::parse(read_text(src / "config.json"));
  cfg["eos_token_id"] = {257, 256};
  write_text(src / "config.json", cfg.dump(2));
  const std::string gen = R"({"do_sample": true, "eos_token_id": [257, 256], "temperature": 0.7, "top_p": 0.8})";
  write_text(src / "generation_config.json", gen);
  const std::string tcfg = read_text(src / "tokenizer_config.json") + "\n";  // any byte change must survive
  write_text(src / "tokenizer_config.json", tcfg);
  ExportOptions o;
  o.derived_from = src.path();
  const HfConfig h = export_hf(*m, &tok, out.path(), o);
  EXPECT_EQ(h.eos_token_id, (std::vector<int64_t>{257, 256}));
  EXPECT_EQ(HfConfig::load_dir(out.path()).eos_token_id, (std::vector<int64_t>{257, 256}));
  EXPECT_EQ(read_text(out / "generation_config.json"), gen);
  EXPECT_EQ(read_text(out / "tokenizer_config.json"), tcfg);
  EXPECT_EQ(read_text(out / "tokenizer.json"), read_text(src / "tokenizer.json"));
  // A source that is not a Hugging Face folder: written as without it.
  TempDir plain("derived_plain"), out2("derived_out2");
  write_text(plain / "config.json", R"({"architecture": "dense"})");
  o.derived_from = plain.path();
  EXPECT_EQ(export_hf(*m, &tok, out2.path(), o).eos_token_id, first.eos_token_id);
}

TEST(HfExport, Refusals) {
  auto m = small_dense(true, false, 6);
  TempDir d("refuse");
  write_text(d / "notes.txt", "x");
  expect_input_error([&] { export_hf(*m, nullptr, d.path()); }, {d.path(), "not empty"});
  ExportOptions o;
  o.overwrite = true;
  EXPECT_NO_THROW(export_hf(*m, nullptr, d.path(), o));
  o.dtype = torch::kInt32;
  expect_input_error([&] { export_hf(*m, nullptr, d.path(), o); }, {"--dtype", "bfloat16"});
  tokenizers::ByteTokenizer big(std::vector<std::string>{});
  for (int i = 0; i < 50; ++i) big.add_token({"<extra_" + std::to_string(i) + ">", -1});
  expect_input_error([&] { export_hf(*m, &big, d / "new"); }, {"306 ids", "vocab_size is 300"});
  auto bias = small_dense(true, true, 6);
  o = {};
  o.architecture = kLlamaArch;
  expect_input_error([&] { export_hf(*bias, nullptr, d / "llama", o); }, {"qkv_bias", "LlamaForCausalLM"});
  EXPECT_FALSE(std::filesystem::exists(d / "llama/config.json"));
  // Qwen3 and only Qwen3 has q_norm / k_norm.
  auto qk = small_dense(true, false, 6, true);
  for (const char* arch : {kQwen2Arch, kLlamaArch}) {
    o.architecture = arch;
    expect_input_error([&] { export_hf(*qk, nullptr, d / "qk", o); }, {"qk_norm = true", arch, "Qwen3ForCausalLM"});
  }
  o.architecture = kQwen3Arch;
  expect_input_error([&] { export_hf(*m, nullptr, d / "q3", o); }, {"qk_norm = false", "Qwen3ForCausalLM"});
  expect_input_error([&] { export_hf(*bias, nullptr, d / "q3", o); }, {"qkv_bias", "Qwen3ForCausalLM"});
  EXPECT_FALSE(std::filesystem::exists(d / "qk/config.json"));
  EXPECT_FALSE(std::filesystem::exists(d / "q3/config.json"));
}

}  // namespace
}  // namespace lol::hf::test
