#include "hf/hf_export.h"

#include <filesystem>
#include <functional>
#include <set>

#include "core/tensor_io.h"
#include "hf/hf_files.h"
#include "hf/hf_model.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::hf {

namespace {

/// Removes parameter `name` from `params` and returns it on the CPU (std::logic_error when
/// the dense model lacks it: a bug, not bad input).
torch::Tensor take_parameter(std::map<std::string, torch::Tensor>& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) throw std::logic_error("export: dense model lacks parameter " + name);
  auto t = it->second.to(torch::kCPU);
  params.erase(it);
  return t;
}

/// GPT2LMHeadModel's tensors of a GPT-2-layout dense model (`params`, name -> tensor):
/// "transformer."-prefixed GPT-2 names, Conv1D weights transposed to [in, out], q/k/v
/// fused into c_attn; lm_head.weight only when untied. GPTBigCodeForCausalLM's (h): the same
/// names, nn.Linear weights as they are, c_attn fused per key/value group (hf::fuse_grouped_qkv).
NamedTensors gpt2_tensors(std::map<std::string, torch::Tensor>& params, const HfConfig& h, c10::ScalarType dtype) {
  NamedTensors out;
  const auto take = [&](const std::string& name) { return take_parameter(params, name); };
  const bool bigcode = h.is_gpt_bigcode();  // (nn.Linear weights; q/k/v fused per key/value group)
  // A parameter under its GPT-2 name (hf::gpt2_stored_name), Conv1D weights transposed.
  auto move = [&](const std::string& name) {
    auto t = take(name);
    const bool conv1d = !bigcode && ends_with(name, "_proj.weight");
    out.emplace_back("transformer." + gpt2_stored_name(name), (conv1d ? t.t() : t).to(dtype).contiguous());
  };
  move("model.embed_tokens.weight");
  move("model.embed_positions.weight");
  for (int64_t i = 0; i < h.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm.weight", "input_layernorm.bias"}) move(p + n);
    for (const char* kind : {".weight", ".bias"}) {  // q, k, v fused into c_attn
      std::vector<torch::Tensor> qkv;
      for (const char* proj : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}) qkv.push_back(take(p + proj + kind));
      const int64_t kv = h.num_key_value_heads;
      auto t = bigcode ? fuse_grouped_qkv(qkv[0], qkv[1], qkv[2], kv, h.num_attention_heads / kv, h.head_dim)
                       : torch::cat(qkv, 0);
      out.emplace_back("transformer." + gpt2_stored_name(p + "self_attn.q_proj" + kind),
                       (std::string(kind) == ".weight" && !bigcode ? t.t() : t).to(dtype).contiguous());
    }
    for (const char* n : {"self_attn.o_proj.weight", "self_attn.o_proj.bias", "post_attention_layernorm.weight",
                          "post_attention_layernorm.bias", "mlp.up_proj.weight", "mlp.up_proj.bias",
                          "mlp.down_proj.weight", "mlp.down_proj.bias"})
      move(p + n);
  }
  move("model.norm.weight");
  move("model.norm.bias");
  if (!h.tie_word_embeddings) out.emplace_back("lm_head.weight", take("lm_head.weight").to(dtype).contiguous());
  if (!params.empty()) throw std::logic_error("export: dense model parameter not exported: " + params.begin()->first);
  return out;
}

