// The tokenizer.json "normalizer" of Hugging Face `tokenizers`, applied to every
// piece of text between added tokens before pre-tokenization (and to the content of
// added tokens flagged "normalized": true, see added_vocab.h).
//
// Supported: null, NFC, NFKC, NFD, NFKD (Unicode normalization forms, with ICU when
// lol_tokenizers is built with LOL_HAVE_ICU=1 and linked with icu-uc; without ICU,
// unicode_forms_available() is false and these steps are recorded but not applied:
// text is assumed to be normalized already), Prepend {prepend}, Replace {pattern:
// {"String": s}, content}, and Sequence {normalizers: [...]} of them (empty allowed).
// GPT-NeoX / Qwen2: NFC; Llama 2: Sequence[Prepend("▁"), Replace(" " -> "▁")];
// DeepSeek V3: Sequence[]; NFKC: the Claude tokenizer.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::tokenizers {

/// True when the Unicode normalization forms (NFC, NFKC, NFD, NFKD) are compiled in.
bool unicode_forms_available();
/// Kept for callers of the NFC-only interface: the same as unicode_forms_available().
inline bool nfc_available() { return unicode_forms_available(); }

/// True when `text` (valid UTF-8) is known to be in NFC: always for ASCII; with
/// ICU, the exact answer; without ICU, true (cannot tell).
bool is_nfc(std::string_view text);

/// NFC of valid UTF-8 `text` (Unicode canonical decomposition, then canonical
/// composition). Returns `text` unchanged when it is already NFC or when NFC is not
/// available.
std::string to_nfc(std::string_view text);

/// Replaces every non-overlapping occurrence of non-empty `from` in `s` by `to`,
/// scanning left to right.
void replace_all(std::string& s, std::string_view from, std::string_view to);

/// The text of a tokenizer.json Replace step's {"pattern": {"String": text}} (the
/// normalizer and the SentencePiece decoder's Replace). Throws lol::InputError naming
/// `where`.pattern for a Regex pattern (not supported) or an empty string.
std::string replace_string_pattern(const nlohmann::json& j, const std::string& where);

class Normalizer {
 public:
  enum class Form { kNfc, kNfkc, kNfd, kNfkd };
  struct Step {
    enum class Kind { kForm, kPrepend, kReplace } kind = Kind::kForm;
    Form form = Form::kNfc;
    std::string from, to;  ///< kPrepend: `to` is the prefix; kReplace: every `from` -> `to`
  };

  /// No steps (tokenizer.json "normalizer": null).
  Normalizer() = default;
  /// Parses a tokenizer.json "normalizer" value. Throws lol::InputError naming
  /// `where` and the field for an unsupported type or a malformed step.
  static Normalizer from_json(const nlohmann::json& j, const std::string& where);

  bool empty() const { return steps_.empty(); }
  const std::vector<Step>& steps() const { return steps_; }
  /// The value read by from_json (null for a default-constructed one), written back
  /// to tokenizer.json by Tokenizer::save.
  const nlohmann::json& json() const { return json_; }

  /// The normalized form of valid UTF-8 `text`: a view of `text` itself when no step
  /// changes it, else a view of `scratch` (overwritten). Prepend acts on non-empty
  /// text only; Replace replaces non-overlapping occurrences left to right, as
  /// Hugging Face does. Thread-safe. Throws std::runtime_error when ICU fails.
  /// `prepend` false skips the Prepend steps (a piece that continues a text).
  std::string_view apply(std::string_view text, std::string& scratch, bool prepend = true) const;
  /// apply() returning a string.
  std::string apply(std::string_view text) const;

 private:
  std::vector<Step> steps_;
  nlohmann::json json_;
};

}  // namespace lol::tokenizers
