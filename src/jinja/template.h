// A Jinja interpreter for Hugging Face chat templates (tokenizer_config.json
// "chat_template", chat_template.jinja): the language subset and the environment that
// transformers' apply_chat_template renders them with, so that a prompt is formatted
// byte for byte as in Python.
//
// Environment (transformers' _compile_jinja_template): jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
// extension ({% break %}, {% continue %}) and the {% generation %} block; filter
// `tojson` = json.dumps(x, ensure_ascii=False, indent=, separators=, sort_keys=);
// globals raise_exception(message) and strftime_now(format), besides jinja2's range,
// namespace and dict.
//
// Language: {{ }}, {% %}, {# #} with "-" / "+" white-space control; if / elif / else,
// for (tuple targets, `if` filter, else, loop.index / index0 / revindex / revindex0 /
// first / last / length / previtem / nextitem / cycle), set (names, tuples, namespace
// attributes, {% set x %}...{% endset %} blocks), macro and call, filter blocks, with,
// raw; Python expressions with jinja2's precedence (literals, lists, tuples, dicts,
// attribute and item access, slices, calls with keyword arguments, + - * / // % ** ~,
// comparisons (chained), in / not in, and / or / not, a if c else b, filters, tests);
// str / dict / list methods and jinja2's built-in filters and tests that chat templates
// use (jinja/builtins.cpp lists them). Values follow Python: str() / repr() of None,
// True, 1.0, lists and dicts; strings indexed in code points; jinja2's Undefined
// (prints as "", is false, iterates as empty; its attributes raise).
// Not supported (TemplateError naming the construct): include / import / extends /
// block, recursive loops, *args / **kwargs, call blocks with arguments, filters and
// tests outside that list. Python's str.upper / lower / title / capitalize change
// ASCII letters only.
//
// LibTorch-free.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "jinja/value.h"

namespace lol::jinja {

struct Node;

struct RenderOptions {
  /// The time strftime_now(format) formats (local time); nullopt: the current time.
  std::optional<std::time_t> now;
  /// Rendering stops with TemplateError past this many bytes of output, or of any one
  /// string value (a list: a sixteenth as many items).
  size_t max_output_bytes = size_t(64) << 20;
  /// Rendering stops with TemplateError past this many evaluation steps (expressions
  /// and statements run): a template that loops without end and prints nothing.
  uint64_t max_steps = 10'000'000;
};

/// A parsed template. Parsing checks the syntax and that every filter and test the
/// template names exists (as jinja2 does when it compiles a template).
class Template {
 public:
  /// Throws TemplateError "NAME line L: what" for a syntax error or an unknown
  /// filter / test / tag. `name` names the template in messages (e.g.
  /// "dir/tokenizer_config.json: chat_template").
  explicit Template(const std::string& source, std::string name = "template");
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  /// The output for the variables `vars` (a Dict value: messages, tools,
  /// add_generation_prompt, bos_token, ...). Throws TemplateError "NAME line L: what"
  /// for what jinja2 raises at render time (an undefined value's attribute, a type
  /// error, raise_exception's message).
  std::string render(const Value& vars, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace lol::jinja
