// Lexer and parser of Jinja templates, following jinja2's grammar (lexer.py, parser.py)
// with the settings transformers uses for chat templates: trim_blocks (the newline after
// a block or comment tag is dropped), lstrip_blocks (white space before a block or
// comment tag at the start of a line is dropped; "{%+" keeps it), keep_trailing_newline
// off (one final newline of the source is dropped), the loopcontrols extension (break,
// continue) and transformers' {% generation %} block.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "jinja/ast.h"

namespace lol::jinja {

namespace {

struct Tok {
  enum class Type { Name, String, Int, Float, Op };
  Type type = Type::Op;
  std::string text;  ///< Name / Op: the token; String: the unescaped value
  Value value;       ///< Int / Float
  int line = 1;
};

/// A piece of the template: raw text, or the tokens of a {{ }} or {% %} tag.
struct Segment {
  enum class Kind { Text, Var, Block };
  Kind kind = Kind::Text;
  std::string text;
  std::vector<Tok> toks;
  int line = 1;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& name) : name_(name) {
    // As jinja2: every newline sequence becomes "\n", and one trailing newline is dropped.
    src_.reserve(src.size());
    for (size_t k = 0; k < src.size(); ++k) {
      if (src[k] == '\r') {
        src_ += '\n';
        if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
      } else {
        src_ += src[k];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Segment> run() {
    std::vector<Segment> out;
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t start = pos;
      while (start < n && !(src_[start] == '{' && start + 1 < n &&
                            (src_[start + 1] == '{' || src_[start + 1] == '%' || src_[start + 1] == '#')))
        ++start;
      std::string text = src_.substr(pos, start - pos);
      if (start >= n) {
        emit_text(out, text, line_of(pos));
        break;
      }
      const char kind = src_[start + 1];
      size_t p = start + 2;
      char left = 0;
      if (p < n && (src_[p] == '-' || (kind != '{' && src_[p] == '+'))) left = src_[p++];
      if (left == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (left != '+' && kind != '{') {  // lstrip_blocks
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
          bool ws = true;
          for (size_t k = l_pos; k < text.size() && ws; ++k) ws = is_space(text[k]);
          if (ws) text.resize(l_pos);
        }
      }
      emit_text(out, text, line_of(pos));
      const int tag_line = line_of(start);
      char right = 0;
      if (kind == '#') {
        size_t e = src_.find("#}", p);
        if (e == std::string::npos) fail(tag_line, "the comment is not closed (expected '#}')");
        if (e > p && (src_[e - 1] == '-' || src_[e - 1] == '+')) right = src_[e - 1];
        pos = e + 2;
      } else {
        Segment seg;
        seg.kind = kind == '{' ? Segment::Kind::Var : Segment::Kind::Block;
        seg.line = tag_line;
        pos = lex_tag(p, kind == '{' ? "}}" : "%}", seg.toks, right, kind == '%');
        if (seg.kind == Segment::Kind::Block && !seg.toks.empty() && seg.toks[0].type == Tok::Type::Name &&
            seg.toks[0].text == "raw") {
          pos = after_tag(pos, right, false);
          pos = lex_raw(pos, out, tag_line);
          line_starting = pos > 0 && src_[pos - 1] == '\n';
          continue;
        }
        out.push_back(std::move(seg));
      }
      pos = after_tag(pos, right, kind != '{');
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    return out;
  }

 private:
  std::string src_;
  std::string name_;
  mutable size_t line_pos_ = 0;  ///< line_of's cache: position and its line
  mutable int line_at_ = 1;

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw TemplateError(name_ + " line " + std::to_string(line) + ": " + what);
  }
  /// The 1-based line of `pos`, counted on from the previous call (positions mostly
  /// grow: linear in the template's size, not quadratic).
  int line_of(size_t pos) const {
    pos = std::min(pos, src_.size());
    if (pos < line_pos_) {
      line_pos_ = 0;
      line_at_ = 1;
    }
    for (; line_pos_ < pos; ++line_pos_) line_at_ += src_[line_pos_] == '\n';
    return line_at_;
  }
  static void emit_text(std::vector<Segment>& out, const std::string& text, int line) {
    if (text.empty()) return;
    Segment s;
    s.kind = Segment::Kind::Text;
    s.text = text;
    s.line = line;
    out.push_back(std::move(s));
  }
  /// What the non-ASCII character at `p` is inside a tag: its bytes, and whether it is
  /// white space (jinja2's \s: NBSP, U+2028, ...) or part of a name (any other valid
  /// character, as Python identifiers). An ASCII or invalid byte is neither.
  struct Wide {
    size_t len = 0;
    bool space = false, name = false;
  };
  Wide wide_at(size_t p) const {
    const unsigned c = static_cast<unsigned char>(src_[p]);
    if (c < 0x80) return {};
    const size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    const auto cps = utf8_decode(src_.substr(p, len));
    if (cps.size() != 1 || (cps[0] >= 0xdc80 && cps[0] <= 0xdcff)) return {};  // invalid UTF-8
    const bool space = py_space(cps[0]);
    return {len, space, !space};
  }

  /// The position after a tag's end: "-" strips all white space, trim_blocks drops
  /// one newline after a block or comment tag ("+" keeps it).
  size_t after_tag(size_t pos, char right, bool trim) const {
    if (right == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (trim && right != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  /// {% raw %}...{% endraw %}: the text up to the endraw tag, verbatim.
  size_t lex_raw(size_t pos, std::vector<Segment>& out, int line) {
    for (size_t k = src_.find("{%", pos); k != std::string::npos; k = src_.find("{%", k + 2)) {
      size_t q = k + 2;
      char left = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) left = src_[q++];
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char right = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) right = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, k - pos);
      if (left == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      }
      emit_text(out, text, line);
      return after_tag(q + 2, right, true);
    }
    fail(line, "{% raw %} without {% endraw %}");
  }

  /// Lexes the expression tokens of a tag from `p` to its end delimiter (found only
  /// outside brackets and strings). Returns the position after the delimiter.
  size_t lex_tag(size_t p, const std::string& end, std::vector<Tok>& toks, char& right, bool plus_ok) {
    const size_t n = src_.size();
    int depth = 0;
    int line = line_of(p);
    while (true) {
      while (p < n) {  // white space, Unicode's too (jinja2's \s)
        if (is_space(src_[p])) {
          line += src_[p++] == '\n';
          continue;
        }
        const Wide w = wide_at(p);
        if (!w.space) break;
        p += w.len;
      }
      if (p >= n) fail(line, "the tag is not closed (expected '" + end + "')");
      if (depth == 0) {
        if (src_.compare(p, 2, end) == 0) {
          right = 0;
          return p + 2;
        }
        if ((src_[p] == '-' || (plus_ok && src_[p] == '+')) && src_.compare(p + 1, 2, end) == 0) {
          right = src_[p];
          return p + 3;
        }
      }
      Tok t;
      t.line = line;
      const char c = src_[p];
      if (is_name_start(c) || wide_at(p).name) {
        // Names: ASCII letters, digits, '_', and non-ASCII characters (Python identifiers).
        size_t e = p;
        while (e < n) {
          const Wide w = wide_at(e);
          if (!is_name_char(src_[e]) && !w.name) break;
          e += w.name ? w.len : 1;
        }
        t.type = Tok::Type::Name;
        t.text = src_.substr(p, e - p);
        p = e;
      } else if (c == '\'' || c == '"') {
        t.type = Tok::Type::String;
        size_t e = p + 1;
        std::string raw;
        while (e < n && src_[e] != c) {
          if (src_[e] == '\\' && e + 1 < n) raw += src_[e++];
          line += src_[e] == '\n';
          raw += src_[e++];
        }
        if (e >= n) fail(t.line, "the string literal is not closed");
        t.text = unescape(raw);
        p = e + 1;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p, t);
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                           ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t len = std::char_traits<char>::length(op);
          if (src_.compare(p, len, op) == 0) {
            t.type = Tok::Type::Op;
            t.text = op;
            p += len;
            found = true;
            break;
          }
        }
        if (!found) {
          char shown[32];
          std::snprintf(shown, sizeof shown, static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? "\\x%02x" : "%c",
                        static_cast<unsigned char>(c));
          fail(line, std::string("unexpected character '") + shown + "'");
        }
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if (t.text == ")" || t.text == "]" || t.text == "}") {
          if (depth == 0) fail(line, "unexpected '" + t.text + "'");
          --depth;
        }
      }
      toks.push_back(std::move(t));
    }
  }

