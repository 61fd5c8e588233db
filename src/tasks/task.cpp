#include "tasks/task.h"

#include <sstream>

namespace lol::tasks {

std::string Example::text() const { return question + " " + label + " " + trace + " " + answer; }

void VerdictTally::add(const Verdict& v) {
  n++;
  as_requested += v.strategy_as_requested;
  legal += v.trace_legal;
  faithful += v.rule_faithful;
  correct += v.answer_correct;
  trajectory += v.strategy_as_requested && v.trace_legal && v.rule_faithful && v.answer_correct;
  padding_sum += v.padding;
}

std::vector<std::string> split_tokens(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

}  // namespace lol::tasks
