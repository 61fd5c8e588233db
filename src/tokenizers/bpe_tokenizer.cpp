#include "tokenizers/bpe_tokenizer.h"

#include <deque>

#include "tokenizers/byte_unicode.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {

BpeTokenizer::BpeTokenizer(std::shared_ptr<const BpeModel> model, PreTokenizer pre_tokenizer, Normalizer normalizer)
    : BpeModelTokenizer(std::move(model)), pre_(std::move(pre_tokenizer)) {
  normalizer_ = std::move(normalizer);
}

void BpeTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out, bool /*at_start*/,
                                     bool continues) const {
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_.split(text, pieces, arena, /*first_step_prefix=*/!continues);
  for (std::string_view p : pieces) model_->encode_word(p, out);
}

void BpeTokenizer::encode_raw_byte(uint8_t byte, std::vector<int32_t>& out) const {
  model_->encode_word(std::string_view(reinterpret_cast<const char*>(&byte), 1), out);
}

bool BpeTokenizer::append_model_bytes(int32_t id, std::string& out) const { return model_->append_bytes(id, out); }

void BpeTokenizer::append_added_text(std::string_view text, std::string& out) const {
  thread_local std::string bytes;
  if (token_to_bytes(text, bytes)) out += bytes;
  else out += text;
}

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view text) const {
  const std::size_t bad = find_invalid_utf8(text);
  require(bad == std::string_view::npos, "pre_tokenize", "invalid UTF-8 at byte offset " + std::to_string(bad));
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  std::string scratch;
  pre_.split(normalizer_.apply(text, scratch), pieces, arena);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

void BpeTokenizer::fill_hf_json(nlohmann::ordered_json& j) const {
  j["pre_tokenizer"] = pre_.to_json();
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = model_->to_json();
}

}  // namespace lol::tokenizers
