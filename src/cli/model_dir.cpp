#include "cli/model_dir.h"

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

std::string resolve_model_dir(const std::string& dir) {
  if (fs::exists(dir + "/config.json")) return dir;
  const std::string latest = dir + "/latest";
  if (fs::is_symlink(latest) || fs::is_directory(latest)) {
    if (fs::exists(latest + "/config.json")) return latest;
  }
  if (fs::is_regular_file(latest)) {
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    for (const std::string& cand : {name, dir + "/" + name, dir + "/checkpoints/" + name})
      if (!name.empty() && fs::exists(cand + "/config.json")) return cand;
  }
  throw InputError(dir + ": not a model directory (no config.json) and not a run directory with a 'latest' checkpoint");
}

analysis::GenerateFn default_generator(bool full_recompute) {
  return analysis::generate_full_recompute;
}

}  // namespace lol::cli
