// The interpreter: runs a parsed template (jinja/ast.h) with jinja2's scoping rules
// (each iteration of a for loop runs in a new scope below the loop's, `if` opens none, a
// macro call opens one below the scope it was defined in) and Python's operators.
#include <cmath>
#include <map>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/template.h"

namespace lol::jinja {

namespace {

struct Frame {
  std::map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
  const Value* find(const std::string& n) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      const auto it = f->vars.find(n);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

constexpr int kMaxCallDepth = 100;

/// Bytes a value holds besides what it shares, roughly: a string's text; a list's or
/// dict's items and their strings (one level: deeper containers are counted when built).
size_t approx_bytes(const Value& v) {
  const auto item = [](const Value& x) { return sizeof(Value) + (x.is_string() ? x.s.size() : 0); };
  size_t n = v.s.size();
  if (v.list)
    for (const auto& x : *v.list) n += item(x);
  if (v.dict)
    for (const auto& kv : v.dict->items) n += kv.first.size() + item(kv.second);
  return n;
}
constexpr int kMaxNesting = 1500;

bool uses_name(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::Name && e->name == name) return true;
  for (const auto& a : e->args)
    if (uses_name(a.get(), name)) return true;
  for (const auto& kv : e->kwargs)
    if (uses_name(kv.second.get(), name)) return true;
  return false;
}

/// Whether a body reads the variable `name` anywhere (jinja2 decides a macro's
/// varargs / kwargs this way).
bool uses_name(const Body& body, const std::string& name) {
  for (const auto& n : body) {
    if (uses_name(n->expr.get(), name) || uses_name(n->cond.get(), name)) return true;
    for (const auto& c : n->conds)
      if (uses_name(c.get(), name)) return true;
    for (const auto& d : n->defaults)
      if (uses_name(d.get(), name)) return true;
    for (const auto& b : n->bodies)
      if (uses_name(b, name)) return true;
    if (uses_name(n->body, name) || uses_name(n->else_body, name)) return true;
  }
  return false;
}

[[noreturn]] void overflow(const BuiltinContext& c) {
  fail_at(c, "integer overflow (Python's integers are unbounded; lol's are 64-bit)");
}

class Renderer {
 public:
  Renderer(const std::string& name, const RenderOptions& o) : name_(name), opts_(o) {}

  void render(const Body& body, const FramePtr& f, std::string& out) {
    for (const auto& n : body) {
      render_node(*n, f, out);
      if (out.size() > opts_.max_output_bytes)
        fail_at(at(n->line), "the output passed " + std::to_string(opts_.max_output_bytes) + " bytes");
      if (flow_ != Flow::Normal) return;
    }
  }

 private:
  enum class Flow { Normal, Break, Continue };
  const std::string& name_;
  const RenderOptions& opts_;
  Flow flow_ = Flow::Normal;
  int call_depth_ = 0;
  int nesting_ = 0;
  uint64_t steps_ = 0;

  BuiltinContext at(int line) const { return {name_ + " line " + std::to_string(line), &opts_}; }

  // ------------------------------------------------------------ statements

  void assign(Frame& f, const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      f.vars[targets[0]] = v;
      return;
    }
    const List items = iterate(v, at(line));
    if (items.size() != targets.size())
      fail_at(at(line), std::string(items.size() > targets.size() ? "too many" : "not enough") +
                            " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                            std::to_string(items.size()) + ")");
    for (size_t k = 0; k < targets.size(); ++k) f.vars[targets[k]] = items[k];
  }

  /// Bounds the C++ recursion of render_node / eval (blocks and expressions within
  /// macro calls within blocks ...): a template cannot overflow the stack.
  struct Nesting {
    Renderer& r;
    Nesting(Renderer& renderer, int line) : r(renderer) {
      if (++r.nesting_ > kMaxNesting)
        fail_at(r.at(line), "rendering nested deeper than " + std::to_string(kMaxNesting) +
                                " levels (macro calls within blocks within expressions)");
    }
    ~Nesting() { --r.nesting_; }
  };

