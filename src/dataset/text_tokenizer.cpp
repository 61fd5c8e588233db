#include "dataset/text_tokenizer.h"

#include <filesystem>

#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace lol::data {

std::unique_ptr<tokenizers::Tokenizer> open_text_tokenizer(const std::string& spec) {
  if (spec == "byte" || spec == "bytes") return std::make_unique<tokenizers::ByteTokenizer>();
  std::error_code ec;
  if (!std::filesystem::exists(spec, ec))
    throw InputError("--tokenizer '" + spec +
                     "': expected 'byte', a tokenizer.json file or a directory holding tokenizer.json");
  return tokenizers::load_tokenizer(spec);
}

std::vector<int32_t> token_byte_lengths(const tokenizers::Tokenizer& tok) {
  const int32_t v = tok.vocab_size();
  std::vector<int32_t> out(std::size_t(v), 0);
  for (int32_t id = 0; id < v; ++id) {
    if (!tok.id_to_token(id)) continue;  // unused id
    out[std::size_t(id)] = int32_t(tok.decode_inner(&id, 1, /*skip_special_tokens=*/true).size());
  }
  return out;
}

}  // namespace lol::data