  /// Integers (with _ separators, 0x / 0o / 0b) and floats (1.5, 1e3, 1.5e-3).
  size_t lex_number(size_t p, Tok& t) {
    const size_t n = src_.size();
    auto digits = [&](size_t q, auto ok) {
      while (q < n && (ok(src_[q]) || (src_[q] == '_' && q + 1 < n && ok(src_[q + 1])))) ++q;
      return q;
    };
    auto dec = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
    if (src_[p] == '0' && p + 1 < n && std::strchr("xXoObB", src_[p + 1]) && src_[p + 1] != 0) {
      const char b = char(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      const int base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      auto ok = [base](char ch) {
        return base == 16 ? std::isxdigit(static_cast<unsigned char>(ch)) != 0 : ch >= '0' && ch < char('0' + base);
      };
      size_t e = digits(p + 2, ok);
      std::string s;
      for (size_t k = p + 2; k < e; ++k)
        if (src_[k] != '_') s += src_[k];
      t.type = Tok::Type::Int;
      t.value = Value::integer(std::strtoll(s.c_str(), nullptr, base));
      return e;
    }
    size_t e = digits(p, dec);
    bool is_float = false;
    if (e + 1 < n && src_[e] == '.' && dec(src_[e + 1])) {
      e = digits(e + 1, dec);
      is_float = true;
    }
    if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && dec(src_[q])) {
        e = digits(q, dec);
        is_float = true;
      }
    }
    std::string s;
    for (size_t k = p; k < e; ++k)
      if (src_[k] != '_') s += src_[k];
    if (is_float) {
      t.type = Tok::Type::Float;
      t.value = Value::real(std::strtod(s.c_str(), nullptr));
    } else {
      errno = 0;
      const long long v = std::strtoll(s.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(line_of(p), "integer literal " + s + " is too large");
      t.type = Tok::Type::Int;
      t.value = Value::integer(v);
    }
    return e;
  }

