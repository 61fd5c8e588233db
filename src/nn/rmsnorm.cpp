#include "nn/rmsnorm.h"

namespace lol::nn {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // Half-precision inputs are normalised in float32 (as Hugging Face does); float64
  // inputs keep float64 so that double-precision checks are not limited to float32.
  auto xf = x.scalar_type() == torch::kFloat64 ? x : x.to(torch::kFloat32);
  auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * y.to(x.scalar_type());
}

}  // namespace lol::nn
