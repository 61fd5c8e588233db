// Character-level BPE as Hugging Face converts SentencePiece BPE models (Llama 2,
// Mistral, TinyLlama, Gemma, Yi): tokens spelled in UTF-8 with U+2581 ("▁") for a
// space, unknown characters as "<0xXX>" byte tokens (byte_fallback), and the
// tokenizer.json pipeline around the model:
//   normalizer     any that normalizer.h reads (Llama 2: Sequence[Prepend("▁"),
//                  Replace(" " -> "▁")]), applied to each piece of text between
//                  added tokens;
//   pre_tokenizer  null (the whole normalized piece is one word), Split steps (any
//                  behaviour, as pre_tokenizer.h; Gemma 2), or Metaspace
//                  {replacement, prepend_scheme always|first|never (or the older
//                  add_prefix_space), split}: spaces -> replacement, the replacement
//                  prepended (unless already there; "first": only to the piece at
//                  offset 0 of the input), split before each replacement when split;
//   decoder        Sequence of Replace(String) ..., ByteFallback, Fuse, Strip(" ",
//                  start, 0) in that order (each optional), or Metaspace: "<0xXX>"
//                  tokens -> their byte, replacement -> " ", and up to `start`
//                  leading spaces of the decoded text removed (Metaspace: 1 unless
//                  prepend_scheme is never).
// Anything else is refused naming the field. Differences from Hugging Face: the
// ByteFallback decoder turns byte tokens that do not form UTF-8 into U+FFFD, decode
// here returns the bytes (use to_valid_utf8 for display, as for byte-level BPE).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/bpe_model_tokenizer.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/pre_tokenizer.h"

namespace lol::tokenizers {

/// The normalizer, pre-tokenizer and decoder of a SentencePiece-style tokenizer.json.
struct SentencePiecePipeline {
  Normalizer normalizer;
  bool metaspace = false;         ///< pre_tokenizer is Metaspace (else null or splits)
  PreTokenizer splits;            ///< pre_tokenizer made of Split steps (Gemma 2), else empty
  std::string replacement = "\xE2\x96\x81";  ///< U+2581
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = false;
  std::vector<std::pair<std::string, std::string>> decode_replace;  ///< applied per token, in order
  bool decode_byte_fallback = false;
  int strip_spaces = 0;  ///< leading ' ' removed from decoded text
  std::string first_token_drop;  ///< Metaspace decoder that prepends: its replacement, dropped from the first token
  /// The objects as read, written back by save().
  nlohmann::json pre_tokenizer_json, decoder_json;

  /// Parses the "normalizer", "pre_tokenizer" and "decoder" of tokenizer.json `j`.
  /// Throws lol::InputError naming `where` and the field for anything unsupported.
  static SentencePiecePipeline from_json(const nlohmann::json& j, const std::string& where);
};

class SentencePieceBpeTokenizer : public BpeModelTokenizer {
 public:
  /// `model` must be character-level (BpeOptions::byte_level false).
  SentencePieceBpeTokenizer(std::shared_ptr<const BpeModel> model, SentencePiecePipeline pipeline);

  /// The words BPE sees for valid UTF-8 `text` at the input's start: normalized and
  /// pre-tokenized. Throws lol::InputError on invalid UTF-8.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 protected:
  void encode_normalized(std::string_view text, std::vector<int32_t>& out, bool at_start,
                         bool continues) const override;
  void encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const override;
  bool append_model_bytes(int32_t id, std::string& out) const override;
  /// Hugging Face runs added tokens through the decoder too (CodeLlama's "▁<PRE>"
  /// decodes as " <PRE>"): the Replace steps apply to their content.
  void append_added_text(std::string_view text, std::string& out) const override;
  void fill_hf_json(nlohmann::ordered_json& j) const override;

 private:
  /// Metaspace pre-tokenization of normalized text.
  void words(std::string_view normalized, bool at_start, bool continues, std::vector<std::string>& out) const;

  SentencePiecePipeline p_;
  std::vector<std::string> decoded_;  // id -> bytes in decoded text
};

}  // namespace lol::tokenizers
