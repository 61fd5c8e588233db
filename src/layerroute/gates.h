// The per-layer skip gates of LayerRoute (paper 3.1-3.4):
//   s_i = w_i . hbar_i + b_i,  sigma_i = sigmoid(s_i),  g_i = 1[sigma_i > 0.5]
// where hbar_i [d_model] is the mean over a sample's tokens of the hidden states
// entering block i. Training uses the straight-through estimator (paper 3.2):
// forward value g_i, gradient that of sigma_i.
#pragma once
#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "layerroute/config.h"

namespace lol::layerroute {

/// Mean over valid tokens: h [batch, seq, d] (any float dtype), valid [batch, seq] bool
/// -> [batch, d] float32. A row without valid tokens gives zeros.
torch::Tensor mean_pool(const torch::Tensor& h, const torch::Tensor& valid);

/// The hard decision 1[sigma > 0.5] of paper eq. 3 as a bool tensor (same shape as
/// sigma, float32 sigma as the gates compute it). Every decision (training forward,
/// perplexity, generation, the non-triviality statistic) goes through it, so they
/// agree even where sigmoid rounds to 0.5 (0 < s < ~3e-8 in float32).
torch::Tensor gate_open(const torch::Tensor& sigma);

/// Straight-through hard gate (paper eq. 3): forward 1[sigma > 0.5] (exact 0/1),
/// backward d/dsigma = 1. sigma any shape.
torch::Tensor ste_gate(const torch::Tensor& sigma);

class GatesImpl : public torch::nn::Module {
 public:
  /// n_layers routers on d_model features, float32 on `device`: w_i uniform in
  /// +-1/sqrt(d_model) (torch.nn.Linear's default) from `seed`, b_i = cfg.init_bias(i).
  GatesImpl(int64_t n_layers, int64_t d_model, const GateConfig& cfg, uint64_t seed,
            const torch::Device& device = torch::kCPU);

  /// Gate logits s_i: hbar [batch, d] -> [batch] float32. `bias_only` drops the
  /// input-dependent term (s_i = b_i), the ablation of paper 5.4.
  torch::Tensor score(int64_t layer, const torch::Tensor& hbar, bool bias_only = false) const;

  int64_t n_layers() const { return weight.size(0); }
  const GateConfig& config() const { return cfg_; }

  torch::Tensor weight;  ///< [n_layers, d_model] the w_i
  torch::Tensor bias;    ///< [n_layers] the b_i

 private:
  GateConfig cfg_;
};
TORCH_MODULE(Gates);

}  // namespace lol::layerroute
