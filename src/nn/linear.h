// Linear layers whose backward adds the weight gradient straight into weight.grad, in a
// plain and a grouped (one weight per consecutive block of rows) form.
//
// In LoL's routed core one expert's weights are used at several routed depths (and by
// every block of a looped model at every loop), so autograd would compute one full
// [out, in] weight gradient per use and then sum them in a separate pass per use
// (aten::add over the whole matrix). Here each use's backward runs one GEMM that
// accumulates into the existing gradient (C <- C + dY^T X, beta = 1): the sum costs
// nothing extra. This is the "gradient accumulation fusion" of Megatron-LM's linear
// layers, for the same reason.
//
// The grouped form runs one routed depth's projection for all of its experts as one
// autograd node (one GEMM per expert on its rows, written into one output): the routed
// core then has as many operators per depth as a dense layer, instead of one set per
// expert (the per-operator cost dominates at small widths; docs/benchmarks.md).
//
// Contract: the weight's gradient is written during backward by these functions, not by
// autograd's AccumulateGrad, so tensor hooks registered on the weight do not see it
// (nothing in lol registers any). With create_graph (grad mode on during backward) the
// weight gradient is returned to autograd as usual, so higher-order gradients work.
#pragma once
#include <vector>

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "nn/weight_stacks.h"

namespace lol::nn {

/// y = x W^T + b with W = layer->weight [out, in], b = layer->bias [out] or undefined.
/// x [..., in] -> y [..., out]. Same values as `layer(x)`; see the file comment for how
/// the weight gradient is accumulated. Throws c10::Error on shape mismatch (as matmul).
torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer);

/// The same with explicit tensors (bias may be undefined).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// Grouped linear: x [N, in] is cut into consecutive row blocks of sizes[g] rows
/// (sum = N) and block g is multiplied by weights[g] [out, in] (+ biases[g] [out]):
/// y[rows of g] = x[rows of g] W_g^T + b_g, y [N, out]. biases is empty (no bias) or has
/// one tensor per group. The same weight may appear in several groups. Equal to calling
/// linear() on each block and concatenating. Off the fused CPU kernels (a GPU) equal
/// groups run as one batched product with the stacked weights ([G, N/G, in] x [G, in, out]),
/// stacked through `stacks` when it is not null (nn::WeightStacks: one stack per forward pass).
/// Throws lol::InputError when the sizes do not sum to N, a size is negative, or the list
/// lengths differ; c10::Error on shape mismatch.
torch::Tensor grouped_linear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                             const std::vector<torch::Tensor>& biases, const std::vector<int64_t>& sizes,
                             WeightStacks* stacks = nullptr);

/// The grouped form over layers (their weights and, where they have one, biases; all or
/// none of the layers must have a bias).
torch::Tensor grouped_linear(const torch::Tensor& x, const std::vector<const torch::nn::LinearImpl*>& layers,
                             const std::vector<int64_t>& sizes, WeightStacks* stacks = nullptr);

/// Checks a grouped call's row blocks: sizes non-negative, sum == rows, sizes.size() ==
/// groups. Throws lol::InputError naming `what` otherwise.
void check_groups(const std::vector<int64_t>& sizes, int64_t rows, size_t groups, const char* what);

/// True when every group has as many rows as the first (an empty list included): the
/// grouped operators then run off the fused CPU kernels as one batched operation.
bool equal_groups(const std::vector<int64_t>& sizes);

}  // namespace lol::nn
