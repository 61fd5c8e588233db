// Typed, validated reading of JSON objects (configs, file headers): every read
// field is recorded so that unknown keys can be rejected with a message naming
// the file and the key; type errors name the field and the expected type.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace lol::util {

class JsonFields {
 public:
  /// Throws InputError if `j` is not an object. `where` names the file (or file:section).
  JsonFields(const nlohmann::json& j, std::string where);

  bool has(const std::string& key) const { return j_.contains(key); }
  /// Sets `out` from j[key] when present (type-checked); leaves it unchanged otherwise.
  void get(const std::string& key, int64_t& out);
  void get(const std::string& key, int& out);
  void get(const std::string& key, double& out);
  void get(const std::string& key, bool& out);
  void get(const std::string& key, std::string& out);
  void get(const std::string& key, std::vector<std::string>& out);
  void get(const std::string& key, std::vector<int64_t>& out);
  /// String field restricted to `allowed`; returns it (or `def` when absent).
  std::string get(const std::string& key, const std::string& def, const std::vector<std::string>& allowed);
  /// Raw sub-object access (marks the key as known).
  const nlohmann::json* raw(const std::string& key);
  /// Marks a key as known without reading it.
  void allow(const std::string& key) { seen_.insert(key); }
  /// Throws InputError naming the first key that was never read.
  void reject_unknown() const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

/// j[key] when it is a string; else throws InputError("<where>.<key>: expected a string").
std::string string_at(const nlohmann::json& j, const char* key, const std::string& where);
/// The "type" of a component object {"type": str, ...} (tokenizer.json's normalizers,
/// pre-tokenizers, decoders); else throws InputError("<where>: expected an object with a
/// string field "type"").
std::string type_at(const nlohmann::json& j, const std::string& where);

/// Throws InputError("<where>: field '<key>' = v: expected lo <= value <= hi").
void check_range(const std::string& where, const std::string& key, int64_t v, int64_t lo, int64_t hi);
void check_range(const std::string& where, const std::string& key, double v, double lo, double hi);

/// "key = A there, B here; ..." for every top-level field where `there` (e.g. what a
/// checkpoint was saved with) and `here` (this run's) differ ("absent" for a missing
/// field); "" when they agree. Non-objects compare as empty objects. `there_label` /
/// `here_label` replace "there" / "here" (e.g. "on rank 0", "on rank 1").
std::string json_difference(const nlohmann::json& there, const nlohmann::json& here,
                            const std::string& there_label = "there", const std::string& here_label = "here");

}  // namespace lol::util
