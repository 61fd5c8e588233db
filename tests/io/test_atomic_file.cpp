// io::AtomicFile: regular files are replaced by rename (no temporary left behind);
// existing non-regular files (devices, FIFOs) are written in place, never replaced by
// a regular file; failed writes are InputError naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/test_files.h"
#include "io/atomic_file.h"
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
