// Model construction for the trainer: architecture name -> TrainableModel.
#include <algorithm>
#include <filesystem>

#include "baselines/factory.h"
#include "baselines/flops.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "training/model_sections.h"
#include "training/lol_trainable.h"
#include "util/error.h"
#include "util/size_limits.h"

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

nlohmann::json with_data_sizes(nlohmann::json section, int64_t vocab_size, int64_t seq_len) {
  if (!section.contains("vocab_size")) section["vocab_size"] = vocab_size;
  if (!section.contains("max_seq_len")) section["max_seq_len"] = std::max<int64_t>(1024, seq_len);
  return section;
}

std::unique_ptr<TrainableModel> make_model(const nlohmann::json& section, const std::string& where,
                                           int64_t vocab_size, int64_t max_seq_len, uint64_t seed) {
  if (!section.is_object()) throw InputError(where + ": expected a JSON object");
  const std::string arch = section.value("architecture", std::string("lol"));
  if (arch == "lol") {
    LoLConfig cfg = LoLConfig::from_json(with_data_sizes(section, vocab_size, max_seq_len), where);
    if (cfg.vocab_size < vocab_size)
      throw InputError(where + ": field 'vocab_size' = " + std::to_string(cfg.vocab_size) +
                       ": expected >= the dataset's vocab_size " + std::to_string(vocab_size));
    if (cfg.max_seq_len < max_seq_len)
      throw InputError(where + ": field 'max_seq_len' = " + std::to_string(cfg.max_seq_len) +
                       ": expected >= the training sequence length " + std::to_string(max_seq_len));
    // Weights, gradients and two optimizer moments: refused up front when even the
    // weights cannot be allocated.
    util::require_fits_in_memory(where, "the model's float32 weights",
                                 4.0 * double(baselines::cost_model(cfg, cfg.core_depth).parameters));
    LoLModel m(cfg);
    m->reset_parameters(seed);
    return std::make_unique<LoLTrainable>(m);
  }
  if (auto b = baselines::make_baseline(arch, section, where, vocab_size, max_seq_len, seed)) return b;
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
