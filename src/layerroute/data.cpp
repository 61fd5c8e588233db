#include "layerroute/data.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "training/batcher.h"
#include "util/error.h"

namespace lol::layerroute {

namespace {

// A string field that must be present (the chat template concatenates it: a missing or
// null value is an error in transformers too).
std::string required_str(const nlohmann::ordered_json& m, const char* key, const std::string& where) {
  if (!m.contains(key) || m[key].is_null())
    throw InputError(where + ": field '" + key + "' is missing or null (expected a string)");
  if (!m[key].is_string()) throw InputError(where + ": field '" + key + "' must be a string");
  return m[key].get<std::string>();
}

std::string str_field(const nlohmann::ordered_json& m, const char* key, const std::string& where) {
  if (!m.contains(key) || m[key].is_null()) return "";
  if (!m[key].is_string()) throw InputError(where + ": field '" + key + "' must be a string");
  return m[key].get<std::string>();
}

// Python's repr of a finite double: the shortest digits that read back to it (ties to
// even, as std::to_chars), fixed notation for decimal exponents -4 <= e < 16 (".0" on
// integers), else "d.ddde+XX" (two exponent digits at least).
std::string python_float(double x) {
  if (std::isnan(x)) return "NaN";  // json.dumps(allow_nan=True); not reachable from JSON input
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // [-]d[.ddd]e(+|-)XX
  const auto epos = sci.find('e');
  const int exp = std::stoi(sci.substr(epos + 1));
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const std::string e = std::to_string(std::abs(exp));
    return out + (exp < 0 ? "e-" : "e+") + (e.size() < 2 ? "0" + e : e);
  }
  if (exp < 0) return out + "0." + std::string(size_t(-exp - 1), '0') + digits;
  const size_t int_digits = size_t(exp) + 1;
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

// Python's json.dumps stops with RecursionError near its recursion limit (1000).
constexpr int kMaxJsonDepth = 1000;

void dumps(const nlohmann::ordered_json& v, std::string& out, int depth) {
  if (depth > kMaxJsonDepth)
    throw InputError("JSON value nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += nlohmann::ordered_json(it.key()).dump();
        out += ": ";
        dumps(it.value(), out, depth + 1);
      }
      out += '}';
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        dumps(v[i], out, depth + 1);
      }
      out += ']';
      return;
    }
    case nlohmann::ordered_json::value_t::number_float:
      out += python_float(v.get<double>());
      return;
    default:  // strings (same escapes as Python with ensure_ascii=False), integers, booleans, null
      out += v.dump();
  }
}

std::string dumps_at(const nlohmann::ordered_json& v, const std::string& where) {
  std::string out;
  try {
    dumps(v, out, 0);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
  return out;
}

std::string render_tool_call(const nlohmann::ordered_json& c, const std::string& where) {
  const auto& f = c.is_object() && c.contains("function") ? c["function"] : c;
  if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
    throw InputError(where + ": a tool call needs {\"function\": {\"name\": STRING, \"arguments\": ...}}");
  // Qwen2.5: '<tool_call>\n{"name": "' + name + '", "arguments": ' + arguments|tojson + '}\n</tool_call>'
  // (the name is inserted as is; an absent "arguments" is Jinja's undefined, which tojson
  // refuses: refused here too).
  if (!f.contains("arguments"))
    throw InputError(where + ": tool call '" + f["name"].get<std::string>() + "' has no 'arguments'");
  return "<tool_call>\n{\"name\": \"" + f["name"].get<std::string>() + "\", \"arguments\": " +
         dumps_at(f["arguments"], where + ": 'arguments'") + "}\n</tool_call>";
}

// Assistant content with its tool calls, as the template writes it after the role line.
std::string assistant_with_calls(const std::string& content, const nlohmann::ordered_json& calls,
                                 const std::string& where) {
  if (!calls.is_array()) throw InputError(where + ": field 'tool_calls' must be an array");
  std::string out = content;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!out.empty()) out += "\n";
    out += render_tool_call(calls[i], where + ": tool call " + std::to_string(i));
  }
  return out;
}

bool is_tool_role(const std::string& role) { return role == "tool" || role == "function" || role == "ipython"; }

bool wrapped_in(const std::string& s, const std::string& open, const std::string& close) {
  const auto b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b != std::string::npos && s.compare(b, open.size(), open) == 0 && e + 1 >= b + open.size() + close.size() &&
         s.compare(e + 1 - close.size(), close.size(), close) == 0;
}

