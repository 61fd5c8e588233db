#include "tokenizers/sentencepiece_bpe.h"

#include <deque>

#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::tokenizers {
namespace {

using Pipeline = SentencePiecePipeline;

/// Metaspace's replacement and prepend scheme (pre-tokenizer and decoder share them).
void parse_metaspace(const nlohmann::json& j, const std::string& where, std::string& replacement,
                     Pipeline::Prepend& prepend) {
  replacement = util::string_at(j, "replacement", where);
  require(utf8_sequence_length(replacement, 0) == int(replacement.size()), where + ".replacement",
          "expected one character");
  prepend = Pipeline::Prepend::kAlways;
  if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
    const std::string s = util::string_at(j, "prepend_scheme", where);
    if (s == "always") prepend = Pipeline::Prepend::kAlways;
    else if (s == "first") prepend = Pipeline::Prepend::kFirst;
    else if (s == "never") prepend = Pipeline::Prepend::kNever;
    else throw InputError(where + ".prepend_scheme: \"" + s + "\": expected always, first or never");
  } else if (j.contains("add_prefix_space")) {  // tokenizers < 0.14
    require(j["add_prefix_space"].is_boolean(), where + ".add_prefix_space", "expected true or false");
    if (!j["add_prefix_space"].get<bool>()) prepend = Pipeline::Prepend::kNever;
  }
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// Byte of a "<0xXX>" token (hex digits in either case), or -1.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || !starts_with(t, "<0x") || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    v *= 16;
    if (c >= '0' && c <= '9') v += c - '0';
    else if (c >= 'A' && c <= 'F') v += c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v += c - 'a' + 10;
    else return -1;
  }
  return v;
}

}  // namespace

SentencePiecePipeline SentencePiecePipeline::from_json(const nlohmann::json& j, const std::string& where) {
  Pipeline p;
  p.normalizer = Normalizer::from_json(j.value("normalizer", nlohmann::json(nullptr)), where + ": normalizer");
  p.pre_tokenizer_json = j.value("pre_tokenizer", nlohmann::json(nullptr));
  p.decoder_json = j.value("decoder", nlohmann::json(nullptr));

  std::string pw = where + ": pre_tokenizer";
  nlohmann::json metaspace_json = p.pre_tokenizer_json;  // the Metaspace step (p.pre_tokenizer_json is saved as read)
  if (!p.pre_tokenizer_json.is_null()) {
    const std::string type = util::type_at(p.pre_tokenizer_json, pw);
    const auto& steps = p.pre_tokenizer_json.value("pretokenizers", nlohmann::json(nullptr));
    if (type == "Sequence" && steps.is_array() && steps.size() == 1 &&
        util::type_at(steps[0], pw + ".pretokenizers[0]") == "Metaspace") {
      // A Sequence of one Metaspace is that Metaspace.
      metaspace_json = steps[0];
      pw += ".pretokenizers[0]";
      p.metaspace = true;
    } else if (type == "Split" || type == "Sequence") {
      p.splits = PreTokenizer::splits_from_json(p.pre_tokenizer_json, pw);
    } else {
      require(type == "Metaspace", pw + ".type",
              "\"" + type + "\": expected null, Split or Metaspace for a character-level (SentencePiece-style) BPE");
      p.metaspace = true;
    }
  }
  if (p.metaspace) {
    parse_metaspace(metaspace_json, pw, p.replacement, p.prepend);
    const auto& s = metaspace_json;
    if (s.contains("split")) {
      require(s["split"].is_boolean(), pw + ".split", "expected true or false");
      p.split = s["split"].get<bool>();
    } else {
      p.split = true;  // Hugging Face's default (and the only behaviour before tokenizers 0.14)
    }
  }

  const std::string dw = where + ": decoder";
  require(!p.decoder_json.is_null(), dw, "missing (expected the Replace/ByteFallback/Fuse/Strip or Metaspace decoder)");
  const std::string dtype = util::type_at(p.decoder_json, dw);
  if (dtype == "Metaspace") {
    std::string repl;
    Pipeline::Prepend prepend;
    parse_metaspace(p.decoder_json, dw, repl, prepend);
    p.decode_replace.emplace_back(repl, " ");
    // Hugging Face's Metaspace decoder drops every replacement of the first token
    // (prepend_scheme first or always), not one leading space.
    if (prepend != Pipeline::Prepend::kNever) p.first_token_drop = repl;
    return p;
  }
  std::vector<nlohmann::json> steps;
  std::vector<std::string> names;
  if (dtype == "Sequence") {
    require(p.decoder_json.contains("decoders") && p.decoder_json["decoders"].is_array(), dw + ".decoders",
            "expected an array");
    for (std::size_t i = 0; i < p.decoder_json["decoders"].size(); ++i) {
      steps.push_back(p.decoder_json["decoders"][i]);
      names.push_back(dw + ".decoders[" + std::to_string(i) + "]");
    }
  } else {
    steps.push_back(p.decoder_json);
    names.push_back(dw);
  }
  // Replace* -> ByteFallback -> Fuse -> Strip: in another order the steps would act on
  // single tokens where this implementation acts on the decoded text.
  int stage = 0;
  bool fused = false;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string& w = names[i];
    const std::string type = util::type_at(steps[i], w);
    const int this_stage = type == "Replace" ? 0 : type == "ByteFallback" ? 1 : type == "Fuse" ? 2 : type == "Strip" ? 3 : -1;
    require(this_stage >= 0, w + ".type",
            "unsupported decoder \"" + type + "\" (supported here: Replace, ByteFallback, Fuse, Strip, Metaspace)");
    require(this_stage >= stage && !(this_stage == stage && this_stage > 0), w,
            "decoder \"" + type + "\" out of order (supported: Replace..., ByteFallback, Fuse, Strip)");
    stage = this_stage;
    if (type == "Replace") {
      p.decode_replace.emplace_back(replace_string_pattern(steps[i], w), util::string_at(steps[i], "content", w));
    } else if (type == "ByteFallback") {
      p.decode_byte_fallback = true;
    } else if (type == "Fuse") {
      fused = true;
    } else {
      require(fused, w, "Strip before Fuse is not supported (it would strip every token)");
      require(util::string_at(steps[i], "content", w) == " ", w + ".content", "expected \" \"");
      const auto& s = steps[i];
      require(s.contains("start") && s["start"].is_number_unsigned() && s["start"].get<int64_t>() <= 64,
              w + ".start", "expected an integer 0..64");
      require(!s.contains("stop") || (s["stop"].is_number_integer() && s["stop"].get<int64_t>() == 0), w + ".stop",
              "only 0 is supported");
      p.strip_spaces = int(s["start"].get<int64_t>());
    }
  }
  return p;
}

