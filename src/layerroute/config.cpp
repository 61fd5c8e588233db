#include "layerroute/config.h"

#include <cmath>
#include <set>

#include "util/error.h"
#include "util/json_fields.h"

namespace lol::layerroute {

std::string target_parent(const std::string& t) {
  if (t == "q_proj" || t == "k_proj" || t == "v_proj" || t == "o_proj") return "self_attn";
  if (t == "gate_proj" || t == "up_proj" || t == "down_proj") return "mlp";
  throw InputError("LoRA target '" + t + "': expected one of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj");
}

void LoraConfig::validate(const std::string& where) const {
  util::check_range(where, "rank", rank, int64_t(1), int64_t(4096));
  if (!(alpha > 0) || !std::isfinite(alpha)) throw InputError(where + ": field 'alpha' must be a positive number");
  require(!targets.empty(), where, "field 'targets' must name at least one projection");
  std::set<std::string> seen;
  for (const auto& t : targets) {
    try {
      target_parent(t);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    require(seen.insert(t).second, where, "LoRA target '" + t + "' is listed twice");
  }
}

std::pair<int64_t, int64_t> GateConfig::band(int64_t n_layers) const {
  auto scale = [&](int64_t v) { return int64_t(std::lround(double(v) * double(n_layers) / double(band_depth))); };
  int64_t first = std::min(scale(band_first), n_layers - 1), last = std::min(scale(band_last), n_layers - 1);
  return {first, std::max(first, last)};
}

double GateConfig::init_bias(int64_t layer, int64_t n_layers) const {
  auto [first, last] = band(n_layers);
  return (layer >= first && layer <= last) ? bias_band : bias_outside;
}

void GateConfig::validate(const std::string& where) const {
  util::check_range(where, "band_depth", band_depth, int64_t(1), int64_t(100000));
  util::check_range(where, "band_first", band_first, int64_t(0), band_depth - 1);
  util::check_range(where, "band_last", band_last, band_first, band_depth - 1);
  require(std::fabs(bias_band) <= 1e4 && std::fabs(bias_outside) <= 1e4, where,
          "gate biases (bias_band, bias_outside) must be finite numbers in [-1e4, 1e4]");
}

nlohmann::json to_json(const LoraConfig& c) { return {{"rank", c.rank}, {"alpha", c.alpha}, {"targets", c.targets}}; }
nlohmann::json to_json(const GateConfig& c) {
  return {{"band_first", c.band_first}, {"band_last", c.band_last}, {"band_depth", c.band_depth},
          {"bias_band", c.bias_band}, {"bias_outside", c.bias_outside}};
}

LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& where) {
  LoraConfig c;
  util::JsonFields f(j, where);
  f.get("rank", c.rank);
  f.get("alpha", c.alpha);
  f.get("targets", c.targets);
  f.reject_unknown();
  c.validate(where);
  return c;
}

GateConfig gate_config_from_json(const nlohmann::json& j, const std::string& where) {
  GateConfig c;
  util::JsonFields f(j, where);
  f.get("band_first", c.band_first);
  f.get("band_last", c.band_last);
  f.get("band_depth", c.band_depth);
  f.get("bias_band", c.bias_band);
  f.get("bias_outside", c.bias_outside);
  f.reject_unknown();
  c.validate(where);
  return c;
}

}  // namespace lol::layerroute
