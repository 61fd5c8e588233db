#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "util/error.h"

namespace lol::io {

const char* const kTempMarker = ".lol-tmp.";

static std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

void create_dirs(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError((flag.empty() ? "" : flag + " ") + dir + ": cannot create directory: " + ec.message());
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw InputError(path + ": is a directory, expected a file path");
    in_place_ = true;
    tmp_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path + ": cannot write here (" + std::strerror(errno) + ")");
    return;
  }
  tmp_ = path + kTempMarker + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  // The path is the user's (an --out flag, a run directory): a path that cannot be
  // created is bad input (exit 2), not an internal error.
  if (fd_ < 0) throw InputError(path + ": cannot write here (" + std::strerror(errno) + ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !in_place_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw InputError(tmp_ + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= size_t(w);
  }
}

void AtomicFile::commit() {
  if (in_place_) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) throw InputError(path_ + ": write failed: " + std::strerror(errno));
    committed_ = true;
    return;
  }
  if (::fsync(fd_) != 0) throw InputError(tmp_ + ": write failed (fsync): " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw InputError(path_ + ": cannot replace it with the new file (" + std::strerror(err) +
                     (err == EISDIR ? "; expected a file path, got a directory)" : ")"));
  }
  committed_ = true;
  fsync_dir(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

int remove_stale_temporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t marker = std::strlen(kTempMarker);
    const auto at = name.rfind(kTempMarker);
    if (at == std::string::npos || at == 0 || at + marker >= name.size()) continue;
    if (!fs::is_regular_file(it->symlink_status(ec))) continue;  // only files this class creates
    const std::string digits = name.substr(at + marker);
    // The pid exactly as AtomicFile spells it (decimal, no sign, no leading zero).
    if (digits.size() > 9 || digits[0] == '0' || digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may be alive
    if (::unlink(it->path().c_str()) == 0) ++removed;
  }
  return removed;
}

std::string read_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InputError(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace lol::io
