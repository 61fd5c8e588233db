#include "baselines/shape.h"

#include "util/error.h"

namespace lol::baselines {

nn::BlockShape TransformerShape::block_shape(int64_t ffn) const {
  nn::BlockShape s;
  s.attn.d_model = d_model;
  s.attn.n_heads = n_heads;
  s.attn.n_kv_heads = n_kv_heads;
  s.attn.head_dim = effective_head_dim();
  s.attn.qkv_bias = qkv_bias;
  s.attn.qk_norm = qk_norm;
  s.attn.qk_norm_across_heads = qk_norm_across_heads;
  s.ffn_hidden = ffn > 0 ? ffn : ffn_hidden;
  s.norm_eps = norm_eps;
  return s;
}

void TransformerShape::read(util::JsonFields& f) {
  f.get("vocab_size", vocab_size);
  f.get("d_model", d_model);
  f.get("n_heads", n_heads);
  f.get("n_kv_heads", n_kv_heads);
  f.get("head_dim", head_dim);
  f.get("ffn_hidden", ffn_hidden);
  f.get("max_seq_len", max_seq_len);
  f.get("qkv_bias", qkv_bias);
  f.get("qk_norm", qk_norm);
  f.get("qk_norm_across_heads", qk_norm_across_heads);
  f.get("tie_word_embeddings", tie_word_embeddings);
  f.get("rope_theta", rope_theta);
  if (const auto* r = f.raw("rope_scaling"); r && !r->is_null())
    rope_scaling = nn::RopeScaling::from_json(*r, f.where(), "rope_scaling", max_seq_len, false);
  f.get("norm_eps", norm_eps);
}

void TransformerShape::write(nlohmann::json& j) const {
  j["vocab_size"] = vocab_size;
  j["d_model"] = d_model;
  j["n_heads"] = n_heads;
  j["n_kv_heads"] = n_kv_heads;
  j["head_dim"] = head_dim;
  j["ffn_hidden"] = ffn_hidden;
  j["max_seq_len"] = max_seq_len;
  j["qkv_bias"] = qkv_bias;
  if (qk_norm) j["qk_norm"] = true;
  if (qk_norm_across_heads) j["qk_norm_across_heads"] = true;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["rope_theta"] = rope_theta;
  if (!rope_scaling.is_default()) j["rope_scaling"] = rope_scaling.to_json(max_seq_len);
  j["norm_eps"] = norm_eps;
}

void TransformerShape::validate(const std::string& w) const {
  using util::check_range;
  check_range(w, "vocab_size", vocab_size, 1, int64_t(1) << 31);
  check_range(w, "d_model", d_model, 1, int64_t(1) << 20);
  check_range(w, "n_heads", n_heads, 1, int64_t(1) << 16);
  check_range(w, "n_kv_heads", n_kv_heads, 1, n_heads);
  require(n_heads % n_kv_heads == 0, w,
          "field 'n_kv_heads' = " + std::to_string(n_kv_heads) + ": must divide n_heads = " + std::to_string(n_heads));
  check_range(w, "head_dim", head_dim, 0, int64_t(1) << 16);
  if (head_dim == 0)
    require(d_model % n_heads == 0, w,
            "field 'n_heads' = " + std::to_string(n_heads) + ": must divide d_model = " + std::to_string(d_model) +
                " when head_dim = 0");
  require(effective_head_dim() % 2 == 0, w,
          "head dimension " + std::to_string(effective_head_dim()) + ": expected an even number (RoPE)");
  check_range(w, "ffn_hidden", ffn_hidden, 1, int64_t(1) << 24);
  check_range(w, "max_seq_len", max_seq_len, 1, int64_t(1) << 24);
  require(rope_theta >= 1 && rope_theta <= 1e30, w,
          "field 'rope_theta' = " + std::to_string(rope_theta) + ": expected a value in [1, 1e30]");
  require(norm_eps > 0 && norm_eps < 1, w, "field 'norm_eps' = " + std::to_string(norm_eps) + ": expected 0 < eps < 1");
  require(qk_norm || !qk_norm_across_heads, w,
          "field 'qk_norm_across_heads' = true: expected qk_norm = true (it sets how q_norm / k_norm normalize)");
  util::check_parameter_estimate(w, "one block", block_parameter_estimate(1, ffn_hidden));
}

}  // namespace lol::baselines
