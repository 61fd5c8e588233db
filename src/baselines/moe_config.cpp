#include "baselines/moe_config.h"

#include "util/error.h"
#include "util/json_fields.h"

namespace lol::baselines {

LayerAttention MoEConfig::layer_attention(int64_t i) const {
  LayerAttention a;
  if (!is_core_layer(i)) return a;
  a.kind = parse_attention_kind(core_attention, "moe config: field 'core_attention'");
  a.window = window;
  a.stride = stride;
  a.depth = i - n_prelude + 1;
  return a;
}

nn::BlockShape MoEConfig::layer_shape(int64_t i) const {
  if (!is_moe_layer(i)) return block_shape();
  nn::BlockShape s = block_shape(effective_expert_ffn());
  s.moe.n_experts = n_experts;
  s.moe.top_k = top_k;
  s.moe.router_noise_std = router_noise_std;
  return s;
}

void MoEConfig::validate(const std::string& w) const {
  using util::check_range;
  TransformerShape::validate(w);
  check_range(w, "n_prelude", n_prelude, 0, 4096);
  check_range(w, "core_depth", core_depth, 1, 4096);
  check_range(w, "n_coda", n_coda, 0, 4096);
  check_range(w, "n_experts", n_experts, 1, 4096);
  check_range(w, "top_k", top_k, 1, n_experts);
  check_range(w, "expert_ffn_hidden", expert_ffn_hidden, 0, int64_t(1) << 24);
  const AttentionKind k = parse_attention_kind(core_attention, w + ": field 'core_attention'");
  if (k != AttentionKind::Full) check_range(w, "window", window, 1, int64_t(1) << 24);
  if (k == AttentionKind::Strided) check_range(w, "stride", stride, 0, window - 1);
  check_range(w, "router_noise_std", router_noise_std, 0.0, 1e3);
  check_range(w, "balance_update_rate", balance_update_rate, 0.0, 1.0);
  util::check_parameter_estimate(
      w, "n_experts experts in every block, and the embeddings",
      double(n_prelude + core_depth + n_coda) * block_parameter_estimate(n_experts, expert_ffn_hidden > 0 ? expert_ffn_hidden : ffn_hidden) +
          2.0 * double(vocab_size) * double(d_model));
}

MoEConfig MoEConfig::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  MoEConfig c;
  f.get("architecture", std::string("moe"), {"moe"});
  c.read(f);
  f.get("n_prelude", c.n_prelude);
  f.get("core_depth", c.core_depth);
  f.get("n_coda", c.n_coda);
  f.get("n_experts", c.n_experts);
  f.get("top_k", c.top_k);
  f.get("expert_ffn_hidden", c.expert_ffn_hidden);
  f.get("core_attention", c.core_attention);
  f.get("window", c.window);
  f.get("stride", c.stride);
  f.get("router_noise_std", c.router_noise_std);
  f.get("balance_update_rate", c.balance_update_rate);
  f.get("moe_prelude_coda", c.moe_prelude_coda);
  f.reject_unknown();
  c.validate(w);
  return c;
}

nlohmann::json MoEConfig::to_json() const {
  nlohmann::json j = {{"architecture", "moe"}};
  write(j);
  j["n_prelude"] = n_prelude;
  j["core_depth"] = core_depth;
  j["n_coda"] = n_coda;
  j["n_experts"] = n_experts;
  j["top_k"] = top_k;
  j["expert_ffn_hidden"] = expert_ffn_hidden;
  j["core_attention"] = core_attention;
  j["window"] = window;
  j["stride"] = stride;
  j["router_noise_std"] = router_noise_std;
  j["balance_update_rate"] = balance_update_rate;
  j["moe_prelude_coda"] = moe_prelude_coda;
  return j;
}

}  // namespace lol::baselines
