// LoRA adapters (Hu et al. 2022) on the projections of a frozen dense model
// (LayerRoute paper 3.1): y = x W^T + (alpha / r) (x A^T) B^T, with A [r, in]
// initialised as PEFT does (uniform in +-1/sqrt(in), from a seed) and B [out, r] = 0,
// so a fresh adapter computes exactly the base model.
//
// Tensor names are PEFT's (Hugging Face `peft` save_pretrained) on a Llama-named model:
//   base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight  [r, in]
//   base_model.model.model.layers.{i}.self_attn.q_proj.lora_B.weight  [out, r]
// (".mlp." for gate/up/down_proj); the adapter files use the base's own Hugging Face
// class's modules and row order (peft_layout.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "baselines/dense_model.h"
#include "core/tensor_io.h"
#include "layerroute/config.h"

namespace lol::layerroute {

/// PEFT name of adapter matrix `which` ('A' or 'B') of `target` in layer `layer`.
std::string peft_name(int64_t layer, const std::string& target, char which);

/// The Linear of `target` ("q_proj", ..., "down_proj") in block `layer` of `m`.
torch::nn::Linear& target_linear(baselines::DenseModelImpl& m, int64_t layer, const std::string& target);

class LoraImpl : public torch::nn::Module {
 public:
  /// Adapters for every layer of `base` and every target of `cfg` (validated:
  /// InputError), matrix shapes taken from the base's Linear weights, float32 on the
  /// base's device. A is drawn from a generator seeded with `seed`.
  LoraImpl(baselines::DenseModelImpl& base, const LoraConfig& cfg, uint64_t seed);

  /// `base_out` [..., out] + scale * (x [..., in] A^T) B^T when (layer, target) has an
  /// adapter, else base_out unchanged. Computed in x's dtype. On a base whose loader folded
  /// a factor into the target's weight (DenseConfig::weight_fold: Gemma 2's and Granite's
  /// attention scale in q_proj, Granite's residual_multiplier in o_proj / down_proj), the
  /// update is scaled likewise: the adapter is PEFT's on the Hugging Face model's projection.
  torch::Tensor add(int64_t layer, const std::string& target, const torch::Tensor& x,
                    const torch::Tensor& base_out) const;
  bool has_target(const std::string& target) const;
  const LoraConfig& config() const { return cfg_; }
  int64_t n_layers() const { return n_layers_; }

  /// Every adapter matrix under its PEFT name on a Llama-named model, layer-major, targets in
  /// config order, A before B (PeftLayout::to_peft names them for the base's class).
  NamedTensors peft_tensors() const;
  /// Copies PEFT-named tensors into the adapters (bit-exact for float32 files). Every
  /// adapter matrix must be present exactly once with its shape; an unknown name, a
  /// shape mismatch or a non-finite value is an InputError naming `where` and the tensor.
  void load_peft_tensors(const NamedTensors& tensors, const std::string& where);
  /// Folds the adapters into `m`'s weights: W <- W + scale * B A (computed in float64,
  /// stored in W's dtype; times the target's fold, as add). `m` must have the
  /// shapes and the fold of the base the adapters were made for.
  void merge_into(baselines::DenseModelImpl& m) const;

 private:
  int64_t index(int64_t layer, const std::string& target) const;
  LoraConfig cfg_;
  int64_t n_layers_ = 0;
  std::vector<torch::Tensor> a_, b_;  ///< [layer * n_targets + t]
  /// Per target (config order): the factor the base's loader folded into its weight
  /// (DenseConfig::weight_fold: the attention scale on q_proj for Gemma 2 / Granite,
  /// Granite's residual_multiplier on o_proj / down_proj), else 1.
  std::vector<double> folds_;
  double factor(const std::string& target) const;
};
TORCH_MODULE(Lora);

}  // namespace lol::layerroute
