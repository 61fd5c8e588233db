// libFuzzer target: tokenizer.json loading (src/tokenizers/hf_json.h) on arbitrary
// bytes, then encoding and decoding a fixed text with whatever tokenizer was accepted.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizers/hf_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;  // the loader reports this as InputError ("invalid JSON"); not its logic
  }
  try {
    auto tok = lol::tokenizers::tokenizer_from_hf_json(j, "fuzz/tokenizer.json");
    static const std::string texts[] = {"Hello, world! 123  \n\tx", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 <|endoftext|>",
                                        ""};
    for (const auto& t : texts) {
      auto ids = tok->encode(t, /*add_special_tokens=*/true);
      for (auto id : ids)
        if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
      (void)tok->decode(ids);
    }
    (void)tok->to_hf_json();
  } catch (const lol::InputError&) {
  }
  return 0;
}
