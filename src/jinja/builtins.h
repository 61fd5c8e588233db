// jinja2's built-in filters, tests and globals, Python's str / dict / list methods, and
// jinja2's attribute / item lookup. Internal to src/jinja (render.cpp calls them).
#pragma once
#include <functional>
#include <memory>
#include <vector>
#include <stdexcept>
#include <string>

#include "jinja/template.h"
#include "jinja/value.h"

namespace lol::jinja {

/// What a builtin needs from the renderer: where it is (for messages) and how to
/// call a template function (macros, loop.cycle) and read the options.
struct BuiltinContext {
  std::string where;  ///< "NAME line L"
  const RenderOptions* options = nullptr;
};

/// Thrown by built-in functions (raise_exception, range, ...) that do not know where
/// they are called; the call site turns it into a TemplateError naming the line.
struct CallError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail_at(const BuiltinContext& c, const std::string& what);

/// jinja2's environment.getattr(obj, name): a method of str / dict / list (bound),
/// else a dict key or namespace attribute, else Undefined. Throws for an Undefined obj.
Value get_attr(const Value& obj, const std::string& name, const BuiltinContext& c);
/// jinja2's environment.getitem(obj, key): obj[key] (negative list and string
/// indices count from the end), else a method named by a string key, else Undefined.
Value get_item(const Value& obj, const Value& key, const BuiltinContext& c);
/// obj[start:stop:step] with Python's rules (null bounds: absent).
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step, const BuiltinContext& c);
/// The items a for loop visits: list elements, string characters, dict keys;
/// Undefined and None... as jinja2 (Undefined: none; None: TypeError).
List iterate(const Value& v, const BuiltinContext& c);
/// len(v): code points of a string, items of a list or dict, 0 for Undefined.
int64_t length(const Value& v, const BuiltinContext& c);

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& subject, CallArgs& args, const BuiltinContext& c);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args, const BuiltinContext& c);

/// range, namespace, dict, raise_exception, strftime_now. Each namespace() made is
/// recorded in `namespaces` (the renderer empties them at the end: they are the only
/// values that can hold themselves).
Dict builtin_globals(const RenderOptions& options, std::vector<std::weak_ptr<Dict>>* namespaces);

/// Python's fmt % args for %s %r %d %i %f %% (a tuple gives one argument per
/// conversion; a list, dict or Undefined left unused is no error, as Python's mapping rule).
std::string percent_format(const std::string& fmt, const Value& args, const BuiltinContext& c);

/// Calls a function value (TemplateError when it is not callable).
Value call_value(const Value& fn, CallArgs& args, const BuiltinContext& c);

}  // namespace lol::jinja
