// The interface between the training loop and a model. The loop (trainer.h) is
// model-agnostic: anything that can turn a TrainBatch into logits, tag its
// parameters with an optimizer group and save/load itself can be trained. LoL
// implements it in lol_trainable.h; baselines and LayerRoute add their own.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>

namespace lol::training {

/// One micro-batch as produced by the Batcher (batcher.h). All tensors share the
/// batch shape [B, T] (prompt_len: [B]); they live on the training device.
struct TrainBatch {
  torch::Tensor tokens;       ///< [B, T] int64 input token ids (padding holds 0)
  torch::Tensor targets;      ///< [B, T] int64: the token position t must predict (tokens[t+1]), or -100
  torch::Tensor target_mask;  ///< [B, T] bool: position t's target counts in the loss
  torch::Tensor doc_ids;      ///< [B, T] int64 document of each token within its row; -1 = padding
  torch::Tensor prompt_len;   ///< [B] int64 prompt window of the row's first document (0 = none)
  torch::Tensor router_only;  ///< [B, T] bool tokens seen only by the router (LoL 4.1.3)
  int64_t n_targets = 0;      ///< number of true entries in target_mask
  int64_t n_tokens = 0;       ///< number of non-padding tokens
};

/// Optimizer group of a parameter (paper Appendix A: Muon for hidden 2-D weight
/// matrices, AdamW for everything else).
enum class ParamGroup {
  Muon,          ///< 2-D hidden weight matrices (attention and MLP projections)
  AdamWDecay,    ///< embeddings, LM head, routers: AdamW with weight decay
  AdamWNoDecay,  ///< norms, FiLM, depth vectors, biases: AdamW without weight decay
};

/// "muon", "adamw_decay", "adamw_no_decay".
const char* group_name(ParamGroup g);

/// True for a 2-D weight inside a block's attention or MLP (Hugging Face names
/// "*.self_attn.*", "*.mlp.*"): the hidden matrices that Muon trains.
inline bool is_block_projection(const std::string& name, const torch::Tensor& t) {
  return t.dim() == 2 && (name.find(".self_attn.") != std::string::npos || name.find(".mlp.") != std::string::npos);
}

struct GroupedParam {
  std::string name;      ///< checkpoint name (e.g. "model.library.0.mlp.up_proj.weight")
  torch::Tensor tensor;  ///< the parameter itself (requires_grad)
  ParamGroup group;
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  /// Architecture name as written in config.json ("lol", ...).
  virtual std::string architecture() const = 0;
  /// The underlying module (for train()/eval(), to(device), parameters and buffers).
  virtual torch::nn::Module& module() = 0;

  /// Logits [B, T, V] for a batch. Router noise and load counting happen only when
  /// module().is_training().
  virtual torch::Tensor forward(const TrainBatch& batch) = 0;

  /// Every trainable parameter exactly once, with its optimizer group, in a fixed
  /// order (the order of the optimizer state in checkpoints).
  virtual std::vector<GroupedParam> grouped_parameters() = 0;

  /// Called after every applied optimizer step (LoL: loss-free balancing update,
  /// paper Appendix A). Returns metrics to log (e.g. {"expert_load": [...]}).
  virtual nlohmann::json after_optimizer_step() { return nlohmann::json::object(); }
  /// Called instead of after_optimizer_step() when a step is skipped (non-finite loss):
  /// discard statistics gathered during the step.
  virtual void discard_step() {}
  /// Data-parallel training (issue 14): a function that sums a statistics tensor over
  /// all ranks (a collective). Models whose after_optimizer_step() uses statistics
  /// gathered in forward (LoL: the expert load of the balancing update) must pass them
  /// through it first, exactly once per call, so that every rank updates alike.
  using StatisticsReducer = std::function<torch::Tensor(const torch::Tensor&)>;
  virtual void set_statistics_reducer(StatisticsReducer reducer) {}

  /// Depth that can be grown (LoL: core depth D, paper 3.3); 0 = not growable.
  virtual int64_t growable_depth() const { return 0; }
  /// Sets the depth run by forward(), 0..growable_depth().
  virtual void set_active_depth(int64_t depth) {}
  /// Depth currently run (or -1 when not growable).
  virtual int64_t active_depth() const { return -1; }

  /// Training FLOPs (forward + backward) per input token at the current active depth
  /// for rows of `seq_len` tokens.
  virtual double train_flops_per_token(int64_t seq_len) const = 0;

  /// Writes a plain model directory (config.json + model.safetensors) that the
  /// model's own loader (e.g. load_lol) reads. `extra` goes to config.json "extra".
  virtual void save(const std::string& dir, const nlohmann::json& extra) const = 0;
  /// Loads weights and buffers from a directory written by save() (strict).
  virtual void load(const std::string& dir) = 0;

  /// Model configuration as JSON (what save() puts into config.json).
  virtual nlohmann::json config_json() const = 0;
  int64_t num_parameters();
};

/// Builds a freshly initialised model from the "model" section of a run config (its
/// "architecture" key selects the implementation; default "lol"). `vocab_size` and
/// `max_seq_len` fill those fields when the section leaves them out; `seed` seeds the
/// weight initialisation. Throws InputError naming `where` and the field for invalid
/// or unknown fields.
std::unique_ptr<TrainableModel> make_model(const nlohmann::json& section, const std::string& where,
                                           int64_t vocab_size, int64_t max_seq_len, uint64_t seed);

/// Loads a plain model directory (config.json + model.safetensors) of any known
/// architecture (the "architecture" field of config.json, default "lol").
std::unique_ptr<TrainableModel> load_model(const std::string& dir);

}  // namespace lol::training
