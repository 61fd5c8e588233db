#include "io/dir_lock.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/atomic_file.h"
#include "util/error.h"

namespace lol::io {

DirLock::DirLock(const std::string& dir, const std::string& flag) {
  create_dirs(dir, flag);
  const std::string path = dir + "/.lol.lock";
  const std::string what = (flag.empty() ? "" : flag + " ") + dir;
  struct stat st {};
  earlier_ = ::lstat(path.c_str(), &st) == 0;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(what + ": cannot create the lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw InputError(what + ": in use by another lol process" +
                       (n > 0 ? " (pid " + std::string(holder, size_t(n)) + ")" : std::string()) +
                       "; wait for it to finish or choose another directory");
    throw InputError(what + ": cannot lock " + path + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
  // A writer killed before its rename left them; said on stderr, as they were files.
  if (const int n = remove_stale_temporaries(dir))
    std::fprintf(stderr, "note: removed %d temporary file%s (*%s<pid>) of a killed lol process from %s\n", n,
                 n == 1 ? "" : "s", kTempMarker, dir.c_str());
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace lol::io
