// A small fixed word-level vocabulary for the synthetic tasks (paper Appendix A:
// "small tokenizers specifically for the vocabulary of each task").
// Ids are dense 0..size-1 in list order; "<pad>" is id 0 and "<eos>" id 1 by convention
// of the task vocabularies built in this folder.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::tasks {

class Vocab {
 public:
  Vocab() = default;
  explicit Vocab(std::vector<std::string> tokens);

  int32_t size() const { return int32_t(tokens_.size()); }
  /// Id of a token; throws lol::InputError naming the token when unknown.
  int32_t id(const std::string& token) const;
  /// -1 when unknown.
  int32_t find(const std::string& token) const;
  const std::string& token(int32_t id) const;
  bool contains(const std::string& token) const { return find(token) >= 0; }

  /// Whitespace-split and map every word; throws InputError on an unknown word.
  std::vector<int32_t> encode(const std::string& text) const;
  /// Tokens joined by single spaces; throws InputError on an out-of-range id.
  std::string decode(const std::vector<int32_t>& ids) const;

  const std::vector<std::string>& tokens() const { return tokens_; }
  /// {"type": "word", "tokens": [...]}
  nlohmann::json to_json() const;
  /// Inverse of to_json; `where` names the file for error messages.
  static Vocab from_json(const nlohmann::json& j, const std::string& where);

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> index_;
};

}  // namespace lol::tasks
