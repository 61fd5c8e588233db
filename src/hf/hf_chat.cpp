#include "hf/hf_chat.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/json_file.h"
#include "util/error.h"

namespace lol::hf {

std::optional<std::string> chatml_default_system(const std::string& jinja) {
  if (jinja.find("<|im_start|>") == std::string::npos || jinja.find("<|im_end|>") == std::string::npos)
    return std::nullopt;
  // A literal system turn: "<|im_start|>system" + newline (escaped or not) + text
  // without Jinja syntax or quotes + "<|im_end|>". A turn built from
  // messages[0]['content'] has a quote right after the newline and is skipped.
  for (const char* head : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    for (size_t at = jinja.find(head); at != std::string::npos; at = jinja.find(head, at + 1)) {
      const size_t begin = at + std::strlen(head);
      const size_t end = jinja.find("<|im_end|>", begin);
      if (end == std::string::npos) continue;
      const std::string text = jinja.substr(begin, end - begin);
      if (text.empty() || text.find_first_of("'\"{}") != std::string::npos) continue;
      std::string out;  // undo Jinja string escapes
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          const char e = text[++i];
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          out += text[i];
        }
      }
      return out;
    }
  }
  return std::string();
}

std::string format_chat(const tokenizers::Tokenizer& tok, const std::vector<tokenizers::ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& where) {
  const std::string& t = tok.chat_template();
  if (t.empty())
    throw InputError(where + ": no \"chat_template\" (expected the ChatML template of a Qwen2/Qwen2.5 instruct model; "
                             "without --chat the prompt is used as plain text)");
  const auto system = chatml_default_system(t);
  if (!system)
    throw InputError(where + ": chat_template is not ChatML (no <|im_start|>/<|im_end|> turns); only ChatML "
                             "templates (Qwen2/Qwen2.5 instruct) are supported");
  if (!tok.token_to_id("<|im_start|>") || !tok.token_to_id("<|im_end|>"))
    throw InputError(where + ": chat_template is ChatML but the tokenizer has no <|im_start|>/<|im_end|> tokens");
  return tokenizers::apply_chatml(messages, add_generation_prompt, *system);
}

std::vector<int64_t> stop_tokens(const std::string& dir, const HfConfig& cfg, const tokenizers::Tokenizer* tok) {
  std::vector<int64_t> out;
  auto add = [&](int64_t id) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  for (int64_t id : cfg.eos_token_id) add(id);
  const std::string gen = dir + "/generation_config.json";
  if (std::filesystem::exists(gen)) {
    const auto j = io::read_json_file(gen);
    require(j.is_object(), gen, "expected a JSON object");
    for (int64_t id : token_id_list(j, "eos_token_id", gen)) add(id);
  }
  if (tok && tok->eos_id()) add(*tok->eos_id());
  return out;
}

}  // namespace lol::hf
