// libFuzzer target: chat templates (src/jinja). Any bytes are a template; it is parsed
// and rendered with a small conversation (messages with tool calls, tools,
// add_generation_prompt, bos/eos tokens). A template that does not parse or raises
// throws lol::InputError (jinja::TemplateError); a crash, sanitizer report, hang or
// unbounded allocation is a bug: the step and size limits of RenderOptions bound every
// template's work.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/template.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const lol::jinja::Value vars = lol::jinja::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hi <think>a</think> b"},
                 {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1.5}}}]},
                 {"role": "tool", "content": [{"type": "text", "text": "ok"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})"));
  lol::jinja::RenderOptions o;
  o.now = 0;
  o.max_steps = 200000;
  o.max_output_bytes = size_t(1) << 20;
  try {
    const lol::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    const std::string out = t.render(vars, o);
    if (out.size() > o.max_output_bytes + (size_t(1) << 20)) __builtin_trap();
  } catch (const lol::InputError&) {
  }
  return 0;
}
