// LoRA adapters (paper 3.1) and adapter files: B = 0 is the base model, merged ==
// unmerged, PEFT names, bit-exact reload, strict loading.
#include <filesystem>
#include <utility>
#include <vector>

#include "core/module_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "layerroute/adapter_io.h"
#include "layerroute/decode.h"
#include "layerroute_test_util.h"

namespace lol::layerroute::test {
namespace {

GatedOptions open_gates(bool lora = true) {
  GatedOptions o;
  o.mode = GateMode::Open;
  o.use_lora = lora;
  return o;
}

TEST(LayerRouteLora, ZeroBLeavesLogitsUnchanged) {
  auto base = tiny_base();
  torch::Tensor tok, docs;
  random_batch({10, 10}, 61, 3, tok, docs);
  torch::NoGradGuard ng;
  auto ref = base->forward(tok);
  LoraConfig lc;
  lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  GatedModel m(base, lc, GateConfig{}, 7);
  for (auto& [n, t] : m->lora->peft_tensors())
    if (n.find("lora_A") != std::string::npos) EXPECT_GT(t.abs().max().item<float>(), 0.0f) << n;
  auto out = m->forward(tok, docs, open_gates());
  EXPECT_TRUE(torch::allclose(out.logits, ref, 1e-5, 1e-5));
  EXPECT_EQ(out.executed_blocks, 2 * 6);
}

TEST(LayerRouteLora, MergedEqualsUnmerged) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 8);
  randomize_adapters(*m, 23);
  torch::NoGradGuard ng;
  torch::Tensor tok, docs;
  random_batch({9, 12}, 61, 29, tok, docs);
  auto unmerged = m->forward(tok, docs, open_gates(true));
  auto plain = m->forward(tok, docs, open_gates(false));
  EXPECT_GT((unmerged.logits - plain.logits).abs().max().item<float>(), 1e-3) << "adapters must matter";
  baselines::DenseModel copy(m->base->config());
  load_module(*copy, module_state(*m->base), "copy");
  m->lora->merge_into(*copy);
  auto valid = (docs >= 0).unsqueeze(-1).to(torch::kFloat32);
  auto merged = copy->forward(tok, docs);
  EXPECT_TRUE(torch::allclose(merged * valid, unmerged.logits * valid, 1e-4, 1e-4));
  // Gated + merged weights without LoRA == gated + LoRA (learned gates too).
  GatedModel mg(copy, LoraConfig{}, GateConfig{}, 0);
  mg->gates->weight.copy_(m->gates->weight);
  mg->gates->bias.copy_(m->gates->bias);
  GatedOptions nolora;
  nolora.use_lora = false;
  auto a = m->forward(tok, docs, GatedOptions{});
  auto b = mg->forward(tok, docs, nolora);
  EXPECT_TRUE(torch::equal(a.open, b.open));
  EXPECT_TRUE(torch::allclose(a.logits * valid, b.logits * valid, 1e-4, 1e-4));
}

