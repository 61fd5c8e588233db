// An exclusive advisory lock on an output directory (`<dir>/.lol.lock`, flock(2)), held
// for the lifetime of the object: two `lol` processes writing the same run or dataset
// directory would interleave their files (docs/robustness.md). The kernel releases the
// lock when the process ends in any way (kill -9 included), so a crashed run never
// leaves its directory locked; the empty lock file itself stays. LibTorch-free.
#pragma once
#include <string>

namespace lol::io {

class DirLock {
 public:
  /// Creates `dir` if needed and locks it. Throws InputError (exit 2) naming the
  /// directory, `flag` (e.g. "train.out") and the holder's process id when another
  /// process holds the lock, or when the lock file cannot be created. Once locked,
  /// removes the temporaries of killed writers in `dir` (remove_stale_temporaries).
  explicit DirLock(const std::string& dir, const std::string& flag = "");
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  /// True when the lock file was already there: a lol process wrote to `dir` before
  /// (the evidence a builder needs before it removes files of an interrupted run).
  bool found_earlier_writer() const { return earlier_; }

 private:
  int fd_ = -1;
  bool earlier_ = false;
};

}  // namespace lol::io
