#include "layerroute/cost.h"

#include "baselines/attention_layout.h"
#include "baselines/flops.h"
#include "util/error.h"

namespace lol::layerroute {

GenerationCost generation_cost(const baselines::DenseConfig& c, int64_t P, int64_t N, const std::vector<uint8_t>& open,
                               bool gates_evaluated) {
  require(P >= 1 && N >= 1, "layerroute generation cost", "prompt_len and new_tokens must be >= 1");
  require(int64_t(open.size()) == c.n_layers, "layerroute generation cost",
          "open has " + std::to_string(open.size()) + " entries, expected n_layers = " + std::to_string(c.n_layers));
  const auto cm = baselines::cost_model(c);
  const double tokens = double(P + N - 1);
  GenerationCost g;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (!open[size_t(i)]) continue;
    const auto& l = cm.layers[size_t(i)];
    // (query, key) pairs over the P + N - 1 positions run (prefill, then decoding steps 1
    // .. N - 1): the causal triangle, or each query's W keys in a sliding layer.
    const double pairs = baselines::allowed_pairs(P + N - 1, c.layer_attention(i));
    g.layer_flops += 2.0 * l.matmul_params * tokens + 4.0 * double(l.attn_width) * pairs;
  }
  g.fixed_flops = 2.0 * cm.extra_matmul_params * double(N);
  if (gates_evaluated) g.fixed_flops += 2.0 * double(c.d_model) * double(c.n_layers);
  return g;
}

}  // namespace lol::layerroute
