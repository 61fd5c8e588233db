#include "layerroute/peft_layout.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "hf/hf_config.h"
#include "hf/hf_model.h"
#include "io/json_file.h"
#include "layerroute/lora.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::layerroute {

namespace {

/// Every projection of a block, attention before MLP (gate_proj only in a gated MLP).
std::vector<std::string> projections(const baselines::DenseConfig& c) {
  std::vector<std::string> out = {"q_proj", "k_proj", "v_proj", "o_proj"};
  if (c.mlp == "gated") out.push_back("gate_proj");
  out.push_back("up_proj");
  out.push_back("down_proj");
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string file_name(const std::string& module, char which) {
  return "base_model.model." + module + ".lora_" + std::string(1, which) + ".weight";
}

/// The last `n` dot-separated components of `path`.
std::string tail(const std::string& path, int n) {
  size_t at = path.size();
  for (int k = 0; k < n && at != std::string::npos; ++k) at = at == 0 ? std::string::npos : path.rfind('.', at - 1);
  return at == std::string::npos ? path : path.substr(at + 1);
}

}  // namespace

std::string peft_architecture_of(const std::string& base_dir) {
  const fs::path p = fs::path(base_dir) / "config.json";
  if (base_dir.empty() || !fs::exists(p)) return kDenseLayout;
  const auto j = io::read_json_file(p.string());
  if (!j.is_object() || j.contains("architecture") || (!j.contains("architectures") && !j.contains("model_type")))
    return kDenseLayout;  // a lol checkpoint (require_dense_base admits only dense ones)
  const auto c = hf::HfConfig::from_json(j, p.string());
  return c.multimodal_text ? hf::kGemma3VisionArch : c.architecture;
}

PeftLayout::PeftLayout(std::string architecture, const baselines::DenseConfig& base, const LoraConfig& lora)
    : arch_(std::move(architecture)), base_(base), lora_(lora) {
  if (arch_ != kDenseLayout && !hf::find_architecture(arch_))
    throw InputError("LayerRoute adapter layout \"" + arch_ + "\": expected \"" + kDenseLayout +
                     "\" or a Hugging Face class lol loads (" + hf::architecture_list() + ")");
  for (const auto& t : lora_.targets)
    if (!contains(projections(base_), t))
      throw InputError("LoRA target '" + t + "': the base has no such projection (its MLP has no gate)");
}

std::string PeftLayout::module_path(int64_t layer, const std::string& target) const {
  const std::string layer_prefix = "model.layers." + std::to_string(layer) + ".";
  const std::string name = layer_prefix + target_parent(target) + "." + target + ".weight";
  std::string s = name;
  if (arch_ == hf::kGpt2Arch || arch_ == hf::kGptBigCodeArch)
    s = "transformer." + hf::gpt2_stored_name(name);
  else if (arch_ == hf::kGptNeoXArch)
    s = hf::gpt_neox_stored_name(name);
  else if (arch_ == hf::kFalconArch)
    s = hf::falcon_stored_name(name, false);  // (the norms' names alone depend on two_norms)
  else if (arch_ == hf::kGptJArch)
    s = hf::gptj_stored_name(name);
  else if (arch_ == hf::kPhiArch)
    s = hf::phi_stored_name(name);
  else if (arch_ == hf::kStarcoder2Arch)
    s = hf::starcoder2_stored_name(name);
  else if (arch_ == hf::kOptArch)
    s = hf::opt_stored_name(name);
  else if (arch_ == hf::kGemma3VisionArch)  // the text model inside Gemma3ForConditionalGeneration (transformers >= 4.52)
    s = "model.language_model.layers." + name.substr(std::string("model.layers.").size());
  else if (arch_ == hf::kPhi3Arch)
    for (const auto& fw : hf::phi3_fused_weights())
      for (const auto& part : fw.parts)
        if (name == layer_prefix + part) s = layer_prefix + fw.fused;
  return s.substr(0, s.size() - std::string(".weight").size());
}

std::vector<PeftModule> PeftLayout::modules(int64_t layer) const {
  std::vector<PeftModule> all;
  for (const auto& p : projections(base_)) {
    const std::string path = module_path(layer, p);
    auto it = std::find_if(all.begin(), all.end(), [&](const PeftModule& m) { return m.path == path; });
    if (it == all.end()) {
      all.push_back(PeftModule{path, "", {}, {}});
      it = all.end() - 1;
    }
    it->parts.push_back(p);
    if (contains(lora_.targets, p)) it->targeted.push_back(p);
  }
  std::vector<PeftModule> out;
  for (auto& m : all) {
    // PEFT matches a target_modules entry against the end of every module's path: the
    // module's own name, with its parent's where another module of the block shares it.
    const auto same = std::count_if(all.begin(), all.end(), [&](const PeftModule& o) { return tail(o.path, 1) == tail(m.path, 1); });
    m.name = tail(m.path, same > 1 ? 2 : 1);
    if (!m.targeted.empty()) out.push_back(m);
  }
  return out;
}

int64_t PeftLayout::part_rows(const std::string& t) const {
  const int64_t hd = base_.effective_head_dim();
  if (t == "q_proj") return base_.n_heads * hd;
  if (t == "k_proj" || t == "v_proj") return base_.n_kv_heads * hd;
  if (t == "gate_proj" || t == "up_proj") return base_.ffn_hidden;
  return base_.d_model;  // o_proj, down_proj
}

torch::Tensor PeftLayout::module_rows(const PeftModule& m, const torch::Tensor& stacked, bool to_file) const {
  const int64_t hd = base_.effective_head_dim();
  if (m.parts.size() > 1) {
    // Fused q/k/v stored per key/value group (hf_export.cpp's fuse_grouped_qkv for these
    // classes); GPT-2's c_attn and Phi-3's fused modules hold the parts one after the other.
    if (arch_ == hf::kGptNeoXArch || arch_ == hf::kFalconArch || arch_ == hf::kGptBigCodeArch) {
      const int64_t kv = base_.n_kv_heads, group = base_.n_heads / kv;
      if (!to_file) return hf::split_grouped_qkv(stacked, kv, group, hd);
      const int64_t q = part_rows("q_proj"), k = part_rows("k_proj");
      return hf::fuse_grouped_qkv(stacked.slice(0, 0, q), stacked.slice(0, q, q + k), stacked.slice(0, q + k), kv, group,
                                  hd);
    }
    return stacked;
  }
  // GPT-J and Cohere keep q and k in interleaved RoPE pairs; lol's rows are rotate-half's.
  if ((arch_ == hf::kGptJArch || arch_ == hf::kCohereArch) && (m.parts[0] == "q_proj" || m.parts[0] == "k_proj"))
    return hf::gptj_rotary_rows(stacked, stacked.size(0) / hd, hd, base_.rotary_dim(), to_file);
  return stacked;
}

NamedTensors PeftLayout::to_peft(const NamedTensors& lol) const {
  if (arch_ == kDenseLayout) return lol;
  torch::NoGradGuard ng;
  std::map<std::string, torch::Tensor> by_name(lol.begin(), lol.end());
  auto get = [&](int64_t layer, const std::string& t, char which) {
    auto it = by_name.find(peft_name(layer, t, which));
    if (it == by_name.end()) throw std::logic_error("PeftLayout::to_peft: no tensor " + peft_name(layer, t, which));
    return it->second.detach();
  };
  NamedTensors out;
  const int64_t r = lora_.rank;
  for (int64_t i = 0; i < base_.n_layers; ++i)
    for (const auto& m : modules(i)) {
      const int64_t rank = r * int64_t(m.targeted.size());
      std::vector<torch::Tensor> a, b;
      for (const auto& p : m.parts) {
        const auto opts = get(i, m.targeted[0], 'B').options();
        auto rows = torch::zeros({part_rows(p), rank}, opts);
        if (contains(m.targeted, p)) {
          const int64_t j = int64_t(a.size());
          rows.slice(1, j * r, (j + 1) * r).copy_(get(i, p, 'B'));
          a.push_back(get(i, p, 'A'));
        }
        b.push_back(rows);
      }
      out.emplace_back(file_name(m.path, 'A'), torch::cat(a, 0).contiguous());
      out.emplace_back(file_name(m.path, 'B'), module_rows(m, torch::cat(b, 0), true).contiguous());
    }
  return out;
}

NamedTensors PeftLayout::from_peft(const NamedTensors& file, const std::string& where) const {
  if (arch_ == kDenseLayout) return file;
  std::map<std::string, torch::Tensor> got;
  for (const auto& [name, t] : file)
    if (!got.emplace(name, t).second) throw InputError(where + ": tensor '" + name + "' appears twice");
  const std::string layout = " (an adapter of rank " + std::to_string(lora_.rank) + " on " + nlohmann::json(lora_.targets).dump() +
                             " of " + std::to_string(base_.n_layers) + " layers, named for " + arch_ + ")";
  auto take = [&](const std::string& name, const std::vector<int64_t>& shape) {
    auto it = got.find(name);
    if (it == got.end()) throw InputError(where + ": missing tensor '" + name + "'" + layout);
    auto t = it->second;
    got.erase(it);
    if (t.sizes() != c10::IntArrayRef(shape))
      throw InputError(where + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) + ", expected " +
                       c10::str(c10::IntArrayRef(shape)) + layout);
    if (!t.is_floating_point()) throw InputError(where + ": tensor '" + name + "' is not a float tensor");
    return t;
  };
  auto in_features = [&](const std::string& t) {
    return t == "o_proj" ? part_rows("q_proj") : t == "down_proj" ? base_.ffn_hidden : base_.d_model;
  };
  NamedTensors out;
  const int64_t r = lora_.rank;
  for (int64_t i = 0; i < base_.n_layers; ++i)
    for (const auto& m : modules(i)) {
      const int64_t rank = r * int64_t(m.targeted.size());
      int64_t rows = 0;
      for (const auto& p : m.parts) rows += part_rows(p);
      const std::string an = file_name(m.path, 'A'), bn = file_name(m.path, 'B');
      const auto a = take(an, {rank, in_features(m.parts[0])});
      const auto stacked = module_rows(m, take(bn, {rows, rank}), false);
      int64_t at = 0, j = 0;
      for (const auto& p : m.parts) {
        const auto part = stacked.slice(0, at, at + part_rows(p));
        at += part_rows(p);
        const bool targeted = contains(m.targeted, p);
        // Entries outside the part's own column block must be zero: lol's adapter on p sees only them.
        auto outside = part.clone();
        if (targeted) outside.slice(1, j * r, (j + 1) * r).zero_();
        if (outside.ne(0).any().item<bool>())
          throw InputError(where + ": tensor '" + bn + "': the rows of " + p + " hold nonzero values " +
                           (targeted ? "outside its own rank-" + std::to_string(r) + " column block" : "(" + p +
                                           " has no adapter)") +
                           ": lol holds one rank-r adapter per projection (lora_B of a fused module is block "
                           "diagonal over its projections, as lol writes it)" + layout);
        if (!targeted) continue;
        out.emplace_back(peft_name(i, p, 'A'), a.slice(0, j * r, (j + 1) * r));
        out.emplace_back(peft_name(i, p, 'B'), part.slice(1, j * r, (j + 1) * r));
        ++j;
      }
    }
  if (!got.empty()) throw InputError(where + ": unexpected tensor '" + got.begin()->first + "'" + layout);
  return out;
}

