#include "baselines/dense_trainable.h"

#include <filesystem>

#include "baselines/flops.h"
#include "core/module_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"

namespace lol::baselines {

training::ParamGroup baseline_param_group(const std::string& n, const torch::Tensor& t) {
  using training::ParamGroup;
  if (training::is_block_projection(n, t) && n.find(".mlp.gate.") == std::string::npos)  // MoE gate: AdamW
    return ParamGroup::Muon;
  if (t.dim() == 2) return ParamGroup::AdamWDecay;  // embeddings, lm_head, routers, adapter
  return ParamGroup::AdamWNoDecay;
}

std::vector<training::GroupedParam> baseline_grouped_parameters(torch::nn::Module& m) {
  std::vector<training::GroupedParam> out;
  for (auto& p : m.named_parameters(/*recurse=*/true))
    out.push_back({p.key(), p.value(), baseline_param_group(p.key(), p.value())});
  return out;
}

void save_baseline(const torch::nn::Module& m, const nlohmann::json& config, const std::string& dir,
                   const nlohmann::json& extra) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = config;
  if (!extra.is_null()) cfg["extra"] = extra;
  save_module(m, dir + "/model.safetensors", {{"format", "pt"}, {"architecture", config.value("architecture", "")}});
  io::write_file_atomic(dir + "/config.json", cfg.dump(2) + "\n");
}

torch::Tensor DenseTrainable::forward(const training::TrainBatch& b) { return model_->forward(b.tokens, b.doc_ids); }

double DenseTrainable::train_flops_per_token(int64_t seq_len) const {
  return flops_report(cost_model(model_->config()), std::max<int64_t>(1, seq_len)).train_flops;
}

void DenseTrainable::save(const std::string& dir, const nlohmann::json& extra) const {
  save_baseline(*model_, model_->config().to_json(), dir, extra);
}

void DenseTrainable::load(const std::string& dir) { load_module(*model_, dir + "/model.safetensors"); }

DenseModel load_dense(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) throw InputError(dir + ": not a model directory (no config.json)");
  nlohmann::json j = io::read_json_file(path);
  if (j.is_object()) j.erase("extra");
  DenseModel m(DenseConfig::from_json(j, path));
  load_module(*m, dir + "/model.safetensors");
  return m;
}

}  // namespace lol::baselines
