// io::AtomicFile: regular files are replaced by rename (no temporary left behind);
// existing non-regular files (devices, FIFOs) are written in place, never replaced by
// a regular file; failed writes are InputError naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/test_files.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "util/error.h"

namespace {

bool is_char_device(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

}  // namespace

TEST(AtomicFile, RegularFileIsReplacedWithoutLeftovers) {
  lol_test::TempDir d("atomic");
  lol::io::write_file_atomic(d / "f.txt", "one");
  lol::io::write_file_atomic(d / "f.txt", "two");
  EXPECT_EQ(lol::io::read_file(d / "f.txt"), "two");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.path())) n += e.is_regular_file();
  EXPECT_EQ(n, 1) << "no temporary file left";
  EXPECT_THROW(lol::io::write_file_atomic(d.path(), "x"), lol::InputError) << "a directory";
}

TEST(AtomicFile, DevicesAreWrittenInPlaceAndFailuresNameTheFile) {
  ASSERT_TRUE(is_char_device("/dev/null"));
  EXPECT_NO_THROW(lol::io::write_file_atomic("/dev/null", "discarded"));
  EXPECT_TRUE(is_char_device("/dev/null")) << "still the device";
  if (!is_char_device("/dev/full")) GTEST_SKIP() << "/dev/full is not a character device here";
  try {
    lol::io::write_file_atomic("/dev/full", "no space");
    ADD_FAILURE() << "expected InputError";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: write failed: No space left on device"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(is_char_device("/dev/full")) << "still the device";
}

// A writer killed before its rename leaves "<name>.lol-tmp.<pid>"; the next holder of the
// directory's lock removes those of processes that no longer exist, and nothing else
// (not a user's "notes.tmp.2024", not a pid spelled with a leading zero, not a symlink).
TEST(AtomicFile, StaleTemporariesOfDeadWritersAreRemovedUnderTheLock) {
  lol_test::TempDir d("stale");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // `child` is now a pid with no process
  const std::string pid = std::to_string(child);
  const std::string dead = d / ("train-00000.safetensors.lol-tmp." + pid);
  const std::string alive = d / ("dataset.json.lol-tmp." + std::to_string(::getpid()));
  const std::string nested = d / "sub";
  std::filesystem::create_directories(nested);
  const std::string nested_dead = nested + "/x.lol-tmp." + pid;
  const std::vector<std::string> kept = {d / "notes.tmp.txt", d / ("notes.tmp." + pid), d / ("a.lol-tmp.0" + pid),
                                         d / "b.lol-tmp.", d / "c.lol-tmp.12x"};
  for (const auto& f : {dead, alive, nested_dead}) lol::io::write_file_atomic(f, "x");
  for (const auto& f : kept) lol::io::write_file_atomic(f, "x");
  const std::string link = d / ("link.lol-tmp." + pid);
  std::filesystem::create_symlink(kept[0], link);
  {
    const lol::io::DirLock lock(d.path());
    EXPECT_FALSE(std::filesystem::exists(dead));
    EXPECT_TRUE(std::filesystem::exists(alive)) << "its writer (this process) is alive";
    for (const auto& f : kept) EXPECT_TRUE(std::filesystem::exists(f)) << f;
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_TRUE(std::filesystem::exists(nested_dead)) << "only the directory itself is cleaned";
  }
  EXPECT_EQ(lol::io::remove_stale_temporaries(d.path()), 0);
}
