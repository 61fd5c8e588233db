#include "dataset/judge.h"

#include <map>
#include <utility>

#include "dataset/task_dataset.h"
#include "tasks/maze.h"
#include "util/error.h"

namespace lol::data {

nlohmann::json verdict_json(const tasks::Verdict& v) {
  return {{"followed", v.followed_strategy}, {"as_requested", v.strategy_as_requested},
          {"legal", v.trace_legal},          {"faithful", v.rule_faithful},
          {"correct", v.answer_correct},     {"error", v.error}};
}

namespace {

const nlohmann::json& field(const nlohmann::json& j, const char* name, const std::string& where, const char* expected) {
  const auto it = j.find(name);
  if (it == j.end()) throw InputError(where + ": missing field '" + name + "' (expected " + expected + ")");
  return *it;
}

std::string string_field(const nlohmann::json& j, const char* name, const std::string& where, const char* expected) {
  const auto& f = field(j, name, where, expected);
  if (!f.is_string()) throw InputError(where + ": field '" + name + "' is " + f.dump() + " (expected " + expected + ")");
  return f.get<std::string>();
}

}  // namespace

tasks::VerdictTally judge_continuations(std::istream& in, const std::string& where, std::ostream& out) {
  tasks::VerdictTally s;
  std::map<std::pair<std::string, int>, TaskSpec> specs;  // (task, maze side) -> spec
  int64_t lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = where + ":" + std::to_string(lineno);
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw InputError(at + ": not a JSON object (expected {\"question\": ..., \"strategy\": 1..5, \"generated\": ...})");
    const std::string question = string_field(j, "question", at, "the prompt, a string \"Q : ...\"");
    const std::string generated = string_field(j, "generated", at, "the continuation from \"R :\" on, a string");
    const auto& sf = field(j, "strategy", at, "the requested strategy, an integer 1..5");
    if (!sf.is_number_integer() || sf.get<int64_t>() < 1 || sf.get<int64_t>() > TaskSpec::kStrategies)
      throw InputError(at + ": field 'strategy' is " + sf.dump() + " (expected the requested strategy, an integer 1..5)");
    const int strategy = sf.get<int>();
    const std::string default_task = question.find(" start ") != std::string::npos ? "maze" : "sudoku";
    const std::string task = j.contains("task") ? string_field(j, "task", at, "\"maze\" or \"sudoku\"") : default_task;
    if (task != "maze" && task != "sudoku")
      throw InputError(at + ": field 'task' is \"" + task + "\" (expected \"maze\" or \"sudoku\")");
    tasks::Verdict v;
    try {
      const int size = task == "maze" ? tasks::Maze::from_question(question).size : 0;
      auto it = specs.find({task, size});
      if (it == specs.end()) it = specs.emplace(std::make_pair(task, size), task_spec(task, size ? size : 8)).first;
      v = it->second.verify(question, strategy, generated);
    } catch (const InputError& e) {
      // The verifiers throw only for the question (the continuation is judged, never refused).
      throw InputError(at + ": field 'question': " + e.what());
    }
    nlohmann::json o = {{"line", lineno}};
    o.update(verdict_json(v));
    o["padding"] = v.padding;
    // Error messages quote whole tokens of valid UTF-8 input; replace anything else anyway.
    out << o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    s.add(v);
  }
  if (in.bad()) throw InputError(where + ": read error");
  return s;
}

}  // namespace lol::data
