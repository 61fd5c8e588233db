#include "io/json_file.h"

#include "io/atomic_file.h"
#include "util/error.h"

namespace lol::io {

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace lol::io
