// Helpers of the robustness tests: temporary directories, running the `lol` binary
// (LOL_BINARY) synchronously or as a child process, and a tiny maze training setting.
#pragma once
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "../common/test_files.h"

namespace lol::robust_test {

using ::lol_test::TempDir;
using ::lol_test::read_text;

/// Starts LOL_BINARY with `args`; stdout and stderr go to `log`. Returns the child's pid.
inline pid_t spawn_lol(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv;
    std::string bin = LOL_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

struct RunResult {
  int status = -1;  ///< exit status, or 128 + signal
  std::string output;
};

/// Runs LOL_BINARY with `args` to completion; output = stdout + stderr.
inline RunResult run_lol(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = spawn_lol(args, log);
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  RunResult r;
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  r.output = read_text(log);
  return r;
}

/// A tiny LoL run configuration on the maze dataset in `data_dir` (d_model 32, 3 experts).
inline nlohmann::json tiny_run_config(const std::string& data_dir, const std::string& out, int64_t steps) {
  return {{"model",
           {{"architecture", "lol"}, {"d_model", 32}, {"n_heads", 2}, {"n_kv_heads", 2}, {"ffn_hidden", 64},
            {"n_prelude", 1}, {"n_coda", 1}, {"library_size", 3}, {"core_depth", 2}, {"window", 8},
            {"stride", 4}, {"max_seq_len", 256}}},
          {"data", {{"dir", data_dir}, {"batch_size", 8}, {"packing", "pad"}}},
          {"train", {{"steps", steps}, {"out", out}, {"progress", false}, {"seed", 1}, {"threads", 1}}}};
}

/// Writes a small 4x4 maze dataset into `dir` with the real binary; returns its exit status.
inline int make_maze_data(const std::string& dir) {
  return run_lol({"data", "maze", "--n", "40", "--size", "4", "--seed", "3", "--valid-fraction", "0.25", "--out", dir},
                 dir + ".log")
      .status;
}

}  // namespace lol::robust_test
