// jinja2 3.x built-ins (filters.py, tests.py, defaults.py, environment.py getattr /
// getitem) and the Python str / dict / list methods chat templates call, with
// transformers' tojson, raise_exception and strftime_now.
#include "jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <locale.h>
#include <wctype.h>
#include <optional>
#include <map>
#include <set>
#include <unordered_set>

namespace lol::jinja {

void fail_at(const BuiltinContext& c, const std::string& what) { throw TemplateError(c.where + ": " + what); }

namespace {

[[noreturn]] void call_fail(const std::string& what) { throw CallError(what); }

/// Reads a builtin's arguments as Python binds them: position or keyword, with
/// defaults; extra ones are an error.
class Args {
 public:
  Args(CallArgs& a, std::string fn) : a_(a), fn_(std::move(fn)), used_(a.kw.size(), false) {}
  /// The argument at `pos` (counting after the subject) or keyword `name`.
  Value get(size_t pos, const char* name, Value def = Value()) {
    for (size_t k = 0; k < a_.kw.size(); ++k)
      if (a_.kw[k].first == name) {
        if (pos < a_.pos.size()) call_fail(fn_ + "() got multiple values for argument '" + name + "'");
        used_[k] = true;
        return a_.kw[k].second;
      }
    if (pos < a_.pos.size()) return a_.pos[pos];
    return def;
  }
  bool has(size_t pos, const char* name) const {
    if (pos < a_.pos.size()) return true;
    for (const auto& kv : a_.kw)
      if (kv.first == name) return true;
    return false;
  }
  void done(size_t max_pos) const {
    if (a_.pos.size() > max_pos)
      call_fail(fn_ + "() takes at most " + std::to_string(max_pos) + " argument(s) (" +
                std::to_string(a_.pos.size()) + " given)");
    for (size_t k = 0; k < a_.kw.size(); ++k)
      if (!used_[k]) call_fail(fn_ + "() got an unexpected keyword argument '" + a_.kw[k].first + "'");
  }

 private:
  CallArgs& a_;
  std::string fn_;
  std::vector<bool> used_;
};

std::string need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) call_fail(what + " must be str, not " + v.type_name());
  return v.s;
}
int64_t need_int(const Value& v, const std::string& what) {
  if (!v.is_integral()) call_fail(what + " must be an integer, not " + v.type_name());
  return v.as_int();
}

// ------------------------------------------------------------- strings

/// Python's str.strip / lstrip / rstrip; `chars` None: white space.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto cps = utf8_decode(s);
  std::vector<uint32_t> set;
  const bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) set = utf8_decode(need_string(chars, "strip argument"));
  auto strip = [&](uint32_t cp) { return ws ? py_space(cp) : std::find(set.begin(), set.end(), cp) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b])) ++b;
  if (right)
    while (e > b && strip(cps[e - 1])) --e;
  return utf8_encode(std::vector<uint32_t>(cps.begin() + long(b), cps.begin() + long(e)));
}

/// Python's str.split / rsplit.
Value py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    const auto cps = utf8_decode(s);
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && py_space(cps[k])) ++k;
      if (k >= cps.size()) break;
      size_t e = k;
      while (e < cps.size() && !py_space(cps[e])) ++e;
      words.emplace_back(k, e);
      k = e;
    }
    auto piece = [&](size_t b, size_t e) {
      return Value::string(utf8_encode(std::vector<uint32_t>(cps.begin() + long(b), cps.begin() + long(e))));
    };
    if (maxsplit < 0 || size_t(maxsplit) >= words.size()) {
      for (auto& w : words) out.push_back(piece(w.first, w.second));
    } else if (!from_right) {
      for (size_t w = 0; w < size_t(maxsplit); ++w) out.push_back(piece(words[w].first, words[w].second));
      // The rest runs from the next word to the end, its trailing white space kept (Python).
      out.push_back(piece(words[size_t(maxsplit)].first, cps.size()));
    } else {
      const size_t keep = words.size() - size_t(maxsplit);
      out.push_back(piece(0, words[keep - 1].second));  // leading white space kept
      for (size_t w = keep; w < words.size(); ++w) out.push_back(piece(words[w].first, words[w].second));
    }
    return Value::make_list(std::move(out));
  }
  const std::string d = need_string(sep, "split separator");
  if (d.empty()) call_fail("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      const size_t at = s.find(d, pos);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(pos, at - pos));
      pos = at + d.size();
      ++n;
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
      ++n;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::make_list(std::move(out));
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `rep` before every character and at the end
    const auto cps = utf8_decode(s);
    int64_t n = 0;
    for (uint32_t cp : cps) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      utf8_append(out, cp);
    }
    if (count < 0 || n < count) out += rep;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + rep;
    pos = at + old.size();
    ++n;
  }
  return out + s.substr(pos);
}

/// Unicode simple case mappings from glibc's C.UTF-8 locale (ASCII only where that
/// locale is missing), as Python's str.upper / lower / title / capitalize map single
/// code points; Python's special casings are not applied, except "ß".upper() == "SS".
locale_t utf8_locale() {
  static const locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(nullptr));
  return l;
}
uint32_t cp_upper(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
  return utf8_locale() ? uint32_t(towupper_l(wint_t(cp), utf8_locale())) : cp;
}
uint32_t cp_lower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  return utf8_locale() ? uint32_t(towlower_l(wint_t(cp), utf8_locale())) : cp;
}
bool cp_cased(uint32_t cp) { return cp_upper(cp) != cp || cp_lower(cp) != cp; }

std::string map_cps(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t cp : utf8_decode(s)) utf8_append(out, f(cp));
  return out;
}
std::string upper(const std::string& s) {
  std::string out;
  for (uint32_t cp : utf8_decode(s)) {
    if (cp == 0xdf) out += "SS";
    else utf8_append(out, cp_upper(cp));
  }
  return out;
}
std::string lower(const std::string& s) { return map_cps(s, cp_lower); }
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t cp : utf8_decode(s)) {
    const bool cased = cp_cased(cp);
    utf8_append(out, cased ? (prev_cased ? cp_lower(cp) : cp_upper(cp)) : cp);
    prev_cased = cased;
  }
  return out;
}
std::string py_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (uint32_t cp : utf8_decode(s)) {
    utf8_append(out, first ? cp_upper(cp) : cp_lower(cp));
    first = false;
  }
  return out;
}
/// Python's str.islower / isupper: every cased character in that case, and one at least.
bool all_cased_as(const std::string& s, bool upper_case) {
  bool any = false;
  for (uint32_t cp : utf8_decode(s)) {
    if (!cp_cased(cp)) continue;
    any = true;
    if ((upper_case ? cp_upper(cp) : cp_lower(cp)) != cp) return false;
  }
  return any;
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return int64_t(utf8_decode(s.substr(0, byte_pos)).size());
}

bool prefix_test(const std::string& s, const Value& arg, bool suffix) {
  auto one = [&](const std::string& p) {
    return suffix ? s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0
                  : s.compare(0, p.size(), p) == 0;
  };
  if (arg.is_list()) {
    for (const auto& v : *arg.list)
      if (one(need_string(v, suffix ? "endswith argument" : "startswith argument"))) return true;
    return false;
  }
  if (!arg.is_string())
    call_fail(std::string(suffix ? "endswith" : "startswith") + " first arg must be str or a tuple of str, not " +
              arg.type_name());
  return one(arg.s);
}

