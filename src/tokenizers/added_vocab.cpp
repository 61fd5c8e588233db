#include "tokenizers/added_vocab.h"

#include <algorithm>

#include "tokenizers/regex_splitter.h"
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

void AddedVocab::add(const AddedToken& token, const std::string& pattern) {
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
  max_id_ = std::max(max_id_, token.id);
  // A pattern another token of this phase already has is matched as the first one
  // (insert keeps the first value).
  if (!pattern.empty()) phase_[token.normalized ? 1 : 0].insert(pattern, static_cast<std::uint32_t>(idx));
}

const AddedToken* AddedVocab::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocab::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool is_word_character(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  static const RegexSplitter word(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", false, "word class");
  thread_local std::string c;
  c.clear();
  append_utf8(cp, c);
  return word.matches_at(c, 0);
}

namespace {

// True when the code point ending right before byte `end` of valid UTF-8 `text` is a
// word character (false at the start).
bool word_before(std::string_view text, std::size_t end) {
  if (end == 0) return false;
  std::size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return is_word_character(decode_utf8(text, b));
}

bool word_at(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return false;
  return is_word_character(decode_utf8(text, pos));
}

}  // namespace

void AddedVocab::split(std::string_view text, std::vector<Segment>& out, bool normalized) const {
  const ByteTrie& trie = phase_[normalized ? 1 : 0];
  if (trie.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  std::size_t seg_start = 0;  // start of the pending plain-text segment
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    if (!trie.has_first_byte(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    const ByteTrie::Match hit = trie.longest_at(text, i);
    if (hit.length == 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[hit.value];
    std::size_t b = i, e = i + hit.length;
    if (t.single_word && (word_before(text, b) || word_at(text, e))) {
      i = e;  // dropped; the scan resumes after it (Hugging Face's find_iter)
      continue;
    }
    if (t.lstrip) {
      while (b > seg_start) {
        std::size_t p = b - 1;
        while (p > seg_start && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        std::size_t q = p;
        if (!is_unicode_whitespace(decode_utf8(text, q))) break;
        b = p;
      }
    }
    if (t.rstrip) {
      while (e < n) {
        std::size_t q = e;
        if (utf8_sequence_length(text, e) == 0 || !is_unicode_whitespace(decode_utf8(text, q))) break;
        e = q;
      }
    }
    if (b > seg_start) out.push_back({text.substr(seg_start, b - seg_start), -1});
    out.push_back({text.substr(b, e - b), t.id});
    // As Hugging Face's find_matches: the matches are those of the text itself, so the
    // scan resumes at the match's own end even when rstrip took the white space after it
    // (an added token inside that white space, " <S>" or "\n\n", is still found).
    seg_start = e;
    i += hit.length;
  }
  if (seg_start < n) out.push_back({text.substr(seg_start), -1});
}

}  // namespace lol::tokenizers
