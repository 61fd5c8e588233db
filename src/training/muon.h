// Muon (Jordan et al. 2024; paper Appendix A): momentum SGD whose update is
// orthogonalised by a quintic Newton-Schulz iteration, as in PyTorch's
// torch.optim.Muon with adjust_lr_fn="match_rms_adamw".
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace lol::training {

/// Quintic Newton-Schulz coefficients (a, b, c) of Keller Jordan's Muon / torch.optim.Muon.
inline constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;

/// Approximate orthogonalisation U V^T of a 2-D matrix G = U S V^T:
///   X = G / max(||G||_F, eps) (transposed first when rows > cols), then `steps` times
///   A = X X^T;  B = b A + c A A;  X = a X + B X.
/// Runs in `dtype` (float32 or bfloat16) and returns the input's shape and dtype.
/// The singular values of the result lie roughly in [0.7, 1.2] (the iteration is
/// tuned for speed, not exact convergence). Throws std::invalid_argument unless G is 2-D.
torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps = 5,
                            torch::ScalarType dtype = torch::kFloat32, double eps = 1e-7);

/// newton_schulz() of each matrix of a batch G [n, rows, cols] (each normalised by its own
/// Frobenius norm), with batched products: 3 per iteration for the whole batch. Equal to
/// newton_schulz() of each matrix up to the rounding of the products. Throws
/// std::invalid_argument unless G is 3-D.
torch::Tensor newton_schulz_batched(const torch::Tensor& g, int64_t steps = 5,
                                    torch::ScalarType dtype = torch::kFloat32, double eps = 1e-7);

/// Learning rate of a [rows, cols] matrix under adjust_lr_fn=match_rms_adamw:
/// lr * 0.2 * sqrt(max(rows, cols)).
double muon_adjusted_lr(double lr, int64_t rows, int64_t cols);

struct MuonHyper {
  double lr = 0.02;            ///< before muon_adjusted_lr
  double momentum = 0.95;
  bool nesterov = true;
  double weight_decay = 0.1;   ///< decoupled: p *= 1 - lr * weight_decay (unadjusted lr)
  int64_t ns_steps = 5;
  torch::ScalarType ns_dtype = torch::kFloat32;
};

/// One Muon update of a 2-D parameter in place (no autograd):
///   buf = momentum buf + (1 - momentum) grad
///   u   = nesterov ? lerp(grad, buf, momentum) : buf
///   p  *= 1 - lr * weight_decay;  p -= muon_adjusted_lr(lr) * newton_schulz(u)
void muon_update(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& momentum_buffer,
                 const MuonHyper& h);

/// The same update of n parameters of one shape, dtype and device at once: multi-tensor
/// (`_foreach_`) momentum and weight decay, one newton_schulz_batched() over the stacked
/// updates [n, rows, cols]. About 25 operator calls for the group instead of 25 per
/// parameter (a GPU step's host time, docs/benchmarks.md "CUDA"). weight_decay[i] belongs
/// to parameter i (h.weight_decay is not used). Throws std::invalid_argument on
/// mismatched list lengths or shapes.
void muon_update(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                 const std::vector<double>& weight_decay, const MuonHyper& h);

}  // namespace lol::training