nlohmann::json PeftLayout::config_fields() const {
  nlohmann::json j = {{"r", lora_.rank}, {"lora_alpha", lora_.alpha}};
  nlohmann::json ranks = nlohmann::json::object(), alphas = nlohmann::json::object();
  std::vector<std::string> names;
  for (const auto& m : modules(0)) {
    names.push_back(m.name);
    if (m.targeted.size() > 1) {
      ranks[m.name] = lora_.rank * int64_t(m.targeted.size());
      alphas[m.name] = lora_.alpha * double(m.targeted.size());
    }
  }
  if (arch_ == kDenseLayout)
    j["target_modules"] = lora_.targets;  // (config order, as before layouts)
  else if (arch_ == hf::kGemma3VisionArch) {
    // A list would match the vision tower's q_proj too: the text layers' modules by a
    // regular expression (PEFT full-matches a string against every module path).
    std::string alt;
    for (const auto& m : modules(0)) alt += (alt.empty() ? "" : "|") + tail(m.path, 2);
    std::string re;
    for (char ch : alt) re += ch == '.' ? std::string("\\.") : std::string(1, ch);
    j["target_modules"] = "model\\.language_model\\.layers\\.\\d+\\.(" + re + ")";
  } else
    j["target_modules"] = names;
  j["rank_pattern"] = ranks;
  j["alpha_pattern"] = alphas;
  j["fan_in_fan_out"] = arch_ == hf::kGpt2Arch;  // (GPT-2's Conv1D weights are [in, out])
  return j;
}

nlohmann::json peft_config_fields(const std::string& architecture, const LoraConfig& lora) {
  baselines::DenseConfig names_only;  // (module names depend on the class and the targets alone)
  names_only.n_layers = 1;
  names_only.mlp = "gated";
  return PeftLayout(architecture, names_only, lora).config_fields();
}

}  // namespace lol::layerroute
