// Chat prompts: a tokenizer's Hugging Face chat template run as transformers'
// apply_chat_template runs it (render_chat_template, by the Jinja interpreter of
// src/jinja), and the fixed ChatML format that LayerRoute trains with (apply_chatml).
//
// apply_chatml: ChatML as used by Qwen2 / Qwen2.5 (the default branch of their Jinja
// chat template, without tool calls). Exact format, for messages m_1..m_n:
//
//   [<|im_start|>system\n{default_system}<|im_end|>\n]   only when m_1 is not a system message
//   <|im_start|>{m_i.role}\n{m_i.content}<|im_end|>\n    for each message, in order
//   [<|im_start|>assistant\n]                            when add_generation_prompt
//
// Contents are inserted verbatim: a content that contains "<|im_end|>" or other
// special-token strings will be encoded as those special tokens.
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

class Tokenizer;

/// What apply_chat_template passes to the template besides the messages.
struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  /// `tools` (a JSON list of tool schemas); nullopt: None.
  std::optional<nlohmann::ordered_json> tools;
  /// More variables (transformers' **kwargs, e.g. {"enable_thinking": false}); they
  /// replace the defaults of the same name.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  /// The time strftime_now formats (Llama 3.1's "Today Date"); nullopt: now.
  std::optional<std::time_t> now;
  /// Which of a tokenizer's templates hf::format_chat runs ("" = as transformers picks:
  /// select_chat_template); render_chat_template, given the template, ignores it.
  std::string template_name;
  /// Rendering stops past this many steps (0: jinja::RenderOptions' default).
  uint64_t max_steps = 0;
};

/// The prompt text transformers' tokenizer.apply_chat_template(messages, tokenize=False,
/// add_generation_prompt=..., tools=..., **variables) gives: the Jinja template `tmpl`
/// run with messages (a JSON array of message objects: role, content, tool_calls, ...),
/// tools, documents (None), add_generation_prompt, the special tokens of `tok`
/// (bos_token, eos_token, pad_token as strings, when it has them; tok may be null) and
/// `variables`. Throws InputError naming `where` (e.g. "dir/tokenizer_config.json:
/// chat_template") and the line for a template that does not parse or that raises,
/// e.g. its raise_exception("Conversation roles must alternate user/assistant/...").
std::string render_chat_template(const std::string& tmpl, const std::string& where,
                                 const nlohmann::ordered_json& messages, const ChatTemplateOptions& options,
                                 const Tokenizer* tok);

/// The template transformers' apply_chat_template picks from `tok`: the one named
/// `name` when given ("default" or a named one); else, with tools, "tool_use" when the
/// tokenizer has it; else the default. Throws InputError naming `where` and the names
/// there are when `name` is unknown, or when the tokenizer has only named templates
/// and none applies (transformers: "multiple chat templates with no default").
/// Returns "" when the tokenizer has no template at all.
std::string select_chat_template(const Tokenizer& tok, const std::string& name, bool with_tools,
                                 const std::string& where);

/// `messages` as the JSON array render_chat_template takes.
nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages);

}  // namespace lol::tokenizers