/// A bound method: `body` reads its arguments; more than `max_pos` positional ones, or
/// an unknown keyword, is an error (Python's TypeError).
Value fn(std::function<Value(Args&)> body, std::string name, size_t max_pos) {
  return Value::function([body = std::move(body), name = std::move(name), max_pos](CallArgs& a) {
    Args r(a, name);
    Value v = body(r);
    r.done(max_pos);
    return v;
  });
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", rr = name != "lstrip";
    return fn([s, l, rr](Args& r) { return Value::string(py_strip(s, r.get(0, "chars", Value::none()), l, rr)); },
              name, 1);
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return fn(
        [s, right](Args& r) {
          return py_split(s, r.get(0, "sep", Value::none()), need_int(r.get(1, "maxsplit", Value::integer(-1)), "maxsplit"),
                          right);
        },
        name, 2);
  }
  if (name == "splitlines")
    return fn(
        [s](Args& r) {
          // Python's line boundaries: \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029.
          const bool keep = r.get(0, "keepends", Value::boolean(false)).truthy();
          const auto cps = utf8_decode(s);
          List out;
          std::vector<uint32_t> line;
          for (size_t k = 0; k < cps.size(); ++k) {
            const uint32_t cp = cps[k];
            const bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                            cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            if (!br) {
              line.push_back(cp);
              continue;
            }
            if (keep) line.push_back(cp);
            if (cp == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') {
              ++k;
              if (keep) line.push_back('\n');
            }
            out.push_back(Value::string(utf8_encode(line)));
            line.clear();
          }
          if (!line.empty()) out.push_back(Value::string(utf8_encode(line)));
          return Value::make_list(std::move(out));
        },
        name, 1);
  if (name == "startswith" || name == "endswith") {
    const bool suffix = name == "endswith";
    return fn([s, suffix](Args& r) { return Value::boolean(prefix_test(s, r.get(0, "prefix"), suffix)); }, name, 1);
  }
  if (name == "replace")
    return fn(
        [s](Args& r) {
          return Value::string(py_replace(s, need_string(r.get(0, "old"), "replace() argument 1"),
                                          need_string(r.get(1, "new"), "replace() argument 2"),
                                          need_int(r.get(2, "count", Value::integer(-1)), "count")));
        },
        name, 3);
  if (name == "upper") return fn([s](Args&) { return Value::string(upper(s)); }, name, 0);
  if (name == "lower") return fn([s](Args&) { return Value::string(lower(s)); }, name, 0);
  if (name == "title") return fn([s](Args&) { return Value::string(py_title(s)); }, name, 0);
  if (name == "capitalize") return fn([s](Args&) { return Value::string(py_capitalize(s)); }, name, 0);
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex")
    return fn(
        [s, name](Args& r) {
          const std::string sub = need_string(r.get(0, "sub"), name + "() argument");
          const size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
          if (at == std::string::npos) {
            if (name.find("index") != std::string::npos) call_fail("substring not found");
            return Value::integer(-1);
          }
          return Value::integer(cp_index(s, at));
        },
        name, 1);
  if (name == "count")
    return fn(
        [s](Args& r) {
          const std::string sub = need_string(r.get(0, "sub"), "count() argument");
          if (sub.empty()) return Value::integer(int64_t(utf8_decode(s).size()) + 1);
          int64_t n = 0;
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
          return Value::integer(n);
        },
        name, 1);
  if (name == "join")
    return fn(
        [s](Args& r) {
          const Value items = r.get(0, "iterable");
          if (!items.is_list() && !items.is_string() && !items.is_dict()) call_fail("can only join an iterable");
          BuiltinContext none;
          const List parts = iterate(items, none);
          std::string out;
          for (size_t k = 0; k < parts.size(); ++k)
            out += (k ? s : "") + need_string(parts[k], "sequence item " + std::to_string(k));
          return Value::string(out);
        },
        name, 1);
  if (name == "removeprefix" || name == "removesuffix") {
    const bool suffix = name == "removesuffix";
    return fn(
        [s, suffix](Args& r) {
          const std::string p = need_string(r.get(0, "prefix"), "argument");
          if (!p.empty() && prefix_test(s, Value::string(p), suffix))
            return Value::string(suffix ? s.substr(0, s.size() - p.size()) : s.substr(p.size()));
          return Value::string(s);
        },
        name, 1);
  }
  if (name == "center" || name == "ljust" || name == "rjust")
    return fn(
        [s, name](Args& r) {
          const int64_t width = need_int(r.get(0, "width"), name + "() width");
          const std::string fill = r.has(1, "fillchar") ? need_string(r.get(1, "fillchar"), "fillchar") : " ";
          if (utf8_decode(fill).size() != 1) call_fail("The fill character must be exactly one character long");
          const int64_t n = int64_t(utf8_decode(s).size());
          if (width > (int64_t(1) << 26)) call_fail(name + "(): width " + std::to_string(width) + " is too large");
          if (width <= n) return Value::string(s);
          const int64_t total = width - n;
          // Python's str.center puts the odd space on the right unless both the padding and the width are odd.
          const int64_t left = name == "ljust" ? 0 : name == "rjust" ? total : total / 2 + (total & width & 1);
          std::string out;
          for (int64_t k = 0; k < left; ++k) out += fill;
          out += s;
          for (int64_t k = left; k < total; ++k) out += fill;
          return Value::string(out);
        },
        name, 2);
  if (name == "zfill")
    return fn(
        [s](Args& r) {
          const int64_t width = need_int(r.get(0, "width"), "zfill() width");
          const int64_t n = int64_t(utf8_decode(s).size());
          if (width > (int64_t(1) << 26)) call_fail("zfill(): width is too large");
          if (width <= n) return Value::string(s);
          const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
          return Value::string((sign ? s.substr(0, 1) : "") + std::string(size_t(width - n), '0') + s.substr(sign ? 1 : 0));
        },
        name, 1);
  if (name == "swapcase")
    return fn(
        [s](Args&) {
          std::string out;
          for (uint32_t cp : utf8_decode(s)) utf8_append(out, cp_upper(cp) != cp ? cp_upper(cp) : cp_lower(cp));
          return Value::string(out);
        },
        name, 0);
  if (name == "partition" || name == "rpartition")
    return fn(
        [s, name](Args& r) {
          const std::string sep = need_string(r.get(0, "sep"), name + "() argument");
          if (sep.empty()) call_fail("empty separator");
          const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
          if (at == std::string::npos)
            return name == "partition"
                       ? Value::make_list({Value::string(s), Value::string(""), Value::string("")}, true)
                       : Value::make_list({Value::string(""), Value::string(""), Value::string(s)}, true);
          return Value::make_list(
              {Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))}, true);
        },
        name, 1);
  if (name == "format")
    return Value::function([s](CallArgs& a) {
      // Python's str.format for replacement fields {}, {0}, {name}, with !s / !r and no format spec.
      std::string out;
      size_t auto_index = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        const char ch = s[k];
        if ((ch == '{' || ch == '}') && k + 1 < s.size() && s[k + 1] == ch) {
          out += ch;
          ++k;
          continue;
        }
        if (ch == '}') call_fail("Single '}' encountered in format string");
        if (ch != '{') {
          out += ch;
          continue;
        }
        const size_t e = s.find('}', k);
        if (e == std::string::npos) call_fail("Single '{' encountered in format string");
        std::string field = s.substr(k + 1, e - k - 1);
        char conv = 's';
        if (field.size() >= 2 && field[field.size() - 2] == '!') {
          conv = field.back();
          field.resize(field.size() - 2);
        }
        if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
            field.find('[') != std::string::npos)
          call_fail("str.format: format specs and attribute lookups are not supported");
        Value v;
        if (field.empty()) {
          if (auto_index >= a.pos.size()) call_fail("Replacement index " + std::to_string(auto_index) + " out of range");
          v = a.pos[auto_index++];
        } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
          const size_t i = size_t(std::atoll(field.c_str()));
          if (i >= a.pos.size()) call_fail("Replacement index " + field + " out of range");
          v = a.pos[i];
        } else {
          bool found = false;
          for (const auto& kv : a.kw)
            if (kv.first == field) {
              v = kv.second;
              found = true;
            }
          if (!found) call_fail("'" + field + "'");
        }
        if (conv != 's' && conv != 'r') call_fail(std::string("Unknown conversion specifier ") + conv);
        out += conv == 'r' ? v.repr() : v.str();
        k = e;
      }
      return Value::string(out);
    });
  if (name == "islower" || name == "isupper") {
    const bool up = name == "isupper";
    return fn([s, up](Args&) { return Value::boolean(all_cased_as(s, up)); }, name, 0);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum")
    return fn(
        [s, name](Args&) {
          const auto cps = utf8_decode(s);
          if (cps.empty()) return Value::boolean(false);
          for (uint32_t cp : cps) {
            const bool ok = name == "isspace"   ? py_space(cp)
                            : name == "isdigit" ? (cp >= '0' && cp <= '9')
                            : name == "isalpha" ? (cp < 0x80 ? std::isalpha(int(cp)) != 0 : cp_cased(cp))
                                                : (cp < 0x80 ? std::isalnum(int(cp)) != 0 : cp_cased(cp));
            if (!ok) return Value::boolean(false);
          }
          return Value::boolean(true);
        },
        name, 0);
  return Value();
}

