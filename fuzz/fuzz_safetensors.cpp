// libFuzzer target: the safetensors reader (src/io/safetensors.h) on arbitrary bytes.
// Every tensor of an accepted file is read in full, so an offset or size the parser
// let through that points outside the buffer is caught by AddressSanitizer.
#include <cstdint>
#include <vector>

#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = lol::io::SafetensorsFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& e : f.entries()) {
      const uint8_t* p = f.data(e);
      const uint64_t n = e.end - e.begin;
      if (uint64_t(e.numel()) * lol::io::dtype_size(e.dtype) != n) __builtin_trap();
      for (uint64_t i = 0; i < n; ++i) sink = uint8_t(sink ^ p[i]);
      if (!f.contains(e.name)) __builtin_trap();
    }
    (void)sink;
  } catch (const lol::InputError&) {
  }
  return 0;
}
