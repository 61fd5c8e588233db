// Model construction for the trainer: architecture name -> TrainableModel.
#include <filesystem>

#include "baselines/factory.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "training/lol_trainable.h"
#include "util/error.h"

namespace lol::training {

const char* group_name(ParamGroup g) {
  switch (g) {
    case ParamGroup::Muon: return "muon";
    case ParamGroup::AdamWDecay: return "adamw_decay";
    case ParamGroup::AdamWNoDecay: return "adamw_no_decay";
  }
  return "?";
}

int64_t TrainableModel::num_parameters() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

std::unique_ptr<TrainableModel> make_model(const nlohmann::json& section, const std::string& where,
                                           int64_t vocab_size, int64_t max_seq_len, uint64_t seed) {
  if (!section.is_object()) throw InputError(where + ": expected a JSON object");
  nlohmann::json j = section;
  const std::string arch = j.value("architecture", std::string("lol"));
  if (arch == "lol") {
    if (!j.contains("vocab_size")) j["vocab_size"] = vocab_size;
    if (!j.contains("max_seq_len")) j["max_seq_len"] = std::max<int64_t>(1024, max_seq_len);
    LoLConfig cfg = LoLConfig::from_json(j, where);
    if (cfg.vocab_size < vocab_size)
      throw InputError(where + ": field 'vocab_size' = " + std::to_string(cfg.vocab_size) +
                       ": expected >= the dataset's vocab_size " + std::to_string(vocab_size));
    if (cfg.max_seq_len < max_seq_len)
      throw InputError(where + ": field 'max_seq_len' = " + std::to_string(cfg.max_seq_len) +
                       ": expected >= the training sequence length " + std::to_string(max_seq_len));
    LoLModel m(cfg);
    m->reset_parameters(seed);
    return std::make_unique<LoLTrainable>(m);
  }
  if (auto b = baselines::make_baseline(arch, j, where, vocab_size, max_seq_len, seed)) return b;
  throw InputError(where + ": field 'architecture' = \"" + arch + "\": expected one of lol, " +
                   baselines::baseline_architectures());
}

std::unique_ptr<TrainableModel> load_model(const std::string& dir) {
  const std::string cfg_path = dir + "/config.json";
  if (!std::filesystem::exists(cfg_path)) throw InputError(dir + ": not a model directory (no config.json)");
  nlohmann::json j = io::read_json_file(cfg_path);
  const std::string arch = j.is_object() ? j.value("architecture", std::string("lol")) : "lol";
  if (arch == "lol") return std::make_unique<LoLTrainable>(load_lol(dir));
  if (auto b = baselines::load_baseline(arch, dir)) return b;
  throw InputError(cfg_path + ": field 'architecture' = \"" + arch + "\": expected one of lol, " +
                   baselines::baseline_architectures());
}

}  // namespace lol::training
