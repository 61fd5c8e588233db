// libFuzzer target: GPT-2 style vocab.json + merges.txt (load_vocab_merges in
// src/tokenizers/hf_json.h). The input is "<vocab.json>\n#merges\n<merges.txt>".
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [vocab, merges] = lol::fuzz::split_input(data, size, "\n#merges\n");
  const std::string vp = lol::fuzz::write_scratch("vocab.json", reinterpret_cast<const uint8_t*>(vocab.data()), vocab.size());
  const std::string mp =
      lol::fuzz::write_scratch("merges.txt", reinterpret_cast<const uint8_t*>(merges.data()), merges.size());
  try {
    auto tok = lol::tokenizers::load_vocab_merges(vp, mp);
    auto ids = tok->encode("the quick brown fox, 42 times");
    (void)tok->decode(ids);
  } catch (const lol::InputError&) {
  }
  return 0;
}
