// Configuration of the mixture-of-experts baseline (paper 4.3.2): prelude and coda of
// dense full-attention blocks, and core_depth MoE blocks whose FFN is n_experts SwiGLU
// experts with top-k token routing and loss-free balancing, with strided-window
// attention at the same depths as LoL's routed core (the paper's 3:2 comparison:
// n_experts = 3, top_k = 2). With moe_prelude_coda the prelude and coda blocks are
// MoE blocks too (full attention), as in the paper's comparison, where both arms use
// MoE prelude and coda layers (LoLConfig::prelude_coda_experts for the LoL arm).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/attention_layout.h"
#include "baselines/shape.h"

namespace lol::baselines {

/// config.json of an MoE model ("architecture": "moe").
struct MoEConfig : TransformerShape {
  int64_t n_prelude = 1, core_depth = 4, n_coda = 1;
  int64_t n_experts = 3;
  int64_t top_k = 2;
  int64_t expert_ffn_hidden = 0;          ///< hidden units of each expert (0 = ffn_hidden)
  std::string core_attention = "strided";  ///< attention of the MoE blocks: "full" | "sliding" | "strided"
  int64_t window = 64, stride = 32;        ///< W, S of the core's attention (LoL's windows)
  double router_noise_std = 0.0;           ///< Gaussian noise on router logits in training
  double balance_update_rate = 1e-3;       ///< u in b_e += u sign(mean load - load_e), per layer
  bool moe_prelude_coda = false;           ///< prelude and coda blocks are MoE blocks too (paper 4.3.2)

  int64_t n_layers() const { return n_prelude + core_depth + n_coda; }
  int64_t effective_expert_ffn() const { return expert_ffn_hidden > 0 ? expert_ffn_hidden : ffn_hidden; }
  /// Layer i is one of the core_depth core blocks (strided attention by default).
  bool is_core_layer(int64_t i) const { return i >= n_prelude && i < n_prelude + core_depth; }
  /// Layer i has an MoE FFN: the core layers, and every layer with moe_prelude_coda.
  bool is_moe_layer(int64_t i) const { return moe_prelude_coda || is_core_layer(i); }
  int64_t n_moe_layers() const { return moe_prelude_coda ? n_layers() : core_depth; }
  /// Block shape of layer i (an MoE FFN of n_experts experts of effective_expert_ffn() on MoE layers).
  nn::BlockShape layer_shape(int64_t i) const;
  /// Attention pattern of layer i: full in prelude/coda, core_attention at core depth
  /// l = i - n_prelude + 1.
  LayerAttention layer_attention(int64_t layer) const;

  static MoEConfig from_json(const nlohmann::json& j, const std::string& where);
  nlohmann::json to_json() const;
  void validate(const std::string& where) const;
};

}  // namespace lol::baselines
