// libFuzzer target: one token shard (safetensors with tokens / offsets / loss_mask /
// router_only / prompt_len / label; src/dataset/shards.h) appended to a split with
// vocab_size 1000; every sequence of an accepted shard is then read in full.
#include <cstdint>
#include <string>

#include "dataset/shards.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lol::fuzz::write_scratch("shard.safetensors", data, size);
  try {
    lol::data::SplitData split;
    split.append_shard(path, 1000);
    split.append_shard(path, 1000);  // appending again must keep arrays aligned
    volatile int64_t sink = 0;
    for (int64_t i = 0; i < split.size(); ++i) {
      const auto v = split.get(i);
      if (v.length < 0 || v.prompt_len < 0 || v.prompt_len > v.length) __builtin_trap();
      for (int64_t k = 0; k < v.length; ++k) {
        if (v.tokens[k] < 0 || v.tokens[k] >= 1000) __builtin_trap();
        sink = sink + v.tokens[k] + (v.loss_mask ? v.loss_mask[k] : 0) + (v.router_only ? v.router_only[k] : 0);
      }
    }
    (void)sink;
  } catch (const lol::InputError&) {
  }
  return 0;
}
