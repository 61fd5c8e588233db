#include "tokenizers/pre_tokenizer.h"

#include <algorithm>

#include "util/error.h"
#include "util/json_fields.h"

namespace lol::tokenizers {
namespace {

std::shared_ptr<const RegexSplitter> gpt2_regex() {
  static const auto r = std::make_shared<const RegexSplitter>(kGpt2Pattern, false, "ByteLevel pre-tokenizer");
  return r;
}

bool get_bool(const nlohmann::json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  require(j[key].is_boolean(), where + "." + key, "expected true or false");
  return j[key].get<bool>();
}

void parse_into(const nlohmann::json& j, const std::string& where, std::vector<PreTokenizer::Step>& steps) {
  const std::string type = util::type_at(j, where);
  if (type == "Sequence") {
    require(j.contains("pretokenizers") && j["pretokenizers"].is_array(), where + ".pretokenizers",
            "expected an array");
    for (std::size_t i = 0; i < j["pretokenizers"].size(); ++i)
      parse_into(j["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
    return;
  }
  PreTokenizer::Step s;
  if (type == "ByteLevel") {
    s.kind = PreTokenizer::Step::Kind::kByteLevel;
    s.add_prefix_space = get_bool(j, "add_prefix_space", true, where);
    s.trim_offsets = get_bool(j, "trim_offsets", true, where);
    if (get_bool(j, "use_regex", true, where)) s.regex = gpt2_regex();
  } else if (type == "Split") {
    s.kind = PreTokenizer::Step::Kind::kSplit;
    require(j.contains("pattern") && j["pattern"].is_object(), where + ".pattern",
            "expected {\"Regex\": ...} or {\"String\": ...}");
    const auto& p = j["pattern"];
    using B = PreTokenizer::Step::Behavior;
    const std::string behavior = j.value("behavior", std::string("Isolated"));
    if (behavior == "Isolated") s.behavior = B::kIsolated;
    else if (behavior == "Removed") s.behavior = B::kRemoved;
    else if (behavior == "MergedWithPrevious") s.behavior = B::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") s.behavior = B::kMergedWithNext;
    else if (behavior == "Contiguous") s.behavior = B::kContiguous;
    else
      throw InputError(where + ".behavior: \"" + behavior +
                       "\": expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous");
    s.invert = get_bool(j, "invert", false, where);
    if (p.contains("Regex") && p["Regex"].is_string()) {
      s.regex = std::make_shared<const RegexSplitter>(p["Regex"].get<std::string>(), false, where + ".pattern.Regex");
    } else if (p.contains("String") && p["String"].is_string()) {
      s.regex = std::make_shared<const RegexSplitter>(p["String"].get<std::string>(), true, where + ".pattern.String");
    } else {
      throw InputError(where + ".pattern: expected {\"Regex\": string} or {\"String\": string}");
    }
  } else {
    throw InputError(where + ".type: unsupported pre-tokenizer \"" + type +
                     "\" (supported: ByteLevel, Split, Sequence of them; Metaspace only as the whole "
                     "pre_tokenizer, or a Sequence of it alone)");
  }
  steps.push_back(std::move(s));
}

const char* behavior_name(PreTokenizer::Step::Behavior b) {
  using B = PreTokenizer::Step::Behavior;
  switch (b) {
    case B::kIsolated: return "Isolated";
    case B::kRemoved: return "Removed";
    case B::kMergedWithPrevious: return "MergedWithPrevious";
    case B::kMergedWithNext: return "MergedWithNext";
    case B::kContiguous: return "Contiguous";
  }
  return "Isolated";
}

// The view from the start of `a` to the end of `b` (b follows a in the same text).
std::string_view span(std::string_view a, std::string_view b) {
  return std::string_view(a.data(), std::size_t(b.data() + b.size() - a.data()));
}

}  // namespace

void PreTokenizer::split_step(const Step& s, std::string_view text, std::vector<std::string_view>& out) {
  using B = Step::Behavior;
  if (s.behavior == B::kIsolated) {  // flags do not matter
    s.regex->split(text, out);
    return;
  }
  thread_local std::vector<std::pair<std::string_view, bool>> parts;
  parts.clear();
  s.regex->split_flagged(text, parts);
  if (s.invert)
    for (auto& p : parts) p.second = !p.second;
  // Hugging Face's NormalizedString::split, on (piece, is_delimiter) in order.
  std::vector<std::pair<std::string_view, bool>> res;  // merged pieces (flag: unused)
  bool previous = false;
  switch (s.behavior) {
    case B::kIsolated:
      break;
    case B::kRemoved:
      for (const auto& [p, m] : parts)
        if (!m && !p.empty()) out.push_back(p);
      return;
    case B::kMergedWithPrevious:
      for (const auto& [p, m] : parts) {
        if (m && !previous && !res.empty()) res.back().first = span(res.back().first, p);
        else res.emplace_back(p, m);
        previous = m;
      }
      break;
    case B::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->second && !previous && !res.empty()) res.back().first = span(it->first, res.back().first);
        else res.emplace_back(it->first, it->second);
        previous = it->second;
      }
      std::reverse(res.begin(), res.end());
      break;
    case B::kContiguous:
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].second == previous) res.back().first = span(res.back().first, parts[i].first);
        else res.emplace_back(parts[i].first, false);
        previous = parts[i].second;
      }
      break;
  }
  for (const auto& r : res)
    if (!r.first.empty()) out.push_back(r.first);  // empty matches leave no piece
}

