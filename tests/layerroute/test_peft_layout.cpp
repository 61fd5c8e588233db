// LayerRoute adapter files as PEFT's on the base's own Hugging Face class (peft_layout.h):
// for every architecture lol exports, PEFT's merge rule applied to the exported base folder
// and the adapter folder alone (module W + (lora_alpha / r) B A, alpha and r from
// rank_pattern / alpha_pattern where they name the module, transposed for fan_in_fan_out)
// gives the weights of `layerroute merge`'s folder; every module that adapter_config.json's
// target_modules selects has adapter tensors; the adapter reads back bit-exactly.
#include <map>
#include <set>

#include "hf/hf_config.h"
#include "hf/hf_export.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "layerroute/adapter_io.h"
#include "layerroute/peft_layout.h"
#include "layerroute_test_util.h"
#include "util/error.h"

namespace lol::layerroute {
namespace {

using test::randomize_adapters;
using test::randomize_base;

struct Case {
  std::string arch;
  baselines::DenseConfig config;
  std::vector<std::string> targets;
};

std::vector<Case> cases() {
  auto layernorm = [](bool gated) {
    auto c = test::tiny_config(3);
    c.norm = "layernorm";
    c.mlp = gated ? "gated" : "plain";
    return c;
  };
  std::vector<Case> out;
  out.push_back({hf::kQwen2Arch, test::tiny_config(3), {"q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"}});
  {
    auto c = layernorm(false);  // GPT-2: Conv1D modules, c_attn = [q; k; v], two c_proj
    c.positions = "learned";
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.n_kv_heads = c.n_heads;
    c.activation = "gelu_pytorch_tanh";
    out.push_back({hf::kGpt2Arch, c, {"q_proj", "v_proj", "o_proj", "down_proj"}});
    c.n_kv_heads = 1;  // GPT-BigCode's multi-query c_attn (nn.Linear)
    out.push_back({hf::kGptBigCodeArch, c, {"q_proj", "k_proj", "v_proj", "up_proj"}});
    c.n_kv_heads = c.n_heads;  // OPT: model.decoder.layers.{i}.self_attn.out_proj, fc1, fc2
    c.activation = "relu";
    c.norm_eps = 1e-5;  // (OPT's LayerNorms: OPTConfig has no epsilon)
    out.push_back({hf::kOptArch, c, {"k_proj", "o_proj", "up_proj", "down_proj"}});
  }
  {
    auto c = layernorm(false);  // GPT-NeoX: query_key_value per head
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.n_kv_heads = c.n_heads;
    c.activation = "gelu";
    c.partial_rotary_factor = 0.5;
    c.parallel_residual = true;
    out.push_back({hf::kGptNeoXArch, c, {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"}});
    c.n_kv_heads = 2;  // Falcon: query_key_value per key/value group
    c.partial_rotary_factor = 1.0;
    out.push_back({hf::kFalconArch, c, {"k_proj", "v_proj", "o_proj", "down_proj"}});
  }
  {
    auto c = layernorm(false);  // Phi: self_attn.dense, mlp.fc1 / fc2
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.activation = "gelu_pytorch_tanh";
    c.partial_rotary_factor = 0.5;
    c.parallel_residual = c.shared_input_norm = c.lm_head_bias = true;
    c.tie_word_embeddings = false;
    out.push_back({hf::kPhiArch, c, {"q_proj", "o_proj", "up_proj", "down_proj"}});
    c.qkv_bias = c.o_bias = false;  // GPT-J: interleaved RoPE rows of q and k, out_proj, fc_in / fc_out
    c.n_kv_heads = c.n_heads;
    c.partial_rotary_factor = 0.75;  // (6 of 8 dimensions: a reordering that is not its own inverse)
    out.push_back({hf::kGptJArch, c, {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj"}});
  }
  {
    auto c = test::tiny_config(3);  // Phi-3: qkv_proj and gate_up_proj, some parts without adapters
    c.qkv_bias = false;
    out.push_back({hf::kPhi3Arch, c, {"k_proj", "o_proj", "gate_proj", "up_proj"}});
  }
  {
    auto c = layernorm(true);  // Cohere: Llama's names, interleaved RoPE rows of q and k
    c.qkv_bias = false;
    c.activation = "silu";
    c.parallel_residual = c.shared_input_norm = true;
    c.logit_scale = 0.3;
    out.push_back({hf::kCohereArch, c, {"q_proj", "k_proj", "o_proj", "gate_proj"}});
  }
  {
    auto c = layernorm(false);  // StarCoder2: mlp.c_fc / c_proj
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.activation = "gelu";
    c.attention = "sliding";
    c.window = 4;
    out.push_back({hf::kStarcoder2Arch, c, {"v_proj", "up_proj", "down_proj"}});
  }
  {
    auto c = test::tiny_config(3);  // Granite: folds in q_proj, o_proj, down_proj
    c.qkv_bias = false;
    c.embedding_multiplier = 3.0;
    c.logits_scaling = 2.5;
    c.residual_multiplier = 0.4;
    c.attention_multiplier = 0.09;
    out.push_back({hf::kGraniteArch, c, {"q_proj", "o_proj", "down_proj"}});
  }
  return out;
}

std::map<std::string, torch::Tensor> tensors_of(const std::string& file) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : load_tensors(file)) out[name] = t.to(torch::kFloat64);
  return out;
}

/// PEFT's rule: a list entry selects a module whose path is the entry or ends with "." + entry.
bool selects(const nlohmann::json& target_modules, const std::string& path) {
  for (const auto& e : target_modules) {
    const std::string key = e.get<std::string>();
    if (path == key || (path.size() > key.size() && path.compare(path.size() - key.size() - 1, std::string::npos,
                                                                 "." + key) == 0))
      return true;
  }
  return false;
}

/// The rank_pattern / alpha_pattern value for module `path`, else `fallback`.
double pattern(const nlohmann::json& p, const std::string& path, double fallback) {
  for (auto it = p.begin(); it != p.end(); ++it)
    if (selects(nlohmann::json::array({it.key()}), path)) return it.value().get<double>();
  return fallback;
}

TEST(LayerRoutePeftLayout, AdapterFilesArePeftsOnEveryArchitecture) {
  for (auto& cs : cases()) {
    SCOPED_TRACE(cs.arch);
    test::TempDir dir("peft");
    baselines::DenseModel base(cs.config);
    randomize_base(*base, 17, 0.3);
    if (cs.arch == hf::kCohereArch) {  // as loaded from a Cohere folder: LayerNorms without a bias
      torch::NoGradGuard ng;
      for (auto& p : base->named_parameters())
        if (p.key().find("norm.bias") != std::string::npos) p.value().zero_();
    }
    hf::ExportOptions eo;
    eo.architecture = cs.arch;
    hf::export_hf(*base, nullptr, dir.path() + "/base", eo);
    LoraConfig lc;
    lc.rank = 3;
    lc.alpha = 5;
    lc.targets = cs.targets;
    GatedModel m(base, lc, GateConfig{}, 6);
    randomize_adapters(*m, 23);
    save_adapter(*m, dir.path() + "/adapter", dir.path() + "/base");
    EXPECT_EQ(read_adapter_info(dir.path() + "/adapter").peft_architecture, cs.arch);
    const auto before = m->lora->peft_tensors();
    std::vector<torch::Tensor> kept;
    for (const auto& [n, t] : before) kept.push_back(t.detach().clone());
    save_merged(*m, nullptr, dir.path() + "/merged", eo, "adapter");

    // PEFT's merge, from the files alone.
    const auto cfg = io::read_json_file(dir.path() + "/adapter/adapter_config.json");
    ASSERT_TRUE(cfg["target_modules"].is_array()) << cfg.dump();
    const double r = cfg["r"].get<double>(), alpha = cfg["lora_alpha"].get<double>();
    const bool fan_in_fan_out = cfg["fan_in_fan_out"].get<bool>();
    EXPECT_EQ(fan_in_fan_out, cs.arch == hf::kGpt2Arch);
    auto w = tensors_of(dir.path() + "/base/model.safetensors");
    auto merged = tensors_of(dir.path() + "/merged/model.safetensors");
    auto lora = tensors_of(dir.path() + "/adapter/adapter_model.safetensors");
    std::set<std::string> used;
    int64_t adapted = 0;
    for (const auto& [name, t] : w) {
      ASSERT_TRUE(merged.count(name)) << name;
      const std::string module = name.substr(0, name.rfind('.'));
      const std::string an = "base_model.model." + module + ".lora_A.weight";
      const std::string bn = "base_model.model." + module + ".lora_B.weight";
      const bool has = lora.count(an) > 0;
      auto want = t;
      if (has && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
        ASSERT_TRUE(lora.count(bn)) << bn;
        used.insert(an);
        used.insert(bn);
        const double rm = pattern(cfg["rank_pattern"], module, r), am = pattern(cfg["alpha_pattern"], module, alpha);
        EXPECT_EQ(lora[an].size(0), int64_t(rm)) << an;
        auto delta = (am / rm) * torch::matmul(lora[bn], lora[an]);
        want = t + (fan_in_fan_out ? delta.t() : delta);
        ++adapted;
      }
      // Modules target_modules selects are the modules with adapters (PEFT would add a
      // zero adapter to any other and warn of its missing tensors).
      if (t.dim() == 2 && name.find("embed") == std::string::npos && name.find("wte") == std::string::npos &&
          name.find("wpe") == std::string::npos && name.find("lm_head") == std::string::npos &&
          name.find("embed_out") == std::string::npos && name.find("embed_positions") == std::string::npos)
        EXPECT_EQ(selects(cfg["target_modules"], module), has) << module;
      const double scale = std::max(1.0, want.abs().max().item<double>());
      EXPECT_LT((merged[name] - want).abs().max().item<double>(), 1e-5 * scale) << name;
    }
    EXPECT_EQ(adapted, 3 * int64_t(cfg["target_modules"].size()));
    for (const auto& [name, t] : lora) EXPECT_TRUE(used.count(name)) << "adapter tensor of no module: " << name;

    // lol reads its file back bit-exactly.
    GatedModel back(baselines::DenseModel(cs.config), lc, GateConfig{}, 99);
    load_adapter_weights(*back, dir.path() + "/adapter");
    const auto after = back->lora->peft_tensors();
    ASSERT_EQ(after.size(), kept.size());
    for (size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(torch::equal(after[i].second, kept[i])) << after[i].first;
  }
}

// A fused module's lora_B is block diagonal over its projections: a nonzero entry outside
// the blocks (an adapter trained on the fused module in Python mixes the projections) or
// in the rows of a projection without an adapter is refused, naming the tensor; so are a
// missing tensor and a rank other than the layout's.
TEST(LayerRoutePeftLayout, ReadingRefusesWhatPerProjectionAdaptersCannotHold) {
  auto c = test::tiny_config(2);
  c.qkv_bias = false;
  LoraConfig lc;
  lc.rank = 2;
  lc.targets = {"q_proj", "v_proj"};
  baselines::DenseModel base(c);
  GatedModel m(base, lc, GateConfig{}, 6);
  randomize_adapters(*m, 5);
  const PeftLayout layout(hf::kPhi3Arch, c, lc);
  const auto modules = layout.modules(1);
  ASSERT_EQ(modules.size(), 1u);
  EXPECT_EQ(modules[0].path, "model.layers.1.self_attn.qkv_proj");
  EXPECT_EQ(modules[0].targeted, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(layout.config_fields()["rank_pattern"], nlohmann::json({{"qkv_proj", 4}}));
  EXPECT_EQ(layout.config_fields()["alpha_pattern"], nlohmann::json({{"qkv_proj", 32.0}}));
  const auto file = layout.to_peft(m->lora->peft_tensors());
  ASSERT_EQ(file.size(), 4u);
  const std::string bn = "base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight";
  const int64_t q = 4 * 8, k = 2 * 8;
  auto expect_refused = [&](const std::function<void(NamedTensors&)>& edit, const std::string& words) {
    NamedTensors f;
    for (const auto& [n, t] : file) f.emplace_back(n, t.clone());
    edit(f);
    try {
      layout.from_peft(f, "adapter_model.safetensors");
      ADD_FAILURE() << "accepted: " << words;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  auto b_of = [&](NamedTensors& f) -> torch::Tensor& {
    for (auto& [n, t] : f)
      if (n == bn) return t;
    throw std::logic_error("no " + bn);
  };
  expect_refused([&](NamedTensors& f) { b_of(f)[0][3] = 0.5; }, "'" + bn + "': the rows of q_proj hold nonzero values outside");
  expect_refused([&](NamedTensors& f) { b_of(f)[q][0] = 0.5; }, "the rows of k_proj hold nonzero values (k_proj has no adapter)");
  expect_refused([&](NamedTensors& f) { b_of(f)[q + k][0] = 0.5; }, "the rows of v_proj hold nonzero values outside");
  expect_refused([&](NamedTensors& f) { f.erase(f.begin()); }, "missing tensor 'base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight'");
  expect_refused([&](NamedTensors& f) { b_of(f) = b_of(f).slice(1, 0, 2); }, "has shape [64, 2], expected [64, 4]");
  expect_refused([&](NamedTensors& f) { f.emplace_back("base_model.model.lm_head.lora_A.weight", torch::zeros({2, 32})); },
                 "unexpected tensor 'base_model.model.lm_head.lora_A.weight'");
  // The block-diagonal file reads back to the adapters it came from.
  const auto back = layout.from_peft(file, "adapter_model.safetensors");
  std::map<std::string, torch::Tensor> want;
  for (const auto& [n, t] : m->lora->peft_tensors()) want[n] = t;
  ASSERT_EQ(back.size(), want.size());
  for (const auto& [n, t] : back) EXPECT_TRUE(torch::equal(t, want.at(n))) << n;
  EXPECT_THROW(PeftLayout("BertModel", c, lc), InputError);
}

// Adapters written before layerroute.json recorded peft_architecture (Llama's names and
// lol's row order on every base) still load: the missing field is the dense layout. A
// Qwen2 base's files are named as before, and GPT-2's c_proj are told apart in target_modules.
TEST(LayerRoutePeftLayout, OlderAdaptersAndLlamaNamedBasesKeepTheirNames) {
  auto c = test::tiny_config(2);
  LoraConfig lc;
  lc.targets = {"q_proj", "o_proj"};
  GatedModel m(baselines::DenseModel(c), lc, GateConfig{}, 6);
  randomize_adapters(*m, 7);
  test::TempDir dir("peft_old");
  hf::ExportOptions eo;
  hf::export_hf(*m->base, nullptr, dir.path() + "/base", eo);  // Qwen2
  save_adapter(*m, dir.path() + "/a", dir.path() + "/base");
  const auto names = load_tensors(dir.path() + "/a/adapter_model.safetensors");
  EXPECT_EQ(names[0].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(io::read_json_file(dir.path() + "/a/adapter_config.json")["target_modules"],
            nlohmann::json({"q_proj", "o_proj"}));
  auto manifest = io::read_json_file(dir.path() + "/a/layerroute.json");
  EXPECT_EQ(manifest["peft_architecture"], hf::kQwen2Arch);
  manifest.erase("peft_architecture");
  io::write_file_atomic(dir.path() + "/a/layerroute.json", manifest.dump());
  EXPECT_EQ(read_adapter_info(dir.path() + "/a").peft_architecture, kDenseLayout);
  GatedModel back(baselines::DenseModel(c), lc, GateConfig{}, 99);
  load_adapter_weights(*back, dir.path() + "/a");
  auto pa = m->lora->peft_tensors(), pb = back->lora->peft_tensors();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  manifest["peft_architecture"] = "BertModel";
  io::write_file_atomic(dir.path() + "/a/layerroute.json", manifest.dump());
  try {
    read_adapter_info(dir.path() + "/a");
    ADD_FAILURE() << "accepted peft_architecture BertModel";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layerroute.json: field 'peft_architecture'"), std::string::npos) << e.what();
  }
  LoraConfig gpt2;
  gpt2.targets = {"o_proj", "down_proj", "up_proj"};
  EXPECT_EQ(peft_config_fields(hf::kGpt2Arch, gpt2)["target_modules"], nlohmann::json({"attn.c_proj", "c_fc", "mlp.c_proj"}));
  // A multimodal Gemma 3: the text layers' modules by a regular expression (a list would
  // also select the vision tower's q_proj / o_proj).
  EXPECT_EQ(peft_config_fields(hf::kGemma3VisionArch, lc)["target_modules"],
            R"(model\.language_model\.layers\.\d+\.(self_attn\.q_proj|self_attn\.o_proj))");
  EXPECT_EQ(PeftLayout(hf::kGemma3VisionArch, c, lc).modules(1)[1].path, "model.language_model.layers.1.self_attn.o_proj");
}

}  // namespace
}  // namespace lol::layerroute
