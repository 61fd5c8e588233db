#include "layerroute/adapter_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "baselines/dense_trainable.h"
#include "core/tensor_io.h"
#include "hf/hf_model.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "layerroute/peft_layout.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace fs = std::filesystem;

namespace lol::layerroute {

namespace {
void write_json(const std::string& path, const nlohmann::json& j) {
  io::AtomicFile f(path);
  f.write(j.dump(2) + "\n");
  f.commit();
}
}  // namespace

void require_dense_base(const std::string& dir) {
  const auto cfg_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg_path)) return;
  const auto j = io::read_json_file(cfg_path);
  if (!j.is_object()) return;  // the loader names the malformed file
  std::string arch;
  if (j.contains("architecture"))
    arch = j["architecture"].is_string() ? j["architecture"].get<std::string>() : j["architecture"].dump();
  else if (!j.contains("architectures") && !j.contains("model_type")) arch = "lol";  // lol's loaders' default
  if (arch == "dense" || (arch.empty() && j.contains("architectures"))) {
    // The layout, before any data is read: blocks and attention the gated decoder
    // implements (gated_model.h).
    auto dense = j;
    dense.erase("extra");  // what the run recorded with a checkpoint (baselines::load_dense ignores it)
    const auto c = arch == "dense" ? baselines::DenseConfig::from_json(dense, cfg_path)
                                   : hf::to_dense_config(hf::HfConfig::from_json(j, cfg_path));
    require_layerroute_base(c, cfg_path);
    return;
  }
  if (arch.empty()) return;
  const std::string name = arch == "lol" ? "LoL" : arch == "moe" ? "MoE" : arch;
  throw InputError("LayerRoute needs a dense model (a Hugging Face folder of " + hf::architecture_list(true) +
                   ", or a dense checkpoint); " + dir + " is a" + (name == "MoE" ? "n " : " ") + name +
                   " checkpoint (" + cfg_path + ": architecture \"" + arch + "\")");
}

baselines::DenseModel load_base_model(const std::string& dir) {
  require_dense_base(dir);
  const auto cfg_path = (fs::path(dir) / "config.json").string();
  auto j = io::read_json_file(cfg_path);
  baselines::DenseModel m{nullptr};
  if (j.is_object() && j.value("architecture", std::string()) == "dense")
    m = baselines::load_dense(dir);
  else
    m = hf::load_hf_model(dir);
  m->eval();
  return m;
}

