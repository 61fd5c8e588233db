// Configuration of the dense decoder-only baseline (paper 4.2, Appendix B.2): a
// Llama/Qwen2 stack of n_layers pre-norm blocks with full causal, sliding-window or
// strided-window attention (the paper's "vanilla", "sliding window" and "strided"
// dense baselines, Appendix C.5).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/attention_layout.h"
#include "baselines/shape.h"

namespace lol::baselines {

/// config.json of a dense model ("architecture": "dense"). Fields of TransformerShape
/// plus the layer count and the attention pattern.
struct DenseConfig : TransformerShape {
  int64_t n_layers = 0;
  std::string attention = "full";  ///< "full" | "sliding" | "strided"
  int64_t window = 0;              ///< W: sliding window / strided window length (tokens)
  int64_t stride = 0;              ///< S: strided window shift between consecutive strided layers
  /// With "sliding" or "strided": the first n_full_prelude and the last n_full_coda
  /// layers use full attention instead (LoL's prelude/coda layout); strided depth l = 1
  /// is the first layer after them.
  int64_t n_full_prelude = 0, n_full_coda = 0;

  /// Attention pattern of layer i (0-based).
  LayerAttention layer_attention(int64_t layer) const;

  /// Strict parse: unknown keys and invalid values are InputErrors naming `where`, the
  /// field and the allowed range. The "architecture" key is allowed (must be "dense").
  static DenseConfig from_json(const nlohmann::json& j, const std::string& where);
  /// Every field, with "architecture": "dense".
  nlohmann::json to_json() const;
  /// Throws InputError for invalid values (see from_json).
  void validate(const std::string& where) const;
};

}  // namespace lol::baselines
