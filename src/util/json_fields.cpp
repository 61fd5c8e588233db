#include "util/json_fields.h"

#include <cmath>
#include <cstdint>
#include <sstream>

namespace lol::util {

JsonFields::JsonFields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
  if (!j_.is_object()) throw InputError(where_ + ": expected a JSON object");
}

static std::string field(const std::string& key) { return "field '" + key + "'"; }

void JsonFields::get(const std::string& key, int64_t& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
    // get<int64_t> would wrap 2^64 - 1 to -1, and messages would show the wrapped value.
    throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected an integer <= 2^63 - 1");
  } else if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e15) {
    out = int64_t(v.get<double>());
  } else {
    throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected an integer");
  }
}

void JsonFields::get(const std::string& key, int& out) {
  int64_t v = out;
  get(key, v);
  if (v < INT32_MIN || v > INT32_MAX) throw InputError(where_ + ": " + field(key) + " out of 32-bit range");
  out = int(v);
}

void JsonFields::get(const std::string& key, double& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  if (!v.is_number()) throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected a number");
  out = v.get<double>();
  if (!std::isfinite(out)) throw InputError(where_ + ": " + field(key) + ": expected a finite number");
}

void JsonFields::get(const std::string& key, bool& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  if (!v.is_boolean()) throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected true or false");
  out = v.get<bool>();
}

void JsonFields::get(const std::string& key, std::string& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  if (!v.is_string()) throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected a string");
  out = v.get<std::string>();
}

void JsonFields::get(const std::string& key, std::vector<std::string>& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  std::vector<std::string> r;
  if (v.is_string()) {
    r.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_string()) throw InputError(where_ + ": " + field(key) + ": expected a list of strings");
      r.push_back(e.get<std::string>());
    }
  } else {
    throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected a list of strings");
  }
  out = r;
}

void JsonFields::get(const std::string& key, std::vector<int64_t>& out) {
  seen_.insert(key);
  if (!j_.contains(key)) return;
  const auto& v = j_[key];
  if (!v.is_array()) throw InputError(where_ + ": " + field(key) + " = " + v.dump() + ": expected a list of integers");
  std::vector<int64_t> r;
  for (const auto& e : v) {
    if (!e.is_number_integer()) throw InputError(where_ + ": " + field(key) + ": expected a list of integers");
    r.push_back(e.get<int64_t>());
  }
  out = r;
}

std::string JsonFields::get(const std::string& key, const std::string& def, const std::vector<std::string>& allowed) {
  std::string v = def;
  get(key, v);
  for (const auto& a : allowed)
    if (a == v) return v;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw InputError(where_ + ": " + field(key) + " = \"" + v + "\": expected one of " + list);
}

const nlohmann::json* JsonFields::raw(const std::string& key) {
  seen_.insert(key);
  return j_.contains(key) ? &j_[key] : nullptr;
}

void JsonFields::reject_unknown() const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(where_ + ": unknown field '" + it.key() + "'" +
                       (known.empty() ? std::string() : " (known fields: " + known + ")"));
    }
}

std::string json_difference(const nlohmann::json& there, const nlohmann::json& here, const std::string& there_label,
                            const std::string& here_label) {
  std::string diff;
  nlohmann::json keys = there.is_object() ? there : nlohmann::json::object();
  if (here.is_object()) keys.update(here);
  const auto empty = nlohmann::json::object();
  const auto& a_obj = there.is_object() ? there : empty;
  const auto& b_obj = here.is_object() ? here : empty;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const auto a = a_obj.find(it.key());
    const auto b = b_obj.find(it.key());
    const std::string va = a != a_obj.end() ? a->dump() : "absent", vb = b != b_obj.end() ? b->dump() : "absent";
    if (va != vb) diff += (diff.empty() ? "" : "; ") + it.key() + " = " + va + " " + there_label + ", " + vb + " " + here_label;
  }
  return diff;
}

void check_range(const std::string& where, const std::string& key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw InputError(where + ": field '" + key + "' = " + std::to_string(v) + ": expected " + std::to_string(lo) +
                     " <= value <= " + std::to_string(hi));
}

void check_range(const std::string& where, const std::string& key, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi)) {
    std::ostringstream s;
    s << where << ": field '" << key << "' = " << v << ": expected " << lo << " <= value <= " << hi;
    throw InputError(s.str());
  }
}

std::string string_at(const nlohmann::json& j, const char* key, const std::string& where) {
  require(j.is_object() && j.contains(key) && j[key].is_string(), where + "." + key, "expected a string");
  return j[key].get<std::string>();
}

std::string type_at(const nlohmann::json& j, const std::string& where) {
  require(j.is_object() && j.contains("type") && j["type"].is_string(), where,
          "expected an object with a string field \"type\"");
  return j["type"].get<std::string>();
}

}  // namespace lol::util
