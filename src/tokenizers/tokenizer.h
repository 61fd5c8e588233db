// The tokenizer interface of lol (issue 7: text tokenizers; issue 10: Hugging Face
// compatibility). A Tokenizer maps UTF-8 text to int32 token ids and back.
// LoL paper, Appendix A: natural-language runs use byte-level BPE tokenizers
// (GPT-NeoX; OLMo3 for multilingual data), the toy tasks small task vocabularies
// (src/tasks/vocab.h). LayerRoute §4: Qwen2.5-0.5B-Instruct, whose tokenizer.json
// (Sequence[Split, ByteLevel], ChatML specials) BpeTokenizer loads.
//
// Pipeline of encode(text), the same as Hugging Face `tokenizers`:
//   1. added tokens with "normalized": false are cut out of the raw text (exact
//      match, leftmost-longest, see added_vocab.h) and become one id each;
//   2. every remaining piece of text is checked for UTF-8 validity (policy below);
//   3. each valid piece is normalized (normalizer.h) and added tokens with
//      "normalized": true are cut out of the normalized text;
//   4. the model encodes what is left (pre-tokenization + BPE, or plain bytes);
//   5. with add_special_tokens, the post-processor template's ids (e.g. a BOS) are
//      put around the result (none for GPT-2 / Qwen2 style tokenizers).
//
// Invalid UTF-8 (InvalidUtf8Policy):
//   kThrow (default)  lol::InputError "invalid UTF-8 at byte offset N" (N counted
//                     in the text passed to encode);
//   kByteFallback     every byte that does not start a well-formed sequence becomes
//                     its own single-byte token, the valid runs around it are
//                     encoded normally; decode then returns the original bytes.
// Nothing in encode/decode crashes on any byte string.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/added_vocab.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"

namespace lol::tokenizers {

enum class InvalidUtf8Policy { kThrow, kByteFallback };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids of `text` (UTF-8 bytes). With add_special_tokens the
  /// post-processor's template ids are added (Hugging Face's default is true; ours
  /// is false so that callers add BOS/EOS explicitly). Throws lol::InputError on
  /// invalid UTF-8 under InvalidUtf8Policy::kThrow. Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  /// As encode, appending to `out`. With `continuation`, `text` continues an earlier
  /// text (a later part of one long document): what a tokenizer adds at the start of a
  /// text is not added to its first piece (Metaspace's prepend, a Prepend normalizer's
  /// prefix, a ByteLevel pre-tokenizer's add_prefix_space when it is the first step), so
  /// the parts' ids are those of the whole text where a part boundary falls between
  /// pre-tokenized words.
  void encode_append(std::string_view text, std::vector<int32_t>& out, bool add_special_tokens = false,
                     bool continuation = false) const;

  /// The bytes that `ids` stand for, concatenated. decode(encode(x)) == x for every
  /// valid UTF-8 x (tokenizers whose pre-tokenizer adds a prefix space excepted).
  /// The result may be invalid UTF-8 when `ids` cut a multi-byte character (use
  /// to_valid_utf8 for display, as Hugging Face's lossy decoding does). With
  /// skip_special_tokens, added tokens flagged special are left out. Throws
  /// lol::InputError naming the position of an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  std::string decode(const int32_t* ids, std::size_t n, bool skip_special_tokens = false) const;
  /// The bytes of `ids` as they stand inside a longer decoded text: decode() without
  /// the decoder's removal of a leading space (the Strip / Metaspace decoders of
  /// SentencePiece-style tokenizers strip the space their normalizer prepended).
  /// Counts the bytes of single tokens (bits per byte). Same errors as decode.
  std::string decode_inner(const int32_t* ids, std::size_t n, bool skip_special_tokens = false) const;
  /// Leading ' ' characters decode() removes from a decoded text (0 for byte-level BPE).
  int decode_strip_spaces() const { return decode_strip_spaces_; }
  /// True when skip_special_tokens leaves id `id` out of decoded text (an added token
  /// flagged special, by its normalized content for a normalized token).
  bool skipped_in_decode(int32_t id, bool skip_special_tokens) const;
  /// The bytes of `id` as the first token of a decoded text: decode_inner, less what the
  /// decoder removes from a first token (a Metaspace decoder that prepends drops every
  /// U+2581 of it, as Hugging Face's; a Strip decoder's leading spaces are not removed
  /// here). Same errors as decode.
  std::string decode_first(int32_t id, bool skip_special_tokens = false) const;
  /// True for a Metaspace decoder that prepends: decode() drops every U+2581 of the
  /// first token it emits instead of stripping leading spaces.
  bool decode_drops_first_token_replacement() const { return !first_token_drop_.empty(); }

  /// 1 + the largest id in use (model vocabulary and added tokens): the size an
  /// embedding table needs.
  int32_t vocab_size() const;
  /// Id of a token given in vocabulary spelling (for byte-level BPE the byte-mapped
  /// form, e.g. "Ġthe"; added tokens as written), or nullopt.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  /// Vocabulary spelling of an id, or nullopt when the id is unused.
  std::optional<std::string> id_to_token(int32_t id) const;