/// dict.items() (as (key, value) tuples), keys() or values(), as a list.
Value dict_view(const Dict& d, const std::string& what) {
  List out;
  for (const auto& kv : d.items)
    out.push_back(what == "keys"     ? Value::string(kv.first)
                  : what == "values" ? kv.second
                                     : Value::make_list({Value::string(kv.first), kv.second}, true));
  return Value::make_list(std::move(out));
}

Value dict_method(const Value& obj, const std::string& name) {
  const auto d = obj.dict;
  if (name == "items" || name == "keys" || name == "values")
    return fn([d, name](Args&) { return dict_view(*d, name); }, name, 0);
  if (name == "copy")
    return fn(
        [d](Args&) {
          Value out = Value::make_dict();
          out.dict->items = d->items;
          return out;
        },
        name, 0);
  if (name == "get")
    return fn(
        [d](Args& r) {
          const Value key = r.get(0, "key");
          const Value def = r.get(1, "default", Value::none());
          if (!key.is_string()) return def;
          const Value* v = d->find(key.s);
          return v ? *v : def;
        },
        name, 2);
  for (const char* m : {"update", "pop", "popitem", "setdefault", "clear"})
    if (name == m)
      return Value::function([name](CallArgs&) -> Value {
        call_fail("dict." + name + "() is not allowed: chat templates render in an immutable sandbox (transformers' "
                  "ImmutableSandboxedEnvironment)");
      });
  return Value();
}

Value list_method(const Value& obj, const std::string& name) {
  const auto l = obj.list;
  if (name == "index" || name == "count")
    return Value::function([l, name](CallArgs& a) {
      Args r(a, name);
      const Value x = r.get(0, "value");
      r.done(1);
      int64_t n = 0;
      for (size_t k = 0; k < l->size(); ++k)
        if (equals((*l)[k], x)) {
          if (name == "index") return Value::integer(int64_t(k));
          ++n;
        }
      if (name == "index") call_fail(x.repr() + " is not in list");
      return Value::integer(n);
    });
  for (const char* m : {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})
    if (name == m)
      return Value::function([name](CallArgs&) -> Value {
        call_fail("list." + name + "() is not allowed: chat templates render in an immutable sandbox (transformers' "
                  "ImmutableSandboxedEnvironment)");
      });
  return Value();
}

std::string jinja_type(const Value& v) {
  return v.kind == Value::Kind::Namespace ? "jinja2.utils.Namespace object" : v.type_name() + " object";
}

}  // namespace

// --------------------------------------------------------------- lookups

Value get_attr(const Value& obj, const std::string& name, const BuiltinContext& c) {
  if (obj.is_undefined()) fail_at(c, obj.s);
  Value m;
  if (obj.is_string()) m = string_method(obj, name);
  else if (obj.is_dict()) m = dict_method(obj, name);
  else if (obj.is_list()) m = list_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict() || obj.kind == Value::Kind::Namespace) {
    if (const Value* v = obj.dict->find(name)) return *v;
  }
  return Value::undefined("'" + jinja_type(obj) + "' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key, const BuiltinContext& c) {
  if (obj.is_undefined()) fail_at(c, obj.s);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict->find(key.s)) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    int64_t k = key.as_int();
    if (obj.is_list()) {
      const int64_t n = int64_t(obj.list->size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) return (*obj.list)[size_t(k)];
    } else {
      const auto cps = utf8_decode(obj.s);
      const int64_t n = int64_t(cps.size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) {
        std::string out;
        utf8_append(out, cps[size_t(k)]);
        return Value::string(out);
      }
    }
    return Value::undefined("'" + jinja_type(obj) + "' has no element " + key.repr());
  }
  if (key.is_string()) return get_attr(obj, key.s, c);
  return Value::undefined("'" + jinja_type(obj) + "' has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step, const BuiltinContext& c) {
  if (obj.is_undefined()) fail_at(c, obj.s);
  // jinja2's getitem: a subscript Python refuses (TypeError) gives Undefined.
  const Value refused = Value::undefined("'" + obj.type_name() + " object' cannot be sliced");
  if (!obj.is_list() && !obj.is_string()) return refused;
  for (const Value* v : {start, stop, step})
    if (v && !v->is_none() && !v->is_integral()) return refused;
  auto bound = [&](const Value* v, const char*) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    return v->as_int();
  };
  const auto st = bound(step, "step");
  const int64_t s = st.value_or(1);
  if (s == 0) fail_at(c, "slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = utf8_decode(obj.s);
    n = int64_t(cps.size());
  } else {
    n = int64_t(obj.list->size());
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (s > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(bound(start, "start"), s > 0 ? 0 : n - 1);
  const int64_t e = clamp(bound(stop, "stop"), s > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t k = b; s > 0 ? k < e : k > e; k += s) idx.push_back(k);
  if (obj.is_string()) {
    std::string out;
    for (int64_t k : idx) utf8_append(out, cps[size_t(k)]);
    return Value::string(out);
  }
  List out;
  for (int64_t k : idx) out.push_back((*obj.list)[size_t(k)]);
  return Value::make_list(std::move(out), obj.tuple);
}

List iterate(const Value& v, const BuiltinContext& c) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return *v.list;
    case Value::Kind::Dict: {
      List out;
      for (const auto& kv : v.dict->items) out.push_back(Value::string(kv.first));
      return out;
    }
    case Value::Kind::String: {
      List out;
      for (uint32_t cp : utf8_decode(v.s)) {
        std::string ch;
        utf8_append(ch, cp);
        out.push_back(Value::string(ch));
      }
      return out;
    }
    default: fail_at(c, "'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length(const Value& v, const BuiltinContext& c) {
  switch (v.kind) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return int64_t(utf8_decode(v.s).size());
    case Value::Kind::List: return int64_t(v.list->size());
    case Value::Kind::Dict: return int64_t(v.dict->items.size());
    default: fail_at(c, "object of type '" + v.type_name() + "' has no len()");
  }
}