std::string base_weights_fingerprint(const baselines::DenseModelImpl& base) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  torch::NoGradGuard ng;
  for (const auto& p : base.named_parameters(/*recurse=*/true)) {
    mix(p.key().data(), p.key().size());
    for (int64_t s : p.value().sizes()) mix(&s, sizeof s);
    const auto flat = p.value().detach().reshape({-1});
    const int64_t n = flat.numel(), k = std::min<int64_t>(n, 4096);
    for (const auto& part : {flat.slice(0, 0, k), flat.slice(0, std::max<int64_t>(k, n - 4096), n)}) {
      const auto v = part.to(torch::kCPU, torch::kFloat).contiguous();
      mix(v.data_ptr<float>(), size_t(v.numel()) * sizeof(float));
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + buf;
}

void save_adapter(const GatedModelImpl& m, const std::string& dir, const std::string& base_dir_given,
                  const nlohmann::json& extra) {
  // Absolute, so that the adapter finds its base from any working directory.
  const std::string base_dir =
      base_dir_given.empty() || fs::path(base_dir_given).is_absolute() || !fs::exists(base_dir_given)
          ? base_dir_given
          : fs::absolute(base_dir_given).lexically_normal().string();
  fs::create_directories(dir);
  const auto& lc = m.lora->config();
  // Every file is staged first ("NAME.lol-staged", each written atomically); then the
  // old layerroute.json (what makes the folder an adapter) is removed, the weights and
  // adapter_config.json renamed into place, and layerroute.json renamed last. A failed
  // write leaves the previous adapter whole; a kill during the renames leaves a folder
  // without layerroute.json (refused when loaded), never new weights under an old
  // manifest.
  const fs::path d(dir);
  const std::vector<std::string> names = {"adapter_model.safetensors", "gates.safetensors", "adapter_config.json",
                                          "layerroute.json"};
  auto staged = [&](const std::string& name) { return (d / (name + ".lol-staged")).string(); };
  // The adapter as PEFT's on the base's Hugging Face class (peft_layout.h).
  const std::string layout_arch = peft_architecture_of(base_dir);
  const PeftLayout layout(layout_arch, m.base->config(), lc);
  try {
    save_tensors(staged(names[0]), layout.to_peft(m.lora->peft_tensors()), {{"format", "pt"}});
    save_tensors(staged(names[1]), {{"gates.weight", m.gates->weight}, {"gates.bias", m.gates->bias}},
                 {{"format", "pt"}});
    nlohmann::json peft = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"base_model_name_or_path", base_dir},
                           {"lora_dropout", 0.0},
                           {"bias", "none"},
                           {"inference_mode", true}};
    peft.update(layout.config_fields());  // r, lora_alpha, target_modules, rank_pattern, alpha_pattern, fan_in_fan_out
    write_json(staged(names[2]), peft);
    write_json(staged(names[3]), {{"base", base_dir},
                                  {"base_fingerprint", base_weights_fingerprint(*m.base)},
                                  {"peft_architecture", layout_arch},
                                  {"lora", to_json(lc)},
                                  {"gates", to_json(m.gates->config())},
                                  {"extra", extra}});
  } catch (...) {
    std::error_code ec;
    for (const auto& n : names) fs::remove(staged(n), ec);
    throw;
  }
  std::error_code ec;
  fs::remove(d / "layerroute.json", ec);
  if (ec) throw InputError(dir + "/layerroute.json: cannot remove the previous adapter's manifest: " + ec.message());
  io::fsync_dir(dir);
  for (const auto& n : names) {
    fs::rename(staged(n), d / n, ec);
    if (ec) throw InputError(dir + "/" + n + ": cannot move the new file into place: " + ec.message());
  }
  io::fsync_dir(dir);
}

namespace {
/// load_adapter_weights with the layout `peft_architecture` already read from dir/layerroute.json.
void load_adapter_weights_named_for(GatedModelImpl& m, const std::string& dir, const std::string& peft_architecture) {
  const auto ap = (fs::path(dir) / "adapter_model.safetensors").string();
  const PeftLayout layout(peft_architecture, m.base->config(), m.lora->config());
  m.lora->load_peft_tensors(layout.from_peft(load_tensors(ap), ap), ap);
  load_gate_weights(m, dir);
}
}  // namespace

void load_adapter_weights(GatedModelImpl& m, const std::string& dir) {
  load_adapter_weights_named_for(m, dir, read_adapter_info(dir).peft_architecture);
}

void load_gate_weights(GatedModelImpl& m, const std::string& dir) {
  const auto gp = (fs::path(dir) / "gates.safetensors").string();
  auto g = load_tensors(gp);
  require(g.size() == 2, gp, "expected exactly the tensors gates.weight and gates.bias");
  torch::NoGradGuard ng;
  for (auto& [name, t] : g) {
    torch::Tensor* dst = name == "gates.weight" ? &m.gates->weight : name == "gates.bias" ? &m.gates->bias : nullptr;
    if (!dst) throw InputError(gp + ": unexpected tensor '" + name + "' (expected gates.weight, gates.bias)");
    if (t.sizes() != dst->sizes())
      throw InputError(gp + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) + ", expected " +
                       c10::str(dst->sizes()));
    if (!t.is_floating_point() || !torch::isfinite(t.to(dst->scalar_type())).all().item<bool>())
      throw InputError(gp + ": tensor '" + name + "' must hold finite float values (as " +
                       std::string(c10::toString(dst->scalar_type())) + ")");
    dst->copy_(t);
  }
}

