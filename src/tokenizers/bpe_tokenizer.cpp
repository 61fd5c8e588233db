#include "tokenizers/bpe_tokenizer.h"

#include <deque>

#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {

BpeTokenizer::BpeTokenizer(std::shared_ptr<const BpeModel> model, PreTokenizer pre_tokenizer,
                           nlohmann::json normalizer)
    : BpeModelTokenizer(std::move(model)), pre_(std::move(pre_tokenizer)), normalizer_(std::move(normalizer)) {
  if (!normalizer_.is_null()) {
    require(normalizer_.is_object() && normalizer_.value("type", std::string()) == "NFC", "normalizer",
            "only null or {\"type\": \"NFC\"} is supported, got " + normalizer_.dump());
    nfc_ = nfc_available();
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out, bool /*at_start*/) const {
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  if (nfc_ && !is_nfc(text)) {
    arena.push_back(to_nfc(text));
    text = arena.back();
  }
  pre_.split(text, pieces, arena);
  for (std::string_view p : pieces) model_->encode_word(p, out);
}

void BpeTokenizer::encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const {
  model_->encode_word(std::string_view(reinterpret_cast<const char*>(&byte), 1), out);
}

bool BpeTokenizer::append_model_bytes(int32_t id, std::string& out) const { return model_->append_bytes(id, out); }

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view text) const {
  const std::size_t bad = find_invalid_utf8(text);
  require(bad == std::string_view::npos, "pre_tokenize", "invalid UTF-8 at byte offset " + std::to_string(bad));
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  if (nfc_ && !is_nfc(text)) {
    arena.push_back(to_nfc(text));
    text = arena.back();
  }
  pre_.split(text, pieces, arena);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

void BpeTokenizer::fill_hf_json(nlohmann::ordered_json& j) const {
  j["normalizer"] = nlohmann::ordered_json::parse(normalizer_.dump());
  j["pre_tokenizer"] = pre_.to_json();
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = model_->to_json();
}

}  // namespace lol::tokenizers
