// LoL model configuration (config.json of a checkpoint). Field names follow the
// paper's terms: library_size L, core_depth D, window W, stride S (section 3).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace lol {

struct LoLConfig {
  int64_t vocab_size = 256;
  int64_t d_model = 256;
  int64_t n_heads = 8;
  int64_t n_kv_heads = 8;
  int64_t ffn_hidden = 688;
  int64_t n_prelude = 2;      ///< full-attention blocks before the routed core
  int64_t n_coda = 2;         ///< full-attention blocks after the routed core
  int64_t library_size = 8;   ///< L: experts in the shared library
  int64_t core_depth = 8;     ///< D: routed depths (block applications)
  int64_t window = 64;        ///< W: tokens per window
  int64_t stride = 32;        ///< S: window shift between successive depths
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  bool untied_router = false;        ///< one router per depth instead of one shared
  double router_noise_std = 0.1;     ///< Gaussian noise on router logits in training (paper 3.2.2; the paper gives no std, 0.1 as every preset)
  double balance_update_rate = 1e-3; ///< u in b_m += u * sign(mean_load - load_m)
  int64_t max_seq_len = 1024;
  /// MoE prelude and coda (paper 4.3.2, the 3:2 comparison with a sparse MoE): with
  /// prelude_coda_experts = E > 0 every prelude and coda block's FFN is E SwiGLU experts
  /// of prelude_coda_expert_ffn hidden units (0 = ffn_hidden) with top-k token routing and
  /// loss-free balancing (nn/sparse_moe.h; router_noise_std and balance_update_rate as the
  /// core's). Written to config.json only when E > 0.
  int64_t prelude_coda_experts = 0;
  int64_t prelude_coda_top_k = 2;
  int64_t prelude_coda_expert_ffn = 0;

  int64_t head_dim() const { return d_model / n_heads; }
  bool moe_prelude_coda() const { return prelude_coda_experts > 0; }

  /// Throws InputError("<where>: field '<name>' = <v>: expected ...") on any invalid value.
  void validate(const std::string& where) const;
  nlohmann::json to_json() const;
  /// Parses and validates; unknown keys are rejected (the "architecture" key is allowed).
  static LoLConfig from_json(const nlohmann::json& j, const std::string& where);
  static LoLConfig load(const std::string& path);
};

}  // namespace lol
