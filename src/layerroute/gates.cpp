#include "layerroute/gates.h"

#include <cmath>

namespace lol::layerroute {

torch::Tensor mean_pool(const torch::Tensor& h, const torch::Tensor& valid) {
  auto m = valid.to(torch::kFloat32).unsqueeze(-1);  // [B, T, 1]
  // Each token's weight 1/count is applied before the sum: summing the states first
  // overflows float32 for large activations (|h| near 1e36 over a few hundred tokens)
  // although their mean is finite, and a NaN gate score closes the gate silently.
  auto w = m / m.sum(1, /*keepdim=*/true).clamp_min(1.0);  // [B, T, 1]
  return (h.to(torch::kFloat32) * w).sum(1);               // [B, d]
}

torch::Tensor gate_open(const torch::Tensor& sigma) { return sigma > 0.5; }

torch::Tensor ste_gate(const torch::Tensor& sigma) {
  auto hard = gate_open(sigma).to(sigma.scalar_type());
  return hard + (sigma - sigma.detach());
}

GatesImpl::GatesImpl(int64_t n_layers, int64_t d_model, const GateConfig& cfg, uint64_t seed,
                     const torch::Device& device)
    : cfg_(cfg) {
  cfg_.validate("gate config");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double bound = 1.0 / std::sqrt(double(d_model));
  auto w = torch::empty({n_layers, d_model}, torch::kFloat32).uniform_(-bound, bound, gen);
  auto b = torch::empty({n_layers}, torch::kFloat32);
  for (int64_t i = 0; i < n_layers; ++i) b[i] = cfg_.init_bias(i, n_layers);
  weight = register_parameter("weight", w.to(device));
  bias = register_parameter("bias", b.to(device));
}

torch::Tensor GatesImpl::score(int64_t layer, const torch::Tensor& hbar, bool bias_only) const {
  auto b = bias[layer];
  if (bias_only) return b.expand({hbar.size(0)});
  return torch::matmul(hbar.to(torch::kFloat32), weight[layer]) + b;
}

}  // namespace lol::layerroute
