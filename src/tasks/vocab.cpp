#include "tasks/vocab.h"

#include "tasks/task.h"
#include "util/error.h"

namespace lol::tasks {

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!index_.emplace(tokens_[i], int32_t(i)).second)
      throw InputError("vocab: duplicate token '" + tokens_[i] + "'");
  }
}

int32_t Vocab::find(const std::string& token) const {
  auto it = index_.find(token);
  return it == index_.end() ? -1 : it->second;
}

int32_t Vocab::id(const std::string& token) const {
  int32_t i = find(token);
  if (i < 0) throw InputError("vocab: unknown token '" + token + "'");
  return i;
}

const std::string& Vocab::token(int32_t id) const {
  if (id < 0 || id >= size())
    throw InputError("vocab: token id " + std::to_string(id) + " out of range [0, " + std::to_string(size()) + ")");
  return tokens_[id];
}

std::vector<int32_t> Vocab::encode(const std::string& text) const {
  std::vector<int32_t> out;
  for (const auto& w : split_tokens(text)) out.push_back(id(w));
  return out;
}

std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

nlohmann::json Vocab::to_json() const { return {{"type", "word"}, {"tokens", tokens_}}; }

Vocab Vocab::from_json(const nlohmann::json& j, const std::string& where) {
  require(j.is_object() && j.contains("tokens") && j["tokens"].is_array(), where,
          "vocabulary must be an object with a 'tokens' array");
  std::vector<std::string> toks;
  for (const auto& t : j["tokens"]) {
    require(t.is_string(), where, "vocabulary 'tokens' must hold strings");
    toks.push_back(t.get<std::string>());
  }
  try {
    return Vocab(std::move(toks));
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
}

}  // namespace lol::tasks
