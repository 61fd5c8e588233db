// TrainableModel for the looped baseline (architecture "looped", looped_model.h).
#pragma once
#include "baselines/looped_model.h"
#include "training/trainable.h"

namespace lol::baselines {

class LoopedTrainable : public training::TrainableModel {
 public:
  explicit LoopedTrainable(LoopedModel m) : model_(std::move(m)) {}
  std::string architecture() const override { return "looped"; }
  torch::nn::Module& module() override { return *model_; }
  /// LoopedModel::forward(tokens, doc_ids) with the training rule for R.
  torch::Tensor forward(const training::TrainBatch& batch) override;
  std::vector<training::GroupedParam> grouped_parameters() override;
  /// Training FLOPs of the last forward(): prelude, coda, head and adapter at 3 x
  /// forward, the recurrent block as R forwards plus 2 x (iterations with gradients);
  /// before any forward, R = config.recurrence with full backpropagation.
  double train_flops_per_token(int64_t seq_len) const override;
  nlohmann::json after_optimizer_step() override { return {{"recurrence", model_->last_recurrence()}}; }
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override { return model_->config().to_json(); }
  LoopedModel& model() { return model_; }

 private:
  LoopedModel model_;
};

/// Reads dir/config.json (architecture "looped") and dir/model.safetensors (strict).
LoopedModel load_looped(const std::string& dir);

}  // namespace lol::baselines
