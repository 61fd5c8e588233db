#include "inference/ops.h"

#include "nn/rmsnorm.h"

namespace lol::inference {

torch::Tensor dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (x.size(0) == 1 && x.is_cpu()) {
    auto y = torch::mv(w, x[0]);
    if (b.defined()) y.add_(b);
    return y.unsqueeze(0);
  }
  return b.defined() ? torch::addmm(b, x, w.t()) : torch::mm(x, w.t());
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return rms_norm_film(x, w, eps, {}, {});
}

torch::Tensor rms_norm_film(const torch::Tensor& x, const torch::Tensor& w, double eps, const torch::Tensor& gamma,
                            const torch::Tensor& beta) {
  // The training forward's norm (nn/rmsnorm.h), so that cached decoding computes what the
  // forward pass computes (on CPU: sums of squares in double, no overflow before 1e154).
  const int64_t d = x.size(-1);
  return nn::rms_norm(x, {w}, {d == 0 ? 0 : x.numel() / d}, gamma, beta, eps);
}

}  // namespace lol::inference
