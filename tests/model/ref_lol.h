// Per-window reference implementation of the LoL forward pass (paper Algorithm 1,
// sections 3.1-3.2, Appendix A), written independently of src/lol/model.cpp for the
// tests: plain loops over documents, depths, windows and queries, each transformer
// block computed by hand from its weights (RMSNorm, q/k/v projections, RoPE,
// attention over an explicit list of allowed keys, SwiGLU), routing exactly as
// Algorithm 1 lines 5-17 say. Slow by design; used on tiny models only.
//
// It reads weights from a name -> tensor map (names of src/lol/model.h), so it can
// run both on a LoLModel's own parameters (gradients then flow into the model) and
// on tensors written by hand into a checkpoint.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lol/config.h"
#include "lol/model.h"
#include "lol/routing_path.h"

namespace reftest {

using Weights = std::map<std::string, torch::Tensor>;

/// One row of a batch, as plain vectors.
struct RefRow {
  std::vector<int64_t> tokens;
  int64_t prompt_len = 0;               ///< prompt window of the document starting at position 0
  std::vector<uint8_t> router_only;     ///< empty = no router-only tokens
  std::vector<int64_t> doc_ids;         ///< empty = one document; -1 = padding
};

/// One routing decision of the reference.
struct RefDecision {
  int64_t doc_begin = 0;   ///< first position of the document in its row
  int64_t depth = 0;       ///< 1-based routed depth
  int64_t k = 0;           ///< window index in the document
  int64_t begin = 0;       ///< first position of the window (in the row)
  int64_t len = 0;
  int64_t expert = 0;
  bool forced = false;
  double alpha = 0;        ///< value of alpha
  std::vector<double> probs;
  double margin = 0;       ///< (a+b)[best] - (a+b)[second best]; inf when L == 1
};

struct RefOptions {
  const lol::RoutingPath* force = nullptr;
  int64_t active_depth = -1;  ///< -1 = core_depth
};

/// The model's parameters and buffers by name (tensors share storage with the model).
Weights weights_of(lol::LoLModel& m);

/// Logits [T, vocab] of one row in the weights' dtype; rows at padding positions are 0.
/// Appends the routing decisions to `trace` when given (document order, then depth, then k).
torch::Tensor ref_forward_row(const Weights& w, const lol::LoLConfig& c, const RefRow& row, const RefOptions& opt = {},
                              std::vector<RefDecision>* trace = nullptr);

/// Window index of document position j at routed depth l (1-based), written from the
/// paper's formula w_i = floor((i + delta_l) / W) and the prompt-window rule.
int64_t ref_window_index(int64_t j, int64_t depth, int64_t W, int64_t S, int64_t prompt_len);

}  // namespace reftest
