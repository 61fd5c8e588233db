// Incremental (KV-cached) decoding of a LoL model (issue 6; paper sections 3.1-3.2,
// Algorithm 1 in Appendix A), for a batch of B independent sequences ("rows").
//
// Caches per row:
//  - prelude and coda: ordinary per-layer KV caches of every key-visible token;
//  - each routed depth: the keys/values of its *current window only* (reset when a
//    new window starts), the running sum of the depth's input states over the current
//    window, the running sum of the means mu_j of the completed windows (router input
//    r_k = mean(mu_0 .. mu_{k-1}), Algorithm 1 line 13), and the expert and alpha
//    chosen when the window's first token arrived. An expert used at several depths
//    has a separate cache per depth. So the core's cache is O(depth x window),
//    independent of the sequence length.
//
// Feeding tokens in chunks of any size (prefill) and then one at a time (decode)
// gives the same logits as LoLModelImpl::forward on the whole sequence (eval mode),
// including the prompt window (prompt_len), router-only tokens (never attention keys,
// but counted in the router's window means) and forced routing paths.
//
// Work per call: one matrix product per weight for all rows together; in the routed
// core the rows are grouped by their window's expert. Routers run only when a window
// starts.
//
// Tensors returned are created under c10::InferenceMode (read them freely; copy
// before modifying them in place outside inference mode).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "inference/cpu_decode.h"
#include "inference/depth_plan.h"
#include "inference/kv_cache.h"
#include "inference/packed_model.h"
#include "lol/model.h"
#include "lol/routing_path.h"

namespace lol::inference {

struct SessionOptions {
  int64_t batch_size = 1;  ///< B: rows (independent sequences)
  int64_t depth = -1;      ///< routed depths to run; -1 = the model's active depth (test-time depth otherwise)
  DepthRule depth_rule = DepthRule::kStretch;  ///< parameters of extra/fewer depths (inference/depth_plan.h)
  int64_t max_len = 0;     ///< positions per row; 0 = config max_seq_len
  bool record_trace = true;  ///< keep every routing decision (trace())
  /// Decoding steps (one token per row) on CPU in float32/float64 use the fused
  /// kernels of cpu_decode.h; false: always the tensor-operation path.
  bool cpu_kernels = true;
};

/// One routing decision, made when a window's first token arrived.
struct WindowDecision {
  int64_t depth = 0;   ///< 0-based run-time routed depth (l - 1)
  int64_t k = 0;       ///< window index within the sequence at this depth
  int64_t begin = 0;   ///< position of the window's first token
  int64_t expert = 0;  ///< selected (or forced) expert
  double alpha = 0;    ///< residual weight used
  bool forced = false; ///< came from the routing path
  std::vector<float> probs;  ///< [L] router softmax (before the balancing bias)
};

/// New tokens of one row. router_only: empty, or one flag per token.
struct RowInput {
  int64_t row = 0;
  std::vector<int64_t> tokens;
  std::vector<uint8_t> router_only;
};

class DecodeSession {
 public:
  /// Snapshots the model's weights (later parameter changes are not seen). Every row
  /// starts empty (reset(row) with prompt_len 0). Throws InputError for bad options
  /// (batch_size < 1, depth < -1, max_len > 2^24, extra depths on a model without core).
  explicit DecodeSession(LoLModel model, const SessionOptions& opt = {});
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;

  /// Empties `row` and starts a new sequence: its first `prompt_len` positions form
  /// window 0 at every routed depth (windows.h window_of); `force` (may be null; must
  /// outlive the row's use) replaces router decisions where it has entries, indexed by
  /// run-time depth and window index. Throws InputError for a bad row, a negative
  /// prompt_len or a path expert >= library_size.
  void reset(int64_t row, int64_t prompt_len = 0, const RoutingPath* force = nullptr);

  /// Appends tokens to rows (distinct rows, any number of tokens each; empty inputs are
  /// ignored). Returns logits [inputs, V] at the last new token of each input, in
  /// input order, or with all_logits [sum of tokens, V] (inputs concatenated).
  /// Throws InputError for a bad row, repeated row, token id outside [0, V), a
  /// router_only of the wrong length, or a row that would exceed max_len.
  torch::Tensor feed(const std::vector<RowInput>& inputs, bool all_logits = false);

  /// One token for every row 0..B-1 (tokens [B]) -> logits [B, V].
  torch::Tensor step(const std::vector<int64_t>& tokens);

  int64_t batch_size() const { return int64_t(rows_.size()); }
  /// Positions fed to `row` so far.
  int64_t length(int64_t row) const { return rows_.at(row).n; }
  int64_t max_len() const { return max_len_; }
  /// Routed depths run (R) and their parameter map.
  const DepthPlan& depth_plan() const { return plan_; }
  /// Routing decisions of `row` since its last reset, in the order they were made.
  const std::vector<WindowDecision>& trace(int64_t row) const { return rows_.at(row).trace; }
  /// Visible keys of `row`'s current window at run-time depth d (0-based).
  int64_t window_keys(int64_t row, int64_t d) const { return rows_.at(row).depth.at(d).wlen; }

  /// Bytes of the prelude + coda KV caches (grow with the sequence length).
  int64_t full_cache_bytes() const;
  /// Bytes of the routed core's state: window KV caches and router running sums
  /// (bounded by max(W, prompt_len); independent of the sequence length).
  int64_t core_cache_bytes() const;
  const PackedModel& weights() const { return w_; }

 private:
  struct DepthRow {
    int64_t k = -1;      ///< current window index (-1: none yet)
    int64_t wlen = 0;    ///< visible keys cached for the current window
    int64_t wcnt = 0;    ///< tokens (visible or not) in the current window
    int64_t expert = -1;
    double alpha = 0;
  };
  struct Row {
    int64_t n = 0, vis = 0, prompt_len = 0;
    const RoutingPath* force = nullptr;
    std::vector<DepthRow> depth;
    std::vector<WindowDecision> trace;
  };
  struct Step;  // token layout of one feed() call (decode_session.cpp)

  torch::Tensor run_core_depth(int64_t d, const torch::Tensor& x, const Step& st);
  /// Expert execution of a decoding step with the fused CPU kernels (token t is run t).
  torch::Tensor run_core_depth_fast(int64_t d, const torch::Tensor& x, const Step& st, const std::vector<int64_t>& base,
                                    const std::vector<int64_t>& expert, const std::vector<double>& alpha);

  PackedModel w_;
  SessionOptions opt_;
  DepthPlan plan_;
  int64_t max_len_ = 0;
  std::vector<Row> rows_;
  std::vector<KVCache> prelude_cache_, coda_cache_, core_cache_;
  std::vector<torch::Tensor> win_sum_, mu_sum_;  ///< per run-time depth, [B, d]
  std::unique_ptr<CpuDecoder> cpu_;  ///< null: tensor-operation path only
};

}  // namespace lol::inference
