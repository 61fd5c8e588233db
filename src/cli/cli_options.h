// Option groups and argument parsers shared by several sub-commands (generation
// options of `lol generate` and `lol hf generate`, token-id lists). Header-only.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "inference/sampling.h"
#include "util/error.h"

namespace lol::cli {

/// CLI11 check that refuses an empty value given explicitly ("expected a non-empty
/// <what>"), for options whose empty default means "automatic".
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& v) { return v.empty() ? "expected a non-empty " + what : std::string(); }, "NONEMPTY");
}

/// CLI11 check of a real number in [lo, hi] that also refuses nan and inf (CLI::Range
/// lets nan through: every comparison with it is false).
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        double x = 0;
        try {
          size_t used = 0;
          x = std::stod(v, &used);
          if (used != v.size()) return "'" + v + "': expected a number";
        } catch (const std::exception&) {
          return "'" + v + "': expected a number";
        }
        if (!std::isfinite(x) || x < lo || x > hi) {
          std::ostringstream o;
          o << "Value " << v << " not in range [" << lo << " - " << hi << "]";
          return o.str();
        }
        return std::string();
      },
      "FINITE");
}

/// Token ids from "1,2,3", "1 2 3" (commas and white space both separate) or a JSON
/// array "[1, 2, 3]" (as `lol tokenizer encode --json` prints). Ids are int32 token ids.
/// Throws InputError naming `flag` for anything that is not an integer in [0, 2^31 - 1],
/// an empty field ("1,,2", ",1"; a trailing comma is fine), and a bracket outside a complete JSON array
/// (e.g. "[1,2").
inline std::vector<int64_t> parse_ids(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && s[first] == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(flag + ": starts with '[' but is not a JSON array of token ids (" + e.what() + ")");
    }
    if (!j.is_array()) throw InputError(flag + ": expected a JSON array of token ids");
    for (const auto& v : j) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        throw InputError(flag + ": '" + v.dump() + "' is not a token id (expected integers in [0, 2147483647])");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  std::string cur;
  std::istringstream in(s);
  const bool commas = s.find(',') != std::string::npos;
  while (std::getline(in, cur, ',')) {
    // A blank field is a missing id ("1,,2", ",1"); after the last comma ("1,2, ") it is
    // a trailing comma, as "1,2," is.
    if (commas && cur.find_first_not_of(" \t\r\n") == std::string::npos && !in.eof())
      throw InputError(flag + ": an empty field (a leading comma or two commas in a row) in '" + s +
                       "' (expected token ids separated by spaces or commas, or a JSON array)");
    std::istringstream words(cur);
    std::string w;
    while (words >> w) {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w.size() || v < 0 || v > INT32_MAX)
        throw InputError(flag + ": '" + w + "' is not a token id (expected integers in [0, 2147483647], separated by " +
                         "spaces or commas, or a JSON array)");
      out.push_back(v);
    }
  }
  return out;
}

/// --temperature, --top-k, --top-p and --seed, bound to `s` and `seed` (defaults shown
/// in --help are the values they hold when this is called).
inline void add_sampling_options(CLI::App* c, inference::SamplingOptions& s, uint64_t& seed) {
  c->add_option("--temperature", s.temperature, "0 = greedy")->capture_default_str();
  c->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = all)")->capture_default_str();
  c->add_option("--top-p", s.top_p, "Nucleus mass (1 = all)")->capture_default_str();
  c->add_option("--repetition-penalty", s.repetition_penalty,
                "Divide positive logits of tokens already in the sequence by this, multiply negative ones (1 = off)")
      ->capture_default_str();
  c->add_option("--seed", seed, "Sampling seed")->capture_default_str();
}

}  // namespace lol::cli
