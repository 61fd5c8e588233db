// The Library of Layers model (paper section 3, Appendix A, Algorithm 1):
// embeddings -> prelude (full causal attention) -> routed core (D routed depths,
// each window of tokens runs one expert chosen by a top-1 router from a shared
// library of L blocks, strided window attention, FiLM) -> coda -> norm -> LM head.
//
// Checkpoint tensor names (Hugging Face Llama names inside each block):
//   model.embed_tokens.weight [V, d], model.prelude.{i}.*, model.library.{m}.*,
//   model.coda.{i}.*, model.norm.weight [d], lm_head.weight [V, d] (absent when tied),
//   model.router.weight [L, d] | model.routers.{l-1}.weight [L, d] (untied_router),
//   model.depth_embed [D, d] (row l-1 is e^(l)), model.film.{l-1}.{attn,ffn}_{gamma,beta} [d],
//   model.balance_bias [L] (buffer). With an MoE prelude/coda (LoLConfig::prelude_coda_experts,
//   paper 4.3.2) their FFNs are model.{prelude,coda}.{i}.mlp.gate.weight [E, d],
//   .mlp.experts.{e}.{gate,up,down}_proj.weight and .mlp.balance_bias [E] (buffer).
#pragma once
#include <optional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "lol/config.h"
#include "lol/routing_path.h"
#include "nn/block.h"

namespace lol {

/// Shape of the library experts (and of dense prelude/coda blocks) of a LoL model with
/// config c; also the equal-depth dense reference's (training/dense_window_model.h).
nn::BlockShape block_shape(const LoLConfig& c);
/// Shape of the prelude and coda blocks: block_shape(c), with an MoE FFN of
/// prelude_coda_experts experts when c.moe_prelude_coda() (paper 4.3.2).
nn::BlockShape prelude_coda_shape(const LoLConfig& c);

/// A batch of token rows. Optional fields may be left undefined.
struct LoLBatch {
  torch::Tensor tokens;       ///< [batch, seq] int64
  torch::Tensor prompt_len;   ///< [batch] int64: prompt window of the row's first document (0 = none)
  torch::Tensor router_only;  ///< [batch, seq] bool: tokens seen only by the router (never attention keys)
  torch::Tensor doc_ids;      ///< [batch, seq] int64: document of each token; -1 = padding (no compute)
};

/// Routing decisions at one routed depth, one entry per window (all on CPU).
struct DepthTrace {
  std::vector<int64_t> row, k, begin, len;  ///< row in batch, window index in its document, first position, length
  std::vector<int64_t> doc_begin;           ///< first position of the window's document in its row
  torch::Tensor expert;  ///< [windows] int64
  torch::Tensor alpha;   ///< [windows] float
  torch::Tensor probs;   ///< [windows, L] float: router softmax (before the balancing bias)
  torch::Tensor forced;  ///< [windows] bool: decision came from a routing path
};

/// Throws NonFiniteError naming `where` and the routed depth (1-based) when a traced
/// router probability is NaN or Inf (the router's inputs overflowed; every routing
/// decision and analysis built on it would be meaningless).
void require_finite_routing(const std::vector<DepthTrace>& trace, const std::string& where);

struct ForwardOptions {
  const RoutingPath* force = nullptr;  ///< replaces router decisions where it has entries
  bool trace = false;                  ///< fill LoLOutput::trace
  /// Compute logits only at these positions of every row ([batch, n] int64); undefined = all.
  torch::Tensor logits_at;
};

struct LoLOutput {
  torch::Tensor logits;            ///< [batch, seq, vocab] (or [batch, n, vocab] with logits_at)
  std::vector<DepthTrace> trace;   ///< one per active routed depth when requested
};

class LoLBodyImpl : public torch::nn::Module {
 public:
  explicit LoLBodyImpl(const LoLConfig& cfg);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList prelude{nullptr}, library{nullptr}, coda{nullptr}, film{nullptr}, routers{nullptr};
  torch::nn::Linear router{nullptr};
  nn::RMSNorm norm{nullptr};
  torch::Tensor depth_embed;   ///< [D, d]
  torch::Tensor balance_bias;  ///< [L] buffer (loss-free load balancing, never trained)
};
TORCH_MODULE(LoLBody);

class LoLModelImpl : public torch::nn::Module {
 public:
  explicit LoLModelImpl(const LoLConfig& cfg);

  /// Full forward pass (Algorithm 1). Router noise is added only in training mode.
  /// In training mode without a forced path, window counts per expert are accumulated
  /// for update_balance(). Throws InputError for token ids >= vocab_size or seq > max_seq_len.
  LoLOutput forward(const LoLBatch& batch, const ForwardOptions& opt = {});

  /// Loss-free load balancing (paper Appendix A, Wang et al. 2024):
  /// b_m += u * sign(mean_load - load_m) using the windows routed since the last call
  /// (summed over depths and micro-batches). No-op when nothing was counted
  /// (e.g. every forward was forced). Returns the load that was used ([L] int64).
  torch::Tensor update_balance();
  /// Windows routed to each expert since the last update_balance() ([L] int64, CPU).
  const torch::Tensor& pending_load() const { return pending_load_; }
  /// Adds counts from elsewhere (e.g. other ranks) before update_balance().
  void set_pending_load(const torch::Tensor& load) { pending_load_ = load.to(torch::kCPU, torch::kInt64).clone(); }

  /// MoE prelude/coda (paper 4.3.2): tokens routed to each expert of each MoE FFN (prelude
  /// blocks, then coda blocks) in training since the last update_ffn_balance(),
  /// [n_prelude + n_coda, E] int64 on the CPU; [0, 0] without an MoE prelude/coda.
  torch::Tensor ffn_pending_load() const;
  /// Replaces those counts (e.g. with their sum over data-parallel ranks); InputError on a wrong shape.
  void set_ffn_pending_load(const torch::Tensor& load);
  /// Loss-free balancing update of every MoE prelude/coda FFN with balance_update_rate;
  /// returns the loads used ([n_prelude + n_coda, E], as ffn_pending_load()).
  torch::Tensor update_ffn_balance();

  /// Routed depths run by forward(): 0..core_depth (growing, paper 3.3). Default core_depth.
  void set_active_depth(int64_t d);
  int64_t active_depth() const { return active_depth_; }

  /// Re-initialises all weights (normal(0, 0.02); o_proj/down_proj scaled by
  /// 1/sqrt(2 * layers)); FiLM gamma = 1, beta = 0; balance bias 0.
  void reset_parameters(uint64_t seed);

  /// Parameter counts: total, and active per token (one expert per routed depth run,
  /// i.e. min(library_size, active_depth) experts; top-k experts of each MoE
  /// prelude/coda FFN).
  int64_t num_parameters() const;
  int64_t active_parameters_per_token() const;

  const LoLConfig& config() const { return cfg_; }
  LoLBody model{nullptr};
  torch::nn::Linear lm_head{nullptr};

  nn::RoPE rope;

 private:
  torch::Tensor router_logits(int64_t depth_index, const torch::Tensor& r);
  /// The MoE FFNs of the prelude then coda blocks (empty with a dense prelude/coda).
  std::vector<nn::SparseMoEImpl*> ffn_moes() const;
  LoLConfig cfg_;
  int64_t active_depth_;
  torch::Tensor pending_load_;
};
TORCH_MODULE(LoLModel);

}  // namespace lol