  /// Python's unicode-escape decoding of a string literal's body (unknown escapes
  /// keep their backslash, as Python's).
  std::string unescape(const std::string& raw) const {
    std::string out;
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '\\' || k + 1 >= raw.size()) {
        out += raw[k];
        continue;
      }
      const char e = raw[++k];
      auto hex = [&](int count) -> bool {
        uint32_t cp = 0;
        for (int m = 1; m <= count; ++m) {
          const size_t at = k + size_t(m);
          if (at >= raw.size() || !std::isxdigit(static_cast<unsigned char>(raw[at]))) return false;
          const char h = char(std::tolower(static_cast<unsigned char>(raw[at])));
          cp = cp * 16 + uint32_t(h <= '9' ? h - '0' : h - 'a' + 10);
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {  // Python: illegal / a lone surrogate
          char hexcp[16];
          std::snprintf(hexcp, sizeof hexcp, "U+%04X", cp);
          throw TemplateError(name_ + ": the string literal escape \\" + std::string(1, e) + " gives " + hexcp +
                              ", not a Unicode scalar value");
        }
        utf8_append(out, cp);
        k += size_t(count);
        return true;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // a line continuation
        case 'N': throw TemplateError(name_ + ": \\N{...} escapes (Unicode names) are not supported in string literals");
        case 'x':
          if (!hex(2)) throw TemplateError(name_ + ": truncated \\xXX escape in a string literal");
          break;
        case 'u':
          if (!hex(4)) throw TemplateError(name_ + ": truncated \\uXXXX escape in a string literal");
          break;
        case 'U':
          if (!hex(8)) throw TemplateError(name_ + ": truncated \\UXXXXXXXX escape in a string literal");
          break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int m = 0; m < 2 && k + 1 < raw.size() && raw[k + 1] >= '0' && raw[k + 1] <= '7'; ++m)
              cp = cp * 8 + uint32_t(raw[++k] - '0');
            utf8_append(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }
};

// ------------------------------------------------------------------ parser

class Parser {
 public:
  Parser(std::vector<Segment> segs, std::string name) : segs_(std::move(segs)), name_(std::move(name)) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  std::vector<Segment> segs_;
  std::string name_;
  size_t seg_ = 0;
  // The tag being parsed.
  const std::vector<Tok>* toks_ = nullptr;
  size_t tp_ = 0;
  int line_ = 1;
  int loop_depth_ = 0;  ///< for loops around the statement being parsed (break / continue)
  int depth_ = 0;       ///< nesting of blocks and sub-expressions (bounded: no stack overflow)