Value call_value(const Value& fn, CallArgs& args, const BuiltinContext& c) {
  if (fn.is_undefined()) fail_at(c, fn.s);
  if (fn.kind != Value::Kind::Function) fail_at(c, "'" + fn.type_name() + "' object is not callable");
  try {
    return (*fn.fn)(args);
  } catch (const CallError& e) {
    fail_at(c, e.what());
  }
}

/// Python's str % args for the conversions chat templates use (%s %r %d %i %f %%).
std::string percent_format(const std::string& fmt, const Value& args, const BuiltinContext& c) {
  List items = args.is_list() && args.tuple ? *args.list : List{args};
  // Python takes a non-tuple argument with __getitem__ (list, dict, jinja2's Undefined)
  // as a mapping: left over, it is no error.
  const bool mapping = (args.is_list() && !args.tuple) || args.is_dict() || args.is_undefined();
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail_at(c, "incomplete format");
    const char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= items.size()) fail_at(c, "not enough arguments for format string");
    const Value& v = items[next++];
    if (conv == 's') out += v.str();
    else if (conv == 'r') out += v.repr();
    else if (conv == 'd' || conv == 'i') {
      if (!v.is_number()) fail_at(c, "%d format: a real number is required, not " + v.type_name());
      out += std::to_string(v.is_integral() ? v.as_int() : int64_t(v.f));
    } else if (conv == 'f') {
      if (!v.is_number()) fail_at(c, "must be real number, not " + v.type_name());
      char b[64];
      std::snprintf(b, sizeof b, "%f", v.as_double());
      out += b;
    } else {
      fail_at(c, std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < items.size() && !(mapping && next == 0))
    fail_at(c, "not all arguments converted during string formatting");
  return out;
}

// ---------------------------------------------------------------- tests

namespace {

using TestFn = std::function<bool(const Value&, Args&, const BuiltinContext&)>;

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> t = [] {
    std::map<std::string, TestFn> m;
    auto simple = [&](const char* name, std::function<bool(const Value&)> f) {
      m[name] = [f](const Value& v, Args&, const BuiltinContext&) { return f(v); };
    };
    using K = Value::Kind;
    simple("defined", [](const Value& v) { return !v.is_undefined(); });
    simple("undefined", [](const Value& v) { return v.is_undefined(); });
    simple("none", [](const Value& v) { return v.is_none(); });
    simple("boolean", [](const Value& v) { return v.kind == K::Bool; });
    simple("true", [](const Value& v) { return v.kind == K::Bool && v.b; });
    simple("false", [](const Value& v) { return v.kind == K::Bool && !v.b; });
    simple("integer", [](const Value& v) { return v.kind == K::Int; });
    simple("float", [](const Value& v) { return v.kind == K::Float; });
    simple("number", [](const Value& v) { return v.is_number(); });
    simple("string", [](const Value& v) { return v.is_string(); });
    simple("mapping", [](const Value& v) { return v.is_dict(); });
    simple("iterable", [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); });
    simple("sequence", [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); });
    simple("callable", [](const Value& v) { return v.kind == K::Function; });
    simple("escaped", [](const Value&) { return false; });
    simple("lower", [](const Value& v) { return v.is_string() && all_cased_as(v.s, false); });
    simple("upper", [](const Value& v) { return v.is_string() && all_cased_as(v.s, true); });
    // value % 2 == 1 / == 0 with Python's %, floats included (0.1 is neither).
    m["odd"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.is_integral()) return ((v.as_int() % 2) + 2) % 2 == 1;
      if (v.kind == K::Float) return std::fmod(std::fmod(v.f, 2.0) + 2.0, 2.0) == 1.0;
      fail_at(c, v.is_undefined() ? v.s : "unsupported operand type(s) for %: '" + v.type_name() + "' and 'int'");
    };
    m["even"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.is_integral()) return v.as_int() % 2 == 0;
      if (v.kind == K::Float) return std::fmod(std::fmod(v.f, 2.0) + 2.0, 2.0) == 0.0;
      fail_at(c, v.is_undefined() ? v.s : "unsupported operand type(s) for %: '" + v.type_name() + "' and 'int'");
    };
    m["divisibleby"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const Value d = a.get(0, "num");
      if (!v.is_integral() || !d.is_integral()) fail_at(c, "divisibleby needs integers");
      if (d.as_int() == 0) fail_at(c, "integer division or modulo by zero");
      return v.as_int() % d.as_int() == 0;
    };
    auto cmp = [&](std::vector<const char*> names, std::function<bool(const Value&, const Value&, const BuiltinContext&)> f) {
      for (const char* n : names)
        m[n] = [f](const Value& v, Args& a, const BuiltinContext& c) { return f(v, a.get(0, "other"), c); };
    };
    cmp({"eq", "equalto", "=="}, [](const Value& a, const Value& b, const BuiltinContext&) { return equals(a, b); });
    cmp({"ne", "!="}, [](const Value& a, const Value& b, const BuiltinContext&) { return !equals(a, b); });
    cmp({"lt", "lessthan", "<"}, [](const Value& a, const Value& b, const BuiltinContext& c) { return less(a, b, c.where); });
    cmp({"gt", "greaterthan", ">"}, [](const Value& a, const Value& b, const BuiltinContext& c) { return less(b, a, c.where); });
    cmp({"le", "<="}, [](const Value& a, const Value& b, const BuiltinContext& c) { return !less(b, a, c.where); });
    cmp({"ge", ">="}, [](const Value& a, const Value& b, const BuiltinContext& c) { return !less(a, b, c.where); });
    m["sameas"] = [](const Value& v, Args& a, const BuiltinContext&) {
      const Value o = a.get(0, "other");
      if (v.kind != o.kind) return false;
      switch (v.kind) {
        case K::None:
        case K::Undefined: return true;
        case K::Bool: return v.b == o.b;
        case K::List: return v.list == o.list;
        case K::Dict:
        case K::Namespace: return v.dict == o.dict;
        case K::Function: return v.fn == o.fn;
        default: return equals(v, o);
      }
    };
    m["in"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const Value seq = a.get(0, "seq");
      if (seq.is_string()) {
        if (!v.is_string()) fail_at(c, "'in <string>' requires string as left operand");
        return seq.s.find(v.s) != std::string::npos;
      }
      if (seq.is_dict()) return v.is_string() && seq.dict->find(v.s) != nullptr;
      for (const auto& x : iterate(seq, c))
        if (equals(x, v)) return true;
      return false;
    };
    m["filter"] = [](const Value& v, Args&, const BuiltinContext&) { return v.is_string() && has_filter(v.s); };
    m["test"] = [](const Value& v, Args&, const BuiltinContext&) { return v.is_string() && has_test(v.s); };
    return m;
  }();
  return t;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(const std::string& name, const Value& subject, CallArgs& args, const BuiltinContext& c) {
  const auto it = tests().find(name);
  if (it == tests().end()) fail_at(c, "no test named '" + name + "'");
  try {
    Args a(args, name);
    const bool r = it->second(subject, a, c);
    a.done(name == "defined" || name == "undefined" ? 0 : 1);
    return r;
  } catch (const CallError& e) {
    fail_at(c, e.what());
  }
}