  /// Added tokens (special or not), in the order they were added.
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  /// Registers an added token (a token with normalized true is matched by its
  /// normalized content). token.id < 0 means: the model's id when the model
  /// already has this token, else vocab_size(). Returns the id. Throws
  /// lol::InputError when the content or id is taken by another added token, when a
  /// given id is the model vocabulary's id of another string or the content is the model
  /// vocabulary's string of another id (one id, one string: Hugging Face tokenizers would
  /// renumber such a token), or when the id is >= vocab_size() + kMaxVocabIdGap
  /// (tokenizers/bpe_model.h).
  int32_t add_token(AddedToken token);
  /// The id Hugging Face `tokenizers` gives an entry of tokenizer.json's added_tokens
  /// when it loads the file, whatever id the file lists: the id of an added token with
  /// this content, else the model vocabulary's id of the content, else the next new id
  /// (the number of model vocabulary entries, or 1 + the largest id of an added token
  /// whose content the model lacks, when that is larger). With ids that have gaps the entry count can be the model's id of
  /// another string (tokenizers/AddedVocabulary::add_tokens does not check).
  int32_t hf_added_token_id(std::string_view content) const;
  /// Registers `token` under hf_added_token_id(token.content), as Hugging Face loads
  /// an added_tokens entry. Unlike add_token, that id may be the model vocabulary's id
  /// of another string, as in Hugging Face: the id then decodes as the added token,
  /// and the model's string still encodes to it. Returns the id. Throws
  /// lol::InputError as add_token for the other cases.
  int32_t add_token_as_hf(AddedToken token);

  std::optional<int32_t> bos_id() const { return bos_; }
  std::optional<int32_t> eos_id() const { return eos_; }
  std::optional<int32_t> pad_id() const { return pad_; }
  /// Sets the BOS/EOS/PAD role to an existing token (given by content; empty
  /// clears the role). Throws lol::InputError naming the token when it is unknown.
  void set_bos_token(std::string_view token);
  void set_eos_token(std::string_view token);
  void set_pad_token(std::string_view token);

  void set_invalid_utf8_policy(InvalidUtf8Policy p) { utf8_policy_ = p; }
  InvalidUtf8Policy invalid_utf8_policy() const { return utf8_policy_; }

  /// Hugging Face chat template (Jinja source) carried over from
  /// tokenizer_config.json; empty when none. Run by tokenizers::render_chat_template.
  const std::string& chat_template() const { return chat_template_; }
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }
  /// Named chat templates besides the default one (tokenizer_config.json's list form,
  /// e.g. "tool_use", "rag"; additional_chat_templates/NAME.jinja), by name.
  const std::map<std::string, std::string>& named_chat_templates() const { return named_chat_templates_; }
  void set_named_chat_template(const std::string& name, std::string t) { named_chat_templates_[name] = std::move(t); }

  /// tokenizer_config.json's clean_up_tokenization_spaces (false when absent, as
  /// transformers >= 4.45): text shown to a user (`tokenizer decode`, the generate
  /// commands' DecodeStream) goes through clean_up_tokenization. decode() itself never
  /// applies it (byte counts and decode(encode(x)) == x stay exact).
  bool clean_up_tokenization_spaces() const { return clean_up_spaces_; }
  void set_clean_up_tokenization_spaces(bool on) { clean_up_spaces_ = on; }

  /// The Hugging Face tokenizer.json document for this tokenizer (layout of
  /// `tokenizers` >= 0.13: version, truncation, padding, added_tokens, normalizer,
  /// pre_tokenizer, post_processor, decoder, model).
  nlohmann::ordered_json to_hf_json() const;
  /// The tokenizer_config.json document: tokenizer_class, BOS/EOS/PAD names,
  /// added_tokens_decoder, chat_template (read back by load_tokenizer and transformers).
  nlohmann::ordered_json to_hf_config_json() const;
  /// Writes dir/tokenizer.json and dir/tokenizer_config.json (BOS/EOS/PAD names,
  /// added_tokens_decoder, chat_template) so that load_tokenizer(dir) and
  /// transformers' AutoTokenizer read it back. Creates dir. Throws lol::InputError
  /// when a file cannot be written.
  void save(const std::string& dir) const;

  /// "bytes" or "bpe".
  virtual std::string type() const = 0;

  /// Ids put before / after the text by encode(..., add_special_tokens=true).
  const std::vector<int32_t>& template_prefix() const { return template_prefix_; }
  const std::vector<int32_t>& template_suffix() const { return template_suffix_; }
  /// Sets the post-processor: `original` is the tokenizer.json "post_processor"
  /// object written back by to_hf_json (null: a ByteLevel one that adds nothing);
  /// prefix/suffix are its ids around a single sequence.
  void set_post_processor(nlohmann::json original, std::vector<int32_t> prefix, std::vector<int32_t> suffix);

 protected:
  /// Encodes valid UTF-8 text that is already normalized and holds no added tokens:
  /// pre-tokenization and the model. `at_start`: the text begins at offset 0 of the
  /// encoded input (Metaspace's prepend_scheme "first"). `continues`: the text is
  /// the first piece of a continuation (encode_append): no prefix is added to it
  /// (Metaspace's prepend, ByteLevel's add_prefix_space as a first step).
  virtual void encode_normalized(std::string_view text, std::vector<int32_t>& out, bool at_start,
                                 bool continues) const = 0;
  /// Encodes one byte that is not part of a valid UTF-8 sequence (byte fallback).
  virtual void encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const = 0;
  /// Appends the bytes of model token `id`; false when the model has no such id.
  virtual bool append_model_bytes(int32_t id, std::string& out) const = 0;
  /// Appends the decoded text of an added token whose content (normalized content for
  /// a normalized token) is `text` (default: `text` as written).
  virtual void append_added_text(std::string_view text, std::string& out) const { out += text; }
  /// 1 + the model vocabulary's largest id.
  virtual int32_t model_vocab_size() const = 0;
  /// Number of model vocabulary entries (Hugging Face's Model::get_vocab_size; smaller
  /// than model_vocab_size() when the ids have gaps).
  virtual int32_t model_entry_count() const { return model_vocab_size(); }
  virtual std::optional<int32_t> model_token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> model_id_to_token(int32_t id) const = 0;
  /// Fills "pre_tokenizer", "decoder" and "model" of tokenizer.json.
  virtual void fill_hf_json(nlohmann::ordered_json& j) const = 0;

  /// Steps 3-4 of encode for one valid UTF-8 piece between raw-text added tokens.
  /// `prepend`: the normalizer's Prepend steps apply (not to a continuation's first piece).
  void encode_piece(std::string_view text, std::vector<int32_t>& out, bool at_start, bool prepend = true) const;

  AddedVocab added_;
  /// Applied to the text between added tokens (set by the subclass constructor,
  /// before any token is added: normalized tokens are matched by normalized content).
  Normalizer normalizer_;
  /// Leading ' ' characters decode() removes (at most this many; the Strip decoder's
  /// `start`, or 1 for a Metaspace decoder that prepends); 0 for byte-level BPE.
  int decode_strip_spaces_ = 0;
  /// Metaspace decoder with a prepend scheme: its replacement (U+2581), dropped from
  /// the first decoded token (Hugging Face's Metaspace::decode_chain); "" otherwise.
  std::string first_token_drop_;

 private:
  std::optional<int32_t> role_id(std::string_view token, const char* role) const;
  int32_t add_token_checked(AddedToken token, bool allow_model_id_of_other_string);

  std::optional<int32_t> bos_, eos_, pad_;
  InvalidUtf8Policy utf8_policy_ = InvalidUtf8Policy::kThrow;
  std::string chat_template_;
  std::map<std::string, std::string> named_chat_templates_;
  bool clean_up_spaces_ = false;
  nlohmann::json post_processor_json_;
  std::vector<int32_t> template_prefix_, template_suffix_;
};

