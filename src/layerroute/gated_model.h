// LayerRoute's gated model (paper 3.1-3.2): a frozen dense model (baselines::DenseModel,
// the Hugging Face Qwen2/Llama layout) with LoRA adapters and one skip gate per layer:
//   h_{i+1} = g_i Block_i(h_i) + (1 - g_i) h_i,   g_i = 1[sigmoid(w_i . mean(h_i) + b_i) > 0.5]
// Gates are per sample (sequence-level routing): a row of the batch is one sample and
// the mean runs over its non-padding tokens.
//
// Two ways to run it (paper 3.2, "inference-time compute realization"):
//  - STE (training): every block runs for every row; the gate multiplies the block's
//    update with the straight-through value, so the gradient reaches sigma_i even
//    when g_i = 0.
//  - Skip (inference): block i runs only on the rows whose gate is open; a closed
//    row's states are not touched, no computation is made for it.
// Both give the same values (up to the rows that a batched attention pads).
#pragma once
#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "baselines/dense_model.h"
#include "layerroute/config.h"
#include "layerroute/gates.h"
#include "layerroute/lora.h"

namespace lol::layerroute {

/// How the gate decisions are made.
enum class GateMode {
  Learned,   ///< s_i = w_i . hbar_i + b_i (the method)
  BiasOnly,  ///< s_i = b_i: the input-dependent term zeroed (paper 5.4 ablation)
  Open,      ///< every gate forced open: the full-model baseline (`--gates open`)
  Closed,    ///< every gate forced closed (embedding -> norm -> head; fixed-cost measurement)
};
/// "learned" | "bias-only" | "open" | "closed"; InputError naming `flag` otherwise.
GateMode parse_gate_mode(const std::string& s, const std::string& flag = "--gates");
const char* gate_mode_name(GateMode m);

struct GatedOptions {
  GateMode mode = GateMode::Learned;
  bool ste = false;      ///< true: run every block, straight-through gates (training); false: skip closed rows
  bool use_lora = true;  ///< false: the frozen backbone's own projections
  /// [batch, n_layers] bool: decisions given rather than computed (any device; `mode`
  /// is then ignored; scores 0, sigma = the decision). Undefined: decided by `mode`.
  /// Eval passes the decisions generation made from each sample's prompt
  /// (generate_gated's prefill) to measure perplexity under them.
  torch::Tensor forced_open;
};

struct GatedOutput {
  torch::Tensor logits;  ///< [batch, seq, vocab]
  torch::Tensor scores;  ///< [batch, n_layers] float32 gate logits s_i (Learned/BiasOnly; 0 for forced modes)
  torch::Tensor sigma;   ///< [batch, n_layers] float32 sigmoid(s_i), differentiable (STE mode)
  torch::Tensor open;    ///< [batch, n_layers] bool hard decisions actually applied
  int64_t executed_blocks = 0;  ///< block evaluations on samples (rows): sum over layers of rows run
};

/// The random stream of the gates' initialisation (util::derive_seed).
constexpr uint64_t kGateSeedStream = 1;

class GatedModelImpl : public torch::nn::Module {
 public:
  /// Wraps `base` (frozen: its parameters get requires_grad = false) with fresh
  /// adapters (seed) and gates (util::derive_seed(seed, kGateSeedStream): seed s's
  /// gates draw no values that seed s + 1's adapters draw). Throws InputError unless every layer of
  /// the base uses full attention, or for invalid configs.
  GatedModelImpl(baselines::DenseModel base, const LoraConfig& lora, const GateConfig& gates, uint64_t seed);

  /// tokens [batch, seq] int64; doc_ids [batch, seq] int64 with -1 for padding (one
  /// sample per row; undefined = no padding). Returns logits and gate statistics (see
  /// GatedOutput). Throws InputError for bad tokens (baselines::check_tokens).
  GatedOutput forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids, const GatedOptions& opt);

  int64_t n_layers() const { return base->config().n_layers; }

  baselines::DenseModel base;
  Lora lora{nullptr};
  Gates gates{nullptr};
};
TORCH_MODULE(GatedModel);

/// InputError naming `where` for a base the gated decoder does not run: one with strided
/// window attention (a lol-trained dense baseline). Every block layout of the Hugging Face
/// architectures runs (Llama's, Gemma's GeGLU, sandwich norms, scaled embeddings,
/// soft-capping and per-layer RoPE, OLMo 2's output norms, GPT-2's LayerNorms, learned
/// positions and ungated MLP with biases), with full causal and
/// sliding-window layers (Mistral v0.1, Phi-3-mini-4k, Qwen2's use_sliding_window,
/// Gemma 2/3, OLMo 3).
void require_layerroute_base(const baselines::DenseConfig& c, const std::string& where);

/// W of layer `layer`'s sliding window (a query sees itself and the W - 1 keys before
/// it), 0 for a full-attention layer.
int64_t layer_window(const baselines::DenseConfig& c, int64_t layer);

}  // namespace lol::layerroute
