#include "baselines/moe_trainable.h"

#include <filesystem>

#include "baselines/dense_trainable.h"
#include "baselines/flops.h"
#include "core/module_io.h"
#include "io/json_file.h"
#include "util/error.h"

namespace lol::baselines {

torch::Tensor MoETrainable::forward(const training::TrainBatch& b) { return model_->forward(b.tokens, b.doc_ids); }

std::vector<training::GroupedParam> MoETrainable::grouped_parameters() { return baseline_grouped_parameters(*model_); }

nlohmann::json MoETrainable::after_optimizer_step() {
  if (reducer_) model_->set_pending_load(reducer_(model_->pending_load()));
  return {{"expert_load", model_->update_balance()}};
}

double MoETrainable::train_flops_per_token(int64_t seq_len) const {
  return flops_report(cost_model(model_->config()), std::max<int64_t>(1, seq_len)).train_flops;
}

void MoETrainable::save(const std::string& dir, const nlohmann::json& extra) const {
  save_baseline(*model_, model_->config().to_json(), dir, extra);
}

void MoETrainable::load(const std::string& dir) { load_module(*model_, dir + "/model.safetensors"); }

MoEModel load_moe(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) throw InputError(dir + ": not a model directory (no config.json)");
  nlohmann::json j = io::read_json_file(path);
  if (j.is_object()) j.erase("extra");
  MoEModel m(MoEConfig::from_json(j, path));
  load_module(*m, dir + "/model.safetensors");
  return m;
}

}  // namespace lol::baselines