std::string tools_block(const nlohmann::ordered_json& tools, const std::string& where) {
  if (!tools.is_array()) throw InputError(where + ": field 'tools' must be an array");
  if (tools.empty()) return "";  // the template tests `if tools`: an empty list renders nothing
  std::string out =
      "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = where + ": tools[" + std::to_string(i) + "]";
    // transformers' apply_chat_template refuses a tool that is not a JSON schema object.
    if (!tools[i].is_object()) throw InputError(w + ": expected an object (a function signature)");
    out += "\n" + dumps_at(tools[i], w);
  }
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>";
  return out;
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& v) {
  std::string out;
  dumps(v, out, 0);
  return out;
}

Sample parse_sample(const nlohmann::ordered_json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(where + ": expected a JSON object");
  Sample s;
  s.where = where;
  s.source = str_field(j, "source", where);
  if (j.contains("tools") && !j["tools"].is_null()) {
    s.tools = tools_block(j["tools"], where);
    s.tool_schemas = j["tools"];
  }
  if (j.contains("messages") || j.contains("conversations")) {
    const bool sharegpt = !j.contains("messages");
    const auto& msgs = sharegpt ? j["conversations"] : j["messages"];
    if (!msgs.is_array())
      throw InputError(where + ": '" + std::string(sharegpt ? "conversations" : "messages") + "' must be an array");
    bool in_tools = false;  // the previous message was a tool result (its user turn is still open)
    for (size_t i = 0; i < msgs.size(); ++i) {
      const std::string w = where + ": message " + std::to_string(i);
      const auto& m = msgs[i];
      if (!m.is_object()) throw InputError(w + ": expected an object");
      const char* role_key = sharegpt ? "from" : "role";
      const char* content_key = sharegpt ? "value" : "content";
      if (!m.contains(role_key))
        throw InputError(w + ": no '" + role_key + "' field (" +
                         (sharegpt ? "'conversations' entries are {\"from\", \"value\"}"
                                   : "'messages' entries are {\"role\", \"content\"}") +
                         ")");
      std::string role = required_str(m, role_key, w);
      if (role == "human") role = "user";
      if (role == "gpt") role = "assistant";
      // Content: a string; only an assistant message with tool calls may leave it out
      // (OpenAI's "content": null), as the template tests `if message.content` there.
      const bool may_lack_content = role == "assistant";
      std::string content = may_lack_content ? str_field(m, content_key, w) : required_str(m, content_key, w);
      if (!sharegpt) {
        s.messages.push_back(m);
        s.messages.back()["role"] = role;  // human / gpt as user / assistant
      } else {
        const std::string open = "<tool_response>\n", close = "\n</tool_response>";
        const bool wrapped = is_tool_role(role) && content.size() >= open.size() + close.size() &&
                             content.compare(0, open.size(), open) == 0 &&
                             content.compare(content.size() - close.size(), close.size(), close) == 0;
        s.messages.push_back(
            {{"role", role},
             {"content", wrapped ? content.substr(open.size(), content.size() - open.size() - close.size()) : content}});
      }
      if (is_tool_role(role)) {
        if (!(sharegpt && wrapped_in(content, "<tool_response>", "</tool_response>")))
          content = "<tool_response>\n" + content + "\n</tool_response>";
        if (in_tools) s.turns.back().content += "\n" + content;
        else s.turns.push_back({"user", content});
        in_tools = true;
        continue;
      }
      in_tools = false;
      if (role != "system" && role != "user" && role != "assistant")
        throw InputError(w + ": role '" + role + "': expected system, user, assistant or tool");
      const auto none = nlohmann::ordered_json::array();
      const auto& tc = m.contains("tool_calls") && !m["tool_calls"].is_null() ? m["tool_calls"] : none;
      // The template tests `message.tool_calls`: an empty list or object is no tool call.
      const bool calls = !((tc.is_array() || tc.is_object()) && tc.empty());
      if (calls && role != "assistant") throw InputError(w + ": only assistant messages carry 'tool_calls'");
      if (calls) content = assistant_with_calls(content, tc, w);
      else if (role == "assistant") content = required_str(m, content_key, w);
      s.turns.push_back({role, content});
    }
  } else if (j.contains("question") && j.contains("answer")) {
    s.turns.push_back({"user", required_str(j, "question", where)});
    s.turns.push_back({"assistant", required_str(j, "answer", where)});
    s.messages.push_back({{"role", "user"}, {"content", s.turns[0].content}});
    s.messages.push_back({{"role", "assistant"}, {"content", s.turns[1].content}});
  } else {
    throw InputError(where + ": expected 'messages', 'conversations' or 'question' + 'answer'");
  }
  bool has_assistant = false;
  for (const auto& t : s.turns) has_assistant = has_assistant || t.role == "assistant";
  if (!has_assistant) throw InputError(where + ": the sample has no assistant turn (nothing to train on)");
  return s;
}

