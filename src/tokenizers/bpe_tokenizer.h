// Byte-level BPE tokenizer (GPT-2, Qwen2, Llama-3 style; issue 10): added tokens,
// then the pre-tokenizer (regex splits), then BpeModel on each pre-token.
// Decoding maps tokens back to bytes with the GPT-2 byte mapping (Hugging Face
// ByteLevel decoder), so decode(encode(x)) == x for valid UTF-8 x unless the
// pre-tokenizer adds a prefix space.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizers/bpe_model.h"
#include "tokenizers/bpe_model_tokenizer.h"
#include "tokenizers/pre_tokenizer.h"
#include "tokenizers/tokenizer.h"

namespace lol::tokenizers {

class BpeTokenizer : public BpeModelTokenizer {
 public:
  /// normalizer: applied to the text between added tokens (normalizer.h).
  BpeTokenizer(std::shared_ptr<const BpeModel> model, PreTokenizer pre_tokenizer, Normalizer normalizer = {});

  const PreTokenizer& pre_tokenizer() const { return pre_; }

  /// The pre-tokens (raw bytes) of valid UTF-8 `text` without added-token
  /// handling, after normalization: what the BPE model sees. Throws
  /// lol::InputError on invalid UTF-8.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 protected:
  void encode_normalized(std::string_view text, std::vector<int32_t>& out, bool at_start,
                         bool continues) const override;
  void encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const override;
  bool append_model_bytes(int32_t id, std::string& out) const override;
  /// Hugging Face's ByteLevel decoder: a token whose characters are all in GPT-2's
  /// byte mapping decodes as those bytes, any other as its UTF-8 text.
  void append_added_text(std::string_view text, std::string& out) const override;
  void fill_hf_json(nlohmann::ordered_json& j) const override;

 private:
  PreTokenizer pre_;
};

}  // namespace lol::tokenizers
