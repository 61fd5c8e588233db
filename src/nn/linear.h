// Linear layer whose backward adds the weight gradient straight into weight.grad.
//
// In LoL's routed core one expert's weights are used at several routed depths (and by
// every block of a looped model at every loop), so autograd would compute one full
// [out, in] weight gradient per use and then sum them in a separate pass per use
// (aten::add over the whole matrix). Here each use's backward runs one GEMM that
// accumulates into the existing gradient (C <- C + dY^T X, beta = 1): the sum costs
// nothing extra. This is the "gradient accumulation fusion" of Megatron-LM's linear
// layers, for the same reason.
//
// Contract: the weight's gradient is written during backward by this function, not by
// autograd's AccumulateGrad, so tensor hooks registered on the weight do not see it
// (nothing in lol registers any). With create_graph (grad mode on during backward) the
// weight gradient is returned to autograd as usual, so higher-order gradients work.
#pragma once
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

namespace lol::nn {

/// y = x W^T + b with W = layer->weight [out, in], b = layer->bias [out] or undefined.
/// x [..., in] -> y [..., out]. Same values as `layer(x)`; see the file comment for how
/// the weight gradient is accumulated. Throws c10::Error on shape mismatch (as matmul).
torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer);

/// The same with explicit tensors (bias may be undefined).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace lol::nn