  void render_node(const Node& n, const FramePtr& f, std::string& out) {
    Nesting guard(*this, n.line);
    step(n.line);
    switch (n.kind) {
      case Node::Kind::Text: out += n.text; return;
      case Node::Kind::Output: out += eval(*n.expr, f).str(); return;
      case Node::Kind::If:
        for (size_t k = 0; k < n.conds.size(); ++k)
          if (eval(*n.conds[k], f).truthy()) return render(n.bodies[k], f, out);
        if (n.bodies.size() > n.conds.size()) render(n.bodies.back(), f, out);
        return;
      case Node::Kind::For: return render_for(n, f, out);
      case Node::Kind::Set: {
        const Value v = eval(*n.expr, f);
        List values{v};
        if (n.targets.size() > 1) {
          values = iterate(v, at(n.line));
          if (values.size() != n.targets.size())
            fail_at(at(n.line), std::string(values.size() > n.targets.size() ? "too many" : "not enough") +
                                    " values to unpack (expected " + std::to_string(n.targets.size()) + ", got " +
                                    std::to_string(values.size()) + ")");
        }
        for (size_t k = 0; k < n.targets.size(); ++k) {
          if (n.attrs[k].empty()) {
            f->vars[n.targets[k]] = values[k];
            continue;
          }
          const Value* ns = f->find(n.targets[k]);
          if (!ns || ns->kind != Value::Kind::Namespace)
            fail_at(at(n.line), "cannot assign attribute on non-namespace object ('" + n.targets[k] + "')");
          ns->dict->set(n.attrs[k], values[k]);
        }
        return;
      }
      case Node::Kind::SetBlock: {
        std::string text;
        render(n.body, f, text);
        Value v = Value::string(text);
        if (n.expr) v = eval_on(*n.expr, v, f);
        f->vars[n.targets[0]] = v;
        return;
      }
      case Node::Kind::Macro: f->vars[n.name] = macro(n, f); return;
      case Node::Kind::CallBlock: {
        const Expr& call = *n.expr;
        const Value callee = eval(*call.args[0], f);
        CallArgs args = eval_args(call, f);
        const Node* body = &n;
        std::weak_ptr<Frame> weak = f;
        args.kw.emplace_back("caller", Value::function([this, body, weak](CallArgs& a) {
          if (!a.pos.empty() || !a.kw.empty()) throw CallError("caller() takes no arguments here");
          const FramePtr f = weak.lock();
          if (!f) throw CallError("caller() is called after its scope ended");
          std::string text;
          render(body->body, f, text);
          return Value::string(text);
        }));
        out += call_value(callee, args, at(n.line)).str();
        return;
      }
      case Node::Kind::FilterBlock: {
        std::string text;
        render(n.body, f, text);
        out += eval_on(*n.expr, Value::string(text), f).str();
        return;
      }
      case Node::Kind::Break: flow_ = Flow::Break; return;
      case Node::Kind::Continue: flow_ = Flow::Continue; return;
      case Node::Kind::Scope: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        for (size_t k = 0; k < n.targets.size(); ++k) inner->vars[n.targets[k]] = eval(*n.defaults[k], f);
        render(n.body, inner, out);
        return;
      }
    }
  }

