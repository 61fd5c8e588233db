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
  // After a forward: the iterations it ran. Before any (lol compare's planning): the
  // expected ones (LoopedConfig::expected_iterations: R and min(backprop_depth, R) when
  // fixed; under sampling the cap lowers both).
  // (Called every training step: the quadrature runs only before the first forward.)
  const auto [R, Rg] = model_->last_recurrence() > 0
                           ? std::make_pair(double(model_->last_recurrence()), double(model_->last_backprop_iterations()))
                           : c.expected_iterations();
  const double outer = flops_report(cost_model(c, 0), T).forward_flops;
  const double per_iter = flops_report(cost_model(c, 1), T).forward_flops - outer;
  return 3.0 * outer + (R + 2.0 * Rg) * per_iter;
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
