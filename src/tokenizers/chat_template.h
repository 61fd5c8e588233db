// ChatML prompt formatting as used by Qwen2 / Qwen2.5 (the default branch of
// their Jinja chat template, without tool calls). Exact format, for messages
// m_1..m_n:
//
//   [<|im_start|>system\n{default_system}<|im_end|>\n]   only when m_1 is not a system message
//   <|im_start|>{m_i.role}\n{m_i.content}<|im_end|>\n    for each message, in order
//   [<|im_start|>assistant\n]                            when add_generation_prompt
//
// Contents are inserted verbatim: a content that contains "<|im_end|>" or other
// special-token strings will be encoded as those special tokens.
#pragma once
#include <string>
#include <vector>

namespace lol::tokenizers {

/// Qwen2.5's default system prompt.
extern const char* const kQwen25DefaultSystem;

struct ChatMessage {
  std::string role;     ///< "system", "user" or "assistant"
  std::string content;
};

/// Formats `messages` as ChatML (see above). An empty default_system inserts no
/// system turn. Throws lol::InputError naming the message index for a role other
/// than system/user/assistant.
std::string apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& default_system = kQwen25DefaultSystem);

}  // namespace lol::tokenizers