  void render_for(const Node& n, const FramePtr& f, std::string& out) {
    const List all = iterate(eval(*n.expr, f), at(n.line));
    List items;
    if (n.cond) {
      for (const auto& it : all) {
        auto cf = std::make_shared<Frame>();
        cf->parent = f;
        assign(*cf, n.targets, it, n.line);
        if (eval(*n.cond, cf).truthy()) items.push_back(it);
      }
    } else {
      items = all;
    }
    const int64_t len = int64_t(items.size());
    // jinja2 marks the loop as iterated at the end of each body run, so the else block
    // also runs when every iteration ended in break or continue before that point.
    bool iterated = false;
    for (int64_t k = 0; k < len; ++k) {
      steps_ += 7;  // an iteration builds its scope and loop object, even for an empty body
      step(n.line);
      // Each iteration starts from the enclosing scope: what the body sets neither
      // leaves the loop nor reaches the next iteration (jinja2: "1110" for
      // {% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}).
      auto lf = std::make_shared<Frame>();
      lf->parent = f;
      assign(*lf, n.targets, items[size_t(k)], n.line);
      Value loop = Value::make_dict();
      Dict& d = *loop.dict;
      d.set("index", Value::integer(k + 1));
      d.set("index0", Value::integer(k));
      d.set("revindex", Value::integer(len - k));
      d.set("revindex0", Value::integer(len - k - 1));
      d.set("first", Value::boolean(k == 0));
      d.set("last", Value::boolean(k == len - 1));
      d.set("length", Value::integer(len));
      d.set("depth", Value::integer(1));
      d.set("depth0", Value::integer(0));
      d.set("previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined("there is no previous item"));
      d.set("nextitem", k + 1 < len ? items[size_t(k + 1)] : Value::undefined("there is no next item"));
      d.set("cycle", Value::function([k](CallArgs& a) {
        if (a.pos.empty()) throw CallError("no items for cycling given");
        return a.pos[size_t(k) % a.pos.size()];
      }));
      lf->vars["loop"] = loop;
      render(n.body, lf, out);
      if (flow_ == Flow::Break) {
        flow_ = Flow::Normal;
        break;
      }
      if (flow_ == Flow::Normal) iterated = true;
      flow_ = Flow::Normal;
    }
    if (!iterated) render(n.else_body, f, out);
  }

  Value macro(const Node& n, const FramePtr& defined_in) {
    const Node* node = &n;
    // A weak reference: the frame holds the macro (a strong one would be a cycle).
    std::weak_ptr<Frame> weak = defined_in;
    return Value::function([this, node, weak](CallArgs& a) {
      const FramePtr defined_in = weak.lock();
      if (!defined_in) throw CallError("macro '" + node->name + "' is called after its scope ended");
      const bool takes_varargs = uses_name(node->body, "varargs"), takes_kwargs = uses_name(node->body, "kwargs");
      if (a.pos.size() > node->params.size() && !takes_varargs)
        throw CallError("macro '" + node->name + "' takes not more than " + std::to_string(node->params.size()) +
                        " argument(s)");
      if (call_depth_ >= kMaxCallDepth)
        throw CallError("macro calls nested deeper than " + std::to_string(kMaxCallDepth));
      auto mf = std::make_shared<Frame>();
      mf->parent = defined_in;
      std::vector<bool> given(node->params.size(), false);
      // jinja2: a macro whose body names `varargs` / `kwargs` collects the extra
      // positional / keyword arguments there.
      Value varargs = Value::make_list({}, true), kwargs = Value::make_dict();
      for (size_t k = 0; k < a.pos.size(); ++k) {
        if (k >= node->params.size()) {
          varargs.list->push_back(a.pos[k]);
          continue;
        }
        mf->vars[node->params[k]] = a.pos[k];
        given[k] = true;
      }
      if (takes_varargs) mf->vars["varargs"] = varargs;
      if (takes_kwargs) mf->vars["kwargs"] = kwargs;
      for (const auto& kv : a.kw) {
        if (kv.first == "caller") {
          mf->vars["caller"] = kv.second;
          continue;
        }
        size_t k = 0;
        while (k < node->params.size() && node->params[k] != kv.first) ++k;
        if (k == node->params.size() && takes_kwargs) {
          kwargs.dict->set(kv.first, kv.second);
          continue;
        }
        if (k == node->params.size())
          throw CallError("macro '" + node->name + "' takes no keyword argument '" + kv.first + "'");
        if (given[k]) throw CallError("macro '" + node->name + "' got multiple values for argument '" + kv.first + "'");
        mf->vars[kv.first] = kv.second;
        given[k] = true;
      }
      for (size_t k = 0; k < node->params.size(); ++k)
        if (!given[k])
          mf->vars[node->params[k]] = node->defaults[k] ? eval(*node->defaults[k], mf)
                                                        : Value::undefined("parameter '" + node->params[k] +
                                                                           "' was not provided");
      ++call_depth_;
      std::string text;
      const Flow saved = flow_;
      try {
        render(node->body, mf, text);
      } catch (...) {
        --call_depth_;
        throw;
      }
      --call_depth_;
      flow_ = saved;
      return Value::string(text);
    });
  }

  // ----------------------------------------------------------- expressions

  CallArgs eval_args(const Expr& e, const FramePtr& f) {
    CallArgs a;
    for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
    for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, f));
    return a;
  }

  /// A filter chain whose innermost subject is `subject` ({% filter %}, {% set x | f %}).
  Value eval_on(const Expr& e, const Value& subject, const FramePtr& f) {
    const Value base = e.args[0] ? eval_on(*e.args[0], subject, f) : subject;
    CallArgs a = eval_args(e, f);
    return apply_filter(e.name, base, a, at(e.line));
  }

  /// Counts a step; TemplateError past RenderOptions::max_steps.
  void step(int line) {
    if (++steps_ > opts_.max_steps)
      fail_at(at(line), "rendering passed " + std::to_string(opts_.max_steps) + " steps (a template that does not end?)");
  }

  Value eval(const Expr& e, const FramePtr& f) {
    Nesting guard(*this, e.line);
    step(e.line);
    Value v = eval_inner(e, f);
    // No value grows without bound (a namespace attribute doubled in a loop). Values
    // looked up (names, attributes, items) existed already and are not measured again.
    const bool made = e.kind == Expr::Kind::Binary || e.kind == Expr::Kind::Filter || e.kind == Expr::Kind::Call ||
                      e.kind == Expr::Kind::Dict;
    if (made && approx_bytes(v) > opts_.max_output_bytes)
      fail_at(at(e.line), "a value passed " + std::to_string(opts_.max_output_bytes) + " bytes");
    return v;
  }

  Value eval_inner(const Expr& e, const FramePtr& f) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::Literal: return e.value;
      case K::Name: {
        const Value* v = f->find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case K::List:
      case K::Tuple: {
        List items;
        size_t bytes = 0;
        for (const auto& a : e.args) {
          items.push_back(eval(*a, f));
          bytes += sizeof(Value) + (items.back().is_string() ? items.back().s.size() : 0);
          if (bytes > opts_.max_output_bytes)
            fail_at(at(e.line), "a value passed " + std::to_string(opts_.max_output_bytes) + " bytes");
        }
        return Value::make_list(std::move(items), e.kind == K::Tuple);
      }
      case K::Dict: {
        Value d = Value::make_dict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const Value key = eval(*e.args[k], f);
          if (!key.is_string()) fail_at(at(e.line), "dict keys must be strings here, not " + key.type_name());
          d.dict->set(key.s, eval(*e.args[k + 1], f));
        }
        return d;
      }
      case K::Attr: return get_attr(eval(*e.args[0], f), e.name, at(e.line));
      case K::Item: return get_item(eval(*e.args[0], f), eval(*e.args[1], f), at(e.line));
      case K::Slice: {
        const Value obj = eval(*e.args[0], f);
        Value b[3];
        const Value* p[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < 3; ++k)
          if (e.args[size_t(k) + 1]) {
            b[k] = eval(*e.args[size_t(k) + 1], f);
            p[k] = &b[k];
          }
        return get_slice(obj, p[0], p[1], p[2], at(e.line));
      }
      case K::Call: {
        const Value callee = eval(*e.args[0], f);
        CallArgs a = eval_args(e, f);
        return call_value(callee, a, at(e.line));
      }
      case K::Filter: {
        const Value subject = eval(*e.args[0], f);
        CallArgs a = eval_args(e, f);
        return apply_filter(e.name, subject, a, at(e.line));
      }
      case K::Test: {
        const Value subject = eval(*e.args[0], f);
        CallArgs a = eval_args(e, f);
        return Value::boolean(apply_test(e.name, subject, a, at(e.line)) != e.negate);
      }
      case K::Unary: {
        const Value v = eval(*e.args[0], f);
        if (e.op == "not") return Value::boolean(!v.truthy());
        if (v.is_undefined()) fail_at(at(e.line), v.s);
        if (!v.is_number()) fail_at(at(e.line), "bad operand type for unary " + e.op + ": '" + v.type_name() + "'");
        if (e.op == "+") return v.is_integral() ? Value::integer(v.as_int()) : v;
        if (v.kind == Value::Kind::Float) return Value::real(-v.f);
        if (v.as_int() == INT64_MIN) overflow(at(e.line));
        return Value::integer(-v.as_int());
      }
      case K::Binary: {
        if (e.op == "and") {
          Value l = eval(*e.args[0], f);
          return l.truthy() ? eval(*e.args[1], f) : l;
        }
        if (e.op == "or") {
          Value l = eval(*e.args[0], f);
          return l.truthy() ? l : eval(*e.args[1], f);
        }
        const Value l = eval(*e.args[0], f);
        const Value r = eval(*e.args[1], f);
        Value v = e.op == "~" ? Value::string(l.str() + r.str()) : arith(e.op, l, r, at(e.line));
        // Concatenation copies: its size is work (ns.l = ns.l + [x] in a loop is quadratic).
        steps_ += v.is_list() ? v.list->size() : v.is_string() ? v.s.size() / 64 : 0;
        return v;
      }
      case K::Compare: {
        Value l = eval(*e.args[0], f);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value r = eval(*e.args[k + 1], f);
          if (!compare(e.ops[k], l, r, at(e.line))) return Value::boolean(false);
          l = std::move(r);
        }
        return Value::boolean(true);
      }
      case K::Cond:
        if (eval(*e.args[0], f).truthy()) return eval(*e.args[1], f);
        if (e.args[2]) return eval(*e.args[2], f);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  bool compare(const std::string& op, const Value& l, const Value& r, const BuiltinContext& c) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "<") return less(l, r, c.where);
    if (op == ">") return less(r, l, c.where);
    if (op == "<=") return !less(r, l, c.where);
    if (op == ">=") return !less(l, r, c.where);
    const bool in = contains(r, l, c);
    return op == "in" ? in : !in;
  }

  static bool contains(const Value& container, const Value& item, const BuiltinContext& c) {
    switch (container.kind) {
      case Value::Kind::String:
        if (!item.is_string())
          fail_at(c, "'in <string>' requires string as left operand, not " + item.type_name());
        return container.s.find(item.s) != std::string::npos;
      case Value::Kind::List:
        for (const auto& v : *container.list)
          if (equals(v, item)) return true;
        return false;
      case Value::Kind::Dict:
      case Value::Kind::Namespace: return item.is_string() && container.dict->find(item.s) != nullptr;
      case Value::Kind::Undefined: return false;
      default: fail_at(c, "argument of type '" + container.type_name() + "' is not iterable");
    }
  }

  Value arith(const std::string& op, const Value& l, const Value& r, const BuiltinContext& c) {
    if (op == "%" && l.is_string()) return Value::string(percent_format(l.s, r, c));  // '' % Undefined too
    if (l.is_undefined()) fail_at(c, l.s);
    if (r.is_undefined()) fail_at(c, r.s);
    const auto type_error = [&]() -> Value {
      if (op == "+" && l.is_string())
        fail_at(c, "can only concatenate str (not \"" + r.type_name() + "\") to str");
      fail_at(c, "unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
    };
    const auto check_size = [&](size_t bytes) {
      if (bytes > opts_.max_output_bytes) fail_at(c, "the result passed " + std::to_string(opts_.max_output_bytes) + " bytes");
    };
    if (l.is_number() && r.is_number()) {
      const bool ints = l.is_integral() && r.is_integral();
      const int64_t a = l.as_int(), b = r.as_int();
      const double x = l.as_double(), y = r.as_double();
      int64_t res;
      if (op == "+") {
        if (!ints) return Value::real(x + y);
        if (__builtin_add_overflow(a, b, &res)) overflow(c);
        return Value::integer(res);
      }
      if (op == "-") {
        if (!ints) return Value::real(x - y);
        if (__builtin_sub_overflow(a, b, &res)) overflow(c);
        return Value::integer(res);
      }
      if (op == "*") {
        if (!ints) return Value::real(x * y);
        if (__builtin_mul_overflow(a, b, &res)) overflow(c);
        return Value::integer(res);
      }
      if (op == "/") {
        if (y == 0) fail_at(c, "division by zero");
        return Value::real(x / y);
      }
      if (op == "//" || op == "%") {
        if (ints ? b == 0 : y == 0)
          fail_at(c, ints ? (op == "//" ? "integer division or modulo by zero" : "integer modulo by zero")
                          : (op == "//" ? "float floor division by zero" : "float modulo"));
        if (ints) {
          if (a == INT64_MIN && b == -1) overflow(c);
          int64_t q = a / b, m = a % b;
          if (m != 0 && ((m < 0) != (b < 0))) {
            --q;
            m += b;
          }
          return Value::integer(op == "//" ? q : m);
        }
        // CPython's float_divmod.
        double mod = std::fmod(x, y);
        double div = (x - mod) / y;
        if (mod != 0) {
          if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
          }
        } else {
          mod = std::copysign(0.0, y);
        }
        double floordiv;
        if (div != 0) {
          floordiv = std::floor(div);
          if (div - floordiv > 0.5) floordiv += 1.0;
        } else {
          floordiv = std::copysign(0.0, x / y);
        }
        return Value::real(op == "//" ? floordiv : mod);
      }
      if (op == "**") {
        if (ints && b >= 0) {
          int64_t acc = 1;
          for (int64_t k = 0; k < b; ++k) {
            if (__builtin_mul_overflow(acc, a, &acc)) overflow(c);
            if (acc == 0 || acc == 1) break;
          }
          return Value::integer(acc);
        }
        if (x == 0 && y < 0) fail_at(c, "0.0 cannot be raised to a negative power");
        return Value::real(std::pow(x, y));
      }
    }
    if (op == "+") {
      if (l.is_string() && r.is_string()) {
        check_size(l.s.size() + r.s.size());
        return Value::string(l.s + r.s);
      }
      if (l.is_list() && r.is_list() && l.tuple == r.tuple) {
        List items = *l.list;
        items.insert(items.end(), r.list->begin(), r.list->end());
        return Value::make_list(std::move(items), l.tuple);
      }
      return type_error();
    }
    const bool seq_times_int = ((l.is_string() || l.is_list()) && r.is_integral()) ||
                               ((r.is_string() || r.is_list()) && l.is_integral());
    if (op == "*" && seq_times_int) {
      const Value& seq = l.is_integral() ? r : l;
      const int64_t times = std::max<int64_t>(0, (l.is_integral() ? l : r).as_int());
      const size_t unit = approx_bytes(seq);
      if (unit && size_t(times) > opts_.max_output_bytes / unit) check_size(opts_.max_output_bytes + 1);
      if (seq.is_string()) {
        std::string out;
        for (int64_t k = 0; k < times; ++k) out += seq.s;
        return Value::string(out);
      }
      List items;
      for (int64_t k = 0; k < times; ++k) items.insert(items.end(), seq.list->begin(), seq.list->end());
      return Value::make_list(std::move(items), seq.tuple);
    }
    return type_error();
  }
};

