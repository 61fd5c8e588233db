#include "layerroute/data.h"

#include <fstream>

#include "training/batcher.h"
#include "util/error.h"

namespace lol::layerroute {

namespace {

std::string str_field(const nlohmann::json& m, const char* key, const std::string& where) {
  if (!m.contains(key) || m[key].is_null()) return "";
  if (!m[key].is_string()) throw InputError(where + ": field '" + key + "' must be a string");
  return m[key].get<std::string>();
}

std::string render_tool_calls(const nlohmann::json& calls, const std::string& where) {
  if (!calls.is_array()) throw InputError(where + ": field 'tool_calls' must be an array");
  std::string out;
  for (const auto& c : calls) {
    const auto& f = c.contains("function") ? c["function"] : c;
    if (!f.is_object() || !f.contains("name"))
      throw InputError(where + ": a tool call needs {\"function\": {\"name\", \"arguments\"}}");
    nlohmann::ordered_json call;  // Qwen2.5's template writes "name" first
    call["name"] = f["name"];
    if (f.contains("arguments")) {
      const auto& a = f["arguments"];
      auto parsed = a.is_string() ? nlohmann::ordered_json::parse(a.get<std::string>(), nullptr, false)
                                  : nlohmann::ordered_json::parse(a.dump());
      call["arguments"] = parsed.is_discarded() ? nlohmann::ordered_json(a.get<std::string>()) : parsed;
    }
    out += "\n<tool_call>\n" + call.dump() + "\n</tool_call>";
  }
  return out;
}

Turn map_turn(std::string role, std::string content, const std::string& where) {
  if (role == "human") role = "user";
  if (role == "gpt") role = "assistant";
  if (role == "tool" || role == "function" || role == "ipython")
    return {"user", "<tool_response>\n" + content + "\n</tool_response>"};
  if (role != "system" && role != "user" && role != "assistant")
    throw InputError(where + ": role '" + role + "': expected system, user, assistant or tool");
  return {role, content};
}

}  // namespace

Sample parse_sample(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(where + ": expected a JSON object");
  Sample s;
  s.source = str_field(j, "source", where);
  if (j.contains("messages") || j.contains("conversations")) {
    const bool sharegpt = !j.contains("messages");
    const auto& msgs = sharegpt ? j["conversations"] : j["messages"];
    if (!msgs.is_array()) throw InputError(where + ": 'messages' must be an array");
    for (size_t i = 0; i < msgs.size(); ++i) {
      const std::string w = where + ": message " + std::to_string(i);
      const auto& m = msgs[i];
      if (!m.is_object()) throw InputError(w + ": expected an object");
      std::string role = str_field(m, sharegpt ? "from" : "role", w);
      std::string content = str_field(m, sharegpt ? "value" : "content", w);
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) content += render_tool_calls(m["tool_calls"], w);
      s.turns.push_back(map_turn(role, content, w));
    }
  } else if (j.contains("question") && j.contains("answer")) {
    s.turns.push_back({"user", str_field(j, "question", where)});
    s.turns.push_back({"assistant", str_field(j, "answer", where)});
  } else {
    throw InputError(where + ": expected 'messages', 'conversations' or 'question' + 'answer'");
  }
  bool has_assistant = false;
  for (const auto& t : s.turns) has_assistant = has_assistant || t.role == "assistant";
  if (!has_assistant) throw InputError(where + ": the sample has no assistant turn (nothing to train on)");
  return s;
}

std::vector<Sample> read_samples(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open");
  std::vector<Sample> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) throw InputError(where + ": not valid JSON");
    out.push_back(parse_sample(j, where));
  }
  if (out.empty()) throw InputError(path + ": no samples");
  return out;
}

Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len,
                        const std::string& default_system) {
  Example e;
  e.source = s.source;
  auto add = [&](const std::string& text, bool train) {
    const size_t before = e.tokens.size();
    tok.encode_append(text, e.tokens);
    e.loss_mask.resize(e.tokens.size(), train ? 1 : 0);
    (void)before;
  };
  std::vector<Turn> turns = s.turns;
  if (!default_system.empty() && turns.front().role != "system") turns.insert(turns.begin(), {"system", default_system});
  for (const auto& t : turns) {
    add("<|im_start|>" + t.role + "\n", false);
    if (t.role == "assistant") e.prompt_len = int64_t(e.tokens.size());
    add(t.content + "<|im_end|>", t.role == "assistant");
    add("\n", false);
  }
  if (max_len > 0 && int64_t(e.tokens.size()) > max_len) {
    e.tokens.resize(size_t(max_len));
    e.loss_mask.resize(size_t(max_len));
    e.prompt_len = std::min(e.prompt_len, max_len);
  }
  return e;
}

void require_examples_fit(const std::vector<Example>& examples, int64_t max_positions, const std::string& what) {
  for (size_t i = 0; i < examples.size(); ++i) {
    const int64_t n = int64_t(examples[i].tokens.size());
    require(n <= max_positions, what,
            "sample " + std::to_string(i) + " has " + std::to_string(n) + " tokens, more than the base model's " +
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
