#include "lol/checkpoint.h"

#include <filesystem>

#include "core/module_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol {

void save_lol(const LoLModel& model, const std::string& dir, const nlohmann::json& extra) {
  fs::create_directories(dir);
  auto cfg = model->config().to_json();
  if (!extra.is_null()) cfg["extra"] = extra;
  save_module(*model, dir + "/model.safetensors", {{"format", "pt"}, {"architecture", "lol"}});
  io::write_file_atomic(dir + "/config.json", cfg.dump(2) + "\n");
}

LoLModel load_lol(const std::string& dir, const torch::Device& device, nlohmann::json* extra) {
  const std::string cfg_path = dir + "/config.json";
  if (!fs::exists(cfg_path)) throw InputError(dir + ": not a checkpoint directory (no config.json)");
  nlohmann::json j = io::read_json_file(cfg_path);
  if (j.is_object() && j.contains("extra")) {
    if (extra) *extra = j["extra"];
    j.erase("extra");
  }
  auto cfg = LoLConfig::from_json(j, cfg_path);
  LoLModel m(cfg);
  load_module(*m, dir + "/model.safetensors");
  m->to(device);
  return m;
}

}  // namespace lol
