// metrics.jsonl: one JSON object per line, flushed after every line.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::training {

class MetricsLog {
 public:
  /// Opens `path` for appending. When resuming at `keep_through_step` >= 0, lines of a
  /// previous session whose "step" is larger are dropped first (they belong to steps
  /// that will be run again); with -1 the file is truncated.
  MetricsLog(const std::string& path, int64_t keep_through_step);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

/// Reads a metrics file; malformed lines raise InputError naming the file and line.
std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace lol::training