SentencePieceBpeTokenizer::SentencePieceBpeTokenizer(std::shared_ptr<const BpeModel> model,
                                                     SentencePiecePipeline pipeline)
    : BpeModelTokenizer(std::move(model)), p_(std::move(pipeline)) {
  require(!model_->options().byte_level, "SentencePieceBpeTokenizer", "expected a character-level BpeModel");
  decode_strip_spaces_ = p_.strip_spaces;
  first_token_drop_ = p_.first_token_drop;
  normalizer_ = p_.normalizer;
  decoded_.assign(std::size_t(model_->size()), std::string());
  for (int32_t id = 0; id < model_->size(); ++id) {
    const std::string* t = model_->id_to_token(id);
    if (!t) continue;
    const int b = p_.decode_byte_fallback ? fallback_byte(*t) : -1;
    if (b >= 0) {
      decoded_[std::size_t(id)] = std::string(1, char(b));
      continue;
    }
    std::string s = *t;
    for (const auto& [from, to] : p_.decode_replace) replace_all(s, from, to);
    decoded_[std::size_t(id)] = std::move(s);
  }
}

void SentencePieceBpeTokenizer::words(std::string_view normalized, bool at_start, bool continues,
                                      std::vector<std::string>& out) const {
  std::string s(normalized);
  if (s.empty()) return;
  if (!p_.metaspace) {
    if (p_.splits.steps().empty()) {
      out.push_back(std::move(s));
      return;
    }
    std::vector<std::string_view> pieces;
    std::deque<std::string> arena;  // unused: Split steps add no prefix
    p_.splits.split(s, pieces, arena);
    out.insert(out.end(), pieces.begin(), pieces.end());
    return;
  }
  replace_all(s, " ", p_.replacement);
  const bool prepend = !continues && (p_.prepend == SentencePiecePipeline::Prepend::kAlways ||
                                      (p_.prepend == SentencePiecePipeline::Prepend::kFirst && at_start));
  if (prepend && !starts_with(s, p_.replacement)) s.insert(0, p_.replacement);
  if (!p_.split) {
    out.push_back(std::move(s));
    return;
  }
  // Split before every replacement (Hugging Face's MergedWithNext).
  std::size_t begin = 0;
  for (std::size_t at = s.find(p_.replacement, 1); at != std::string::npos; at = s.find(p_.replacement, at + 1)) {
    out.push_back(s.substr(begin, at - begin));
    begin = at;
  }
  out.push_back(s.substr(begin));
}

void SentencePieceBpeTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out, bool at_start,
                                                  bool continues) const {
  thread_local std::vector<std::string> ws;
  ws.clear();
  words(text, at_start, continues, ws);
  for (const auto& w : ws) model_->encode_word(w, out);
}

void SentencePieceBpeTokenizer::encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const {
  if (model_->fallback_id(byte) >= 0) out.push_back(model_->fallback_id(byte));
  else if (model_->unk_id() >= 0) out.push_back(model_->unk_id());
}

bool SentencePieceBpeTokenizer::append_model_bytes(int32_t id, std::string& out) const {
  if (id < 0 || id >= model_->size() || !model_->id_to_token(id)) return false;
  out += decoded_[std::size_t(id)];
  return true;
}

void SentencePieceBpeTokenizer::append_added_text(std::string_view text, std::string& out) const {
  std::string s(text);
  for (const auto& [from, to] : p_.decode_replace) replace_all(s, from, to);
  out += s;
}

std::vector<std::string> SentencePieceBpeTokenizer::pre_tokenize(std::string_view text) const {
  const std::size_t bad = find_invalid_utf8(text);
  require(bad == std::string_view::npos, "pre_tokenize", "invalid UTF-8 at byte offset " + std::to_string(bad));
  std::vector<std::string> out;
  std::string scratch;
  words(normalizer_.apply(text, scratch), true, false, out);
  return out;
}

void SentencePieceBpeTokenizer::fill_hf_json(nlohmann::ordered_json& j) const {
  j["pre_tokenizer"] = nlohmann::ordered_json::parse(p_.pre_tokenizer_json.dump());
  j["decoder"] = nlohmann::ordered_json::parse(p_.decoder_json.dump());
  j["model"] = model_->to_json();
}

}  // namespace lol::tokenizers