// A Qwen3-style base (q_norm / k_norm with weights away from 1, head_dim 12 != 32 / 4):
// zero B is the base model, merged LoRA equals LoRA, and cached gated generation equals
// greedy full forwards with the same gates (the norms run in every path).
TEST(LayerRouteLora, Qwen3BaseWithQkNormsAndItsOwnHeadDim) {
  auto cfg = tiny_config(4);
  cfg.qkv_bias = false;
  cfg.qk_norm = true;
  cfg.head_dim = 12;
  baselines::DenseModel base(cfg);
  base->reset_parameters(5);
  {
    torch::NoGradGuard ng;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
    for (auto& p : base->named_parameters())
      if (p.key().find("_norm") != std::string::npos) p.value().add_(0.4 * torch::randn(p.value().sizes(), gen));
  }
  base->eval();
  torch::Tensor tok, docs;
  random_batch({9, 12}, 61, 31, tok, docs);
  torch::NoGradGuard ng;
  const auto ref = base->forward(tok, docs);
  LoraConfig lc;
  lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  GatedModel zero(base, lc, GateConfig{}, 7);
  auto valid = (docs >= 0).unsqueeze(-1).to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(zero->forward(tok, docs, open_gates()).logits * valid, ref * valid, 1e-5, 1e-5));
  GatedModel m(base, lc, GateConfig{}, 8);
  randomize_adapters(*m, 23, 2.0);
  auto unmerged = m->forward(tok, docs, open_gates(true));
  EXPECT_GT((unmerged.logits - ref).abs().max().item<float>(), 1e-3) << "adapters must matter";
  baselines::DenseModel copy(cfg);
  load_module(*copy, module_state(*base), "copy");
  m->lora->merge_into(*copy);
  EXPECT_TRUE(torch::allclose(copy->forward(tok, docs) * valid, unmerged.logits * valid, 1e-4, 1e-4));
  // Without the norms the function differs: they are applied.
  auto no_norm = cfg;
  no_norm.qk_norm = false;
  baselines::DenseModel plain(no_norm);
  for (auto& p : plain->named_parameters()) p.value().copy_(base->named_parameters()[p.key()]);
  EXPECT_GT((plain->forward(tok, docs) - ref).abs().max().item<float>(), 1e-3);
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11};
  auto g = generate_gated(*m, prompt, 5, GateMode::Open, true);
  std::vector<int64_t> seq = prompt;
  for (size_t t = 0; t < g.tokens.size(); ++t) {
    auto out = m->forward(torch::tensor(seq).unsqueeze(0), torch::Tensor(), open_gates(true));
    EXPECT_EQ(out.logits[0][-1].argmax().item<int64_t>(), g.tokens[t]) << "step " << t;
    seq.push_back(g.tokens[t]);
  }
}

TEST(LayerRouteLora, AdaptersReloadBitExactly) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 9);
  randomize_adapters(*m, 31);
  TempDir d("adapter");
  save_adapter(*m, d.path(), "/some/base");
  auto tensors = load_tensors(d.path() + "/adapter_model.safetensors");
  ASSERT_EQ(tensors.size(), size_t(6 * 4 * 2));
  EXPECT_EQ(tensors[0].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(tensors[1].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(tensors[0].second.sizes(), torch::IntArrayRef({8, 32}));
  auto cfg = io::read_json_file(d.path() + "/adapter_config.json");
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 8);
  EXPECT_EQ(cfg["lora_alpha"], 16.0);
  GatedModel r(tiny_base(), LoraConfig{}, GateConfig{}, 99);
  load_adapter_weights(*r, d.path());
  auto pa = m->lora->peft_tensors(), pb = r->lora->peft_tensors();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  EXPECT_TRUE(torch::equal(m->gates->weight, r->gates->weight));
  EXPECT_TRUE(torch::equal(m->gates->bias, r->gates->bias));
  torch::NoGradGuard ng;
  torch::Tensor tok, docs;
  random_batch({7, 12}, 61, 37, tok, docs);
  EXPECT_TRUE(torch::equal(m->forward(tok, docs, {}).logits, r->forward(tok, docs, {}).logits));
  auto info = read_adapter_info(d.path());
  EXPECT_EQ(info.base_dir, "/some/base");
  EXPECT_EQ(info.lora.rank, 8);
  // adapter_config.json (PEFT) and layerroute.json must describe the same adapters: an
  // edit to the PEFT file alone is refused naming it, not silently ignored.
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"r", 4}, {"lora_alpha", 32.0}, {"target_modules", {"q_proj", "v_proj"}}, {"bias", "all"},
           // PEFT options that change what the weights compute (they were ignored):
           {"peft_type", "LOHA"}, {"use_rslora", true}, {"use_dora", true}, {"fan_in_fan_out", true},
           {"rank_pattern", {{"q_proj", 4}}}, {"alpha_pattern", {{"q_proj", 4}}}, {"layers_to_transform", {0, 1}},
           {"modules_to_save", {"lm_head"}}}) {
    auto edited = cfg;
    edited[field] = value;
    io::write_file_atomic(d.path() + "/adapter_config.json", edited.dump());
    try {
      read_adapter_info(d.path());
      ADD_FAILURE() << "accepted adapter_config.json with " << field << " = " << value.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("adapter_config.json: field '" + field + "'"), std::string::npos)
          << e.what();
    }
  }
  // Fields that do not change the weights' meaning may differ; the target order may too.
  auto same = cfg;
  same["lora_dropout"] = 0.05;
  same["inference_mode"] = false;
  same["use_rslora"] = false;
  same["rank_pattern"] = nlohmann::json::object();
  same["layers_to_transform"] = nullptr;
  same["target_modules"] = {"o_proj", "v_proj", "k_proj", "q_proj"};
  io::write_file_atomic(d.path() + "/adapter_config.json", same.dump());
  EXPECT_EQ(read_adapter_info(d.path()).lora.rank, 8);
}

