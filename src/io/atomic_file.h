// Crash-safe file writing: data goes to "<path>.lol-tmp.<pid>", is fsync'ed, then
// renamed over <path> (and the directory fsync'ed) in commit(). A process killed at
// any moment leaves either the old file or the new one, never a torn file.
// A path that exists and is not a regular file (/dev/stdout, /dev/null, a FIFO) is
// written in place: renaming over it would replace the device with a file.
// Failed writes (disk full, I/O error) throw InputError naming the file (exit 2).
#pragma once
#include <string>

namespace lol::io {

class AtomicFile {
 public:
  /// Opens the temporary file (or the existing non-regular file); throws InputError
  /// naming the path on failure, or when it is a directory.
  explicit AtomicFile(const std::string& path);
  /// Removes the temporary file if commit() was not called.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  /// fsync + rename + fsync(directory).
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  bool in_place_ = false;  ///< an existing non-regular file, written directly
};

/// Atomically replaces `path` with `content`.
void write_file_atomic(const std::string& path, const std::string& content);

/// fsync a directory (so a rename inside it is durable). Ignores errors.
void fsync_dir(const std::string& dir);

/// Creates `dir` and its parents (nothing when it exists). Throws InputError naming the
/// path (after `flag`, e.g. "--out", when given) when that fails (a file in the way, no
/// permission).
void create_dirs(const std::string& dir, const std::string& flag = "");

/// The marker between a temporary's target path and the writer's pid.
extern const char* const kTempMarker;

/// Removes the temporaries ("<name>.lol-tmp.<pid>", regular files, the pid spelled as
/// AtomicFile spells it) that AtomicFile writers killed before their commit left
/// directly in `dir` (not its subdirectories); a file whose process still exists is
/// kept, and nothing else is touched. Returns how many were removed; errors are ignored
/// (the files are litter, never read). Called by DirLock once the lock is held.
int remove_stale_temporaries(const std::string& dir);

/// Whole file as a string; throws InputError naming the path when unreadable.
std::string read_file(const std::string& path);

}  // namespace lol::io
