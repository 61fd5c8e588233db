#include "nn/rope.h"

namespace lol::nn {

RoPE::RoPE(int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {}

void RoPE::ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype) {
  if (cos_.defined() && cos_.size(0) >= max_pos && cos_.device() == dev && cos_.scalar_type() == dtype) return;
  int64_t n = 256;
  while (n < max_pos) n *= 2;
  auto idx = torch::arange(0, head_dim_, 2, torch::kInt64).to(torch::kFloat32) / double(head_dim_);
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta_, torch::kFloat32), idx);
  auto p = torch::arange(n, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(p, inv_freq);  // [n, hd/2]
  cos_ = freqs.cos().to(dev, dtype);
  sin_ = freqs.sin().to(dev, dtype);
}

torch::Tensor RoPE::apply(const torch::Tensor& x, const torch::Tensor& pos) {
  if (x.size(0) == 0) return x;
  int64_t max_pos = pos.max().item<int64_t>() + 1;
  ensure(max_pos, x.device(), x.scalar_type());
  auto c = cos_.index_select(0, pos).unsqueeze(1);  // [N, 1, hd/2]
  auto s = sin_.index_select(0, pos).unsqueeze(1);
  auto halves = x.chunk(2, -1);
  const auto& x1 = halves[0];
  const auto& x2 = halves[1];
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

}  // namespace lol::nn