  static constexpr int kMaxDepth = 200;
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };
  /// Counts the nodes a loop wraps around its left operand (a + b + c ..., x.a.b ...,
  /// x | f | g ...): they nest as deep as brackets do.
  struct ChainGuard {
    Parser& p;
    int n = 0;
    explicit ChainGuard(Parser& parser) : p(parser) {}
    void add() {
      ++n;
      if (++p.depth_ > kMaxDepth) p.fail("an expression chained or nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~ChainGuard() { p.depth_ -= n; }
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(name_ + " line " + std::to_string(line_) + ": " + what);
  }

  // --- token access within the current tag
  bool at_end() const { return tp_ >= toks_->size(); }
  const Tok* peek(size_t ahead = 0) const { return tp_ + ahead < toks_->size() ? &(*toks_)[tp_ + ahead] : nullptr; }
  bool is_op(const char* op, size_t ahead = 0) const {
    const Tok* t = peek(ahead);
    return t && t->type == Tok::Type::Op && t->text == op;
  }
  bool is_name(const char* nm, size_t ahead = 0) const {
    const Tok* t = peek(ahead);
    return t && t->type == Tok::Type::Name && t->text == nm;
  }
  std::string describe(const Tok* t) const {
    if (!t) return "the end of the tag";
    if (t->type == Tok::Type::String) return "a string";
    return "'" + (t->type == Tok::Type::Int || t->type == Tok::Type::Float ? t->value.repr() : t->text) + "'";
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', found " + describe(peek()));
    ++tp_;
  }
  std::string expect_name() {
    const Tok* t = peek();
    if (!t || t->type != Tok::Type::Name) fail("expected a name, found " + describe(t));
    ++tp_;
    return t->text;
  }
  void expect_tag_end() {
    if (!at_end()) fail("unexpected " + describe(peek()) + " (expected the end of the tag)");
  }
  ExprPtr node(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = peek() ? peek()->line : line_;
    return e;
  }

  // --- statements

  /// Parses nodes until a block tag whose keyword is in `ends` (consumed; its
  /// keyword in `end`, the tag's tokens left for the caller at tp_ = 1).
  Body parse_body(const std::set<std::string>& ends, std::string& end) {
    DepthGuard guard(*this);
    Body body;
    while (seg_ < segs_.size()) {
      const Segment& s = segs_[seg_++];
      line_ = s.line;
      if (s.kind == Segment::Kind::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->text = s.text;
        n->line = s.line;
        body.push_back(std::move(n));
        continue;
      }
      toks_ = &s.toks;
      tp_ = 0;
      if (s.kind == Segment::Kind::Var) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->line = s.line;
        if (at_end()) fail("expected an expression in {{ }}");
        n->expr = parse_tuple(true);
        expect_tag_end();
        body.push_back(std::move(n));
        continue;
      }
      if (at_end()) fail("expected a statement in {% %}");
      const Tok& kw = s.toks[0];
      if (kw.type != Tok::Type::Name) fail("expected a statement keyword, found " + describe(&kw));
      if (ends.count(kw.text)) {
        end = kw.text;
        tp_ = 1;
        return body;
      }
      tp_ = 1;
      body.push_back(parse_statement(kw.text));
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
      fail("unexpected end of template: expected " + list);
    }
    return body;
  }

