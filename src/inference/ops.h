// Small tensor operations of the decoding path. Each computes the same function as
// the corresponding module of src/nn (so that cached decoding reproduces
// LoLModelImpl::forward), with fewer dispatches per call.
#pragma once
#include <torch/types.h>

namespace lol::inference {

/// x [n, in] @ w[out, in]^T (+ b [out]) -> [n, out]. One row uses a matrix-vector
/// product, which streams the weight at full memory bandwidth on CPU.
torch::Tensor dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {});

/// RMSNorm through nn::rms_norm (the forward pass's norm): w * (x / sqrt(mean(x^2) + eps));
/// on CPU float32/64 the sum of squares in double, elsewhere float32 statistics.
/// x [n, d], w [d] -> [n, d] in x's dtype.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);

/// RMSNorm followed by FiLM (paper Appendix A): gamma * rms_norm(x, w) + beta.
torch::Tensor rms_norm_film(const torch::Tensor& x, const torch::Tensor& w, double eps, const torch::Tensor& gamma,
                            const torch::Tensor& beta);

}  // namespace lol::inference
