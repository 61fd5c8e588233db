// metrics.jsonl: one JSON object per line, flushed after every line.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::training {

class MetricsLog {
 public:
  /// Opens `path` for appending. When resuming at `keep_through_step` >= 0, lines of a
  /// previous session whose "step" is larger are dropped first (they belong to steps
  /// that will be run again), and so are lines that do not parse (cut by a kill or a
  /// failed write); with -1 the file is truncated. InputError when it cannot be opened.
  MetricsLog(const std::string& path, int64_t keep_through_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  /// Appends `record` as one line. A write that fails (disk full, quota, file size
  /// limit) is cut back to the file's previous length, so no partial line is left,
  /// and throws InputError "PATH: write failed: REASON": a run never goes on with its
  /// log silently stopped (docs/robustness.md).
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  /// Whether a kept line of the previous session is the evaluation record of `step`
  /// (an object with that "step" and a "valid_loss").
  bool has_evaluation(int64_t step) const { return evaluated_.count(step) > 0; }

 private:
  std::string path_;
  int fd_ = -1;
  std::set<int64_t> evaluated_;
};

/// Reads a metrics file; malformed lines raise InputError naming the file and line.
std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace lol::training
