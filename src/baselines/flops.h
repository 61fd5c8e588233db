// FLOPs and parameter accounting for every architecture (paper 4.2-4.3): LoL, dense
// (full / sliding / strided attention), looped (Huginn-style) and MoE.
//
// Conventions (matmul FLOPs = 2 x multiply-adds; norms, softmax, RoPE and element-wise
// operations are not counted):
//   linear    = 2 x (weights a token multiplies with, each layer application counted):
//               q,k,v,o projections, SwiGLU (the k active experts for MoE), routers,
//               the looped adapter, and the LM head (tied or not);
//   attention = per layer, 4 x (H head_dim) x (allowed (query, key) pairs of a
//               context-long document) / context: QK^T and AV over the keys each query
//               actually sees with the layer's window (full: (n+1)/2 on average,
//               sliding: min(i+1, W), strided: the window's causal triangle);
//   training  = 3 x forward (backward = 2 x forward).
// The Kaplan et al. (2020) estimate LoLTrainable uses, 6 N + 6 d (n_full T + D W), is
// this count up to norm weights, per-token vs per-window router calls and (T+1)/2 vs T/2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baselines/attention_layout.h"
#include "lol/config.h"

namespace lol::baselines {

struct DenseConfig;
struct LoopedConfig;
struct MoEConfig;

/// One kind of layer application on a token's path.
struct LayerCost {
  std::string name;            ///< e.g. "layers.0", "core.3" (for breakdowns)
  double matmul_params = 0;    ///< weights one application multiplies a token with
  LayerAttention attention;    ///< the layer's attention pattern
  int64_t attn_width = 0;      ///< H x head_dim
  double applications = 1;     ///< applications per token (looped recurrence R)
};

/// What a token costs in a model: its layers plus matmuls outside them.
struct CostModel {
  std::string architecture;
  std::vector<LayerCost> layers;
  double extra_matmul_params = 0;   ///< LM head + adapter + routers, per token
  int64_t parameters = 0;           ///< all trainable parameters
  int64_t active_parameters = 0;    ///< distinct parameters one token uses
  int64_t effective_parameters = 0; ///< parameters one token uses, counted once per application
};

struct FlopsReport {
  int64_t context = 0;                 ///< document length the attention terms assume
  int64_t parameters = 0, active_parameters = 0, effective_parameters = 0;
  double linear_flops = 0;             ///< per token, forward
  double attention_flops = 0;          ///< per token, forward
  double forward_flops = 0;            ///< linear + attention, per token
  double train_flops = 0;              ///< 3 x forward, per token
  double flops_per_parameter = 0;      ///< forward_flops / parameters (the paper's FLOPs-to-parameters ratio)
  nlohmann::json to_json() const;
};

/// Per-token FLOPs of `m` for documents of `context` tokens (context >= 1; InputError otherwise).
FlopsReport flops_report(const CostModel& m, int64_t context);

CostModel cost_model(const DenseConfig& c);
/// `recurrence` = R applications of the recurrent block.
CostModel cost_model(const LoopedConfig& c, int64_t recurrence);
CostModel cost_model(const MoEConfig& c);
/// LoL with `active_depth` routed depths (one expert per window and depth, router once
/// per window of W tokens).
CostModel cost_model(const LoLConfig& c, int64_t active_depth);
/// By the config's "architecture" field (lol, dense, looped, moe); the model's default
/// depth / mean recurrence. Throws InputError naming `where` for other architectures.
CostModel cost_model_from_json(const nlohmann::json& config, const std::string& where);

}  // namespace lol::baselines