/// The tensors of a GPT-NeoX- or Falcon-layout dense model (`params`, name -> tensor) under
/// `rename`'s names (hf::gpt_neox_stored_name, hf::falcon_stored_name), q/k/v fused into
/// query_key_value per key/value group (hf::fuse_grouped_qkv: per head for GPT-NeoX); the
/// LayerNorms the model has, biases where it has them, the head only when untied.
NamedTensors fused_qkv_tensors(std::map<std::string, torch::Tensor>& params, const HfConfig& h, c10::ScalarType dtype,
                               const std::function<std::string(const std::string&)>& rename) {
  NamedTensors out;
  const auto take = [&](const std::string& name) { return take_parameter(params, name); };
  auto move = [&](const std::string& name) { out.emplace_back(rename(name), take(name).to(dtype).contiguous()); };
  const int64_t kv = h.num_key_value_heads, group = h.num_attention_heads / kv;
  move("model.embed_tokens.weight");
  for (int64_t i = 0; i < h.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm.weight", "input_layernorm.bias", "post_attention_layernorm.weight",
                          "post_attention_layernorm.bias"})
      if (params.count(p + n)) move(p + n);  // (none after input_layernorm with a shared input norm)
    for (const char* kind : {".weight", ".bias"}) {
      if (std::string(kind) == ".bias" && !h.qkv_bias) continue;
      auto qkv = fuse_grouped_qkv(take(p + "self_attn.q_proj" + kind), take(p + "self_attn.k_proj" + kind),
                                  take(p + "self_attn.v_proj" + kind), kv, group, h.head_dim);
      out.emplace_back(rename(p + "self_attn.q_proj" + kind), qkv.to(dtype).contiguous());
    }
    for (const char* n : {"self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.up_proj.weight", "mlp.up_proj.bias",
                          "mlp.down_proj.weight", "mlp.down_proj.bias"})
      if (ends_with(n, ".weight") || params.count(p + n)) move(p + n);  // (biases checked by from_dense_config)
  }
  move("model.norm.weight");
  move("model.norm.bias");
  if (!h.tie_word_embeddings) move("lm_head.weight");
  if (!params.empty()) throw std::logic_error("export: dense model parameter not exported: " + params.begin()->first);
  return out;
}

/// Every parameter of `m` under its stored name `rename(name)`, in the dense model's order:
/// PhiForCausalLM's tensors (hf::phi_stored_name) and StableLmForCausalLM's (the dense
/// model's own names, its LayerNorm biases included).
NamedTensors renamed_tensors(std::map<std::string, torch::Tensor>& params, baselines::DenseModelImpl& m,
                             c10::ScalarType dtype, const std::function<std::string(const std::string&)>& rename) {
  NamedTensors out;
  for (auto& p : m.named_parameters())
    out.emplace_back(rename(p.key()), take_parameter(params, p.key()).to(dtype).contiguous());
  return out;
}

/// Appends a zero bias [rows] in `dtype` for every weight of `out` that `has_bias` names
/// and whose bias `out` lacks (an architecture's biases a model trained without them
/// exports as: the same function).
void add_zero_biases(NamedTensors& out, c10::ScalarType dtype, const std::function<bool(const std::string&)>& has_bias) {
  std::set<std::string> stored;
  for (const auto& [name, t] : out) stored.insert(name);
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string name = out[i].first;  // (a copy: out grows below)
    const std::string bias = name.substr(0, name.size() - 6) + "bias";
    if (ends_with(name, ".weight") && has_bias(name) && !stored.count(bias))
      out.emplace_back(bias, torch::zeros({out[i].second.size(0)}, torch::TensorOptions().dtype(dtype)));
  }
}

