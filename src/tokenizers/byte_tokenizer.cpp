#include "tokenizers/byte_tokenizer.h"

#include "tokenizers/byte_unicode.h"
#include "tokenizers/utf8.h"

namespace lol::tokenizers {

ByteTokenizer::ByteTokenizer(const std::vector<std::string>& specials) {
  set_invalid_utf8_policy(InvalidUtf8Policy::kByteFallback);  // every byte string is encodable
  for (const std::string& s : specials) {
    AddedToken t;
    t.content = s;
    t.id = 256 + int32_t(added_tokens().size());
    t.special = true;
    add_token(t);
  }
  auto has = [&](const char* s) { return added_.find_content(s) != nullptr; };
  if (has("<pad>")) set_pad_token("<pad>");
  if (has("<bos>")) set_bos_token("<bos>");
  else if (has("<s>")) set_bos_token("<s>");
  if (has("<eos>")) set_eos_token("<eos>");
  else if (has("</s>")) set_eos_token("</s>");
}

void ByteTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out, bool /*at_start*/,
                                     bool /*continues*/) const {
  for (unsigned char c : text) out.push_back(int32_t(c));
}

void ByteTokenizer::encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const { out.push_back(byte); }

bool ByteTokenizer::append_model_bytes(int32_t id, std::string& out) const {
  if (id < 0 || id > 255) return false;
  out += char(id);
  return true;
}

std::optional<int32_t> ByteTokenizer::model_token_to_id(std::string_view token) const {
  std::string bytes;
  if (!token_to_bytes(token, bytes) || bytes.size() != 1) return std::nullopt;
  return int32_t(static_cast<unsigned char>(bytes[0]));
}

std::optional<std::string> ByteTokenizer::model_id_to_token(int32_t id) const {
  if (id < 0 || id > 255) return std::nullopt;
  return bytes_to_token(std::string(1, char(id)));
}

void ByteTokenizer::fill_hf_json(nlohmann::ordered_json& j) const {
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                        {"use_regex", false}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::ordered_json m;
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  m["unk_token"] = nullptr;
  m["continuing_subword_prefix"] = nullptr;
  m["end_of_word_suffix"] = nullptr;
  m["fuse_unk"] = false;
  m["byte_fallback"] = false;
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  for (int b = 0; b < 256; ++b) v[bytes_to_token(std::string(1, char(b)))] = b;
  m["vocab"] = std::move(v);
  m["merges"] = nlohmann::ordered_json::array();
  j["model"] = std::move(m);
}

}  // namespace lol::tokenizers
