#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <locale.h>
#include <wctype.h>

#include "util/utf8.h"

namespace lol::jinja {

namespace {

/// Deletes lists and dicts one at a time, whatever their nesting: a container freed
/// while another is being freed is queued instead of freed recursively (a list nested
/// 10^6 deep would overflow the stack).
struct IterativeDelete {
  struct Pending {
    List* list = nullptr;
    Dict* dict = nullptr;
  };
  static void release(Pending p) {
    // The queue lives on the stack of the outermost call (a thread_local vector would be
    // destroyed at thread exit before static values that still free containers).
    thread_local std::vector<Pending>* active = nullptr;
    if (active) {
      active->push_back(p);
      return;
    }
    std::vector<Pending> queue{p};
    active = &queue;
    while (!queue.empty()) {
      const Pending q = queue.back();
      queue.pop_back();
      delete q.list;  // its items' containers come back here and are queued
      delete q.dict;
    }
    active = nullptr;
  }
  void operator()(List* l) const { release({l, nullptr}); }
  void operator()(Dict* d) const { release({nullptr, d}); }
};

}  // namespace

Value Value::make_list(List items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.list = std::shared_ptr<List>(new List(std::move(items)), IterativeDelete());
  v.tuple = tuple;
  return v;
}

Value Value::make_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::shared_ptr<Dict>(new Dict(), IterativeDelete());
  return v;
}

Value Value::make_namespace() {
  Value v = make_dict();
  v.kind = Kind::Namespace;
  return v;
}

Value Value::function(Function f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

const std::pair<std::string, Value>* Dict::lookup(const std::string& key) const {
  if (items.size() <= 16) {
    for (const auto& kv : items)
      if (kv.first == key) return &kv;
    return nullptr;
  }
  if (index_.size() != items.size()) {
    index_.clear();
    for (size_t k = 0; k < items.size(); ++k) index_.emplace(items[k].first, k);
  }
  const auto it = index_.find(key);
  return it == index_.end() || it->second >= items.size() || items[it->second].first != key ? nullptr
                                                                                             : &items[it->second];
}

const Value* Dict::find(const std::string& key) const {
  const auto* kv = lookup(key);
  return kv ? &kv->second : nullptr;
}

void Dict::set(const std::string& key, Value v) {
  if (const auto* kv = lookup(key)) {
    const_cast<Value&>(kv->second) = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
  if (!index_.empty()) index_.emplace(key, items.size() - 1);
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0;
    case Kind::String: return !s.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->items.empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // The shortest %e form that reads back exactly, then Python's layout of its digits.
  char buf[64];
  for (int p = 0; p < 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string e = buf;
  const bool neg = e[0] == '-';
  if (neg) e.erase(0, 1);
  const size_t epos = e.find('e');
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (e[k] != '.') digits += e[k];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp10 = std::atoi(e.c_str() + epos + 1);
  const int decpt = exp10 + 1;  // digits d1 d2 ... times 10^(decpt - len)
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(size_t(-decpt), '0') + digits;
    } else if (size_t(decpt) >= digits.size()) {
      out = digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ex[16];
    std::snprintf(ex, sizeof ex, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ex;
  }
  return neg ? "-" + out : out;
}

bool py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

bool py_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return false;  // Cc
  if (cp < 0x7f) return true;
  static const uint32_t kRanges[][2] = {
      // Zs, Zl, Zp (but ' '), Cf, Cs, Co: what Python's str.isprintable() refuses besides unassigned code points.
      {0xa0, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},     {0x6dd, 0x6dd},
      {0x70f, 0x70f},     {0x890, 0x891},     {0x8e2, 0x8e2},     {0x1680, 0x1680},   {0x180e, 0x180e},
      {0x2000, 0x200f},   {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},
      {0xd800, 0xf8ff},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
      {0x13430, 0x1343f}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f},
      {0xf0000, 0x10ffff}};
  for (const auto& r : kRanges)
    if (cp >= r[0] && cp <= r[1]) return false;
  // Unassigned code points (Cn): glibc's C.UTF-8 tables, where available.
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(nullptr));
  return !utf8 || iswprint_l(wint_t(cp), utf8) != 0;
}

namespace {

/// Python's repr of a str: single quotes unless the text holds ' and no ".
std::string string_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t cp : utf8_decode(s)) {
    if (cp == '\\') out += "\\\\";
    else if (cp == uint32_t(q)) out += std::string("\\") + q;
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (!py_printable(cp)) {  // \xhh, \uhhhh or \Uhhhhhhhh, as Python (an undecodable byte: \udcXX)
      char b[16];
      std::snprintf(b, sizeof b, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += b;
    } else {
      utf8_append(out, cp);
    }
  }
  return out + q;
}

}  // namespace

std::string Value::str() const {
  switch (kind) {
    case Kind::Undefined: return "";
    case Kind::String: return s;
    default: return repr();
  }
}