  NodePtr parse_statement(const std::string& kw) {
    auto n = std::make_unique<Node>();
    n->line = line_;
    std::string end;
    if (kw == "if") {
      n->kind = Node::Kind::If;
      n->conds.push_back(parse_tuple(true));
      expect_tag_end();
      while (true) {
        n->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
        if (end == "elif") {
          n->conds.push_back(parse_tuple(true));
          expect_tag_end();
        } else if (end == "else") {
          expect_tag_end();
          n->bodies.push_back(parse_body({"endif"}, end));
          expect_tag_end();
          break;
        } else {
          expect_tag_end();
          break;
        }
      }
    } else if (kw == "for") {
      n->kind = Node::Kind::For;
      n->targets = parse_targets();
      if (!is_name("in")) fail("expected 'in' in the for loop, found " + describe(peek()));
      ++tp_;
      n->expr = parse_tuple(false);
      if (is_name("if")) {
        ++tp_;
        n->cond = parse_tuple(true);
      }
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_tag_end();
      ++loop_depth_;
      n->body = parse_body({"else", "endfor"}, end);
      --loop_depth_;
      if (end == "else") {
        expect_tag_end();
        n->else_body = parse_body({"endfor"}, end);
      }
      expect_tag_end();
    } else if (kw == "set") {
      // name or ns.attr, comma-separated
      bool any_attr = false;
      while (true) {
        n->targets.push_back(expect_name());
        n->attrs.emplace_back();
        if (is_op(".")) {
          ++tp_;
          n->attrs.back() = expect_name();
          any_attr = true;
        }
        if (!is_op(",")) break;
        ++tp_;
      }
      if (is_op("=")) {
        ++tp_;
        n->kind = Node::Kind::Set;
        n->expr = parse_tuple(true);
        expect_tag_end();
      } else {
        if (any_attr || n->targets.size() != 1) fail("expected '=' in the set statement");
        n->kind = Node::Kind::SetBlock;
        if (is_op("|")) n->expr = parse_filter_chain(nullptr);
        expect_tag_end();
        n->body = parse_body({"endset"}, end);
        expect_tag_end();
      }
    } else if (kw == "macro") {
      n->kind = Node::Kind::Macro;
      n->name = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        n->params.push_back(expect_name());
        if (is_op("=")) {
          ++tp_;
          n->defaults.push_back(parse_expression(true));
        } else {
          n->defaults.push_back(nullptr);
        }
        if (!is_op(")")) expect_op(",");
      }
      expect_op(")");
      expect_tag_end();
      const int outer_loops = loop_depth_;
      loop_depth_ = 0;
      n->body = parse_body({"endmacro"}, end);
      loop_depth_ = outer_loops;
      expect_tag_end();
    } else if (kw == "call") {
      n->kind = Node::Kind::CallBlock;
      if (is_op("(")) fail("call blocks with caller arguments are not supported");
      n->expr = parse_expression(true);
      if (n->expr->kind != Expr::Kind::Call) fail("expected a macro call after 'call'");
      expect_tag_end();
      n->body = parse_body({"endcall"}, end);
      expect_tag_end();
    } else if (kw == "filter") {
      n->kind = Node::Kind::FilterBlock;
      n->expr = parse_filter_chain(nullptr, /*leading_bar=*/false);
      expect_tag_end();
      n->body = parse_body({"endfilter"}, end);
      expect_tag_end();
    } else if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::Break : Node::Kind::Continue;
      if (loop_depth_ == 0) fail("'" + kw + "' outside a for loop");
      expect_tag_end();
    } else if (kw == "generation") {
      n->kind = Node::Kind::Scope;
      expect_tag_end();
      n->body = parse_body({"endgeneration"}, end);
      expect_tag_end();
    } else if (kw == "with") {
      n->kind = Node::Kind::Scope;
      while (!at_end()) {
        n->targets.push_back(expect_name());
        expect_op("=");
        n->defaults.push_back(parse_expression(true));
        if (!at_end()) expect_op(",");
      }
      n->body = parse_body({"endwith"}, end);
      expect_tag_end();
    } else {
      static const std::set<std::string> kKnown = {"include", "import", "from", "extends", "block",
                                                   "autoescape", "do", "trans", "print"};
      if (kKnown.count(kw)) fail("the '" + kw + "' tag is not supported in chat templates");
      fail("unknown tag '" + kw + "'");
    }
    return n;
  }

