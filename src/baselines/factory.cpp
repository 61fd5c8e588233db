#include "baselines/factory.h"

#include <algorithm>

#include "baselines/dense_trainable.h"
#include "baselines/flops.h"
#include "baselines/looped_trainable.h"
#include "baselines/moe_trainable.h"
#include "training/model_sections.h"
#include "util/error.h"
#include "util/size_limits.h"

namespace lol::baselines {

namespace {

/// The dataset's sizes fit the model, and its float32 weights fit this machine's memory
/// (refused before allocation, as for LoL in training::make_model).
void check_sizes(const TransformerShape& s, const std::string& where, int64_t vocab_size, int64_t max_seq_len,
                 const CostModel& cost) {
  if (s.vocab_size < vocab_size)
    throw InputError(where + ": field 'vocab_size' = " + std::to_string(s.vocab_size) +
                     ": expected >= the dataset's vocab_size " + std::to_string(vocab_size));
  if (s.max_seq_len < max_seq_len)
    throw InputError(where + ": field 'max_seq_len' = " + std::to_string(s.max_seq_len) +
                     ": expected >= the training sequence length " + std::to_string(max_seq_len));
  util::require_fits_in_memory(where, "the model's float32 weights", 4.0 * double(cost.parameters));
}

}  // namespace

const char* baseline_architectures() { return "dense, looped, moe"; }

std::unique_ptr<training::TrainableModel> make_baseline(const std::string& arch, const nlohmann::json& section,
                                                        const std::string& where, int64_t vocab_size,
                                                        int64_t max_seq_len, uint64_t seed) {
  if (arch == "dense") {
    auto cfg = DenseConfig::from_json(training::with_data_sizes(section, vocab_size, max_seq_len), where);
    check_sizes(cfg, where, vocab_size, max_seq_len, cost_model(cfg));
    DenseModel m(cfg);
    m->reset_parameters(seed);
    return std::make_unique<DenseTrainable>(m);
  }
  if (arch == "looped") {
    auto cfg = LoopedConfig::from_json(training::with_data_sizes(section, vocab_size, max_seq_len), where);
    check_sizes(cfg, where, vocab_size, max_seq_len, cost_model(cfg, cfg.recurrence));
    LoopedModel m(cfg);
    m->reset_parameters(seed);
    return std::make_unique<LoopedTrainable>(m);
  }
  if (arch == "moe") {
    auto cfg = MoEConfig::from_json(training::with_data_sizes(section, vocab_size, max_seq_len), where);
    check_sizes(cfg, where, vocab_size, max_seq_len, cost_model(cfg));
    MoEModel m(cfg);
    m->reset_parameters(seed);
    return std::make_unique<MoETrainable>(m);
  }
  return nullptr;
}

std::unique_ptr<training::TrainableModel> load_baseline(const std::string& arch, const std::string& dir) {
  if (arch == "dense") return std::make_unique<DenseTrainable>(load_dense(dir));
  if (arch == "looped") return std::make_unique<LoopedTrainable>(load_looped(dir));
  if (arch == "moe") return std::make_unique<MoETrainable>(load_moe(dir));
  return nullptr;
}

}  // namespace lol::baselines
