// RoPE frequency scaling of pretrained Llama / Qwen2 checkpoints: the `rope_scaling`
// object of a Hugging Face config.json (transformers 4.x) or `rope_parameters`
// (transformers 5.x), with transformers' semantics (modeling_rope_utils.py). LibTorch-free;
// the frequencies themselves are computed by nn::rope_frequencies (nn/rope.h).
//
// Types (all static: the frequencies depend only on the position, except "dynamic"):
//   default  inv_freq_j = theta^(-2j/head_dim)
//   linear   inv_freq / factor (position interpolation)
//   llama3   Llama 3.1: frequencies whose wavelength exceeds original / low_freq_factor are
//            divided by factor, those below original / high_freq_factor are kept, the band
//            between is interpolated smoothly
//   yarn     YaRN (Peng et al. 2023): a ramp between interpolated and original frequencies
//            over the dimensions set by beta_fast / beta_slow, and cos/sin multiplied by
//            the attention factor (0.1 ln(factor) + 1 unless given)
//   dynamic  dynamic NTK: equal to default for sequences within max_position_embeddings;
//            beyond it transformers recomputes the base from the sequence length, which
//            is not implemented (positions there are refused)
//   longrope LongRoPE (Ding et al. 2024; Phi-3-128k, Phi-3.5, Phi-4-mini): inv_freq_j divided
//            by short_factor[j], or by long_factor[j] when the forward call's sequence
//            (its largest position + 1) exceeds original_max_position_embeddings; cos and
//            sin times sqrt(1 + ln(factor) / ln(original)) (or attention_factor)
// Other types are refused by from_json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::nn {

struct RopeScaling {
  std::string type = "default";  ///< "default" | "linear" | "llama3" | "yarn" | "dynamic" | "longrope"
  /// Context extension factor (every type but default). longrope: absent (nullopt in
  /// from_json) only with attention_factor given; Phi-3 folders set it to
  /// max_position_embeddings / original_max_position_embeddings (hf_config).
  double factor = 1.0;
  /// Context length of pretraining (llama3, yarn, longrope); from_json defaults it to
  /// max_position_embeddings, as transformers 5 does.
  int64_t original_max_position_embeddings = 0;
  double low_freq_factor = 1.0;   ///< llama3
  double high_freq_factor = 4.0;  ///< llama3 (> low_freq_factor)
  double beta_fast = 32.0;        ///< yarn: rotations where extrapolation ends
  double beta_slow = 1.0;         ///< yarn: rotations where interpolation begins
  std::optional<double> attention_factor;  ///< yarn, longrope: cos/sin multiplier; absent = from factor (and mscale)
  double mscale = 0.0;          ///< yarn (DeepSeek-style): with mscale_all_dim, the attention factor is
  double mscale_all_dim = 0.0;  ///< (0.1 mscale ln f + 1) / (0.1 mscale_all_dim ln f + 1); 0 = absent
  bool truncate = true;         ///< yarn: correction range rounded to whole dimensions
  /// dynamic: the largest sequence length computed as default RoPE (max_position_embeddings).
  int64_t max_positions = 0;
  /// longrope: per-frequency divisors of inv_freq [rotary_dim / 2], for sequences up to
  /// original_max_position_embeddings (short) and beyond it (long).
  std::vector<double> short_factor, long_factor;

  bool is_default() const { return type == "default"; }
  /// The multiplier of cos and sin: yarn's and longrope's attention factor, 1 for the
  /// other types.
  double cos_sin_factor() const;
  /// longrope: whether a forward call whose sequence is `seq_len` positions long (its
  /// largest position + 1; transformers' longrope_frequency_update) uses long_factor.
  /// False for every other type.
  bool uses_long_factors(int64_t seq_len) const {
    return type == "longrope" && seq_len > original_max_position_embeddings;
  }
  /// Throws InputError naming `where` and the field when longrope's factor lists do not
  /// hold rotary_dim / 2 values (transformers' Phi3Config validation). No-op otherwise.
  void check_rotary_dim(int64_t rotary_dim, const std::string& where, const std::string& key) const;
  /// Throws InputError naming `where` and `key` when the cos/sin multiplier is not a
  /// finite number > 0 (longrope with original_max_position_embeddings 1 and factor > 1:
  /// ln(1) = 0 divides, a ZeroDivisionError in transformers; yarn's mscales).
  void check_attention_factor(const std::string& where, const std::string& key) const;
  /// Positions beyond which this scaling is refused (0: none): max_positions for dynamic.
  int64_t position_limit() const { return type == "dynamic" ? max_positions : 0; }
  /// One line for `hf info`: "llama3 (factor 8, low_freq_factor 1, ...)" or "none".
  std::string describe() const;

  /// Parses a transformers RoPE object ({"rope_type": "llama3", "factor": 8.0, ...}; the
  /// older key "type" is read too). `where` names the file and `key` the field in errors;
  /// `max_position_embeddings` is the default of original_max_position_embeddings and
  /// the dynamic limit. A "rope_theta" key is left to the caller (`theta_key_allowed`,
  /// else refused). Throws InputError naming `key`.<field> for an unsupported type,
  /// a missing required field (factor; llama3 low/high_freq_factor; longrope
  /// short_factor / long_factor, and factor unless attention_factor is given), a
  /// key the type does not use, a non-numeric or out-of-range value (factor > 0,
  /// high_freq_factor > low_freq_factor, original_max_position_embeddings >= 1,
  /// partial_rotary_factor other than 1).
  static RopeScaling from_json(const nlohmann::json& j, const std::string& where, const std::string& key,
                               int64_t max_position_embeddings, bool theta_key_allowed);
  /// The object in transformers' layout ({"rope_type": ..., ...}); yarn's
  /// original_max_position_embeddings only when it differs from `max_position_embeddings`
  /// (some transformers 4.x releases replace factor by the ratio when it is present).
  nlohmann::ordered_json to_json(int64_t max_position_embeddings) const;

  bool operator==(const RopeScaling& o) const;
  bool operator!=(const RopeScaling& o) const { return !(*this == o); }
};

}  // namespace lol::nn