namespace {

/// repr's texts stay below kMaxTextBytes (lists that share their items can print
/// exponentially long): the work to reach the limit is a few times the limit.
void check_text(size_t bytes) {
  if (bytes > kMaxTextBytes) throw TemplateError("repr: the text passed " + std::to_string(kMaxTextBytes) + " bytes");
}

/// repr() with Python's guard against containers that hold themselves: a dict being
/// printed prints as {...} inside itself (only namespaces can make such cycles).
std::string repr_guarded(const Value& v, std::vector<const void*>& open) {
  using K = Value::Kind;
  if (open.size() > size_t(kMaxValueDepth))
    throw TemplateError("repr: a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (v.kind) {
    case K::Undefined: return "Undefined";
    case K::None: return "None";
    case K::Bool: return v.b ? "True" : "False";
    case K::Int: return std::to_string(v.i);
    case K::Float: return float_repr(v.f);
    case K::String: return string_repr(v.s);
    case K::List: {
      if (std::find(open.begin(), open.end(), v.list.get()) != open.end()) return v.tuple ? "(...)" : "[...]";
      open.push_back(v.list.get());
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += (k ? ", " : "") + repr_guarded((*v.list)[k], open);
        check_text(out.size());
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      open.pop_back();
      return out + (v.tuple ? ")" : "]");
    }
    case K::Dict:
    case K::Namespace: {
      std::string out;
      if (std::find(open.begin(), open.end(), v.dict.get()) != open.end()) {
        out = "{...}";
      } else {
        open.push_back(v.dict.get());
        out = "{";
        bool first = true;
        for (const auto& kv : v.dict->items) {
          out += (first ? "" : ", ") + string_repr(kv.first) + ": " + repr_guarded(kv.second, open);
          check_text(out.size());
          first = false;
        }
        out += "}";
        open.pop_back();
      }
      return v.kind == K::Namespace ? "<Namespace " + out + ">" : out;
    }
    case K::Function: return "<function>";
  }
  return "";
}

}  // namespace

std::string Value::repr() const {
  std::vector<const void*> open;
  return repr_guarded(*this, open);
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
  }
  return "";
}

namespace {

bool equals_at(const Value& a, const Value& b, int depth, uint64_t& work) {
  using K = Value::Kind;
  if (depth > kMaxValueDepth)
    throw TemplateError("==: values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  if (++work > 10'000'000) throw TemplateError("==: the comparison passed 10 million elements");
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.s == b.s;
    case K::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals_at((*a.list)[k], (*b.list)[k], depth + 1, work)) return false;
      return true;
    case K::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& kv : a.dict->items) {
        const Value* o = b.dict->find(kv.first);
        if (!o || !equals_at(kv.second, *o, depth + 1, work)) return false;
      }
      return true;
    }
    case K::Namespace: return a.dict == b.dict;
    case K::Function: return a.fn == b.fn;
    default: return false;
  }
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  uint64_t work = 0;
  return equals_at(a, b, 0, work);
}

bool less_at(const Value& a, const Value& b, const std::string& where, int depth);

bool less(const Value& a, const Value& b, const std::string& where) { return less_at(a, b, where, 0); }

bool less_at(const Value& a, const Value& b, const std::string& where, int depth) {
  if (depth > kMaxValueDepth)
    throw TemplateError(where + ": <: values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return less_at(x[k], y[k], where, depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined())
    throw TemplateError(where + ": " + (a.is_undefined() ? a.s : b.s));
  throw TemplateError(where + ": '<' not supported between instances of '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth)
    throw InputError("a JSON value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? Value::integer(int64_t(u)) : Value::real(double(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::make_dict();
      // JSON object keys are unique (nlohmann keeps one of each): appended without a search.
      for (auto it = j.begin(); it != j.end(); ++it) d.dict->items.emplace_back(it.key(), from_json_at(it.value(), depth + 1));
      return d;
    }
    default: return Value::none();
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (uint32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char b[16];
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7f)) {
          if (cp >= 0x10000) {  // a UTF-16 surrogate pair, as json.dumps writes it
            const uint32_t v = cp - 0x10000;
            std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(b, sizeof b, "\\u%04x", cp);
          }
          out += b;
        } else {
          utf8_append(out, cp);
        }
      }
    }
  }
  return out + "\"";
}

void dump(const Value& v, const JsonDumpOptions& o, const std::string& where, int depth, std::string& out) {
  using K = Value::Kind;
  if (depth > kMaxValueDepth)
    throw TemplateError(where + ": tojson: a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  if (out.size() > kMaxTextBytes)
    throw TemplateError(where + ": tojson: the text passed " + std::to_string(kMaxTextBytes) + " bytes");
  const std::string item_sep = o.item_separator ? *o.item_separator : o.indent ? "," : ", ";
  const auto newline = [&](int d) {
    if (!o.indent) return;
    out += '\n';
    for (int k = 0; k < d; ++k) out += *o.indent;
  };
  switch (v.kind) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.b ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.i); return;
    case K::Float:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity") : float_repr(v.f);
      return;
    case K::String: out += json_string(v.s, o.ensure_ascii); return;
    case K::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        dump((*v.list)[k], o, where, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case K::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        out += json_string(items[k]->first, o.ensure_ascii) + o.key_separator;
        dump(items[k]->second, o, where, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    default:
      throw TemplateError(where + ": Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& o, const std::string& where) {
  std::string out;
  dump(v, o, where, 0, out);
  return out;
}

std::vector<uint32_t> utf8_decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    // Ill-formed bytes (overlong forms, surrogates, past U+10FFFF, as Python refuses them)
    // become surrogateescape code points: the byte comes back unchanged.
    if (utf8_sequence_length(s, k) == 0) {
      out.push_back(0xdc00 + uint32_t(static_cast<unsigned char>(s[k])));
      ++k;
      continue;
    }
    out.push_back(uint32_t(decode_utf8(s, k)));
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= 0xdc80 && cp <= 0xdcff) out += char(cp - 0xdc00);  // a surrogate-escaped byte
  else append_utf8(char32_t(cp), out);
}

std::string utf8_encode(const std::vector<uint32_t>& cps) {
  std::string out;
  for (uint32_t cp : cps) utf8_append(out, cp);
  return out;
}

}  // namespace lol::jinja
