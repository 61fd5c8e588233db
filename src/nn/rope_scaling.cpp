#include "nn/rope_scaling.h"

#include <cmath>
#include <set>
#include <sstream>

#include "util/error.h"

namespace lol::nn {

namespace {

std::string num(double v) {
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

/// get_mscale of transformers' YaRN: 0.1 m ln(s) + 1 for s > 1, else 1.
double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

}  // namespace

double RopeScaling::cos_sin_factor() const {
  if (type == "longrope") {  // transformers' _compute_longrope_parameters
    if (attention_factor) return *attention_factor;
    if (factor <= 1.0) return 1.0;
    return std::sqrt(1 + std::log(factor) / std::log(double(original_max_position_embeddings)));
  }
  if (type != "yarn") return 1.0;
  if (attention_factor) return *attention_factor;
  if (mscale != 0 && mscale_all_dim != 0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
  return yarn_mscale(factor, 1.0);
}

std::string RopeScaling::describe() const {
  if (is_default()) return "none";
  std::string s = type + " (factor " + num(factor);
  if (type == "llama3")
    s += ", low_freq_factor " + num(low_freq_factor) + ", high_freq_factor " + num(high_freq_factor) +
         ", original_max_position_embeddings " + std::to_string(original_max_position_embeddings);
  if (type == "yarn")
    s += ", original_max_position_embeddings " + std::to_string(original_max_position_embeddings) + ", beta_fast " +
         num(beta_fast) + ", beta_slow " + num(beta_slow) + ", attention factor " + num(cos_sin_factor()) +
         (truncate ? "" : ", truncate false");
  if (type == "dynamic") s += ", equal to plain RoPE up to " + std::to_string(max_positions) + " positions";
  if (type == "longrope")
    s += ", original_max_position_embeddings " + std::to_string(original_max_position_embeddings) +
         ", attention factor " + num(cos_sin_factor()) + ", " + std::to_string(short_factor.size()) +
         " short / long factors; long beyond " + std::to_string(original_max_position_embeddings) + " positions";
  return s + ")";
}

void RopeScaling::check_attention_factor(const std::string& where, const std::string& key) const {
  const double a = cos_sin_factor();
  if (!(a > 0) || !(a <= 1e6))  // beyond it q.k overflows float32
    throw InputError(where + ": field '" + key + "': the attention factor " + num(a) +
                     (attention_factor ? std::string(" (given)")
                                       : " (from factor " + num(factor) + ", original_max_position_embeddings " +
                                             std::to_string(original_max_position_embeddings) + ")") +
                     ": expected a number in (0, 1e6]");
}

void RopeScaling::check_rotary_dim(int64_t rotary_dim, const std::string& where, const std::string& key) const {
  if (type != "longrope") return;
  for (const auto* f : {&short_factor, &long_factor})
    if (int64_t(f->size()) != rotary_dim / 2)
      throw InputError(where + ": field '" + key + (f == &short_factor ? ".short_factor" : ".long_factor") + "' has " +
                       std::to_string(f->size()) + " values: expected rotary dimension / 2 = " +
                       std::to_string(rotary_dim / 2) + " (one per RoPE frequency)");
}

RopeScaling RopeScaling::from_json(const nlohmann::json& j, const std::string& where, const std::string& key,
                                   int64_t max_position_embeddings, bool theta_key_allowed) {
  auto field = [&](const std::string& k) { return where + ": field '" + key + (k.empty() ? "" : "." + k) + "'"; };
  if (!j.is_object())
    throw InputError(field("") + " = " + j.dump() + ": expected an object {\"rope_type\": ..., \"factor\": ...} or null");
  RopeScaling s;
  bool typed = false;
  for (const char* k : {"rope_type", "type"}) {
    if (!j.contains(k)) continue;
    if (!j[k].is_string()) throw InputError(field(k) + " = " + j[k].dump() + ": expected a string");
    if (typed && j[k].get<std::string>() != s.type)
      throw InputError(field(k) + " = " + j[k].dump() + " differs from rope_type \"" + s.type + "\": expected one type");
    s.type = j[k].get<std::string>();
    typed = true;
  }
  static const std::set<std::string> kTypes = {"default", "linear", "dynamic", "llama3", "yarn", "longrope"};
  if (!kTypes.count(s.type))
    throw InputError(field(j.contains("rope_type") ? "rope_type" : "type") + " = \"" + s.type +
                     "\": not supported (implemented: default, linear, dynamic, llama3, yarn, longrope; the function "
                     "of this RoPE type would not be computed)");
  // The keys transformers reads for each type (modeling_rope_utils.py, validation functions).
  std::set<std::string> used = {"rope_type", "type"};
  if (s.type != "default") used.insert("factor");
  if (s.type == "llama3") used.insert({"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
  if (s.type == "yarn")
    used.insert({"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
                 "mscale_all_dim", "truncate"});
  if (s.type == "dynamic") used.insert("original_max_position_embeddings");  // accepted and unused, as transformers
  if (s.type == "longrope")
    used.insert({"short_factor", "long_factor", "attention_factor", "original_max_position_embeddings"});
  auto number = [&](const std::string& k) -> std::optional<double> {
    if (!j.contains(k) || j[k].is_null()) return std::nullopt;
    if (!j[k].is_number() || !std::isfinite(j[k].get<double>()))
      throw InputError(field(k) + " = " + j[k].dump() + ": expected a finite number");
    return j[k].get<double>();
  };
  std::string used_list;  // for the error below
  for (const auto& u : used)
    if (u != "type") used_list += (used_list.empty() ? "" : ", ") + u;
  for (const auto& [k, v] : j.items()) {
    if (used.count(k)) continue;
    if (k == "rope_theta" && theta_key_allowed) continue;
    if (k == "partial_rotary_factor") {
      auto p = number(k);
      if (!p || *p == 1.0) continue;
      throw InputError(field(k) + " = " + v.dump() + ": not supported (RoPE is applied to every dimension of a head)");
    }
    throw InputError(field(k) + " = " + v.dump() + ": not used by RoPE type \"" + s.type + "\" (its fields: " +
                     used_list + ")");
  }
  if (s.is_default()) return s;

  s.original_max_position_embeddings = max_position_embeddings;
  // transformers fills an absent value with max_position_embeddings; a null one stays
  // null and fails in its arithmetic (TypeError).
  if (s.type != "dynamic" && j.contains("original_max_position_embeddings") &&
      j["original_max_position_embeddings"].is_null())
    throw InputError(field("original_max_position_embeddings") +
                     " = null: expected an integer in [1, 16777216] (or no field: max_position_embeddings)");
  if (auto o = number("original_max_position_embeddings"); o && s.type != "dynamic") {
    if (*o != std::floor(*o) || *o < 1 || *o > double(int64_t(1) << 24))
      throw InputError(field("original_max_position_embeddings") + " = " + j["original_max_position_embeddings"].dump() +
                       ": expected an integer in [1, 16777216]");
    s.original_max_position_embeddings = int64_t(*o);
  }
  if (s.type == "longrope") {
    for (auto [k, list] : {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
      if (!j.contains(k) || !j[k].is_array() || j[k].empty())
        throw InputError(field(k) + (j.contains(k) ? " = " + j[k].dump() : std::string(" is missing")) +
                         ": expected a list of numbers in [1e-6, 1e6], one per RoPE frequency (rotary dimension / 2)");
      for (size_t i = 0; i < j[k].size(); ++i) {
        const auto& v = j[k][i];
        // Outside [1e-6, 1e6] the frequencies overflow float32 or vanish (real lists: 1 to ~100).
        if (!v.is_number() || !(v.get<double>() >= 1e-6 && v.get<double>() <= 1e6))
          throw InputError(field(std::string(k) + "[" + std::to_string(i) + "]") + " = " + v.dump() +
                           ": expected a number in [1e-6, 1e6]");
        list->push_back(v.get<double>());
      }
    }
    if (auto a = number("attention_factor")) {
      if (!(*a > 0)) throw InputError(field("attention_factor") + " = " + num(*a) + ": expected a number > 0");
      s.attention_factor = *a;
    }
    // Absent factor: Phi-3's rule, max_position_embeddings / original (hf_config applies
    // it to every Phi-3 folder, as transformers does).
    auto f = number("factor");
    if (f && (!(*f > 0) || *f > 1e6))
      throw InputError(field("factor") + " = " + j["factor"].dump() + ": expected a number in (0, 1e6]");
    s.factor = f ? *f : double(max_position_embeddings) / double(s.original_max_position_embeddings);
    s.check_attention_factor(where, key);
    return s;
  }
  if (!j.contains("factor"))
    throw InputError(field("factor") + " is missing (expected the scaling factor of RoPE type \"" + s.type + "\")");
  auto f = number("factor");
  if (!f && s.type == "yarn") f = double(max_position_embeddings) / double(s.original_max_position_embeddings);
  if (!f || !(*f > 0) || *f > 1e6)
    throw InputError(field("factor") + " = " + j["factor"].dump() + ": expected a number in (0, 1e6]");
  s.factor = *f;
  if (s.type == "dynamic") {
    s.original_max_position_embeddings = 0;
    s.max_positions = max_position_embeddings;
  }
  if (s.type == "llama3") {
    for (const char* k : {"low_freq_factor", "high_freq_factor"})
      if (!number(k)) throw InputError(field(k) + " is missing (expected a number > 0; Llama 3.1 uses 1 and 4)");
    s.low_freq_factor = *number("low_freq_factor");
    s.high_freq_factor = *number("high_freq_factor");
    if (!(s.low_freq_factor > 0))
      throw InputError(field("low_freq_factor") + " = " + num(s.low_freq_factor) + ": expected a number > 0");
    if (!(s.high_freq_factor > s.low_freq_factor))
      throw InputError(field("high_freq_factor") + " = " + num(s.high_freq_factor) +
                       ": expected a number > low_freq_factor = " + num(s.low_freq_factor));
  }
  if (s.type == "yarn") {
    // transformers: `get("beta_fast") or 32`: absent, null or 0 take the default.
    if (auto b = number("beta_fast"); b && *b != 0) s.beta_fast = *b;
    if (auto b = number("beta_slow"); b && *b != 0) s.beta_slow = *b;
    if (!(s.beta_fast > 0) || !(s.beta_slow > 0))
      throw InputError(field("beta_fast") + " = " + num(s.beta_fast) + ", beta_slow = " + num(s.beta_slow) +
                       ": expected numbers > 0");
    if (auto a = number("attention_factor")) {
      if (!(*a > 0)) throw InputError(field("attention_factor") + " = " + num(*a) + ": expected a number > 0");
      s.attention_factor = *a;
    }
    if (auto m = number("mscale")) s.mscale = *m;
    if (auto m = number("mscale_all_dim")) s.mscale_all_dim = *m;
    // transformers: `get("truncate", True)`: absent is true, null (None) is false.
    if (j.contains("truncate")) {
      if (!j["truncate"].is_boolean() && !j["truncate"].is_null())
        throw InputError(field("truncate") + " = " + j["truncate"].dump() + ": expected true, false or null");
      s.truncate = j["truncate"].is_boolean() && j["truncate"].get<bool>();
    }
    if (!(s.cos_sin_factor() > 0) || !std::isfinite(s.cos_sin_factor()))
      throw InputError(field("mscale") + " = " + num(s.mscale) + ", mscale_all_dim = " + num(s.mscale_all_dim) +
                       ": the attention factor " + num(s.cos_sin_factor()) + " is not a number > 0");
  }
  return s;
}

nlohmann::ordered_json RopeScaling::to_json(int64_t max_position_embeddings) const {
  nlohmann::ordered_json j;
  j["rope_type"] = type;
  if (is_default()) return j;
  j["factor"] = factor;
  if (type == "llama3") {
    j["low_freq_factor"] = low_freq_factor;
    j["high_freq_factor"] = high_freq_factor;
    j["original_max_position_embeddings"] = original_max_position_embeddings;
  }
  if (type == "yarn") {
    if (original_max_position_embeddings != max_position_embeddings)
      j["original_max_position_embeddings"] = original_max_position_embeddings;
    j["beta_fast"] = beta_fast;
    j["beta_slow"] = beta_slow;
    if (attention_factor) j["attention_factor"] = *attention_factor;
    if (mscale != 0) j["mscale"] = mscale;
    if (mscale_all_dim != 0) j["mscale_all_dim"] = mscale_all_dim;
    if (!truncate) j["truncate"] = false;
  }
  if (type == "longrope") {
    j["original_max_position_embeddings"] = original_max_position_embeddings;
    j["short_factor"] = short_factor;
    j["long_factor"] = long_factor;
    if (attention_factor) j["attention_factor"] = *attention_factor;
  }
  return j;
}

bool RopeScaling::operator==(const RopeScaling& o) const {
  return type == o.type && factor == o.factor && original_max_position_embeddings == o.original_max_position_embeddings &&
         low_freq_factor == o.low_freq_factor && high_freq_factor == o.high_freq_factor && beta_fast == o.beta_fast &&
         beta_slow == o.beta_slow && attention_factor == o.attention_factor && mscale == o.mscale &&
         mscale_all_dim == o.mscale_all_dim && truncate == o.truncate && max_positions == o.max_positions &&
         short_factor == o.short_factor && long_factor == o.long_factor;
}

}  // namespace lol::nn
