#include "training/metrics_log.h"

#include <filesystem>
#include <cstdio>
#include <sstream>

#include "io/atomic_file.h"
#include "util/error.h"

namespace lol::training {

MetricsLog::MetricsLog(const std::string& path, int64_t keep) : path_(path) {
  if (keep < 0 || !std::filesystem::exists(path)) {
    io::write_file_atomic(path, "");
  } else {
    std::istringstream in(io::read_file(path));
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) continue;  // a torn last line from a killed run
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > keep)
        continue;
      kept += line + "\n";
    }
    io::write_file_atomic(path, kept);
  }
  out_.open(path, std::ios::app);
  if (!out_) throw InputError(path + ": cannot open for writing");
}

void MetricsLog::write(const nlohmann::json& r) {
  out_ << r.dump() << "\n";
  out_.flush();
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  const std::string text = io::read_file(path);
  std::istringstream in(text);
  std::vector<nlohmann::json> out;
  std::string line;
  int64_t n = 0;
  size_t consumed = 0;
  while (std::getline(in, line)) {
    ++n;
    consumed += line.size() + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      // A last line without its newline is a record cut by a kill mid-write: left out.
      if (consumed > text.size()) {
        std::fprintf(stderr, "note: %s:%lld: a partial last line (a run stopped mid-write) is left out\n", path.c_str(),
                     (long long)n);
        break;
      }
      throw InputError(path + ":" + std::to_string(n) + ": not a JSON object");
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace lol::training
