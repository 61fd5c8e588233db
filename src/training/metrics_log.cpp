#include "training/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
      if (j.is_discarded()) continue;  // a torn line from a killed run
      const bool has_step = j.is_object() && j.contains("step") && j["step"].is_number_integer();
      if (has_step && j["step"].get<int64_t>() > keep) continue;
      if (has_step && j.contains("valid_loss")) evaluated_.insert(j["step"].get<int64_t>());
      kept += line + "\n";
    }
    io::write_file_atomic(path, kept);
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path + ": cannot open for writing: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& r) {
  const std::string line = r.dump() + "\n";
  struct stat st {};
  const off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : off_t(-1);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (before >= 0 && ::ftruncate(fd_, before) != 0) {
        // The partial line stays; a resumed run drops lines that do not parse.
      }
      throw InputError(path_ + ": write failed: " + std::strerror(err));
    }
    done += size_t(n);
  }
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
      throw InputError(path + ":" + std::to_string(n) + ": " +
                       (!j.is_discarded() ? "a JSON " + std::string(j.type_name()) + ", expected an object"
                        : line.find("NaN") != std::string::npos || line.find("Infinity") != std::string::npos
                            ? "not valid JSON (NaN and Infinity are not JSON numbers; null is)"
                            : "not valid JSON"));
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace lol::training
