// TrainableModel for the MoE baseline (architecture "moe", moe_model.h).
#pragma once
#include "baselines/moe_model.h"
#include "training/trainable.h"

namespace lol::baselines {

class MoETrainable : public training::TrainableModel {
 public:
  explicit MoETrainable(MoEModel m) : model_(std::move(m)) {}
  std::string architecture() const override { return "moe"; }
  torch::nn::Module& module() override { return *model_; }
  torch::Tensor forward(const training::TrainBatch& batch) override;
  /// Muon for attention and expert matrices; AdamW with decay for embeddings, head and
  /// the routers (mlp.gate); AdamW without decay for norms and biases.
  std::vector<training::GroupedParam> grouped_parameters() override;
  /// Loss-free balancing update of every MoE layer; returns {"expert_load": [[E] per layer]}.
  /// With a statistics reducer (data parallel) the loads are first summed over ranks,
  /// so that every rank applies the same bias update.
  nlohmann::json after_optimizer_step() override;
  void set_statistics_reducer(StatisticsReducer reducer) override { reducer_ = std::move(reducer); }
  void discard_step() override { model_->clear_pending_load(); }
  double train_flops_per_token(int64_t seq_len) const override;
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override { return model_->config().to_json(); }
  MoEModel& model() { return model_; }

 private:
  MoEModel model_;
  StatisticsReducer reducer_;
};

/// Reads dir/config.json (architecture "moe") and dir/model.safetensors (strict).
MoEModel load_moe(const std::string& dir);

}  // namespace lol::baselines
