#include "layerroute/trainable.h"

#include "layerroute/adapter_io.h"

namespace lol::layerroute {

torch::Tensor LayerRouteTrainable::forward(const training::TrainBatch& batch) {
  GatedOptions o;
  o.mode = mode;
  o.ste = model_->is_training();
  auto out = model_->forward(batch.tokens, batch.doc_ids, o);
  sigma_ = out.sigma;
  gate_mean_ = out.sigma.mean();
  return out.logits;
}

std::vector<training::GroupedParam> LayerRouteTrainable::grouped_parameters() {
  std::vector<training::GroupedParam> g;
  g.push_back({"gates.weight", model_->gates->weight, training::ParamGroup::AdamWDecay});
  g.push_back({"gates.bias", model_->gates->bias, training::ParamGroup::AdamWDecay});
  for (auto& [name, t] : model_->lora->peft_tensors()) g.push_back({name, t, training::ParamGroup::AdamWDecay});
  return g;
}

double LayerRouteTrainable::train_flops_per_token(int64_t) const {
  int64_t n = 0;
  for (const auto& p : model_->base->parameters()) n += p.numel();
  n -= model_->base->embed_tokens->weight.numel();
  if (model_->base->config().tie_word_embeddings) n += model_->base->embed_tokens->weight.numel();
  return 6.0 * double(n);
}

void LayerRouteTrainable::save(const std::string& dir, const nlohmann::json& extra) const {
  save_adapter(*model_, dir, base_dir_, extra);
}

void LayerRouteTrainable::load(const std::string& dir) { load_adapter_weights(*model_, dir); }

nlohmann::json LayerRouteTrainable::config_json() const {
  return {{"architecture", "layerroute"},
          {"base", base_dir_},
          {"lora", to_json(model_->lora->config())},
          {"gates", to_json(model_->gates->config())}};
}

}  // namespace lol::layerroute