void save_merged(GatedModelImpl& m, const tokenizers::Tokenizer* tok, const std::string& out_dir,
                 const hf::ExportOptions& eo, const std::string& merged_from, const nlohmann::json& extra) {
  m.lora->merge_into(*m.base);
  hf::export_hf(*m.base, tok, out_dir, eo);
  save_tensors((fs::path(out_dir) / "gates.safetensors").string(),
               {{"gates.weight", m.gates->weight}, {"gates.bias", m.gates->bias}}, {{"format", "pt"}});
  write_json((fs::path(out_dir) / "layerroute_gates.json").string(),
             {{"gates", to_json(m.gates->config())},
              {"merged_from", merged_from},
              {"extra", extra.is_object() ? extra : nlohmann::json::object()}});
}

/// The PEFT adapter_config.json written next to layerroute.json (for Python users) must
/// describe the same adapters in the layout `arch` (peft_layout.h): an edit to one of the
/// two would otherwise be silently ignored (layerroute.json is what is loaded). Fields that
/// do not change the loaded weights' meaning (lora_dropout, inference_mode, ...) are not
/// compared; a missing file is fine (older adapters).
static void check_peft_config(const std::string& dir, const LoraConfig& lora, const std::string& arch) {
  const auto cp = (fs::path(dir) / "adapter_config.json").string();
  if (!fs::exists(cp)) return;
  const auto c = io::read_json_file(cp);
  require(c.is_object(), cp, "expected a JSON object (PEFT adapter config)");
  const auto want = peft_config_fields(arch, lora);
  const std::string also = " (layerroute.json: lora has rank " + std::to_string(lora.rank) + ", alpha " +
                           nlohmann::json(lora.alpha).dump() + ", targets " + nlohmann::json(lora.targets).dump() +
                           ", named for " + arch + "; expected ";
  auto differs = [&](const char* key, const std::string& why) {
    throw InputError(cp + ": field '" + key + "' = " + c[key].dump().substr(0, 200) + also + want[key].dump() +
                     "; the two must agree)" + why);
  };
  if (c.contains("r") && !(c["r"].is_number_integer() && c["r"] == want["r"])) differs("r", "");
  if (c.contains("lora_alpha") && !(c["lora_alpha"].is_number() && c["lora_alpha"].get<double>() == lora.alpha))
    differs("lora_alpha", "");
  if (c.contains("target_modules")) {
    const auto& t = c["target_modules"];
    auto sorted = [](const nlohmann::json& v) {
      std::vector<std::string> out;
      for (const auto& x : v)
        if (x.is_string()) out.push_back(x.get<std::string>());
      std::sort(out.begin(), out.end());
      return out;
    };
    const bool same = want["target_modules"].is_string()
                          ? t == want["target_modules"]
                          : t.is_array() && std::all_of(t.begin(), t.end(), [](const auto& x) { return x.is_string(); }) &&
                                sorted(t) == sorted(want["target_modules"]);
    if (!same) differs("target_modules", "");
  }
  if (c.contains("bias"))
    require(c["bias"] == "none", cp, "field 'bias' = " + c["bias"].dump() + ": LayerRoute adapters have no bias (expected \"none\")");
  // PEFT options that change what the weights compute: refused rather than ignored.
  if (c.contains("peft_type"))
    require(c["peft_type"] == "LORA", cp, "field 'peft_type' = " + c["peft_type"].dump() + ": expected \"LORA\"");
  for (const char* flag : {"use_rslora", "use_dora"})
    if (c.contains(flag))
      require(c[flag].is_null() || c[flag] == false, cp,
              std::string("field '") + flag + "' = " + c[flag].dump() + ": not supported (expected false: plain LoRA, scale lora_alpha / r)");
  if (c.contains("fan_in_fan_out") && !c["fan_in_fan_out"].is_null() && c["fan_in_fan_out"] != want["fan_in_fan_out"])
    differs("fan_in_fan_out", ": true for GPT-2's Conv1D modules alone");
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (!c.contains(key) || c[key].is_null() || (c[key].is_object() && c[key].empty() && want[key].empty())) continue;
    if (c[key] != want[key])
      differs(key, ": a fused module's rank and alpha are k r and k alpha for its k projections with adapters; "
                   "every other module has rank r");
  }
  for (const char* key : {"layers_to_transform", "modules_to_save"})
    if (c.contains(key))
      require(c[key].is_null() || (c[key].is_object() && c[key].empty()) || (c[key].is_array() && c[key].empty()), cp,
              std::string("field '") + key + "' = " + c[key].dump().substr(0, 60) +
                  ": not supported (expected null or empty: every targeted projection of every layer)");
}

