// Helpers shared by the dataset tests.
#pragma once
#include <string>

#include "common/test_files.h"

namespace lol::data::test {

/// A file of the shared test data, ../shared/data/<rel> next to the repository.
inline std::string shared(const std::string& rel) {
  return std::string(LOL_SOURCE_DIR) + "/../shared/data/" + rel;
}

/// A fresh temporary directory (lol_test::TempDir) that also writes files into itself.
class TmpDir : public lol_test::TempDir {
 public:
  TmpDir() : lol_test::TempDir("dataset") {}
  /// Writes `content` to <dir>/<name> and returns that path.
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = *this / name;
    lol_test::write_text(p, content);
    return p;
  }
};

}  // namespace lol::data::test