std::vector<Sample> read_samples(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path + ": a directory (expected a JSONL file of samples: messages / conversations / question+answer)");
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open");
  std::vector<Sample> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(where + ": not valid JSON (" + e.what() + ")");
    }
    out.push_back(parse_sample(j, where));
    out.back().where = where;
  }
  if (out.empty()) throw InputError(path + ": no samples");
  return out;
}

std::vector<Turn> chat_turns(const Sample& s, const std::string& default_system) {
  std::vector<Turn> turns = s.turns;
  const bool has_system = !turns.empty() && turns.front().role == "system";
  if (!has_system && (!default_system.empty() || !s.tools.empty())) turns.insert(turns.begin(), {"system", default_system});
  if (!s.tools.empty()) turns.front().content += s.tools;
  return turns;
}

std::string render_chatml(const Sample& s, const std::string& default_system) {
  std::string out;
  for (const auto& t : chat_turns(s, default_system)) out += "<|im_start|>" + t.role + "\n" + t.content + "<|im_end|>\n";
  return out;
}

LossTokens parse_loss_tokens(const std::string& s, const std::string& flag) {
  if (s == "assistant") return LossTokens::Assistant;
  if (s == "all") return LossTokens::All;
  throw InputError(flag + " '" + s + "': expected assistant or all");
}

const char* loss_tokens_name(LossTokens l) { return l == LossTokens::All ? "all" : "assistant"; }

Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len,
                        const std::string& default_system, LossTokens loss) {
  Example e;
  e.source = s.source;
  e.where = s.where;
  auto add = [&](const std::string& text, bool train) {
    tok.encode_append(text, e.tokens);
    e.loss_mask.resize(e.tokens.size(), train ? 1 : 0);
  };
  for (const auto& t : chat_turns(s, default_system)) {
    const bool assistant = t.role == "assistant";
    // "<|im_start|>ROLE\nCONTENT" is one piece of text between special tokens: encoded
    // at once, so that a token merging the role line's "\n" with the content's leading
    // whitespace comes out as the tokenizer makes it for the whole string.
    const std::string head = "<|im_start|>" + t.role + "\n";
    const size_t first = e.tokens.size();
    add(head + t.content, false);
    if (assistant) {
      // Tokens whose bytes reach past the role line are content: walk the decoded byte
      // lengths (the role line is ASCII, unchanged by normalizers) up to its end.
      size_t i = first, bytes = 0;
      for (; i < e.tokens.size() && bytes < head.size(); ++i)
        bytes += tok.decode_inner(&e.tokens[i], 1).size();  // inside a text (a Strip decoder keeps the space)
      // Token i-1 ended at or past the role line's end: when past it, it holds content.
      if (bytes > head.size()) --i;
      e.prompt_len = int64_t(i);
      for (; i < e.tokens.size(); ++i) e.loss_mask[i] = 1;
    }
    add("<|im_end|>", assistant);
    add("\n", false);
  }
  cut_example(e, max_len, loss);
  return e;
}

void cut_example(Example& e, int64_t max_len, LossTokens loss) {
  if (max_len > 0 && int64_t(e.tokens.size()) > max_len) {
    e.tokens.resize(size_t(max_len));
    e.loss_mask.resize(size_t(max_len));
    e.prompt_len = std::min(e.prompt_len, max_len);
  }
  if (loss == LossTokens::All && std::find(e.loss_mask.begin(), e.loss_mask.end(), 1) != e.loss_mask.end())
    std::fill(e.loss_mask.begin(), e.loss_mask.end(), 1);
}

void require_examples_fit(const std::vector<Example>& examples, int64_t max_positions, const std::string& what) {
  for (size_t i = 0; i < examples.size(); ++i) {
    const int64_t n = int64_t(examples[i].tokens.size());
    require(n <= max_positions, what,
            (examples[i].where.empty() ? "sample " + std::to_string(i) : examples[i].where) + " has " + std::to_string(n) + " tokens, more than the base model's " +
                std::to_string(max_positions) + " positions (max_position_embeddings); cut samples with --max-len " +
                std::to_string(max_positions) + " or less");
  }
}

training::TrainBatch make_batch(const std::vector<const Example*>& rows) {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int64_t>> doc;
  std::vector<std::vector<uint8_t>> mask, router;
  std::vector<int64_t> prompt;
  for (const auto* e : rows) {
    tokens.push_back(e->tokens);
    doc.emplace_back(e->tokens.size(), 0);
    mask.push_back(e->loss_mask);
    router.emplace_back(e->tokens.size(), 0);
    prompt.push_back(0);
  }
  return training::assemble_batch(tokens, doc, mask, router, prompt);
}

}  // namespace lol::layerroute