AdapterInfo read_adapter_info(const std::string& dir) {
  const auto mp = (fs::path(dir) / "layerroute_gates.json").string();
  if (!fs::exists(fs::path(dir) / "layerroute.json") && fs::exists(mp)) {
    auto j = io::read_json_file(mp);
    util::JsonFields f(j, mp);
    AdapterInfo a;
    a.file = mp;
    a.merged = true;
    a.base_dir = dir;
    const auto* g = f.raw("gates");
    require(g != nullptr, mp, "field 'gates' is required");
    a.gates = gate_config_from_json(*g, mp + ": gates");
    std::string from;
    f.get("merged_from", from);
    // The adapter's training record (folders merged before it was kept have none).
    a.extra = nlohmann::json::object();
    if (const auto* e = f.raw("extra")) {
      require(e->is_object(), mp, "field 'extra': expected a JSON object (the adapter's layerroute.json extra)");
      a.extra = *e;
    }
    a.extra["merged_from"] = from;
    f.reject_unknown();
    return a;
  }
  const auto p = (fs::path(dir) / "layerroute.json").string();
  if (!fs::exists(p))
    throw InputError(dir + ": not a LayerRoute adapter or merged folder (no layerroute.json or layerroute_gates.json; " +
                     (fs::is_directory(dir) ? "made by `lol layerroute train` or `lol layerroute merge`)"
                                            : "no such directory)"));
  auto j = io::read_json_file(p);
  util::JsonFields f(j, p);
  AdapterInfo a;
  a.file = p;
  f.get("base", a.base_dir);
  f.get("base_fingerprint", a.base_fingerprint);
  f.get("peft_architecture", a.peft_architecture);
  const auto* l = f.raw("lora");
  const auto* g = f.raw("gates");
  require(l && g, p, "fields 'lora' and 'gates' are required");
  a.lora = lora_config_from_json(*l, p + ": lora");
  a.gates = gate_config_from_json(*g, p + ": gates");
  if (const auto* e = f.raw("extra")) {
    require(e->is_object(), p, "field 'extra': expected a JSON object (the training's options)");
    a.extra = *e;
  }
  f.reject_unknown();
  try {
    peft_config_fields(a.peft_architecture, a.lora);  // (a known class)
  } catch (const InputError& e) {
    throw InputError(p + ": field 'peft_architecture': " + e.what());
  }
  check_peft_config(dir, a.lora, a.peft_architecture);
  return a;
}

