#include "baselines/looped_trainable.h"

#include <algorithm>
#include <filesystem>

#include "baselines/dense_trainable.h"
#include "baselines/flops.h"
#include "core/module_io.h"
#include "io/json_file.h"
#include "util/error.h"

namespace lol::baselines {

torch::Tensor LoopedTrainable::forward(const training::TrainBatch& b) { return model_->forward(b.tokens, b.doc_ids); }

std::vector<training::GroupedParam> LoopedTrainable::grouped_parameters() {
  return baseline_grouped_parameters(*model_);
}

double LoopedTrainable::train_flops_per_token(int64_t seq_len) const {
  const auto& c = model_->config();
  const int64_t T = std::max<int64_t>(1, seq_len);
  const int64_t R = model_->last_recurrence() > 0 ? model_->last_recurrence() : c.recurrence;
  // Before any forward (lol compare's planning): backward through the last
  // backprop_depth iterations, as the forward will run it (0 = all).
  const int64_t Rg = model_->last_recurrence() > 0 ? model_->last_backprop_iterations()
                     : c.backprop_depth > 0      ? std::min(c.backprop_depth, R)
                                                 : R;
  const double outer = flops_report(cost_model(c, 0), T).forward_flops;
  const double per_iter = flops_report(cost_model(c, 1), T).forward_flops - outer;
  return 3.0 * outer + (double(R) + 2.0 * double(Rg)) * per_iter;
}

void LoopedTrainable::save(const std::string& dir, const nlohmann::json& extra) const {
  save_baseline(*model_, model_->config().to_json(), dir, extra);
}

void LoopedTrainable::load(const std::string& dir) { load_module(*model_, dir + "/model.safetensors"); }

LoopedModel load_looped(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) throw InputError(dir + ": not a model directory (no config.json)");
  nlohmann::json j = io::read_json_file(path);
  if (j.is_object()) j.erase("extra");
  LoopedModel m(LoopedConfig::from_json(j, path));
  load_module(*m, dir + "/model.safetensors");
  return m;
}

}  // namespace lol::baselines