/// Filters and tests a template names must exist: jinja2 checks them when it compiles a
/// template, except inside the branches of an if statement (checked when they run).
void check_names(const Expr* e, const std::string& name) {
  if (!e) return;
  if (e->kind == Expr::Kind::Cond) {  // a branch of a ternary is checked when it runs
    check_names(e->args[0].get(), name);
    return;
  }
  if (e->kind == Expr::Kind::Filter && !has_filter(e->name))
    throw TemplateError(name + " line " + std::to_string(e->line) + ": no filter named '" + e->name + "'");
  if (e->kind == Expr::Kind::Test && !has_test(e->name))
    throw TemplateError(name + " line " + std::to_string(e->line) + ": no test named '" + e->name + "'");
  for (const auto& a : e->args) check_names(a.get(), name);
  for (const auto& kv : e->kwargs) check_names(kv.second.get(), name);
}

void check_names(const Body& body, const std::string& name) {
  for (const auto& n : body) {
    check_names(n->expr.get(), name);
    check_names(n->cond.get(), name);
    for (const auto& c : n->conds) check_names(c.get(), name);
    for (const auto& d : n->defaults) check_names(d.get(), name);
    if (n->kind != Node::Kind::If)
      for (const auto& b : n->bodies) check_names(b, name);
    check_names(n->body, name);
    check_names(n->else_body, name);
  }
}

}  // namespace

Template::Template(const std::string& source, std::string name) : name_(std::move(name)) {
  auto body = std::make_shared<Body>(parse_template(source, name_));
  check_names(*body, name_);
  body_ = std::move(body);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& vars, const RenderOptions& options) const {
  // Namespaces are the only mutable values: one can come to hold itself
  // ({% set ns.x = [ns] %}), a reference cycle; emptying every namespace made once
  // rendering ends frees them.
  struct CycleBreaker {
    std::vector<std::weak_ptr<Dict>> namespaces;
    ~CycleBreaker() {
      for (auto& w : namespaces)
        if (auto d = w.lock()) d->items.clear();
    }
  } breaker;
  auto globals = std::make_shared<Frame>();
  for (auto& kv : builtin_globals(options, &breaker.namespaces).items) globals->vars[kv.first] = kv.second;
  auto root = std::make_shared<Frame>();
  root->parent = globals;
  if (vars.is_dict())
    for (const auto& kv : vars.dict->items) root->vars[kv.first] = kv.second;
  Renderer r(name_, options);
  std::string out;
  r.render(*body_, root, out);
  return out;
}

}  // namespace lol::jinja
