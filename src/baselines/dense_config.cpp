#include "baselines/dense_config.h"

#include "util/error.h"
#include "util/json_fields.h"

namespace lol::baselines {

LayerAttention DenseConfig::layer_attention(int64_t i) const {
  LayerAttention a;
  const AttentionKind kind = parse_attention_kind(attention, "dense config: field 'attention'");
  if (kind == AttentionKind::Full || i < n_full_prelude || i >= n_layers - n_full_coda) return a;
  a.kind = kind;
  a.window = window;
  a.stride = stride;
  a.depth = i - n_full_prelude + 1;
  return a;
}

void DenseConfig::validate(const std::string& w) const {
  using util::check_range;
  TransformerShape::validate(w);
  check_range(w, "n_layers", n_layers, 1, 4096);
  const AttentionKind kind = parse_attention_kind(attention, w + ": field 'attention'");
  if (kind != AttentionKind::Full) {
    check_range(w, "window", window, 1, int64_t(1) << 24);
    check_range(w, "n_full_prelude", n_full_prelude, 0, n_layers);
    check_range(w, "n_full_coda", n_full_coda, 0, n_layers - n_full_prelude);
  } else {
    require(n_full_prelude == 0 && n_full_coda == 0, w,
            "fields 'n_full_prelude'/'n_full_coda' apply to sliding or strided attention only: expected 0 with "
            "attention = \"full\"");
  }
  if (kind == AttentionKind::Strided) check_range(w, "stride", stride, 0, window - 1);
  util::check_parameter_estimate(w, "n_layers blocks and the embeddings",
                                 double(n_layers) * block_parameter_estimate(1, ffn_hidden) +
                                     2.0 * double(vocab_size) * double(d_model));
}

DenseConfig DenseConfig::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  DenseConfig c;
  f.get("architecture", std::string("dense"), {"dense"});
  c.read(f);
  f.get("n_layers", c.n_layers);
  f.get("attention", c.attention);
  f.get("window", c.window);
  f.get("stride", c.stride);
  f.get("n_full_prelude", c.n_full_prelude);
  f.get("n_full_coda", c.n_full_coda);
  f.reject_unknown();
  c.validate(w);
  return c;
}

nlohmann::json DenseConfig::to_json() const {
  nlohmann::json j = {{"architecture", "dense"}};
  write(j);
  j["n_layers"] = n_layers;
  j["attention"] = attention;
  j["window"] = window;
  j["stride"] = stride;
  j["n_full_prelude"] = n_full_prelude;
  j["n_full_coda"] = n_full_coda;
  return j;
}

}  // namespace lol::baselines
