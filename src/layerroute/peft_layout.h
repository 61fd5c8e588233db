// Where a LayerRoute adapter's LoRA matrices (LayerRoute paper 3.1: LoRA on the frozen base's
// projections, lora.h) sit in a PEFT adapter of the base's own Hugging Face class (adapter_model.safetensors / adapter_config.json, adapter_io.h), so
// that Python's `PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), dir)`
// computes what lol computes (the gates aside, which PEFT does not know).
//
// lol holds one rank-r adapter per projection of its dense model (q_proj ... down_proj,
// LoraImpl): update dW_t = (alpha / r) B_t A_t, A_t [r, in], B_t [rows_t, r]. A Hugging
// Face class may name the projection otherwise (GPT-2's attn.c_proj, Phi's self_attn.dense),
// store several projections as one module (GPT-2's attn.c_attn = [q; k; v], Phi-3's
// mlp.gate_up_proj = [gate; up], GPT-NeoX's attention.query_key_value per head), or keep
// the rows of q and k in another order (GPT-J's and Cohere's interleaved RoPE pairs, which
// lol's loader reorders: hf::gptj_rotary_rows). For a module M stacking parts p_1..p_n of
// which k carry adapters t_1..t_k, the PEFT adapter is exact with rank k r:
//   lora_A(M) = [A_t1; ...; A_tk]                       [k r, in]
//   lora_B(M) = rows_M(blockdiag over parts: B_tj in column block j, zeros for parts
//               without an adapter)                      [rows_M, k r]
// where rows_M puts stacked rows in the module's stored order (the export's: hf_export.cpp),
// and scale alpha_M / (k r) = alpha / r with alpha_M = k alpha: adapter_config.json's
// rank_pattern / alpha_pattern give M its rank and alpha. Reading reverses this and refuses
// a lora_B whose off-block entries are not zero (a Python-trained adapter of a fused module
// mixes the projections: lol's per-projection adapters cannot hold it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baselines/dense_config.h"
#include "core/tensor_io.h"
#include "layerroute/config.h"

namespace lol::layerroute {

/// The layout of adapters on a lol dense checkpoint, and of every adapter written before
/// layerroute.json recorded "peft_architecture": Llama's module names
/// (model.layers.{i}.self_attn.q_proj, ...) and lol's row order, whatever the base.
inline constexpr const char* kDenseLayout = "dense";

/// The layout an adapter on the base model directory `base_dir` is written in: the
/// Hugging Face class of a Hugging Face folder (hf::HfConfig::architecture, or
/// "Gemma3ForConditionalGeneration" for a multimodal Gemma 3 folder), kDenseLayout for a
/// lol dense checkpoint or a directory without config.json. InputError as
/// hf::HfConfig::from_json for a malformed Hugging Face config.json.
std::string peft_architecture_of(const std::string& base_dir);

/// One module of the Hugging Face model that holds LayerRoute projections.
struct PeftModule {
  std::string path;                   ///< module path: "transformer.h.3.attn.c_attn"
  std::string name;                   ///< target_modules entry: "c_attn"; "attn.c_proj" where the block has two c_proj
  std::vector<std::string> parts;     ///< lol projections whose rows it stores, in stored order
  std::vector<std::string> targeted;  ///< the parts with an adapter, in stored order
};

class PeftLayout {
 public:
  /// The layout of `architecture` (peft_architecture_of) for adapters `lora` on a base of
  /// configuration `base`. InputError for an architecture lol does not load.
  PeftLayout(std::string architecture, const baselines::DenseConfig& base, const LoraConfig& lora);

  const std::string& architecture() const { return arch_; }
  /// The modules of layer `layer` holding at least one targeted projection, in the block's
  /// order (attention before MLP).
  std::vector<PeftModule> modules(int64_t layer) const;

  /// The file's tensors from lol's (LoraImpl::peft_tensors: Llama names, lol's rows). The
  /// dense layout returns them as they are.
  NamedTensors to_peft(const NamedTensors& lol) const;
  /// lol's tensors (LoraImpl::peft_tensors' names) from the file's `file`. InputError
  /// naming `where` and the tensor for a missing, repeated or unexpected tensor, a shape
  /// other than the layout's, or nonzero entries outside a fused module's blocks.
  NamedTensors from_peft(const NamedTensors& file, const std::string& where) const;

  /// adapter_config.json's fields that depend on the layout: r, lora_alpha,
  /// target_modules (a list of module names), rank_pattern / alpha_pattern (modules of
  /// rank k r; {} when none), fan_in_fan_out (true for GPT-2's Conv1D modules).
  nlohmann::json config_fields() const;

 private:
  std::string arch_;
  baselines::DenseConfig base_;
  LoraConfig lora_;
  std::string module_path(int64_t layer, const std::string& target) const;
  int64_t part_rows(const std::string& target) const;
  /// Stacked part rows [sum rows, R] -> the module's stored rows, or back (`to_file` false).
  torch::Tensor module_rows(const PeftModule& m, const torch::Tensor& stacked, bool to_file) const;
};

/// PeftLayout(architecture, base, lora).config_fields() for any base: the module names
/// depend on the class and the targets alone. InputError as PeftLayout's constructor.
nlohmann::json peft_config_fields(const std::string& architecture, const LoraConfig& lora);

}  // namespace lol::layerroute
