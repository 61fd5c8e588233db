// The syntax tree of a parsed template (jinja/parser.cpp builds it, jinja/render.cpp
// runs it). Internal to src/jinja.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace lol::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// An expression. Which fields a node uses depends on its kind:
///   Literal   value
///   Name      name
///   List / Tuple / Dict   args (Dict: key, value, key, value, ...)
///   Attr      args[0] . name            Item  args[0] [ args[1] ]
///   Slice     args[0] [ args[1] : args[2] : args[3] ]  (null where omitted)
///   Call      args[0] ( args[1..], kwargs )
///   Filter    args[0] | name ( args[1..], kwargs )   (args[0] null in a {% filter %} block)
///   Test      args[0] is [not: negate] name ( args[1..] )
///   Unary     op ("-", "+", "not") args[0]
///   Binary    args[0] op args[1]  (op: + - * / // % ** ~ and or in notin)
///   Compare   args[0] ops[0] args[1] ops[1] args[2] ...  (== != < <= > >=, chained)
///   Cond      args[1] if args[0] else args[2]  (args[2] null: undefined)
struct Expr {
  enum class Kind { Literal, Name, List, Tuple, Dict, Attr, Item, Slice, Call, Filter, Test, Unary, Binary, Compare, Cond };
  Kind kind = Kind::Literal;
  int line = 1;
  Value value;
  std::string name;  ///< Name, Attr, Filter, Test
  std::string op;    ///< Unary, Binary
  bool negate = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  ///< Compare
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

/// A statement. Fields by kind:
///   Text      text
///   Output    expr                                  {{ expr }}
///   If        conds[k] -> bodies[k]; bodies.size() == conds.size() + 1 holds the else
///   For       targets in expr [if cond] body [else else_body]
///   Set       targets = expr (attrs[k] non-empty: targets[k].attrs[k], a namespace attribute)
///   SetBlock  targets[0] = rendered body (| filter chain in expr)
///   Macro     name(params = defaults) body
///   CallBlock expr (a Call) with `caller` = body
///   FilterBlock  body rendered, then the filter chain expr applied
///   Break / Continue
///   Scope     body (generation / with blocks: with assigns targets = defaults first)
struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Scope };
  Kind kind = Kind::Text;
  int line = 1;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::string> targets;
  std::vector<std::string> attrs;  ///< Set: one per target, "" for a plain name
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  ///< one per param, null when it has none
};

/// Parses Jinja source as transformers' chat-template environment reads it
/// (trim_blocks, lstrip_blocks, no trailing newline kept, loopcontrols, the
/// {% generation %} tag). `name` prefixes error messages. Throws TemplateError.
Body parse_template(const std::string& source, const std::string& name);

}  // namespace lol::jinja
