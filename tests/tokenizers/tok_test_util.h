// Shared helpers for the tokenizer tests: paths into the shared test data
// (../shared relative to the repository root) and small corpus readers.
// Missing shared data makes the calling test FAIL (never skip).
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::tokenizers::test {

/// Absolute path of shared/data/<rel>.
inline std::string shared_data(const std::string& rel) {
  return std::string(LOL_SOURCE_DIR) + "/../shared/data/" + rel;
}

/// Fails the current test (fatal) when `path` does not exist.
#define LOL_REQUIRE_SHARED(path)                                                                  \
  ASSERT_TRUE(std::filesystem::exists(path))                                                     \
      << "shared test data missing: " << (path)                                                  \
      << " (the tokenizer tests read the shared data folder at ../shared next to the repository)"

/// At most `max_bytes` of a file, cut back to a UTF-8 character boundary.
inline std::string read_prefix(const std::string& path, std::size_t max_bytes = std::string::npos) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_bytes) {
    std::size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s.resize(n);
  }
  return s;
}

/// The "text" fields of a JSONL file, reading at most `max_bytes` of it (whole lines).
inline std::vector<std::string> read_jsonl_texts(const std::string& path, std::size_t max_bytes = std::string::npos) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::string> out;
  std::string line;
  std::size_t used = 0;
  while (used < max_bytes && std::getline(f, line)) {
    used += line.size() + 1;
    if (line.empty()) continue;
    out.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  }
  return out;
}

inline std::string gpt2_dir() { return shared_data("tokenizers/gpt2"); }

}  // namespace lol::tokenizers::test
