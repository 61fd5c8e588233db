// Added (and special) tokens: strings that are matched verbatim in the input and
// mapped to one id each, before any pre-tokenization, as Hugging Face's
// AddedVocabulary does:
//   1. tokens with "normalized": false are matched in the raw text;
//   2. the text between them is normalized (normalizer.h) and tokens with
//      "normalized": true are matched in it, their content normalized the same way.
// In each phase matching is leftmost-longest and non-overlapping: scanning left to
// right, the first position where some token occurs wins, the longest token starting
// there is taken, and the scan goes on after it. A match of a single_word token with
// a word character (regex \w: Alphabetic, marks, decimal digits, connector
// punctuation, joiners) right before or after it is dropped and the scan still goes
// on after it (Hugging Face's find_iter). lstrip / rstrip swallow the Unicode white
// space next to a match. A matched token is never split. Matching walks a byte trie
// (byte_trie.h): the cost of adding a token or matching at a position does not grow
// with the number of tokens stored.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/byte_trie.h"

namespace lol::tokenizers {

/// One entry of tokenizer.json's "added_tokens" (same fields and meaning).
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = true;       ///< dropped by decode(..., skip_special_tokens=true)
  bool lstrip = false;       ///< the match also swallows white space on its left
  bool rstrip = false;       ///< ... and on its right
  bool single_word = false;  ///< only matches when not inside a word (see docs)
  bool normalized = false;   ///< matched in the normalized text (phase 2 above)

  nlohmann::ordered_json to_json() const;
  /// Parses {"id", "content", "special", ...}; throws lol::InputError naming `where`.
  static AddedToken from_json(const nlohmann::json& j, const std::string& where);
};

/// A segment of the input: either plain text (id < 0) or one added token.
struct Segment {
  std::string_view text;
  int32_t added_id = -1;
};

class AddedVocab {
 public:
  /// Adds a token. `pattern`: the string matched, the content itself for a token
  /// with normalized false, the normalized content otherwise (empty: the token is
  /// never matched, only decoded). Throws lol::InputError when the content is empty,
  /// or when the content or the id is already taken by a different added token.
  void add(const AddedToken& token, const std::string& pattern);
  void add(const AddedToken& token) { add(token, token.content); }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }
  /// The largest id of an added token, or -1 when there is none.
  int32_t max_id() const { return max_id_; }
  /// The added token with this id / content, or nullptr.
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;

  /// True when some token is matched in normalized text (phase 2).
  bool has_normalized() const { return !phase_[1].empty(); }

  /// Splits valid UTF-8 `text` into plain-text and added-token segments, in order,
  /// matching the tokens of one phase: normalized false (raw text) or true
  /// (normalized text). The segments' concatenation is `text` except for white space
  /// swallowed by lstrip/rstrip.
  void split(std::string_view text, std::vector<Segment>& out, bool normalized = false) const;

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, std::size_t> by_content_;
  std::unordered_map<int32_t, std::size_t> by_id_;
  int32_t max_id_ = -1;
  // Matched string -> index into tokens_; [0]: normalized false, [1]: normalized true.
  ByteTrie phase_[2];
};

/// Regex \w of the Rust regex crate, which Hugging Face's single_word test uses:
/// Alphabetic, general category M or Nd or Pc, U+200C, U+200D.
bool is_word_character(char32_t cp);

}  // namespace lol::tokenizers
