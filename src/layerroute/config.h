// Configuration of LayerRoute (paper seed 004, sections 3.1-3.4): the LoRA adapters
// and the per-layer skip gates put around a frozen dense (Qwen2/Llama layout) model.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::layerroute {

/// LoRA adapters W' = W + (alpha / rank) B A (paper 3.1): A [rank, in] random, B [out, rank] zero.
struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16;
  /// Projections that get an adapter: any of q_proj k_proj v_proj o_proj (attention)
  /// and gate_proj up_proj down_proj (MLP). Paper default: the four attention ones.
  std::vector<std::string> targets{"q_proj", "k_proj", "v_proj", "o_proj"};

  double scale() const { return alpha / double(rank); }
  /// Throws InputError naming `where` for rank < 1, alpha <= 0, an unknown or repeated target.
  void validate(const std::string& where) const;
};

/// The skip gates s_i = w_i . mean(h_i) + b_i (paper 3.1) and their biased
/// initialisation (paper 3.4): b_i = bias_band inside the middle band, bias_outside
/// elsewhere. The band is given for a model of band_depth layers (paper: layers 8..16
/// of 24, inclusive) and scaled to other depths: first = round(band_first * L /
/// band_depth), last = round(band_last * L / band_depth).
struct GateConfig {
  int64_t band_first = 8, band_last = 16, band_depth = 24;
  double bias_band = -1.0, bias_outside = 1.0;

  /// Inclusive layer range [first, last] of the band for a model of n_layers layers.
  std::pair<int64_t, int64_t> band(int64_t n_layers) const;
  /// Initial b_i of layer i of n_layers.
  double init_bias(int64_t layer, int64_t n_layers) const;
  /// Throws InputError naming `where` unless 0 <= band_first <= band_last < band_depth.
  void validate(const std::string& where) const;
};

/// {"rank", "alpha", "targets"} / {"band_first", "band_last", "band_depth", "bias_band", "bias_outside"}.
nlohmann::json to_json(const LoraConfig& c);
nlohmann::json to_json(const GateConfig& c);
/// Strict parsers (unknown keys are InputErrors naming `where`); absent keys keep defaults.
LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& where);
GateConfig gate_config_from_json(const nlohmann::json& j, const std::string& where);

/// Module that holds projection `target` inside a block: "self_attn" or "mlp".
/// Throws InputError for an unknown target name.
std::string target_parent(const std::string& target);

}  // namespace lol::layerroute
