// Added (and special) tokens: strings that are matched verbatim in the input and
// mapped to one id each, before any pre-tokenization, as Hugging Face's
// AddedVocabulary does. Matching is leftmost-longest: scanning left to right, the
// first position where some added token occurs wins, and among the tokens
// starting there the longest one is taken. A matched token is never split.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::tokenizers {

/// One entry of tokenizer.json's "added_tokens" (same fields and meaning).
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = true;       ///< dropped by decode(..., skip_special_tokens=true)
  bool lstrip = false;       ///< the match also swallows white space on its left
  bool rstrip = false;       ///< ... and on its right
  bool single_word = false;  ///< only matches when not inside a word (see docs)
  bool normalized = false;   ///< matched on normalized text (no-op: no normalizer runs)

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
  /// Adds a token. Throws lol::InputError when the content is empty, or when the
  /// content or the id is already taken by a different added token.
  void add(const AddedToken& token);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }
  /// The added token with this id / content, or nullptr.
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;

  /// Splits `text` into plain-text and added-token segments, in order; their
  /// concatenation is `text` except for white space swallowed by lstrip/rstrip.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, std::size_t> by_content_;
  std::unordered_map<int32_t, std::size_t> by_id_;
  // Per first byte: indices of the tokens starting with it, longest first.
  std::array<std::vector<std::size_t>, 256> by_first_byte_;
};

}  // namespace lol::tokenizers