/// Tensors in transformers' order, converted to `dtype` on the CPU, with zero q/k/v
/// biases where the architecture has them and the model does not. Gemma's RMSNorm weights
/// (h.norm_offset) are written as w - 1 (the model computes x_normalized (1 + w)), computed
/// in float32 (float64 for a float64 model) before the conversion (hf_model.cpp: the loader adds 1 back);
/// an attention scale the loader folded into the queries (DenseConfig::query_pre_attn_scalar)
/// is divided out of q_norm (Gemma 3) or q_proj (Gemma 2) first, Granite's folds
/// (DenseConfig::weight_fold: q_proj, o_proj, down_proj) in float64.
NamedTensors hf_tensors(baselines::DenseModelImpl& m, const HfConfig& h, c10::ScalarType dtype) {
  std::map<std::string, torch::Tensor> params;
  for (auto& p : m.named_parameters()) params[p.key()] = p.value().detach();
  NamedTensors out;
  const double fold = h.norm_offset ? m.config().query_fold() : 1.0;
  const std::string folded = h.qk_norm ? "self_attn.q_norm.weight" : "self_attn.q_proj.weight";
  auto put = [&](const std::string& name) {
    auto t = take_parameter(params, name);
    const auto wide = torch::promote_types(t.scalar_type(), torch::kFloat);
    if (fold != 1.0 && ends_with(name, folded)) t = t.to(wide) / fold;
    // Granite: the loader's folds divided out in float64.
    if (const double g = h.is_granite() ? granite_parameter_fold(m.config(), name) : 1.0; g != 1.0)
      t = t.to(torch::kFloat64) / g;
    if (h.norm_offset && ends_with(name, "norm.weight")) t = t.to(wide) - 1.0;
    out.emplace_back(name, t.to(dtype).contiguous());
  };
  if (h.is_gpt2() || h.is_gpt_bigcode()) return gpt2_tensors(params, h, dtype);
  if (h.is_gpt_neox()) return fused_qkv_tensors(params, h, dtype, gpt_neox_stored_name);
  if (h.is_falcon()) {
    const bool two_norms = h.parallel_residual && !h.shared_input_norm;
    return fused_qkv_tensors(params, h, dtype, [&](const std::string& n) { return falcon_stored_name(n, two_norms); });
  }
  if (h.is_phi()) {
    // Phi has biases on every projection and on lm_head: zeros where the model has none
    // (the same function), so that a model trained without them exports too.
    auto out = renamed_tensors(params, m, dtype, phi_stored_name);
    add_zero_biases(out, dtype, [](const std::string& name) {
      return name == "lm_head.weight" || ends_with(name, "_proj.weight") || ends_with(name, "self_attn.dense.weight") ||
             ends_with(name, "mlp.fc1.weight") || ends_with(name, "mlp.fc2.weight");
    });
    return out;
  }
  if (h.is_gptj()) {
    // GPT-J's names, the rotary rows of q_proj / k_proj back in interleaved order, and zero
    // fc_in / fc_out / lm_head biases where the model has none.
    auto out = renamed_tensors(params, m, dtype, gptj_stored_name);
    for (auto& [name, t] : out)
      if (ends_with(name, "attn.q_proj.weight") || ends_with(name, "attn.k_proj.weight"))
        t = gptj_rotary_rows(t, t.size(0) / h.head_dim, h.head_dim, h.rotary_dim(), true).contiguous();
    add_zero_biases(out, dtype, [](const std::string& name) {
      return name == "lm_head.weight" || ends_with(name, "mlp.fc_in.weight") || ends_with(name, "mlp.fc_out.weight");
    });
    return out;
  }
  if (h.is_cohere()) {
    // Llama's names; the LayerNorms' biases, which CohereLayerNorm lacks, must be zero
    // (they are dropped); the q_proj / k_proj rows back in interleaved pairs (as GPT-J's).
    NamedTensors out;
    for (auto& [name, t] : renamed_tensors(params, m, dtype, [](const std::string& n) { return n; })) {
      if (ends_with(name, "norm.bias")) {
        const double b = t.abs().max().item<double>();
        if (b != 0)
          throw InputError("dense model: tensor '" + name + "' (max |b| = " + std::to_string(b) + "): " + h.architecture +
                           "'s LayerNorms have no bias (expected zero biases: a model loaded from a Cohere folder, or "
                           "export as " + kStableLmArch + ")");
        continue;
      }
      if (ends_with(name, "self_attn.q_proj.weight") || ends_with(name, "self_attn.k_proj.weight"))
        t = gptj_rotary_rows(t, t.size(0) / h.head_dim, h.head_dim, h.rotary_dim(), true).contiguous();
      out.emplace_back(name, t);
    }
    return out;
  }
  if (h.is_stablelm()) return renamed_tensors(params, m, dtype, [](const std::string& n) { return n; });
  if (h.is_starcoder2()) return renamed_tensors(params, m, dtype, starcoder2_stored_name);
  if (h.is_opt()) {
    // OPT's names; the position table gets OPT's 2 leading rows (padding positions only:
    // written as zeros).
    auto out = renamed_tensors(params, m, dtype, opt_stored_name);
    for (auto& [name, t] : out)
      if (name == "model.decoder.embed_positions.weight")
        t = torch::cat({torch::zeros({2, t.size(1)}, t.options()), t}, 0).contiguous();
    return out;
  }
  put("model.embed_tokens.weight");
  for (int64_t i = 0; i < h.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (h.input_norms) put(p + "input_layernorm.weight");  // (OLMo: none)
    // Phi-3 stores q/k/v (and gate/up below) as one fused matrix, rows one after the other.
    auto fuse = [&](const FusedWeight& fw) {
      std::vector<torch::Tensor> ts;
      for (const auto& q : fw.parts) {
        put(p + q);
        ts.push_back(out.back().second);
        out.pop_back();
      }
      out.emplace_back(p + fw.fused, torch::cat(ts, 0).contiguous());
    };
    if (h.is_phi3())
      fuse(phi3_fused_weights()[0]);
    else
      for (const char* proj : {"q_proj", "k_proj", "v_proj"}) put(p + "self_attn." + proj + ".weight");
    if (h.qkv_bias) {
      const int64_t hd = h.head_dim;
      const int64_t rows[3] = {h.num_attention_heads * hd, h.num_key_value_heads * hd, h.num_key_value_heads * hd};
      const char* projs[3] = {"q_proj", "k_proj", "v_proj"};
      for (int k = 0; k < 3; ++k) {
        const std::string name = p + "self_attn." + projs[k] + ".bias";
        if (params.count(name))
          put(name);
        else
          out.emplace_back(name, torch::zeros({rows[k]}, torch::TensorOptions().dtype(dtype)));
      }
    }
    put(p + "self_attn.o_proj.weight");
    if (h.qk_norm) {
      put(p + "self_attn.q_norm.weight");
      put(p + "self_attn.k_norm.weight");
    }
    put(p + "post_attention_layernorm.weight");  // Gemma 2/3, OLMo: the attention output's norm
    if (h.sandwich_norm && h.input_norms) put(p + "pre_feedforward_layernorm.weight");  // Gemma 2/3
    if (h.sandwich_norm) put(p + "post_feedforward_layernorm.weight");
    if (h.is_phi3()) {
      fuse(phi3_fused_weights()[1]);
      put(p + "mlp.down_proj.weight");
    } else if (h.is_moe_layer(i)) {  // the router, then each expert (Mixtral's names below)
      put(p + "mlp.gate.weight");
      for (int64_t e = 0; e < h.num_experts; ++e)
        for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
          put(p + "mlp.experts." + std::to_string(e) + "." + proj + ".weight");
      if (h.shared_expert_intermediate_size > 0) {  // (Qwen2-MoE)
        for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) put(p + "mlp.shared_expert." + proj + ".weight");
        put(p + "mlp.shared_expert_gate.weight");
      }
    } else {
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) put(p + "mlp." + proj + ".weight");
    }
  }
  put("model.norm.weight");
  if (!h.tie_word_embeddings) put("lm_head.weight");
  if (h.is_mixtral())
    for (auto& nt : out) nt.first = mixtral_stored_name(nt.first);
  if (!params.empty()) throw std::logic_error("export: dense model parameter not exported: " + params.begin()->first);
  return out;
}

