#include "tokenizers/added_vocab.h"

#include <algorithm>

#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {

nlohmann::ordered_json AddedToken::to_json() const {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["content"] = content;
  j["single_word"] = single_word;
  j["lstrip"] = lstrip;
  j["rstrip"] = rstrip;
  j["normalized"] = normalized;
  j["special"] = special;
  return j;
}

AddedToken AddedToken::from_json(const nlohmann::json& j, const std::string& where) {
  require(j.is_object(), where, "expected an object {\"id\", \"content\", ...}");
  AddedToken t;
  require(j.contains("id") && j["id"].is_number_integer() && j["id"].get<int64_t>() >= 0 &&
              j["id"].get<int64_t>() < INT32_MAX,
          where + ".id", "expected a non-negative integer");
  t.id = j["id"].get<int32_t>();
  require(j.contains("content") && j["content"].is_string(), where + ".content", "expected a string");
  t.content = j["content"].get<std::string>();
  auto flag = [&](const char* name, bool& v) {
    if (!j.contains(name) || j[name].is_null()) return;
    require(j[name].is_boolean(), where + "." + name, "expected true or false");
    v = j[name].get<bool>();
  };
  flag("special", t.special);
  flag("lstrip", t.lstrip);
  flag("rstrip", t.rstrip);
  flag("single_word", t.single_word);
  flag("normalized", t.normalized);
  return t;
}

void AddedVocab::add(const AddedToken& token) {
  require(!token.content.empty(), "added token " + std::to_string(token.id), "empty content");
  require(find_invalid_utf8(token.content) == std::string_view::npos, "added token " + std::to_string(token.id),
          "content is not valid UTF-8");
  if (const AddedToken* t = find_content(token.content)) {
    require(t->id == token.id, "added token '" + token.content + "'",
            "listed twice with ids " + std::to_string(t->id) + " and " + std::to_string(token.id));
    return;
  }
  if (const AddedToken* t = find_id(token.id)) {
    throw InputError("added token id " + std::to_string(token.id) + ": taken by both '" + t->content +
                     "' and '" + token.content + "'");
  }
  const std::size_t idx = tokens_.size();
  tokens_.push_back(token);
  by_content_[token.content] = idx;
  by_id_[token.id] = idx;
  auto& bucket = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  bucket.push_back(idx);
  std::stable_sort(bucket.begin(), bucket.end(), [&](std::size_t a, std::size_t b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

const AddedToken* AddedVocab::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocab::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

// The code point ending right before byte `end` (text valid UTF-8), or 0 at the start.
char32_t cp_before(std::string_view text, std::size_t end) {
  if (end == 0) return 0;
  std::size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return decode_utf8(text, b);
}

char32_t cp_at(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return 0;
  return decode_utf8(text, pos);
}

// "Word" characters for single_word: ASCII letters/digits/underscore and any
// non-ASCII character that is not white space (an approximation of Rust's
// char::is_alphanumeric that errs towards not matching inside words).
bool is_word_char(char32_t cp) {
  if (cp == 0) return false;
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !is_unicode_whitespace(cp);
}

}  // namespace

void AddedVocab::split(std::string_view text, std::vector<Segment>& out) const {
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  std::size_t seg_start = 0;  // start of the pending plain-text segment
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[i])];
    const AddedToken* hit = nullptr;
    for (std::size_t idx : bucket) {
      const AddedToken& t = tokens_[idx];
      if (t.content.size() > n - i || text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word && (is_word_char(cp_before(text, i)) || is_word_char(cp_at(text, i + t.content.size()))))
        continue;
      hit = &t;
      break;
    }
    if (!hit) {
      ++i;
      continue;
    }
    std::size_t b = i, e = i + hit->content.size();
    if (hit->lstrip) {
      while (b > seg_start) {
        std::size_t p = b - 1;
        while (p > seg_start && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        std::size_t q = p;
        if (!is_unicode_whitespace(decode_utf8(text, q))) break;
        b = p;
      }
    }
    if (hit->rstrip) {
      while (e < n) {
        std::size_t q = e;
        if (utf8_sequence_length(text, e) == 0 || !is_unicode_whitespace(decode_utf8(text, q))) break;
        e = q;
      }
    }
    if (b > seg_start) out.push_back({text.substr(seg_start, b - seg_start), -1});
    out.push_back({text.substr(b, e - b), hit->id});
    seg_start = i = e;
  }
  if (seg_start < n) out.push_back({text.substr(seg_start), -1});
}

}  // namespace lol::tokenizers
