// TrainableModel for the Library of Layers model (paper section 3, Appendix A).
#pragma once
#include "lol/model.h"
#include "training/trainable.h"

namespace lol::training {

class LoLTrainable : public TrainableModel {
 public:
  explicit LoLTrainable(LoLModel model) : model_(std::move(model)) {}

  std::string architecture() const override { return "lol"; }
  torch::nn::Module& module() override { return *model_; }
  /// LoLModel::forward with the batch's doc ids (document-blocked attention),
  /// prompt lengths and router-only mask.
  torch::Tensor forward(const TrainBatch& batch) override;
  /// Muon: 2-D weights of the attention and MLP projections (prelude, library, coda).
  /// AdamW with decay: token embedding, LM head, router(s), MoE prelude/coda gates (mlp.gate).
  /// AdamW without decay: RMSNorm weights, FiLM gamma/beta, depth embeddings.
  std::vector<GroupedParam> grouped_parameters() override;
  /// update_balance() (loss-free balancing); returns {"expert_load": [L counts]}, and with
  /// an MoE prelude/coda update_ffn_balance() and "prelude_coda_expert_load": [[E] per block].
  /// With a statistics reducer (data parallel) the counts are first summed over all
  /// ranks (one collective), so the biases move by the global load, as in Megatron-LM's MoE.
  nlohmann::json after_optimizer_step() override;
  void discard_step() override;
  void set_statistics_reducer(StatisticsReducer reducer) override { reducer_ = std::move(reducer); }
  int64_t growable_depth() const override { return model_->config().core_depth; }
  void set_active_depth(int64_t d) override { model_->set_active_depth(d); }
  int64_t active_depth() const override { return model_->active_depth(); }
  /// 6 * N_active + 6 * d_model * (n_full * T + a * min(W, T)) (Kaplan et al. 2020
  /// estimate), with N_active the non-embedding parameters a token uses at the
  /// current active depth a (full blocks (gate and top-k experts of an MoE FFN), a expert
  /// applications, a router calls, LM head) and n_full = n_prelude + n_coda.
  double train_flops_per_token(int64_t seq_len) const override;
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override { return model_->config().to_json(); }

  LoLModel& model() { return model_; }

 private:
  LoLModel model_;
  StatisticsReducer reducer_;
};

}  // namespace lol::training
