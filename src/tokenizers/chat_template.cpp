#include "tokenizers/chat_template.h"

#include "jinja/template.h"
#include "tokenizers/tokenizer.h"
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

std::string render_chat_template(const std::string& tmpl, const std::string& where,
                                 const nlohmann::ordered_json& messages, const ChatTemplateOptions& options,
                                 const Tokenizer* tok) {
  require(messages.is_array(), where, "the messages must be a JSON array of message objects");
  jinja::Value vars = jinja::Value::make_dict();
  jinja::Dict& d = *vars.dict;
  d.set("messages", jinja::from_json(messages));
  d.set("tools", options.tools ? jinja::from_json(*options.tools) : jinja::Value::none());
  d.set("documents", jinja::Value::none());
  d.set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  if (tok) {
    // transformers passes its special_tokens_map: the roles the tokenizer has.
    const std::pair<const char*, std::optional<int32_t>> roles[] = {
        {"bos_token", tok->bos_id()}, {"eos_token", tok->eos_id()}, {"pad_token", tok->pad_id()}};
    for (const auto& [name, id] : roles)
      if (id)
        if (auto content = tok->id_to_token(*id)) d.set(name, jinja::Value::string(*content));
  }
  require(options.variables.is_object(), where, "template variables must be a JSON object");
  for (auto it = options.variables.begin(); it != options.variables.end(); ++it)
    d.set(it.key(), jinja::from_json(it.value()));
  jinja::RenderOptions ro;
  ro.now = options.now;
  if (options.max_steps > 0) ro.max_steps = options.max_steps;
  return jinja::Template(tmpl, where).render(vars, ro);
}

std::string select_chat_template(const Tokenizer& tok, const std::string& name, bool with_tools,
                                 const std::string& where) {
  const auto& named = tok.named_chat_templates();
  const auto names = [&] {
    std::string out = tok.chat_template().empty() ? "" : "default";
    for (const auto& kv : named) out += (out.empty() ? "" : ", ") + kv.first;
    return out.empty() ? std::string("none") : out;
  };
  if (!name.empty()) {
    if (name == "default" && !tok.chat_template().empty()) return tok.chat_template();
    const auto it = named.find(name);
    if (it == named.end())
      throw InputError(where + ": no chat template named \"" + name + "\" (the tokenizer has: " + names() + ")");
    return it->second;
  }
  if (with_tools && named.count("tool_use")) return named.at("tool_use");
  if (!tok.chat_template().empty() || named.empty()) return tok.chat_template();
  throw InputError(where + ": the tokenizer has no default chat template, only named ones (" + names() +
                   "): name one (--chat-template NAME)");
}

nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

}  // namespace lol::tokenizers
