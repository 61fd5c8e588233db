// TrainableModel for the dense baseline (architecture "dense"): trained by the same
// trainer as LoL (training/trainer.h), checkpoints as config.json + model.safetensors
// with Hugging Face tensor names (dense_model.h).
#pragma once
#include <string>

#include "baselines/dense_model.h"
#include "training/trainable.h"

namespace lol::baselines {

/// Optimizer groups shared by the baselines (paper Appendix A): Muon for 2-D weights
/// whose name contains ".self_attn." or ".mlp." except MoE router gates (".mlp.gate.");
/// AdamW with decay for embed_tokens, lm_head, routers and the looped adapter; AdamW
/// without decay for norms and biases.
training::ParamGroup baseline_param_group(const std::string& name, const torch::Tensor& t);
/// Every parameter of `m` with baseline_param_group, in named_parameters() order.
std::vector<training::GroupedParam> baseline_grouped_parameters(torch::nn::Module& m);
/// Writes dir/config.json (`config` + "extra") and dir/model.safetensors (module_state).
void save_baseline(const torch::nn::Module& m, const nlohmann::json& config, const std::string& dir,
                   const nlohmann::json& extra);

class DenseTrainable : public training::TrainableModel {
 public:
  explicit DenseTrainable(DenseModel m) : model_(std::move(m)) {}
  std::string architecture() const override { return "dense"; }
  torch::nn::Module& module() override { return *model_; }
  /// DenseModel::forward(tokens, doc_ids): document-blocked attention; prompt_len and
  /// router_only are ignored (no router).
  torch::Tensor forward(const training::TrainBatch& batch) override;
  std::vector<training::GroupedParam> grouped_parameters() override { return baseline_grouped_parameters(*model_); }
  /// flops_report(cost_model(config), seq_len).train_flops (baselines/flops.h).
  double train_flops_per_token(int64_t seq_len) const override;
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  /// Strict load of dir/model.safetensors into this model (core/module_io.h).
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override { return model_->config().to_json(); }
  DenseModel& model() { return model_; }

 private:
  DenseModel model_;
};

/// Reads dir/config.json (architecture "dense") and dir/model.safetensors. InputError
/// naming the file for a missing/invalid config or tensor.
DenseModel load_dense(const std::string& dir);

}  // namespace lol::baselines
