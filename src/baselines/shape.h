// Transformer fields shared by every baseline configuration (dense, looped, MoE):
// the Llama/Qwen2 block shape, embeddings and RoPE. Each model config inherits it
// and adds its own fields; parsing and validation of these fields live here once.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/block.h"
#include "nn/rope_scaling.h"
#include "util/json_fields.h"
#include "util/size_limits.h"

namespace lol::baselines {

struct TransformerShape {
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;  ///< 0 = d_model / n_heads
  int64_t ffn_hidden = 0;
  int64_t max_seq_len = 2048;
  bool qkv_bias = false;             ///< q/k/v projection biases (Qwen2)
  bool qk_norm = false;              ///< per-head RMSNorm of q and k before RoPE (Qwen3; nn::AttentionShape)
  /// With qk_norm: one RMSNorm over all heads of q and of k instead (OLMo 2/3;
  /// nn::AttentionShape::qk_norm_across_heads). Written only when true.
  bool qk_norm_across_heads = false;
  bool tie_word_embeddings = false;  ///< LM head shares the token embedding
  double rope_theta = 10000;
  /// RoPE frequency scaling of a loaded Hugging Face model (config key "rope_scaling",
  /// written only when not default; nn/rope_scaling.h).
  nn::RopeScaling rope_scaling;
  double norm_eps = 1e-6;

  /// Parameters of one block with `experts` MLPs of width `ffn`, in floating point
  /// (util::block_parameter_estimate), for the size checks of the configurations.
  double block_parameter_estimate(int64_t experts, int64_t ffn) const {
    const double hd = double(effective_head_dim());
    return util::block_parameter_estimate(double(d_model), double(n_heads) * hd, double(n_kv_heads) * hd,
                                          double(experts), double(ffn));
  }
  /// head_dim, or d_model / n_heads when head_dim = 0.
  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : (n_heads > 0 ? d_model / n_heads : 0); }
  /// The nn::Block shape of one layer with `ffn` hidden units (0 = ffn_hidden).
  nn::BlockShape block_shape(int64_t ffn = 0) const;

  /// Reads the shape fields present in `f` (marking them as known). "rope_scaling" is
  /// read after max_seq_len, its default original / dynamic length.
  void read(util::JsonFields& f);
  /// Writes every shape field into `j` (rope_scaling, qk_norm and qk_norm_across_heads only
  /// when not default).
  void write(nlohmann::json& j) const;
  /// Throws InputError("<where>: field '<name>' = v: expected ...") for invalid values:
  /// sizes >= 1, n_kv_heads divides n_heads, an even head dimension (RoPE), head_dim = 0
  /// only when n_heads divides d_model, rope_theta > 0, 0 < norm_eps < 1,
  /// qk_norm_across_heads only with qk_norm.
  void validate(const std::string& where) const;
};

}  // namespace lol::baselines