PreTokenizer PreTokenizer::splits_from_json(const nlohmann::json& j, const std::string& where) {
  PreTokenizer p;
  parse_into(j, where, p.steps_);
  for (const Step& s : p.steps_)
    require(s.kind == Step::Kind::kSplit, where, "expected Split steps only (no ByteLevel) for a SentencePiece-style BPE");
  return p;
}

PreTokenizer PreTokenizer::gpt2() {
  PreTokenizer p;
  Step s;
  s.kind = Step::Kind::kByteLevel;
  s.regex = gpt2_regex();
  p.steps_.push_back(s);
  return p;
}

PreTokenizer PreTokenizer::from_pattern(const std::string& pattern) {
  if (pattern == kGpt2Pattern) return gpt2();
  PreTokenizer p;
  Step split;
  split.kind = Step::Kind::kSplit;
  split.regex = std::make_shared<const RegexSplitter>(pattern, false, "pre-tokenizer pattern");
  p.steps_.push_back(split);
  Step bl;
  bl.kind = Step::Kind::kByteLevel;
  p.steps_.push_back(bl);
  return p;
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& where) {
  require(!j.is_null(), where, "a byte-level BPE needs a pre-tokenizer with a ByteLevel step, got null");
  PreTokenizer p;
  parse_into(j, where, p.steps_);
  std::size_t n_bl = 0;
  for (const Step& s : p.steps_) n_bl += s.kind == Step::Kind::kByteLevel;
  require(n_bl == 1 && p.steps_.back().kind == Step::Kind::kByteLevel, where,
          "expected exactly one ByteLevel step, as the last step (byte-level BPE only)");
  return p;
}

nlohmann::ordered_json PreTokenizer::to_json() const {
  auto one = [](const Step& s) {
    nlohmann::ordered_json j;
    if (s.kind == Step::Kind::kByteLevel) {
      j["type"] = "ByteLevel";
      j["add_prefix_space"] = s.add_prefix_space;
      j["trim_offsets"] = s.trim_offsets;
      j["use_regex"] = s.regex != nullptr;
    } else {
      j["type"] = "Split";
      j["pattern"] = {{s.regex->literal() ? "String" : "Regex", s.regex->pattern()}};
      j["behavior"] = behavior_name(s.behavior);
      j["invert"] = s.invert;
    }
    return j;
  };
  if (steps_.size() == 1) return one(steps_[0]);
  nlohmann::ordered_json seq;
  seq["type"] = "Sequence";
  seq["pretokenizers"] = nlohmann::ordered_json::array();
  for (const Step& s : steps_) seq["pretokenizers"].push_back(one(s));
  return seq;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena,
                         bool first_step_prefix) const {
  // Fast path: no prefix space, at most one regex, only Isolated splits (GPT-2 and Qwen2 style).
  const RegexSplitter* only = nullptr;
  int n_regex = 0;
  bool prefix = false, isolated = true;
  for (const Step& s : steps_) {
    prefix = prefix || (s.add_prefix_space && (first_step_prefix || &s != &steps_.front()));
    isolated = isolated && s.behavior == Step::Behavior::kIsolated;  // invert changes nothing then
    if (s.regex) {
      only = s.regex.get();
      ++n_regex;
    }
  }
  if (!prefix && n_regex <= 1 && isolated) {
    if (only) only->split(text, out);
    else if (!text.empty()) out.push_back(text);
    return;
  }
  std::vector<std::string_view> cur{text}, next;
  for (const Step& s : steps_) {
    next.clear();
    for (std::string_view piece : cur) {
      const bool add_prefix = s.add_prefix_space && (first_step_prefix || &s != &steps_.front());
      if (add_prefix && !piece.empty() && piece[0] != ' ') {  // HF's prepend leaves an empty string empty
        arena.push_back(" " + std::string(piece));
        piece = arena.back();
      }
      if (s.kind == Step::Kind::kSplit) split_step(s, piece, next);
      else if (s.regex) s.regex->split(piece, next);
      else if (!piece.empty()) next.push_back(piece);
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace lol::tokenizers
