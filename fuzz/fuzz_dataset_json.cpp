// libFuzzer target: dataset.json (src/dataset/shards.h Dataset::open) on arbitrary
// bytes, then loading every split it names (shard files are absent or are the
// scratch directory's own files: both must give InputError, not a crash).
#include <cstdint>
#include <string>

#include "dataset/shards.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = lol::fuzz::scratch_dir() + "/ds";
  static const bool made = [&] {
    std::filesystem::create_directories(dir);
    return true;
  }();
  (void)made;
  lol::fuzz::write_scratch("ds/dataset.json", data, size);
  try {
    auto ds = lol::data::Dataset::open(dir);
    (void)ds.task();
    for (const char* split : {"train", "valid", "test"})
      if (ds.has_split(split)) (void)ds.load(split);
  } catch (const lol::InputError&) {
  }
  return 0;
}
