// Values of the Jinja interpreter (jinja/template.h): the Python objects a Hugging Face
// chat template sees (None, bool, int, float, str, list, tuple, dict, jinja2's Undefined
// and namespace, functions) with Python's semantics for truth, equality, ordering, str()
// and repr(), and json.dumps() as transformers' `tojson` filter calls it.
// LibTorch-free.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace lol::jinja {

/// A template that cannot be parsed or rendered: a syntax error, an operation Python
/// refuses (an undefined value's attribute, "a" + 1, division by zero), or the
/// template's own raise_exception(message). The message names the template and line.
class TemplateError : public InputError {
 public:
  explicit TemplateError(const std::string& what) : InputError(what) {}
};

struct Value;
struct Dict;
using List = std::vector<Value>;

/// Values nest at most this deep (a deeper list, dict or JSON document is a
/// TemplateError / InputError): repr, tojson, comparisons and reading JSON recurse.
inline constexpr int kMaxValueDepth = 1000;
/// repr() and json_dumps() stop with TemplateError past this many bytes.
inline constexpr size_t kMaxTextBytes = size_t(64) << 20;

/// Arguments of a call: positional, then keyword (name, value) in call order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using Function = std::function<Value(CallArgs&)>;

/// One value. Lists, dicts and namespaces are shared (Python reference semantics:
/// a namespace assigned to two names is one object).
struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  /// String: the UTF-8 text. Undefined: why it is undefined ("'x' is undefined",
  /// "'dict object' has no attribute 'y'"), the message of the error its use raises.
  std::string s;
  std::shared_ptr<List> list;
  bool tuple = false;             ///< a List that Python would print as a tuple
  std::shared_ptr<Dict> dict;     ///< Dict and Namespace (its attributes)
  std::shared_ptr<Function> fn;

  Value() = default;
  static Value undefined(std::string why) { Value v; v.s = std::move(why); return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value real(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  static Value make_list(List items = {}, bool tuple = false);
  static Value make_dict();
  static Value make_namespace();
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  /// int, float or bool (Python's bool is an int).
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_integral() const { return kind == Kind::Int || kind == Kind::Bool; }
  int64_t as_int() const { return kind == Kind::Bool ? int64_t(b) : i; }
  double as_double() const { return kind == Kind::Float ? f : double(as_int()); }

  /// Python's bool(x) (Undefined is false).
  bool truthy() const;
  /// Python's str(x) as Jinja prints it ({{ x }}; Undefined prints as "").
  std::string str() const;
  /// Python's repr(x) (strings quoted as Python quotes them).
  std::string repr() const;
  /// Python's type name ("str", "int", "dict", "list", ...), for error messages.
  std::string type_name() const;
};

/// A dict's items in insertion order (Python dicts keep it; tojson prints it).
/// Keys are strings (JSON objects and the dict literals of chat templates). Lookups in
/// a large dict go through a hash index, rebuilt when `items` changed size.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);

 private:
  mutable std::unordered_map<std::string, size_t> index_;
  const std::pair<std::string, Value>* lookup(const std::string& key) const;
};

/// Python's ==, for any two values (1 == 1.0 == True; lists and dicts element-wise;
/// Undefined equals only Undefined, as jinja2's Undefined.__eq__). Throws TemplateError
/// for values nested deeper than kMaxValueDepth or a comparison of more than 10 million
/// elements (lists that share their items can be exponentially large).
bool equals(const Value& a, const Value& b);
/// Python's a < b for numbers, strings (code point order) and lists; throws
/// TemplateError (naming `where`) for other types, as Python's TypeError.
bool less(const Value& a, const Value& b, const std::string& where);

/// Python's repr() of a float: the shortest digits that read back exactly, "1.0",
/// "1e+16", "1e-05", "inf", "nan".
std::string float_repr(double x);

/// The Value of a JSON document (objects become dicts in document order; integers
/// beyond int64 become floats). Throws InputError for a document nested deeper than
/// kMaxValueDepth (Python's json module stops near its recursion limit, 1000, too).
Value from_json(const nlohmann::ordered_json& j);

/// Options of json.dumps as transformers' tojson filter passes them (ensure_ascii=False).
struct JsonDumpOptions {
  std::optional<std::string> indent;  ///< nullopt: None (one line); else the text of one level
  std::optional<std::string> item_separator;  ///< nullopt: Python's default (", ", or "," with indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
/// json.dumps(value, ...) with `o` (floats as Python's repr, NaN as NaN, keys in
/// order). Throws TemplateError (naming `where`) for values JSON cannot hold
/// (Undefined, functions).
std::string json_dumps(const Value& v, const JsonDumpOptions& o, const std::string& where);

/// Python's str.isspace() for one code point (str.strip / split and jinja2's \s).
bool py_space(uint32_t cp);

/// Python's str.isprintable() for one code point (repr escapes the others): false for
/// control, format, separator (but ' '), surrogate, private-use and unassigned ones.
bool py_printable(uint32_t cp);

/// UTF-8 text as code points and back (strings are indexed, sliced and measured in
/// code points, as Python's str). Invalid bytes count as one code point each.
std::vector<uint32_t> utf8_decode(const std::string& s);
std::string utf8_encode(const std::vector<uint32_t>& cps);
void utf8_append(std::string& out, uint32_t cp);

}  // namespace lol::jinja
