#include "tasks/task.h"

#include <sstream>

namespace lol::tasks {

std::string Example::text() const { return question + " " + label + " " + trace + " " + answer; }

std::vector<std::string> split_tokens(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

}  // namespace lol::tasks
