// libFuzzer target: encoding arbitrary bytes with a byte-level BPE tokenizer (Qwen2
// pre-tokenizer regex, special tokens, byte fallback for invalid UTF-8). Checks the
// documented round trip decode(encode(x)) == x (src/tokenizers/tokenizer.h) and that
// the strict policy either encodes the same ids or throws InputError.
#include <cstdint>
#include <memory>
#include <string>

#include "tokenizers/bpe_trainer.h"
#include "util/error.h"

namespace {
const lol::tokenizers::Tokenizer& tokenizer(bool fallback) {
  static std::unique_ptr<lol::tokenizers::BpeTokenizer> strict, lenient;
  if (!strict) {
    lol::tokenizers::TrainBpeOptions o;
    o.vocab_size = 400;
    o.special_tokens = {"<|endoftext|>", "<|im_start|>"};
    o.pattern = lol::tokenizers::kQwen2Pattern;
    o.min_frequency = 1;
    for (auto* t : {&strict, &lenient}) {
      int calls = 0;
      *t = lol::tokenizers::train_bpe(
          [&](std::string& s) {
            static const char* docs[] = {"The quick brown fox jumps over the lazy dog. 1234567890",
                                         "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 <|im_start|>user",
                                         "  indented\n\tlines\r\n and   spaces don't won't I'll"};
            if (calls >= 3) return false;
            s = docs[calls++];
            return true;
          },
          o);
    }
    lenient->set_invalid_utf8_policy(lol::tokenizers::InvalidUtf8Policy::kByteFallback);
  }
  return fallback ? *lenient : *strict;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto ids = tokenizer(true).encode(text);
  if (tokenizer(true).decode(ids) != text) __builtin_trap();
  try {
    const auto strict_ids = tokenizer(false).encode(text);
    if (strict_ids != ids) __builtin_trap();  // valid UTF-8: both policies agree
  } catch (const lol::InputError&) {
  }
  return 0;
}