// -------------------------------------------------------------- filters

namespace {

using FilterFn = std::function<Value(const Value&, Args&, const BuiltinContext&)>;

/// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value attr_path(const Value& v, const Value& attribute, const BuiltinContext& c) {
  if (attribute.is_integral()) return get_item(v, attribute, c);
  const std::string path = need_string(attribute, "attribute");
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    cur = digits ? get_item(cur, Value::integer(std::atoll(part.c_str())), c) : get_item(cur, Value::string(part), c);
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

/// The sort key of jinja2's sort / min / max / unique: strings lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(lower(v.s)) : v;
}

std::vector<Value> sorted_items(List items, bool reverse, bool case_sensitive, const Value& attribute,
                                const BuiltinContext& c) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& v : items)
    keyed.emplace_back(sort_key(attribute.is_none() || attribute.is_undefined() ? v : attr_path(v, attribute, c),
                                case_sensitive),
                       v);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first, c.where) : less(a.first, b.first, c.where);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return out;
}

/// Python's round(x, n) for a float: the exact binary value rounded to n decimals, ties
/// to even (printf's %.nf rounds the same way), read back.
double py_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    if (ndigits > 340) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  if (-ndigits > 308) return std::copysign(0.0, x);
  const double p = std::pow(10.0, double(-ndigits));
  const double q = x / p;
  double r = std::nearbyint(q);  // ties to even in the default rounding mode
  return r * p;
}

/// Python's int(text, base) syntax: optional sign, digits of `base` with single
/// underscores between them (base 16 / 8 / 2 also take their 0x / 0o / 0b prefix);
/// white space around is allowed.
std::optional<int64_t> parse_py_int(std::string s, int64_t base) {
  s = py_strip(s, Value::none(), true, true);
  size_t k = 0;
  bool neg = false;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) neg = s[k++] == '-';
  if (base != 10 && k + 1 < s.size() && s[k] == '0') {
    const char p = char(std::tolower(static_cast<unsigned char>(s[k + 1])));
    if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) k += 2;
  }
  if (k >= s.size() || base < 2 || base > 36) return std::nullopt;
  int64_t v = 0;
  bool prev_digit = false;
  for (; k < s.size(); ++k) {
    const char ch = char(std::tolower(static_cast<unsigned char>(s[k])));
    if (ch == '_' && prev_digit && k + 1 < s.size()) {
      prev_digit = false;
      continue;
    }
    const int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, int64_t(d), &v))
      call_fail("integer overflow: " + s + " (Python's integers are unbounded; lol's are 64-bit)");
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  return neg ? -v : v;
}

/// Python's float(text) syntax: decimal digits (single underscores between digits), an
/// optional fraction and exponent, or inf / infinity / nan; white space around.
std::optional<double> parse_py_float(std::string s) {
  s = py_strip(s, Value::none(), true, true);
  std::string t = lower(s), body = t;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(t.c_str(), nullptr);
  std::string clean;
  bool digit_seen = false, prev_digit = false;
  for (size_t k = 0; k < t.size(); ++k) {
    const char ch = t[k];
    if (ch == '_') {
      if (!prev_digit || k + 1 >= t.size() || !std::isdigit(static_cast<unsigned char>(t[k + 1]))) return std::nullopt;
      continue;
    }
    prev_digit = std::isdigit(static_cast<unsigned char>(ch)) != 0;
    digit_seen = digit_seen || prev_digit;
    if (!prev_digit && ch != '.' && ch != 'e' && ch != '+' && ch != '-') return std::nullopt;
    clean += ch;
  }
  if (!digit_seen) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (!end || *end != 0) return std::nullopt;
  return d;
}