/// transformers' PreTrainedTokenizerBase.clean_up_tokenization: removes the space
/// before . ? ! , and English contractions, as the Python chain
///   s.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
///    .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m")
///    .replace(" 's", "'s").replace(" 've", "'ve").replace(" 're", "'re")
/// (each pass leftmost, non-overlapping, no rescan). Bytes other than these ASCII
/// patterns are untouched, so UTF-8 stays valid.
std::string clean_up_tokenization(std::string_view text);

/// Streams generated ids as text, one id at a time, in amortised constant work per id: the
/// concatenated output equals to_valid_utf8(tok.decode(all ids pushed)), passed through
/// clean_up_tokenization when `clean_up_spaces` (default: the tokenizer's
/// tokenizer_config.json setting, as transformers' decode). Holds back a character
/// split across tokens until it is complete (Utf8Stream), and with clean-up the text
/// after the last byte that cannot begin a clean-up match across it (any byte but
/// ' ', '\'', 'n', 'v', 'r': " can" prints " ca" until the next byte). `tok` must outlive
/// the stream.
class DecodeStream {
 public:
  DecodeStream(const Tokenizer& tok, bool skip_special_tokens)
      : DecodeStream(tok, skip_special_tokens, tok.clean_up_tokenization_spaces()) {}
  DecodeStream(const Tokenizer& tok, bool skip_special_tokens, bool clean_up_spaces)
      : tok_(tok), skip_(skip_special_tokens), clean_up_(clean_up_spaces) {}
  /// Text to print after id `id`; nothing for an id the tokenizer has no token for
  /// (a generated id of a padded model vocabulary: Hugging Face's decode skips it).
  std::string push(int32_t id);
  /// What is still held back (an incomplete character as U+FFFD, the clean-up tail).
  std::string finish();

 private:
  std::string decoded(int32_t id);
  std::string cleaned(std::string text);

  const Tokenizer& tok_;
  bool skip_;
  bool clean_up_;
  std::string pending_;  // clean-up: text not yet printed (may still lose a space)
  int stripped_ = 0;     // leading spaces removed so far (decode_strip_spaces)
  bool first_seen_ = false;  // the first emitted token went through decode_first
  bool started_ = false; // a non-space byte was seen
  Utf8Stream utf8_;
};

}  // namespace lol::tokenizers
