#include "baselines/flops.h"

#include <algorithm>

#include "baselines/dense_config.h"
#include "baselines/looped_config.h"
#include "baselines/moe_config.h"
#include "lol/model.h"
#include "nn/block_cost.h"
#include "util/error.h"

namespace lol::baselines {

namespace {

/// Matmul weights one token multiplies with in a block of `s` (biases and norms excluded).
double block_matmul(const nn::BlockShape& s) { return double(nn::block_active_matmul_weights(s)); }

LayerCost layer(const std::string& name, double matmul, const LayerAttention& a, int64_t width, double apps = 1) {
  LayerCost l;
  l.name = name;
  l.matmul_params = matmul;
  l.attention = a;
  l.attn_width = width;
  l.applications = apps;
  return l;
}

/// Appends layers.0 .. layers.{n-1} of the block shapes shape_of(i) and attentions
/// attn_of(i) to m.layers; returns {every block parameter, the FFN weights a token leaves
/// idle} (the dense and MoE models' layer stacks; MoE layers count every expert).
template <class ShapeOf, class AttnOf>
std::pair<int64_t, int64_t> add_layer_stack(CostModel& m, int64_t n, int64_t width, ShapeOf shape_of, AttnOf attn_of) {
  int64_t blocks = 0, idle = 0;
  for (int64_t i = 0; i < n; ++i) {
    const nn::BlockShape s = shape_of(i);
    m.layers.push_back(layer("layers." + std::to_string(i), block_matmul(s), attn_of(i), width));
    blocks += nn::block_parameters(s);
    idle += nn::ffn_idle_weights(s);
  }
  return {blocks, idle};
}

}  // namespace

nlohmann::json FlopsReport::to_json() const {
  return {{"context", context},
          {"parameters", parameters},
          {"active_parameters_per_token", active_parameters},
          {"effective_parameters_per_token", effective_parameters},
          {"linear_flops_per_token", linear_flops},
          {"attention_flops_per_token", attention_flops},
          {"forward_flops_per_token", forward_flops},
          {"training_flops_per_token", train_flops},
          {"flops_per_parameter", flops_per_parameter}};
}

FlopsReport flops_report(const CostModel& m, int64_t context) {
  if (context < 1) throw InputError("context " + std::to_string(context) + ": expected >= 1");
  FlopsReport r;
  r.context = context;
  r.parameters = m.parameters;
  r.active_parameters = m.active_parameters;
  r.effective_parameters = m.effective_parameters;
  double linear = m.extra_matmul_params;
  for (const auto& l : m.layers) {
    linear += l.matmul_params * l.applications;
    r.attention_flops +=
        4.0 * double(l.attn_width) * allowed_pairs(context, l.attention) / double(context) * l.applications;
  }
  r.linear_flops = 2.0 * linear;
  r.forward_flops = r.linear_flops + r.attention_flops;
  r.train_flops = 3.0 * r.forward_flops;
  r.flops_per_parameter = r.parameters > 0 ? r.forward_flops / double(r.parameters) : 0.0;
  return r;
}

CostModel cost_model(const DenseConfig& c) {
  CostModel m;
  m.architecture = "dense";
  const auto [blocks, idle] = add_layer_stack(
      m, c.n_layers, c.n_heads * c.effective_head_dim(), [&](int64_t i) { return c.layer_block_shape(i); },
      [&](int64_t i) { return c.layer_attention(i); });
  m.extra_matmul_params = double(c.d_model) * double(c.vocab_size);
  const int64_t embed = c.vocab_size * c.d_model;
  // (+ GPT-2's position table and final LayerNorm bias)
  m.parameters = embed * (c.tie_word_embeddings ? 1 : 2) + blocks + c.d_model * (c.norm == "layernorm" ? 2 : 1) +
                 (c.learned_positions() ? c.max_seq_len * c.d_model : 0) + (c.lm_head_bias ? c.vocab_size : 0);
  m.active_parameters = m.parameters - idle;
  m.effective_parameters = m.active_parameters;
  return m;
}

CostModel cost_model(const LoopedConfig& c, int64_t R) {
  if (R < 0) throw InputError("recurrence " + std::to_string(R) + ": expected >= 0");
  CostModel m;
  m.architecture = "looped";
  const int64_t width = c.n_heads * c.effective_head_dim();
  const double per_block = block_matmul(c.block_shape());
  const double d = double(c.d_model);
  for (int64_t i = 0; i < c.n_prelude; ++i) m.layers.push_back(layer("prelude." + std::to_string(i), per_block, {}, width));
  for (int64_t j = 0; j < c.n_recur; ++j)
    m.layers.push_back(layer("core." + std::to_string(j), per_block, {}, width, double(R)));
  for (int64_t i = 0; i < c.n_coda; ++i) m.layers.push_back(layer("coda." + std::to_string(i), per_block, {}, width));
  m.extra_matmul_params = d * double(c.vocab_size) + double(R) * 2.0 * d * d;  // head + adapter per iteration
  const int64_t blk = nn::block_parameters(c.block_shape());
  const int64_t adapter = 2 * c.d_model * c.d_model;
  m.parameters = c.vocab_size * c.d_model * (c.tie_word_embeddings ? 1 : 2) + (c.n_prelude + c.n_recur + c.n_coda) * blk +
                 adapter + c.d_model;
  m.active_parameters = m.parameters;
  m.effective_parameters = m.parameters + (R - 1) * (c.n_recur * blk + adapter);
  return m;
}

CostModel cost_model(const MoEConfig& c) {
  CostModel m;
  m.architecture = "moe";
  const auto [blocks, idle] = add_layer_stack(
      m, c.n_layers(), c.n_heads * c.effective_head_dim(), [&](int64_t i) { return c.layer_shape(i); },
      [&](int64_t i) { return c.layer_attention(i); });
  m.extra_matmul_params = double(c.d_model) * double(c.vocab_size);
  m.parameters = c.vocab_size * c.d_model * (c.tie_word_embeddings ? 1 : 2) + blocks + c.d_model;
  m.active_parameters = m.parameters - idle;
  m.effective_parameters = m.active_parameters;
  return m;
}

CostModel cost_model(const LoLConfig& c, int64_t active_depth) {
  if (active_depth < 0 || active_depth > c.core_depth)
    throw InputError("active depth " + std::to_string(active_depth) + ": expected 0 <= depth <= core_depth = " +
                     std::to_string(c.core_depth));
  CostModel m;
  m.architecture = "lol";
  const nn::BlockShape core = block_shape(c), outer = prelude_coda_shape(c);
  const int64_t width = c.n_heads * c.head_dim();
  const double per_block = block_matmul(core);
  const double per_outer = block_matmul(outer);  // dense, or attention + gate + top-k experts
  for (int64_t i = 0; i < c.n_prelude; ++i) m.layers.push_back(layer("prelude." + std::to_string(i), per_outer, {}, width));
  for (int64_t l = 1; l <= active_depth; ++l) {
    LayerAttention a{AttentionKind::Strided, c.window, c.stride, l};
    m.layers.push_back(layer("core." + std::to_string(l - 1), per_block, a, width));
  }
  for (int64_t i = 0; i < c.n_coda; ++i) m.layers.push_back(layer("coda." + std::to_string(i), per_outer, {}, width));
  const double d = double(c.d_model);
  m.extra_matmul_params = d * double(c.vocab_size) + double(active_depth) * d * double(c.library_size) / double(c.window);
  const int64_t blk = nn::block_parameters(core);
  const int64_t outer_blk = nn::block_parameters(outer);
  const int64_t router = c.untied_router ? c.core_depth * c.d_model * c.library_size : c.d_model * c.library_size;
  const int64_t per_depth = 4 * c.d_model /* FiLM */ + c.d_model /* depth embedding */;
  m.parameters = c.vocab_size * c.d_model * (c.tie_embeddings ? 1 : 2) +
                 (c.n_prelude + c.n_coda) * outer_blk + c.library_size * blk + router + c.core_depth * per_depth +
                 c.d_model;
  const int64_t used_experts = std::min(c.library_size, active_depth);
  const int64_t unused_ffn = (c.n_prelude + c.n_coda) * nn::ffn_idle_weights(outer);
  m.active_parameters = m.parameters - (c.library_size - used_experts) * blk - unused_ffn;
  m.effective_parameters = m.parameters - c.library_size * blk + active_depth * blk - unused_ffn;
  return m;
}

CostModel cost_model_from_json(const nlohmann::json& j, const std::string& where) {
  const std::string arch = j.is_object() ? j.value("architecture", std::string("lol")) : "lol";
  nlohmann::json cfg = j;
  if (cfg.is_object()) cfg.erase("extra");
  if (arch == "lol") {
    const auto c = LoLConfig::from_json(cfg, where);
    return cost_model(c, c.core_depth);
  }
  if (arch == "dense") return cost_model(DenseConfig::from_json(cfg, where));
  if (arch == "looped") {
    const auto c = LoopedConfig::from_json(cfg, where);
    return cost_model(c, c.recurrence);
  }
  if (arch == "moe") return cost_model(MoEConfig::from_json(cfg, where));
  throw InputError(where + ": field 'architecture' = \"" + arch + "\": expected one of lol, dense, looped, moe");
}

}  // namespace lol::baselines
