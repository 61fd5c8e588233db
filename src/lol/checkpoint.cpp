#include "lol/checkpoint.h"

#include <cstdint>
#include <filesystem>

#include "core/module_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "nn/block_cost.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol {

namespace {
/// Lower bound on the number of weights a model of this config holds (embedding and the
/// parameters of every prelude, library and coda block; FiLM, router and final norm left
/// out). Used to refuse a config.json that declares a far larger model than
/// model.safetensors can hold, before any weight is allocated.
double min_weight_count(const LoLConfig& c) {
  return double(c.vocab_size) * double(c.d_model) +
         double(c.n_prelude + c.n_coda) * double(nn::block_parameters(prelude_coda_shape(c))) +
         double(c.library_size) * double(nn::block_parameters(block_shape(c)));
}
}  // namespace

int64_t saved_active_depth(const std::string& dir, int64_t core_depth) {
  const std::string state_path = dir + "/trainer_state.json";
  if (!fs::exists(state_path)) return core_depth;
  const nlohmann::json s = io::read_json_file(state_path);
  const auto it = s.is_object() ? s.find("active_depth") : s.end();
  if (it == s.end()) return core_depth;
  // -2: not an integer, or one beyond int64 (get<int64_t> would wrap 2^64 - 1 to -1).
  const bool fits = it->is_number_integer() && !(it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX));
  const int64_t d = fits ? it->get<int64_t>() : -2;
  if (d == -1) return core_depth;  // written for a model without a growable core
  if (d < 0 || d > core_depth)
    throw InputError(state_path + ": field 'active_depth' = " + it->dump() +
                     ": expected 0 <= active_depth <= core_depth = " + std::to_string(core_depth) +
                     " (config.json), or -1");
  return d;
}

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
  const std::string weights = dir + "/model.safetensors";
  std::error_code ec;
  const auto file_bytes = fs::file_size(weights, ec);
  const double need = 2 * min_weight_count(cfg);  // every float dtype takes >= 2 bytes
  if (!ec && need > double(file_bytes))
    throw InputError(cfg_path + ": declares a model of at least " + std::to_string(int64_t(need / 2)) +
                     " weights (>= " + std::to_string(int64_t(need)) + " bytes), but " + weights + " has only " +
                     std::to_string(file_bytes) + " bytes: config.json does not match the weights");
  LoLModel m(cfg);
  load_module(*m, weights);
  m->set_active_depth(saved_active_depth(dir, cfg.core_depth));
  m->to(device);
  return m;
}

}  // namespace lol
