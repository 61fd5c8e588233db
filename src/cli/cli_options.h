// Option groups and argument parsers shared by several sub-commands (generation
// options of `lol generate` and `lol hf generate`, token-id lists). Header-only.
#pragma once
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "inference/sampling.h"
#include "util/error.h"

namespace lol::cli {

/// Token ids from "1,2,3" or "1 2 3" (commas and white space both separate).
/// Throws InputError naming `flag` for anything that is not an integer >= 0.
inline std::vector<int64_t> parse_ids(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ',')) {
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
      if (used != w.size() || v < 0) throw InputError(flag + ": '" + w + "' is not a token id (expected integers >= 0)");
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
  c->add_option("--seed", seed, "Sampling seed")->capture_default_str();
}

}  // namespace lol::cli
