// Byte-level tokenizer (issue 7): one token per byte, id == byte value (0..255),
// then special tokens as added tokens with ids 256, 257, ... Every byte string
// encodes (no UTF-8 requirement unless the policy says so) and decodes back
// exactly (InvalidUtf8Policy::kByteFallback by default). Saved as a Hugging Face BPE with the 256 byte-mapped characters as
// vocabulary and no merges, which `tokenizers` encodes identically.
#pragma once
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace lol::tokenizers {

class ByteTokenizer : public Tokenizer {
 public:
  /// specials get ids 256, 257, ... in order. The roles PAD/BOS/EOS are given to
  /// "<pad>", "<bos>" (or "<s>") and "<eos>" (or "</s>") when present. Throws
  /// lol::InputError on an empty or duplicate special.
  explicit ByteTokenizer(const std::vector<std::string>& specials = {"<pad>", "<bos>", "<eos>"});

  std::string type() const override { return "bytes"; }

 protected:
  void encode_normalized(std::string_view text, std::vector<int32_t>& out, bool at_start,
                         bool continues) const override;
  void encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const override;
  bool append_model_bytes(int32_t id, std::string& out) const override;
  int32_t model_vocab_size() const override { return 256; }
  std::optional<int32_t> model_token_to_id(std::string_view token) const override;
  std::optional<std::string> model_id_to_token(int32_t id) const override;
  void fill_hf_json(nlohmann::ordered_json& j) const override;
};

}  // namespace lol::tokenizers
