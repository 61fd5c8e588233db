// Router inputs of one routed depth (LoL paper Algorithm 1, lines 7-14).
//
// The windows of a depth partition each document's tokens into runs of consecutive flat
// rows. With mu_j the mean state of window j of a document (over its tokens) and k the
// window's index in its document, the router input of window k is
//   r_0 = (e^(l) + s_first) / 2           (s_first: the document's first token state)
//   r_k = (mu_0 + ... + mu_{k-1}) / k      (k >= 1)
// so a window is routed from what came before it, never from its own tokens.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace lol {

/// Windows of one routed depth in document order (a document's windows consecutive,
/// k = 0, 1, 2, ... within it). Window g covers flat rows [start[g], start[g] + len[g]).
struct RouterWindows {
  std::vector<int64_t> start;             ///< first flat row of the window
  std::vector<int64_t> len;               ///< tokens in the window (> 0)
  std::vector<int64_t> k;                 ///< index of the window in its document
  std::vector<int64_t> doc_first_window;  ///< index (into these lists) of the document's window 0
};

/// r [G, d_model] for the G windows of `w`, from the residual stream s [rows, d_model] and
/// the depth embedding e^(l) [d_model] (of s's dtype and device). Sums and running sums are
/// taken in float64 within each document, so a window's input never depends on other
/// documents or rows of the batch. Differentiable in s and depth_embed (on the CPU one
/// autograd node; on other devices composed operations). Throws lol::InputError when the
/// tables are inconsistent (lengths differ, a window outside s, a document not starting
/// with k = 0).
torch::Tensor router_inputs(const torch::Tensor& s, const torch::Tensor& depth_embed, const RouterWindows& w);

/// The same with composed LibTorch operations (any device): the reference the CPU kernel
/// is tested against (tests/model/test_fused_ops.cpp).
torch::Tensor router_inputs_composed(const torch::Tensor& s, const torch::Tensor& depth_embed, const RouterWindows& w);

}  // namespace lol