/// jinja2's int filter: int(value, base) for text, int(value) for numbers, else
/// int(float(value)); `def` when those fail. Undefined raises, as int(Undefined) does.
Value to_int(const Value& v, const Value& def, int64_t base, const BuiltinContext& c) {
  if (v.is_undefined()) fail_at(c, v.s);
  if (v.is_integral()) return Value::integer(v.as_int());
  // int(float): inf raises OverflowError (jinja2 lets it through), NaN a ValueError (the default).
  const auto from_double = [&](double d) {
    if (std::isnan(d)) return def;
    if (std::isinf(d)) fail_at(c, "cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18)
      fail_at(c, "integer overflow: " + float_repr(d) + " (Python's integers are unbounded; lol's are 64-bit)");
    return Value::integer(int64_t(d));
  };
  if (v.kind == Value::Kind::Float) return from_double(v.f);
  if (v.is_string()) {
    try {
      if (const auto i = parse_py_int(v.s, base)) return Value::integer(*i);
    } catch (const CallError& e) {
      fail_at(c, e.what());
    }
    if (const auto d = parse_py_float(v.s)) return from_double(*d);
  }
  return def;
}

/// jinja2's float filter: float(value), else `def`; Undefined raises.
Value to_float(const Value& v, const Value& def, const BuiltinContext& c) {
  if (v.is_undefined()) fail_at(c, v.s);
  if (v.is_number()) return Value::real(v.as_double());
  if (v.is_string())
    if (const auto d = parse_py_float(v.s)) return Value::real(*d);
  return def;
}

/// The select / reject family: keeps items whose test (or truth) is `keep`.
Value select(const Value& v, Args& a, const BuiltinContext& c, bool keep, bool by_attr, CallArgs& raw) {
  // Arguments after the subject: [attribute,] [test name, test args...].
  const size_t first = by_attr ? 1 : 0;
  Value attribute = by_attr ? a.get(0, "attribute") : Value();
  if (by_attr && attribute.is_undefined()) fail_at(c, "selectattr / rejectattr need an attribute name");
  std::string test;
  CallArgs targs;
  if (raw.pos.size() > first) {
    test = need_string(raw.pos[first], "test name");
    targs.pos.assign(raw.pos.begin() + long(first) + 1, raw.pos.end());
  }
  if (!test.empty() && !has_test(test)) fail_at(c, "no test named '" + test + "'");
  List out;
  if (!v.truthy()) return Value::make_list();  // jinja2: `if value:` before iterating (None, false, "")
  for (const auto& item : iterate(v, c)) {
    const Value subject = by_attr ? attr_path(item, attribute, c) : item;
    bool ok;
    if (test.empty()) {
      ok = subject.truthy();
    } else {
      CallArgs copy = targs;
      ok = apply_test(test, subject, copy, c);
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = [] {
    std::map<std::string, FilterFn> m;
    using K = Value::Kind;
    m["abs"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.kind == K::Float) return Value::real(std::fabs(v.f));
      if (v.is_integral()) {
        if (v.as_int() == INT64_MIN) fail_at(c, "integer overflow (Python's integers are unbounded; lol's are 64-bit)");
        return Value::integer(std::llabs(v.as_int()));
      }
      fail_at(c, "bad operand type for abs(): '" + v.type_name() + "'");
    };
    m["attr"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      // getattr() only: a dict's items are not its attributes (a namespace's are).
      const std::string name = need_string(a.get(0, "name"), "attr name");
      if (v.is_undefined()) fail_at(c, v.s);
      if (v.is_dict()) {
        const Value m = get_attr(v, name, c);
        return m.kind == Value::Kind::Function ? m : Value::undefined("'dict object' has no attribute '" + name + "'");
      }
      return get_attr(v, name, c);
    };
    m["capitalize"] = [](const Value& v, Args&, const BuiltinContext&) { return Value::string(py_capitalize(v.str())); };
    m["length"] = m["count"] = [](const Value& v, Args&, const BuiltinContext& c) { return Value::integer(length(v, c)); };
    m["default"] = m["d"] = [](const Value& v, Args& a, const BuiltinContext&) {
      const Value def = a.get(0, "default_value", Value::string(""));
      const bool boolean = a.get(1, "boolean", Value::boolean(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return def;
      return v;
    };
    m["dictsort"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      if (!v.is_dict()) fail_at(c, "dictsort expects a dict");
      const bool cs = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
      const std::string by = a.get(1, "by", Value::string("key")).str();
      const bool rev = a.get(2, "reverse", Value::boolean(false)).truthy();
      if (by != "key" && by != "value") fail_at(c, "dictsort: You can only sort by either 'key' or 'value'");
      List items;
      for (const auto& kv : v.dict->items) items.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
      return Value::make_list(sorted_items(items, rev, cs, Value::integer(by == "key" ? 0 : 1), c));
    };
    m["first"] = [](const Value& v, Args&, const BuiltinContext& c) {
      const List items = iterate(v, c);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    m["last"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.is_dict()) fail_at(c, "'dict' object is not reversible");
      const List items = iterate(v, c);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    m["float"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      return to_float(v, a.get(0, "default", Value::real(0)), c);
    };
    m["int"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const Value def = a.get(0, "default", Value::integer(0));
      const Value base = a.get(1, "base", Value::integer(10));
      if (!base.is_integral()) fail_at(c, "int: base must be an integer");
      return to_int(v, def, base.as_int(), c);
    };
    m["join"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const std::string sep = a.get(0, "d", Value::string("")).str();
      const Value attribute = a.get(1, "attribute", Value::none());
      std::string out;
      bool first = true;
      for (const auto& item : iterate(v, c)) {
        out += (first ? "" : sep) + (attribute.is_none() ? item : attr_path(item, attribute, c)).str();
        first = false;
      }
      return Value::string(out);
    };
    m["list"] = [](const Value& v, Args&, const BuiltinContext& c) { return Value::make_list(iterate(v, c)); };
    m["lower"] = [](const Value& v, Args&, const BuiltinContext&) { return Value::string(lower(v.str())); };
    m["upper"] = [](const Value& v, Args&, const BuiltinContext&) { return Value::string(upper(v.str())); };
    // jinja2's do_title (not str.title): words split at white space, '-' and opening
    // brackets; each word's first character upper-cased, the rest lower-cased.
    m["title"] = [](const Value& v, Args&, const BuiltinContext&) {
      std::string out;
      bool start = true;
      for (uint32_t cp : utf8_decode(v.str())) {
        const bool sep = py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        utf8_append(out, sep ? cp : start ? cp_upper(cp) : cp_lower(cp));
        start = sep;
      }
      return Value::string(out);
    };
    m["items"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.is_undefined()) return Value::make_list();
      if (!v.is_dict()) fail_at(c, "Can only get item pairs from a mapping.");
      return dict_view(*v.dict, "items");
    };
    auto minmax = [](bool is_max) {
      return [is_max](const Value& v, Args& a, const BuiltinContext& c) {
        const bool cs = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
        const Value attribute = a.get(1, "attribute", Value::none());
        const auto items = sorted_items(iterate(v, c), false, cs, attribute, c);
        if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
        if (!is_max) return items.front();
        // max: the first of the largest, as Python's max()
        const Value key = sort_key(attribute.is_none() ? items.back() : attr_path(items.back(), attribute, c), cs);
        for (const auto& it : items)
          if (equals(sort_key(attribute.is_none() ? it : attr_path(it, attribute, c), cs), key)) return it;
        return items.back();
      };
    };
    m["max"] = minmax(true);
    m["min"] = minmax(false);
    m["replace"] = [](const Value& v, Args& a, const BuiltinContext&) {
      const Value count = a.get(2, "count", Value::none());
      return Value::string(py_replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                      count.is_none() ? -1 : need_int(count, "count")));
    };
    m["reverse"] = [](const Value& v, Args&, const BuiltinContext& c) {
      if (v.is_string()) {
        auto cps = utf8_decode(v.s);
        std::reverse(cps.begin(), cps.end());
        return Value::string(utf8_encode(cps));
      }
      List items = iterate(v, c);
      std::reverse(items.begin(), items.end());
      return Value::make_list(std::move(items));
    };
    m["round"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const int64_t precision = need_int(a.get(0, "precision", Value::integer(0)), "precision");
      const std::string method = a.get(1, "method", Value::string("common")).str();
      if (v.is_undefined()) fail_at(c, v.s);
      if (!v.is_number()) fail_at(c, "type " + v.type_name() + " doesn't define __round__ method");
      const double x = v.as_double(), p = std::pow(10.0, double(precision));
      if (method == "common") {  // Python's round(): an int stays an int
        if (v.is_integral()) {
          if (precision >= 0) return Value::integer(v.as_int());
          return Value::integer(int64_t(py_round(double(v.as_int()), precision)));
        }
        return Value::real(py_round(x, precision));
      }
      if (method == "ceil") return Value::real(std::ceil(x * p) / p);
      if (method == "floor") return Value::real(std::floor(x * p) / p);
      fail_at(c, "method must be common, ceil or floor");
    };
    m["safe"] = [](const Value& v, Args&, const BuiltinContext&) { return v; };
    m["string"] = [](const Value& v, Args&, const BuiltinContext&) { return Value::string(v.str()); };
    m["sort"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const bool rev = a.get(0, "reverse", Value::boolean(false)).truthy();
      const bool cs = a.get(1, "case_sensitive", Value::boolean(false)).truthy();
      const Value attribute = a.get(2, "attribute", Value::none());
      return Value::make_list(sorted_items(iterate(v, c), rev, cs, attribute, c));
    };
    m["sum"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const Value attribute = a.get(0, "attribute", Value::none());
      Value total = a.get(1, "start", Value::integer(0));
      for (const auto& it : iterate(v, c)) {
        const Value x = attribute.is_none() ? it : attr_path(it, attribute, c);
        if (!x.is_number() || !total.is_number()) fail_at(c, "sum needs numbers");
        int64_t r = 0;
        if (x.is_integral() && total.is_integral() && __builtin_add_overflow(total.as_int(), x.as_int(), &r))
          fail_at(c, "integer overflow (Python's integers are unbounded; lol's are 64-bit)");
        if (x.is_integral() && total.is_integral()) total = Value::integer(r);
        else total = Value::real(total.as_double() + x.as_double());
      }
      return total;
    };
    m["tojson"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      JsonDumpOptions o;
      const Value indent = a.get(0, "indent", Value::none());
      if (indent.is_integral()) {
        if (indent.as_int() > 4096) fail_at(c, "tojson: indent " + indent.repr() + " is too large");
        o.indent = std::string(size_t(std::max<int64_t>(0, indent.as_int())), ' ');
      } else if (indent.is_string()) {
        o.indent = indent.s;
      } else if (!indent.is_none()) {
        fail_at(c, "tojson: indent must be an integer, a string or None");
      }
      o.ensure_ascii = a.get(1, "ensure_ascii", Value::boolean(false)).truthy();
      const Value seps = a.get(2, "separators", Value::none());
      if (seps.is_list() && seps.list->size() == 2) {
        o.item_separator = need_string((*seps.list)[0], "separators[0]");
        o.key_separator = need_string((*seps.list)[1], "separators[1]");
      } else if (!seps.is_none()) {
        fail_at(c, "tojson: separators must be a pair of strings");
      }
      o.sort_keys = a.get(3, "sort_keys", Value::boolean(false)).truthy();
      std::string out = json_dumps(v, o, c.where);
      return Value::string(out);
    };
    m["trim"] = [](const Value& v, Args& a, const BuiltinContext&) {
      return Value::string(py_strip(v.str(), a.get(0, "chars", Value::none()), true, true));
    };
    m["unique"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const bool cs = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
      const Value attribute = a.get(1, "attribute", Value::none());
      // A set of Python-hashable keys (1, 1.0 and True are one key; lists and dicts are
      // unhashable, as in Python).
      List out;
      std::unordered_set<std::string> seen;
      for (const auto& it : iterate(v, c)) {
        const Value key = sort_key(attribute.is_none() ? it : attr_path(it, attribute, c), cs);
        std::string h;
        if (key.is_number()) {
          const double d = key.as_double();
          h = key.is_integral() ? "n" + std::to_string(key.as_int())
              : (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18) ? "n" + std::to_string(int64_t(d))
                                                                                 : "f" + float_repr(d);
        } else if (key.is_string()) {
          h = "s" + key.s;
        } else if (key.is_none() || key.is_undefined()) {
          h = key.is_none() ? "N" : "U";
        } else {
          fail_at(c, "unhashable type: '" + key.type_name() + "'");
        }
        if (seen.insert(h).second) out.push_back(it);
      }
      return Value::make_list(std::move(out));
    };
    m["indent"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const Value width = a.get(0, "width", Value::integer(4));
      if (!width.is_string() && !width.is_integral()) fail_at(c, "indent: width must be an integer or a string");
      if (width.is_integral() && width.as_int() > 4096) fail_at(c, "indent: width " + width.repr() + " is too large");
      const std::string ind = width.is_string() ? width.s : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
      const bool first = a.get(1, "first", Value::boolean(false)).truthy();
      const bool blank = a.get(2, "blank", Value::boolean(false)).truthy();
      std::string s = v.str() + "\n";
      std::vector<std::string> lines;
      size_t pos = 0;
      while (pos < s.size()) {
        const size_t e = s.find('\n', pos);
        lines.push_back(s.substr(pos, e - pos));
        pos = e + 1;
      }
      std::string out;
      for (size_t k = 0; k < lines.size(); ++k) {
        if (k) out += "\n" + ((blank || !lines[k].empty()) ? ind : std::string());
        out += lines[k];
      }
      return Value::string(first ? ind + out : out);
    };
    // printf-style: value % args (jinja2's format filter).
    m["format"] = [](const Value& v, Args&, const BuiltinContext&) -> Value {
      return v;  // replaced in apply_filter (it takes any number of arguments)
    };
    m["escape"] = m["e"] = m["forceescape"] = [](const Value& v, Args&, const BuiltinContext&) {
      std::string out;
      for (char ch : v.str()) {
        switch (ch) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += ch;
        }
      }
      return Value::string(out);
    };
    // jinja2's truncate(length=255, killwords=False, end='...', leeway=None -> 5).
    m["truncate"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const int64_t length = need_int(a.get(0, "length", Value::integer(255)), "length");
      const bool killwords = a.get(1, "killwords", Value::boolean(false)).truthy();
      const std::string end = a.get(2, "end", Value::string("...")).str();
      const Value lw = a.get(3, "leeway", Value::none());
      const int64_t leeway = lw.is_none() ? 5 : need_int(lw, "leeway");
      const auto cps = utf8_decode(v.str());
      const int64_t end_len = int64_t(utf8_decode(end).size());
      if (length < end_len) fail_at(c, "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
      if (leeway < 0) fail_at(c, "expected leeway >= 0, got " + std::to_string(leeway));
      if (int64_t(cps.size()) <= length + leeway) return Value::string(v.str());
      std::vector<uint32_t> head(cps.begin(), cps.begin() + long(length - end_len));
      if (killwords) return Value::string(utf8_encode(head) + end);
      // Drop the last (partial) word: rsplit(' ', 1)[0].
      std::string h = utf8_encode(head);
      const size_t sp = h.rfind(' ');
      if (sp != std::string::npos) h.resize(sp);
      return Value::string(h + end);
    };
    // jinja2's batch(linecount, fill_with=None): lists of linecount items.
    m["batch"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const int64_t n = need_int(a.get(0, "linecount"), "linecount");
      if (n <= 0) fail_at(c, "batch: linecount must be positive");
      const Value fill = a.get(1, "fill_with", Value::none());
      List out, cur;
      for (const auto& it : iterate(v, c)) {
        cur.push_back(it);
        if (int64_t(cur.size()) == n) {
          out.push_back(Value::make_list(std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) {
        if (!fill.is_none())
          while (int64_t(cur.size()) < n) cur.push_back(fill);
        out.push_back(Value::make_list(std::move(cur)));
      }
      return Value::make_list(std::move(out));
    };
    m["wordcount"] = [](const Value& v, Args&, const BuiltinContext&) {
      // jinja2: len(re.findall(r"\w+", s)); \w: letters, digits, '_' (non-ASCII: cased letters).
      int64_t n = 0;
      bool in_word = false;
      for (uint32_t cp : utf8_decode(v.str())) {
        const bool w = cp < 0x80 ? (std::isalnum(int(cp)) != 0 || cp == '_') : cp_cased(cp);
        n += w && !in_word;
        in_word = w;
      }
      return Value::integer(n);
    };
    m["center"] = [](const Value& v, Args& a, const BuiltinContext& c) {
      const int64_t width = need_int(a.get(0, "width", Value::integer(80)), "width");
      if (width > int64_t(c.options->max_output_bytes)) fail_at(c, "center: width " + std::to_string(width) + " is too large");
      const auto cps = utf8_decode(v.str());
      const int64_t n = int64_t(cps.size());
      if (width <= n) return Value::string(v.str());
      const int64_t total = width - n;
      const int64_t left = total / 2 + (total & width & 1);  // Python's str.center
      return Value::string(std::string(size_t(left), ' ') + v.str() + std::string(size_t(total - left), ' '));
    };
    return m;
  }();
  return f;
}

}  // namespace

bool has_filter(const std::string& name) {
  return filters().count(name) > 0 || name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
         name == "rejectattr";
}

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args, const BuiltinContext& c) {
  try {
    Args a(args, name);
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      const bool by_attr = name.size() > 6;
      for (const auto& kv : args.kw) fail_at(c, name + "() got an unexpected keyword argument '" + kv.first + "'");
      return select(subject, a, c, name[0] == 's', by_attr, args);
    }
    if (name == "format") {
      if (!args.kw.empty() && !args.pos.empty()) fail_at(c, "can't handle positional and keyword arguments at the same time");
      std::string fmt = subject.str();
      if (!args.kw.empty()) fail_at(c, "format with keyword arguments is not supported");
      Value tuple = Value::make_list(args.pos, true);
      // Python: "%s" % x through the same rules as the % operator (render.cpp).
      return Value::string(percent_format(fmt, tuple, c));
    }
    if (name == "map") {
      if (!subject.truthy()) return Value::make_list();  // jinja2: `if value:` before iterating
      if (args.pos.empty()) {
        const Value attribute = a.get(99, "attribute");
        if (attribute.is_undefined()) fail_at(c, "map needs a filter name or attribute=");
        const Value def = a.get(99, "default");
        a.done(0);
        List out;
        for (const auto& it : iterate(subject, c)) {
          Value x = attr_path(it, attribute, c);
          out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
        }
        return Value::make_list(std::move(out));
      }
      const std::string fname = need_string(args.pos[0], "map filter name");
      if (!has_filter(fname)) fail_at(c, "no filter named '" + fname + "'");
      CallArgs rest;
      rest.pos.assign(args.pos.begin() + 1, args.pos.end());
      rest.kw = args.kw;
      List out;
      for (const auto& it : iterate(subject, c)) {
        CallArgs copy = rest;
        out.push_back(apply_filter(fname, it, copy, c));
      }
      return Value::make_list(std::move(out));
    }
    const auto it = filters().find(name);
    if (it == filters().end()) fail_at(c, "no filter named '" + name + "'");
    Value r = it->second(subject, a, c);
    static const std::map<std::string, size_t> kMaxArgs = {
        {"attr", 1},    {"default", 2}, {"d", 2},      {"dictsort", 3}, {"float", 1},  {"int", 2},
        {"join", 2},    {"max", 2},     {"min", 2},    {"replace", 3},  {"round", 2},  {"sort", 3},
        {"sum", 2},     {"tojson", 4},  {"trim", 1},   {"unique", 2},   {"indent", 3}, {"center", 1}, {"truncate", 4}, {"batch", 2}};
    const auto mx = kMaxArgs.find(name);
    a.done(mx == kMaxArgs.end() ? 0 : mx->second);
    return r;
  } catch (const CallError& e) {
    fail_at(c, e.what());
  }
}

// -------------------------------------------------------------- globals

Dict builtin_globals(const RenderOptions& options, std::vector<std::weak_ptr<Dict>>* namespaces) {
  Dict g;
  g.set("range", Value::function([](CallArgs& a) {
    if (!a.kw.empty()) call_fail("range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) call_fail("range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    for (const auto& v : a.pos)
      if (!v.is_integral()) call_fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
    if (a.pos.size() == 1) {
      stop = a.pos[0].as_int();
    } else {
      start = a.pos[0].as_int();
      stop = a.pos[1].as_int();
      if (a.pos.size() == 3) step = a.pos[2].as_int();
    }
    if (step == 0) call_fail("range() arg 3 must not be zero");
    List out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (out.size() >= 100000) call_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.push_back(Value::integer(k));
    }
    return Value::make_list(std::move(out));
  }));
  // namespace(...) and dict(...): the items of dict arguments, then the keyword arguments.
  const auto fill = [](Value target, const CallArgs& a, const std::string& fn) {
    for (const auto& v : a.pos) {
      if (!v.is_dict()) call_fail(fn + "() positional arguments must be dicts");
      for (const auto& kv : v.dict->items) target.dict->set(kv.first, kv.second);
    }
    for (const auto& kv : a.kw) target.dict->set(kv.first, kv.second);
    return target;
  };
  g.set("namespace", Value::function([namespaces, fill](CallArgs& a) {
    Value ns = Value::make_namespace();
    namespaces->push_back(ns.dict);
    return fill(ns, a, "namespace");
  }));
  g.set("dict", Value::function([fill](CallArgs& a) { return fill(Value::make_dict(), a, "dict"); }));
  // joiner(sep=", "): a function that returns "" the first time, then sep.
  g.set("joiner", Value::function([](CallArgs& a) {
    Args r(a, "joiner");
    const std::string sep = r.get(0, "sep", Value::string(", ")).str();
    r.done(1);
    auto used = std::make_shared<bool>(false);
    return Value::function([sep, used](CallArgs& b) {
      if (!b.pos.empty() || !b.kw.empty()) call_fail("joiner() takes no arguments");
      if (!*used) {
        *used = true;
        return Value::string("");
      }
      return Value::string(sep);
    });
  }));
  g.set("raise_exception", Value::function([](CallArgs& a) -> Value {
    call_fail("raise_exception: " + (a.pos.empty() ? std::string() : a.pos[0].str()));
  }));
  const auto now = options.now;
  g.set("strftime_now", Value::function([now](CallArgs& a) {
    if (a.pos.size() != 1 || !a.pos[0].is_string()) call_fail("strftime_now(format) takes one string");
    // transformers formats a naive datetime.now(): %z and %Z are empty.
    std::string fmt;
    const std::string& f = a.pos[0].s;
    for (size_t k = 0; k < f.size(); ++k) {
      if (f[k] == '%' && k + 1 < f.size()) {
        if (f[k + 1] == 'z' || f[k + 1] == 'Z') {
          ++k;
          continue;
        }
        fmt += f.substr(k, 2);
        ++k;
        continue;
      }
      fmt += f[k];
    }
    const std::time_t t = now ? *now : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[512];
    const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    if (n == 0 && fmt.size() > 64) call_fail("strftime_now: the formatted date is too long");
    return Value::string(std::string(buf, n));
  }));
  return g;
}

}  // namespace lol::jinja
