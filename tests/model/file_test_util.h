// File helpers of the checkpoint and CLI tests: temporary directories, raw byte
// access, rewriting a safetensors header in place, running the lol binary.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "../common/test_files.h"

namespace reftest {

using ::lol_test::TempDir;
using ::lol_test::read_text;
using ::lol_test::write_text;
using ::lol_test::read_bytes;
using ::lol_test::write_bytes;

/// Header length field of a safetensors image.
inline uint64_t header_len(const std::vector<uint8_t>& b) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
  return n;
}

/// Rebuilds a safetensors image with a new header text and the same data buffer.
inline std::vector<uint8_t> with_header(const std::vector<uint8_t>& b, const std::string& header) {
  const uint64_t n = header_len(b);
  const size_t data = b.size() - 8 - n;
  std::vector<uint8_t> out(8 + header.size() + data);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  std::copy(b.begin() + 8 + n, b.end(), out.begin() + 8 + header.size());
  return out;
}

/// Parses the header of a file, lets `edit` change it, writes the file back.
inline void edit_header(const std::string& path, const std::function<void(nlohmann::ordered_json&)>& edit) {
  auto b = read_bytes(path);
  const uint64_t n = header_len(b);
  auto j = nlohmann::ordered_json::parse(std::string(b.begin() + 8, b.begin() + 8 + n));
  edit(j);
  write_bytes(path, with_header(b, j.dump()));
}

struct RunResult {
  int code = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs a shell command line, capturing stdout+stderr.
inline RunResult run_cmd(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs the lol binary built with the tests (LOL_BINARY) with LOL_NUM_THREADS=1.
inline RunResult run_lol(const std::string& args) {
  return run_cmd(std::string("LOL_NUM_THREADS=1 ") + quote(LOL_BINARY) + " " + args);
}

/// Runs several lol command lines concurrently, at most 4 at a time (each process is
/// mostly LibTorch start-up; dozens of sanitized ones at once could exhaust a small
/// CI machine's memory); results in the order of `args`. The commands of one call must
/// not write what another of them reads.
inline std::vector<RunResult> run_lol_all(const std::vector<std::string>& args) {
  std::vector<RunResult> out(args.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < args.size();) out[i] = run_lol(args[i]);
  };
  std::vector<std::future<void>> fs;
  for (size_t w = 0; w < std::min<size_t>(4, args.size()); ++w) fs.push_back(std::async(std::launch::async, worker));
  for (auto& f : fs) f.get();
  return out;
}

}  // namespace reftest