namespace {
/// InputError "FILE: field 'extra.KEY' = VALUE: expected WHAT".
[[noreturn]] void bad_record_field(const AdapterInfo& info, const std::string& key, const nlohmann::json& v,
                                   const std::string& what) {
  throw InputError(info.file + ": field 'extra." + key + "' = " + v.dump() + ": expected " + what);
}

/// extra[key] as a string: nullopt when absent (or null, where `null_ok`); InputError
/// for any other type.
std::optional<std::string> record_string(const AdapterInfo& info, const nlohmann::json& extra, const std::string& key,
                                         const std::string& what, bool null_ok = false) {
  if (!extra.contains(key) || (null_ok && extra[key].is_null())) return std::nullopt;
  if (!extra[key].is_string()) bad_record_field(info, key, extra[key], what);
  return extra[key].get<std::string>();
}

/// obj[key] (shown as extra.`path`) as a non-negative integer; nullopt when absent.
std::optional<uint64_t> record_seed(const AdapterInfo& info, const nlohmann::json& obj, const std::string& key,
                                    const std::string& path) {
  if (!obj.contains(key)) return std::nullopt;
  const auto& v = obj[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    bad_record_field(info, path, v, "a non-negative integer (the training seed; it selects the held-out samples)");
  return v.get<uint64_t>();
}
}  // namespace

TrainingRecord training_record(const AdapterInfo& info) {
  TrainingRecord r;
  const auto& e = info.extra;
  if (!e.is_object()) return r;
  r.system = record_string(info, e, "system", "a string (the training's --system)");
  r.tokenizer = record_string(info, e, "tokenizer", "a string or null (the training's --tokenizer)", true);
  r.loss_tokens = record_string(info, e, "loss_tokens", "\"assistant\" or \"all\" (the training's --loss-tokens)");
  if (r.loss_tokens && *r.loss_tokens != "assistant" && *r.loss_tokens != "all")
    bad_record_field(info, "loss_tokens", e["loss_tokens"], "\"assistant\" or \"all\" (the training's --loss-tokens)");
  if (e.contains("max_len")) {
    const auto& v = e["max_len"];
    if (!v.is_number_integer() || v.get<int64_t>() < kMinMaxLen || v.get<int64_t>() > kMaxMaxLen)
      bad_record_field(info, "max_len", v,
                       "an integer in [" + std::to_string(kMinMaxLen) + ", " + std::to_string(kMaxMaxLen) +
                           "] (the training's --max-len)");
    r.max_len = v.get<int64_t>();
  }
  std::optional<uint64_t> train_seed;
  if (e.contains("train")) {
    if (!e["train"].is_object()) bad_record_field(info, "train", e["train"], "a JSON object (the training options)");
    train_seed = record_seed(info, e["train"], "seed", "train.seed");
  }
  r.seed = record_seed(info, e, "seed", "seed");
  if (!r.seed) r.seed = train_seed;
  return r;
}

GatedModel load_gated_model(const std::string& dir, const std::string& base_dir, std::string* note) {
  if (note) note->clear();
  auto info = read_adapter_info(dir);
  if (info.merged) {
    if (!base_dir.empty() && fs::weakly_canonical(base_dir) != fs::weakly_canonical(dir))
      throw InputError(dir + " is a merged LayerRoute folder (adapters folded in): it is its own base; got --base " +
                       base_dir + " (the adapters would be applied twice)");
    GatedModel m(load_base_model(dir), LoraConfig{}, info.gates, 0);  // fresh adapters: B = 0 adds exactly 0
    load_gate_weights(*m, dir);
    m->eval();
    return m;
  }
  const std::string b = base_dir.empty() ? info.base_dir : base_dir;
  require(!b.empty(), dir + "/layerroute.json", "no base model recorded; pass the base directory");
  if (base_dir.empty() && !fs::exists(fs::path(b) / "config.json"))
    throw InputError(dir + "/layerroute.json: field 'base' = \"" + b + "\": no model there" +
                     (fs::path(b).is_relative() ? " (a path relative to where training ran)" : std::string()) +
                     "; pass --base DIR");
  GatedModel m(load_base_model(b), info.lora, info.gates, 0);
  if (note && !info.base_fingerprint.empty()) {
    const std::string got = base_weights_fingerprint(*m->base);
    if (got != info.base_fingerprint)
      *note = "the base " + b + " has other weights than the one " + dir + " was trained on (" + dir +
              "/layerroute.json: base_fingerprint " + info.base_fingerprint + ", this base " + got +
              "): the adapters and gates were fitted to that model";
  }
  load_adapter_weights_named_for(*m, dir, info.peft_architecture);
  m->eval();
  return m;
}

}  // namespace lol::layerroute
