// Helpers shared by the libFuzzer targets (fuzz/README in docs/robustness.md).
//
// Policy of every target: a malformed input may throw lol::InputError (a named,
// user-facing error); anything else -- another exception type, a sanitizer report, a
// crash, a hang or an allocation over libFuzzer's -rss_limit_mb -- is a bug. Other
// exceptions therefore propagate out of LLVMFuzzerTestOneInput, which libFuzzer
// reports as a crash (uncaught exception -> std::terminate -> abort).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace lol::fuzz {

/// A per-process scratch directory (removed at exit) for parsers that read files.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("LOL_FUZZ_TMP");
    std::filesystem::path p = base ? base : (std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp");
    p /= "lol-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(p);
    static struct Cleanup {
      std::filesystem::path p;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } cleanup{p};
    return p.string();
  }();
  return dir;
}

/// Writes `n` bytes to scratch_dir()/name; returns the path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t n) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(n));
  return path;
}

/// Splits the input at the first occurrence of `sep`: (before, after); no separator:
/// (everything, "").
inline std::pair<std::string_view, std::string_view> split_input(const uint8_t* data, size_t n, std::string_view sep) {
  std::string_view s(reinterpret_cast<const char*>(data), n);
  const auto pos = s.find(sep);
  if (pos == std::string_view::npos) return {s, {}};
  return {s.substr(0, pos), s.substr(pos + sep.size())};
}

}  // namespace lol::fuzz
