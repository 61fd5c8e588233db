#include "tokenizers/chat_template.h"

#include "util/error.h"

namespace lol::tokenizers {

const char* const kQwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

std::string apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& default_system) {
  std::string out;
  auto turn = [&](const std::string& role, const std::string& content) {
    out += "<|im_start|>";
    out += role;
    out += '\n';
    out += content;
    out += "<|im_end|>\n";
  };
  if ((messages.empty() || messages[0].role != "system") && !default_system.empty()) turn("system", default_system);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    require(r == "system" || r == "user" || r == "assistant", "chat message " + std::to_string(i) + ": role",
            "expected \"system\", \"user\" or \"assistant\", got \"" + r + "\"");
    turn(r, messages[i].content);
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace lol::tokenizers
