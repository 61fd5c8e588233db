// LayerRoute as a training::TrainableModel (issue 11): only the gates and the LoRA
// adapters are trainable (the backbone is frozen); forward runs the STE path (every
// block computed, paper 3.2) in training mode and the skipping path in eval mode, and
// keeps the mean soft gate of its last forward for the gate-regularised objective
//   L = L_LM + lambda * (1 / L) sum_i sigma_i     (paper eq. 4, averaged over the batch)
// that layerroute/train.h adds to the masked LM loss.
#pragma once
#include <string>

#include "layerroute/gated_model.h"
#include "training/trainable.h"

namespace lol::layerroute {

class LayerRouteTrainable : public training::TrainableModel {
 public:
  /// `base_dir` is recorded in saved adapters.
  LayerRouteTrainable(GatedModel m, std::string base_dir) : model_(std::move(m)), base_dir_(std::move(base_dir)) {}
  std::string architecture() const override { return "layerroute"; }
  torch::nn::Module& module() override { return *model_; }
  /// Logits [B, T, V] of batch.tokens with batch.doc_ids (one sample per row). Training
  /// mode: STE gates, all blocks run; eval mode: closed gates skip their blocks.
  /// Sets last_gate_mean() and last_sigma().
  torch::Tensor forward(const training::TrainBatch& batch) override;
  /// gates.weight, gates.bias and every LoRA matrix (PEFT names), all AdamW with decay
  /// (torch.optim.AdamW decays every parameter, as the paper's setup).
  std::vector<training::GroupedParam> grouped_parameters() override;
  /// 6 x (block + head parameters): every block runs forward and backward in STE mode.
  double train_flops_per_token(int64_t seq_len) const override;
  /// save_adapter(model, dir, base_dir, extra) (adapter_io.h).
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  /// load_adapter_weights(model, dir).
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override;

  /// Mean of sigma over the batch rows and layers of the last forward: a differentiable
  /// float32 scalar (the regulariser's (1/L) sum_i sigma_i, batch-averaged).
  const torch::Tensor& last_gate_mean() const { return gate_mean_; }
  /// [B, n_layers] soft gates of the last forward.
  const torch::Tensor& last_sigma() const { return sigma_; }
  GatedModel& model() { return model_; }
  GateMode mode = GateMode::Learned;

 private:
  GatedModel model_;
  std::string base_dir_;
  torch::Tensor gate_mean_, sigma_;
};

}  // namespace lol::layerroute