// Rewriting an adapter folder: a write that fails (here gates.safetensors cannot be
// staged) keeps the previous adapter whole; a rename that fails leaves no layerroute.json
// (refused when loaded), never new weights under the old manifest.
TEST(LayerRouteLora, RewritingAnAdapterNeverMixesOldAndNewFiles) {
  GatedModel first(tiny_base(), LoraConfig{}, GateConfig{}, 9), second(tiny_base(), LoraConfig{}, GateConfig{}, 10);
  randomize_adapters(*first, 31);
  randomize_adapters(*second, 32);
  TempDir d("adapter_rewrite");
  save_adapter(*first, d.path(), "/some/base");
  const auto bytes = [&](const std::string& f) { return io::read_file(d.path() + "/" + f); };
  const std::vector<std::string> files = {"adapter_model.safetensors", "gates.safetensors", "adapter_config.json",
                                          "layerroute.json"};
  std::vector<std::string> before;
  for (const auto& f : files) before.push_back(bytes(f));
  std::filesystem::create_directory(d.path() + "/gates.safetensors.lol-staged");
  EXPECT_THROW(save_adapter(*second, d.path(), "/some/base"), InputError);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(bytes(files[i]), before[i]) << files[i];
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/adapter_model.safetensors.lol-staged"));
  std::filesystem::remove(d.path() + "/gates.safetensors.lol-staged");
  // A directory where gates.safetensors goes: the rename into place fails.
  std::filesystem::remove(d.path() + "/gates.safetensors");
  std::filesystem::create_directory(d.path() + "/gates.safetensors");
  EXPECT_THROW(save_adapter(*second, d.path(), "/some/base"), InputError);
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/layerroute.json"));
  EXPECT_THROW(read_adapter_info(d.path()), InputError);
  std::filesystem::remove(d.path() + "/gates.safetensors");
  save_adapter(*second, d.path(), "/some/base");
  GatedModel r(tiny_base(), LoraConfig{}, GateConfig{}, 99);
  load_adapter_weights(*r, d.path());
  EXPECT_TRUE(torch::equal(r->gates->weight, second->gates->weight));
  EXPECT_EQ(read_adapter_info(d.path()).base_dir, "/some/base");
  for (const auto& e : std::filesystem::directory_iterator(d.path()))
    EXPECT_EQ(e.path().string().find(".lol-staged"), std::string::npos) << e.path();
}

TEST(LayerRouteLora, StrictLoadingNamesTheTensor) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 9);
  TempDir d("strict");
  save_adapter(*m, d.path(), "");
  LoraConfig r4;
  r4.rank = 4;
  GatedModel other(tiny_base(), r4, GateConfig{}, 1);
  try {
    load_adapter_weights(*other, d.path());
    FAIL() << "rank mismatch accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lora_A.weight"), std::string::npos) << e.what();
  }
  LoraConfig bad;
  bad.targets = {"q_proj", "qq_proj"};
  EXPECT_THROW(bad.validate("x"), InputError);
  EXPECT_THROW(parse_gate_mode("half"), InputError);
}

}  // namespace
}  // namespace lol::layerroute::test