void write_weights(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes) {
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (max_shard_bytes <= 0) {
    save_tensors(dir + "/model.safetensors", tensors, meta);
    return;
  }
  std::vector<NamedTensors> shards(1);
  int64_t used = 0, total = 0;
  for (const auto& nt : tensors) {
    const int64_t b = int64_t(nt.second.nbytes());
    if (!shards.back().empty() && used + b > max_shard_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().push_back(nt);
    used += b;
    total += b;
  }
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  const int64_t n = int64_t(shards.size());
  for (int64_t s = 0; s < n; ++s) {
    const std::string name = shard_file_name(s + 1, n);
    save_tensors(dir + "/" + name, shards[s], meta);
    for (const auto& nt : shards[s]) map[nt.first] = name;
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = map;
  io::write_file_atomic(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

/// Checks `out_dir` (see export_hf) and, when it holds an earlier export and
/// `opt.overwrite` allows replacing it, removes that export's files: leftovers in
/// another layout (shards vs one file, no tokenizer, no gates) would confuse loaders.
void prepare_out_dir(const std::string& out_dir, const ExportOptions& opt) {
  if (out_dir.empty()) throw InputError("export: --out is empty (expected the folder to write)");
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw InputError("export: --out " + out_dir + " is a file (expected a folder to write)");
  std::vector<std::string> inputs = opt.read_from;
  if (!opt.derived_from.empty()) inputs.push_back(opt.derived_from);
  for (const auto& in : inputs) {
    std::error_code eq;
    if (!in.empty() && fs::exists(out_dir, eq) && fs::equivalent(out_dir, in, eq))
      throw InputError("export: --out " + out_dir + " is " + in +
                       ", a folder being read (writing there would destroy it, even with --overwrite): choose a new folder");
  }
  if (!fs::exists(out_dir, ec) || fs::is_empty(out_dir, ec)) {
    fs::create_directories(out_dir, ec);
    if (!fs::is_directory(out_dir)) throw InputError("export: cannot create folder " + out_dir + ": " + ec.message());
    return;
  }
  if (!opt.overwrite)
    throw InputError("export: --out " + out_dir + " exists and is not empty (choose a new folder, or pass --overwrite)");
  const fs::path o(out_dir);
  const auto cfg = o / "config.json";
  const std::string not_export =
      ", not a Hugging Face export: --overwrite replaces only an earlier export; choose a new folder";
  if (fs::exists(cfg) && !io::read_json_file(cfg.string()).contains("architectures"))
    throw InputError("export: --out " + out_dir + " holds a lol model (config.json has no 'architectures')" + not_export);
  for (const char* f : {"latest", "trainer_state.json", "layerroute.json", "dataset.json"})
    if (fs::exists(o / f)) throw InputError("export: --out " + out_dir + " holds a lol file " + f + not_export);
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string f = e.path().filename().string();
    bool old = f == "model.safetensors" || f == "model.safetensors.index.json" || f == "config.json" ||
               f == "generation_config.json" || f == "gates.safetensors" || f == "layerroute_gates.json" ||
               (f.rfind("model-", 0) == 0 && f.size() > 12 && f.substr(f.size() - 12) == ".safetensors");
    for (const char* t : kTokenizerFiles) old = old || f == t;
    if (old) fs::remove(e.path());
  }
}

}  // namespace

HfConfig export_hf(baselines::DenseModelImpl& m, const tokenizers::Tokenizer* tok, const std::string& out_dir,
                   const ExportOptions& opt) {
  torch::NoGradGuard no_grad;
  if (opt.dtype != c10::kFloat && opt.dtype != c10::kBFloat16 && opt.dtype != c10::kHalf)
    throw InputError("export: --dtype " + dtype_name(opt.dtype) + ": expected float32, bfloat16 or float16");
  HfConfig h = from_dense_config(m.config(), opt.architecture, dtype_name(opt.dtype));
  if (tok) {
    if (tok->vocab_size() > h.vocab_size)
      throw InputError("export: the tokenizer uses " + std::to_string(tok->vocab_size()) +
                       " ids but the model's vocab_size is " + std::to_string(h.vocab_size));
    if (tok->bos_id()) h.bos_token_id = {*tok->bos_id()};
    if (tok->eos_id()) h.eos_token_id = {*tok->eos_id()};
  }
  // A derived model keeps its source folder's token ids, generation settings and
  // tokenizer files as they were.
  const std::string src = opt.derived_from;
  const nlohmann::json sc = !src.empty() && fs::exists(src + "/config.json") ? io::read_json_file(src + "/config.json")
                                                                           : nlohmann::json();
  const bool from_hf = sc.is_object() && sc.contains("architectures");
  if (from_hf) {
    h.bos_token_id = token_id_list(sc, "bos_token_id", src + "/config.json");
    h.eos_token_id = token_id_list(sc, "eos_token_id", src + "/config.json");
    h.pad_token_id = pad_token_id_of(sc);
  }
  prepare_out_dir(out_dir, opt);
  write_weights(out_dir, hf_tensors(m, h, opt.dtype), opt.max_shard_bytes);
  if (from_hf && fs::exists(src + "/generation_config.json")) {
    io::write_file_atomic(out_dir + "/generation_config.json", io::read_file(src + "/generation_config.json"));
  } else {
    auto first = [](const std::vector<int64_t>& ids) {
      return ids.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ids[0]);
    };
    nlohmann::ordered_json gen;
    gen["bos_token_id"] = first(h.bos_token_id);
    gen["eos_token_id"] = h.eos_token_id.size() > 1 ? nlohmann::ordered_json(h.eos_token_id) : first(h.eos_token_id);
    gen["transformers_version"] = "4.45.0";
    io::write_file_atomic(out_dir + "/generation_config.json", gen.dump(2) + "\n");
  }
  if (from_hf && fs::exists(src + "/tokenizer.json")) {
    for (const char* f : kTokenizerFiles)
      if (fs::exists(src + "/" + f)) io::write_file_atomic(out_dir + "/" + f, io::read_file(src + "/" + f));
  } else if (tok && opt.save_tokenizer) {
    tok->save(out_dir);
  }
  io::write_file_atomic(out_dir + "/config.json", h.to_json().dump(2) + "\n");  // last: marks a complete folder
  return h;
}

}  // namespace lol::hf