  /// for-loop targets: `x`, `k, v`, `(k, v)`.
  std::vector<std::string> parse_targets() {
    std::vector<std::string> out;
    const bool paren = is_op("(");
    if (paren) ++tp_;
    out.push_back(expect_name());
    while (is_op(",")) {
      ++tp_;
      if (paren && is_op(")")) break;
      out.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return out;
  }

  // --- expressions (jinja2 parser.py precedence)

  /// expression (, expression)* -> a tuple when a comma appears.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens = false) {
    auto first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::Tuple);
    t->args.push_back(std::move(first));
    while (is_op(",")) {
      ++tp_;
      if (at_end() || is_op(")") || is_name("in") || is_name("if") || is_op("]")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    (void)explicit_parens;
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ChainGuard chain(*this);
    auto e = parse_or();
    while (is_name("if")) {
      chain.add();
      ++tp_;
      auto c = node(Expr::Kind::Cond);
      c->args.push_back(parse_or());
      c->args.push_back(std::move(e));
      if (is_name("else")) {
        ++tp_;
        c->args.push_back(parse_condexpr());
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r) {
    auto b = node(Expr::Kind::Binary);
    b->op = op;
    b->line = l->line;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ChainGuard chain(*this);
    auto e = parse_and();
    while (is_name("or")) {
      chain.add();
      ++tp_;
      e = binary("or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ChainGuard chain(*this);
    auto e = parse_not();
    while (is_name("and")) {
      chain.add();
      ++tp_;
      e = binary("and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      auto u = node(Expr::Kind::Unary);
      ++tp_;
      u->op = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    auto first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> args;
    while (true) {
      std::string op;
      const Tok* t = peek();
      if (t && t->type == Tok::Type::Op &&
          (t->text == "==" || t->text == "!=" || t->text == "<" || t->text == "<=" || t->text == ">" ||
           t->text == ">=")) {
        op = t->text;
        ++tp_;
      } else if (is_name("in")) {
        op = "in";
        ++tp_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "notin";
        tp_ += 2;
      } else {
        break;
      }
      ops.push_back(op);
      args.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto c = node(Expr::Kind::Compare);
    c->line = first->line;
    c->args.push_back(std::move(first));
    for (auto& a : args) c->args.push_back(std::move(a));
    c->ops = std::move(ops);
    return c;
  }
  ExprPtr parse_math1() {
    ChainGuard chain(*this);
    auto e = parse_concat();
    while (is_op("+") || is_op("-")) {
      chain.add();
      const std::string op = peek()->text;
      ++tp_;
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ChainGuard chain(*this);
    auto e = parse_math2();
    while (is_op("~")) {
      chain.add();
      ++tp_;
      e = binary("~", std::move(e), parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {
    ChainGuard chain(*this);
    auto e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.add();
      const std::string op = peek()->text;
      ++tp_;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ChainGuard chain(*this);
    auto e = parse_unary(true);
    while (is_op("**")) {
      chain.add();
      ++tp_;
      e = binary("**", std::move(e), parse_unary(true));
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = node(Expr::Kind::Unary);
      u->op = peek()->text;
      ++tp_;
      u->args.push_back(parse_unary(false));
      e = std::move(u);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Tok* t = peek();
    if (!t) fail("expected an expression, found the end of the tag");
    if (t->type == Tok::Type::Name) {
      ++tp_;
      auto e = node(Expr::Kind::Literal);
      e->line = t->line;
      if (t->text == "true" || t->text == "True") e->value = Value::boolean(true);
      else if (t->text == "false" || t->text == "False") e->value = Value::boolean(false);
      else if (t->text == "none" || t->text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = t->text;
      }
      return e;
    }
    if (t->type == Tok::Type::String) {
      std::string s;
      while (peek() && peek()->type == Tok::Type::String) s += (*toks_)[tp_++].text;  // adjacent literals join
      auto e = node(Expr::Kind::Literal);
      e->line = t->line;
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t->type == Tok::Type::Int || t->type == Tok::Type::Float) {
      ++tp_;
      auto e = node(Expr::Kind::Literal);
      e->value = t->value;
      return e;
    }
    if (is_op("(")) {
      ++tp_;
      if (is_op(")")) {
        ++tp_;
        auto e = node(Expr::Kind::Tuple);
        return e;
      }
      auto inner = parse_expression(true);
      if (is_op(",")) {
        auto tup = node(Expr::Kind::Tuple);
        tup->args.push_back(std::move(inner));
        while (is_op(",")) {
          ++tp_;
          if (is_op(")")) break;
          tup->args.push_back(parse_expression(true));
        }
        inner = std::move(tup);
      }
      expect_op(")");
      return inner;
    }
    if (is_op("[")) {
      auto e = node(Expr::Kind::List);
      ++tp_;
      while (!is_op("]")) {
        e->args.push_back(parse_expression(true));
        if (!is_op("]")) expect_op(",");
      }
      ++tp_;
      return e;
    }
    if (is_op("{")) {
      auto e = node(Expr::Kind::Dict);
      ++tp_;
      while (!is_op("}")) {
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
        if (!is_op("}")) expect_op(",");
      }
      ++tp_;
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add();
      if (is_op(".")) {
        ++tp_;
        const Tok* t = peek();
        if (t && t->type == Tok::Type::Name) {
          ++tp_;
          auto a = node(Expr::Kind::Attr);
          a->line = e->line;
          a->name = t->text;
          a->args.push_back(std::move(e));
          e = std::move(a);
        } else if (t && t->type == Tok::Type::Int) {
          ++tp_;
          auto a = node(Expr::Kind::Item);
          a->line = e->line;
          a->args.push_back(std::move(e));
          auto idx = node(Expr::Kind::Literal);
          idx->value = t->value;
          a->args.push_back(std::move(idx));
          e = std::move(a);
        } else {
          fail("expected an attribute name after '.', found " + describe(t));
        }
      } else if (is_op("[")) {
        ++tp_;
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (!is_op("]")) {
      if (is_op(":")) {
        ++tp_;
        slice = true;
        if (++part > 2) fail("too many ':' in a slice");
        continue;
      }
      if (parts[part]) fail("expected ':' or ']', found " + describe(peek()));
      parts[part] = parse_expression(true);
      if (!slice && is_op(",")) fail("tuple subscripts are not supported");
    }
    ++tp_;
    if (!slice && !parts[0]) fail("empty subscript []");
    auto e = node(slice ? Expr::Kind::Slice : Expr::Kind::Item);
    e->line = target->line;
    e->args.push_back(std::move(target));
    if (slice)
      for (auto& p : parts) e->args.push_back(std::move(p));
    else
      e->args.push_back(std::move(parts[0]));
    return e;
  }

  /// `(` args `)` after a callable: positional, then name=value.
  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail("*args / **kwargs in calls are not supported");
      const Tok* t = peek();
      if (t && t->type == Tok::Type::Name && is_op("=", 1)) {
        tp_ += 2;
        call.kwargs.emplace_back(t->text, parse_expression(true));
      } else {
        if (!call.kwargs.empty()) fail("a positional argument follows a keyword argument");
        call.args.push_back(parse_expression(true));
      }
      if (!is_op(")")) expect_op(",");
    }
    ++tp_;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node(Expr::Kind::Call);
    c->line = callee->line;
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  /// `| name [(args)]` repeated; `subject` null for {% filter %} / {% set x | f %}.
  ExprPtr parse_filter_chain(ExprPtr subject, bool leading_bar = true) {
    ChainGuard chain(*this);
    bool first = true;
    while (first ? (leading_bar ? is_op("|") : true) : is_op("|")) {
      chain.add();
      if (!(first && !leading_bar)) ++tp_;
      first = false;
      auto f = node(Expr::Kind::Filter);
      f->name = expect_name();
      while (is_op(".")) {
        ++tp_;
        f->name += "." + expect_name();
      }
      f->args.push_back(std::move(subject));
      if (is_op("(")) parse_call_args(*f);
      subject = std::move(f);
    }
    return subject;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add();
      if (is_op("|")) {
        e = parse_filter_chain(std::move(e));
      } else if (is_name("is")) {
        ++tp_;
        auto t = node(Expr::Kind::Test);
        t->line = e->line;
        if (is_name("not")) {
          ++tp_;
          t->negate = true;
        }
        t->name = expect_name();
        t->args.push_back(std::move(e));
        const Tok* nx = peek();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if (nx && (nx->type == Tok::Type::Name || nx->type == Tok::Type::String || nx->type == Tok::Type::Int ||
                          nx->type == Tok::Type::Float || is_op("[") || is_op("{")) &&
                   !(nx->type == Tok::Type::Name &&
                     (nx->text == "else" || nx->text == "or" || nx->text == "and" || nx->text == "if" ||
                      nx->text == "in" || nx->text == "not" || nx->text == "is"))) {
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

Body parse_template(const std::string& source, const std::string& name) {
  Lexer lexer(source, name);
  Parser parser(lexer.run(), name);
  return parser.parse();
}

}  // namespace lol::jinja
