#include "tokenizers/normalizer.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "util/error.h"
#include "util/json_fields.h"

#if defined(LOL_HAVE_ICU) && LOL_HAVE_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#define LOL_TOKENIZERS_ICU 1
#endif

namespace lol::tokenizers {
namespace {

bool is_ascii(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & 0x8080808080808080ULL) return false;
  }
  for (; i < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) & 0x80) return false;
  return true;
}

#ifdef LOL_TOKENIZERS_ICU
const icu::Normalizer2& instance(Normalizer::Form f) {
  auto get = [](Normalizer::Form form) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* p = nullptr;
    switch (form) {
      case Normalizer::Form::kNfc: p = icu::Normalizer2::getNFCInstance(err); break;
      case Normalizer::Form::kNfkc: p = icu::Normalizer2::getNFKCInstance(err); break;
      case Normalizer::Form::kNfd: p = icu::Normalizer2::getNFDInstance(err); break;
      case Normalizer::Form::kNfkd: p = icu::Normalizer2::getNFKDInstance(err); break;
    }
    if (U_FAILURE(err) || !p) throw std::runtime_error(std::string("ICU normalizer instance: ") + u_errorName(err));
    return p;
  };
  static const icu::Normalizer2* const all[4] = {get(Normalizer::Form::kNfc), get(Normalizer::Form::kNfkc),
                                                 get(Normalizer::Form::kNfd), get(Normalizer::Form::kNfkd)};
  return *all[static_cast<int>(f)];
}

icu::StringPiece piece(std::string_view s) { return icu::StringPiece(s.data(), int32_t(s.size())); }
#endif

/// True when `text` is known to be in form `f` (ASCII always is).
bool is_normalized(Normalizer::Form f, std::string_view text) {
  if (is_ascii(text)) return true;
#ifdef LOL_TOKENIZERS_ICU
  UErrorCode err = U_ZERO_ERROR;
  const bool ok = instance(f).isNormalizedUTF8(piece(text), err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU normalization check: ") + u_errorName(err));
  return ok;
#else
  (void)f;
  return true;
#endif
}

std::string normalize_form(Normalizer::Form f, std::string_view text) {
#ifdef LOL_TOKENIZERS_ICU
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  UErrorCode err = U_ZERO_ERROR;
  instance(f).normalizeUTF8(0, piece(text), sink, nullptr, err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU normalization: ") + u_errorName(err));
  return out;
#else
  (void)f;
  return std::string(text);
#endif
}

void parse_steps(const nlohmann::json& j, const std::string& where, std::vector<Normalizer::Step>& out) {
  const std::string type = util::type_at(j, where);
  using Step = Normalizer::Step;
  if (type == "Sequence") {
    require(j.contains("normalizers") && j["normalizers"].is_array(), where + ".normalizers", "expected an array");
    for (std::size_t i = 0; i < j["normalizers"].size(); ++i)
      parse_steps(j["normalizers"][i], where + ".normalizers[" + std::to_string(i) + "]", out);
    return;
  }
  Step s;
  if (type == "NFC" || type == "NFKC" || type == "NFD" || type == "NFKD") {
    s.kind = Step::Kind::kForm;
    s.form = type == "NFC"    ? Normalizer::Form::kNfc
             : type == "NFKC" ? Normalizer::Form::kNfkc
             : type == "NFD"  ? Normalizer::Form::kNfd
                              : Normalizer::Form::kNfkd;
  } else if (type == "Prepend") {
    s.kind = Step::Kind::kPrepend;
    s.to = util::string_at(j, "prepend", where);
  } else if (type == "Replace") {
    s.kind = Step::Kind::kReplace;
    s.from = replace_string_pattern(j, where);
    s.to = util::string_at(j, "content", where);
  } else {
    throw InputError(where + ".type: unsupported normalizer \"" + type +
                     "\" (supported: NFC, NFKC, NFD, NFKD, Prepend, Replace, Sequence of them)");
  }
  out.push_back(std::move(s));
}

}  // namespace

std::string replace_string_pattern(const nlohmann::json& j, const std::string& where) {
  const auto p = j.find("pattern");
  require(p != j.end() && p->is_object() && p->contains("String") && (*p)["String"].is_string(), where + ".pattern",
          "expected {\"String\": text} (Regex patterns are not supported)");
  std::string s = (*p)["String"].get<std::string>();
  require(!s.empty(), where + ".pattern.String", "expected a non-empty string");
  return s;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  std::size_t at = 0;
  for (std::size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(s, at, hit - at).append(to);
  out.append(s, at, std::string::npos);
  s.swap(out);
}

bool unicode_forms_available() {
#ifdef LOL_TOKENIZERS_ICU
  return true;
#else
  return false;
#endif
}

bool is_nfc(std::string_view text) { return is_normalized(Normalizer::Form::kNfc, text); }

std::string to_nfc(std::string_view text) {
  if (is_nfc(text)) return std::string(text);
  return normalize_form(Normalizer::Form::kNfc, text);
}

Normalizer Normalizer::from_json(const nlohmann::json& j, const std::string& where) {
  Normalizer n;
  n.json_ = j;
  if (!j.is_null()) parse_steps(j, where, n.steps_);
  return n;
}

std::string_view Normalizer::apply(std::string_view text, std::string& scratch, bool prepend) const {
  bool copied = false;  // scratch holds the current text
  for (const Step& s : steps_) {
    std::string_view cur = copied ? std::string_view(scratch) : text;
    switch (s.kind) {
      case Step::Kind::kForm:
        if (is_normalized(s.form, cur)) break;
        scratch = normalize_form(s.form, cur);
        copied = true;
        break;
      case Step::Kind::kPrepend:
        if (cur.empty() || !prepend) break;
        if (copied) {
          scratch.insert(0, s.to);
        } else {
          scratch.assign(s.to).append(cur);
          copied = true;
        }
        break;
      case Step::Kind::kReplace:
        if (cur.find(s.from) == std::string_view::npos) break;
        if (!copied) scratch.assign(cur);
        copied = true;
        replace_all(scratch, s.from, s.to);
        break;
    }
  }
  return copied ? std::string_view(scratch) : text;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string scratch;
  return std::string(apply(text, scratch));
}

}  // namespace lol::tokenizers
