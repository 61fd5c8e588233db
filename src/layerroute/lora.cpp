#include "layerroute/lora.h"

#include <cmath>
#include <map>

#include "nn/block.h"
#include "util/error.h"

namespace lol::layerroute {

std::string peft_name(int64_t layer, const std::string& target, char which) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + target_parent(target) + "." + target +
         ".lora_" + std::string(1, which) + ".weight";
}

torch::nn::Linear& target_linear(baselines::DenseModelImpl& m, int64_t layer, const std::string& t) {
  auto* blk = m.layers[layer]->as<nn::Block>();
  if (t == "q_proj") return blk->self_attn->q_proj;
  if (t == "k_proj") return blk->self_attn->k_proj;
  if (t == "v_proj") return blk->self_attn->v_proj;
  if (t == "o_proj") return blk->self_attn->o_proj;
  if (t == "gate_proj") {
    if (!blk->mlp->gated())
      throw InputError("LoRA target 'gate_proj': the base's MLP has no gate (GPT-2's: up_proj, down_proj)");
    return blk->mlp->gate_proj;
  }
  if (t == "up_proj") return blk->mlp->up_proj;
  if (t == "down_proj") return blk->mlp->down_proj;
  target_parent(t);  // throws
  throw InputError("unknown LoRA target " + t);
}

LoraImpl::LoraImpl(baselines::DenseModelImpl& base, const LoraConfig& cfg, uint64_t seed) : cfg_(cfg) {
  cfg_.validate("LoRA config");
  n_layers_ = base.config().n_layers;
  // (Gemma 3 folds the scale into q_norm, after q_proj and its LoRA: nothing to scale.)
  for (const auto& t : cfg_.targets) folds_.push_back(base.config().weight_fold(t));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto dev = base.embed_tokens->weight.device();
  for (int64_t i = 0; i < n_layers_; ++i)
    for (const auto& t : cfg_.targets) {
      const auto& w = target_linear(base, i, t)->weight;  // [out, in]
      const int64_t out = w.size(0), in = w.size(1);
      const double bound = 1.0 / std::sqrt(double(in));
      auto a = torch::empty({cfg_.rank, in}, torch::kFloat32).uniform_(-bound, bound, gen).to(dev);
      auto b = torch::zeros({out, cfg_.rank}, torch::TensorOptions(torch::kFloat32).device(dev));
      const std::string key = std::to_string(i) + "_" + t;
      a_.push_back(register_parameter("A_" + key, a));
      b_.push_back(register_parameter("B_" + key, b));
    }
}

bool LoraImpl::has_target(const std::string& t) const {
  for (const auto& x : cfg_.targets)
    if (x == t) return true;
  return false;
}

int64_t LoraImpl::index(int64_t layer, const std::string& t) const {
  for (size_t k = 0; k < cfg_.targets.size(); ++k)
    if (cfg_.targets[k] == t) return layer * int64_t(cfg_.targets.size()) + int64_t(k);
  return -1;
}

double LoraImpl::factor(const std::string& t) const {
  for (size_t k = 0; k < cfg_.targets.size(); ++k)
    if (cfg_.targets[k] == t) return folds_[k];
  return 1.0;
}

torch::Tensor LoraImpl::add(int64_t layer, const std::string& target, const torch::Tensor& x,
                            const torch::Tensor& base_out) const {
  const int64_t k = index(layer, target);
  if (k < 0) return base_out;
  const auto dt = x.scalar_type();
  auto low = torch::matmul(x, a_[k].to(dt).t());  // [..., r]
  return base_out + torch::matmul(low, b_[k].to(dt).t()).mul(cfg_.scale() * factor(target));
}

NamedTensors LoraImpl::peft_tensors() const {
  NamedTensors out;
  for (int64_t i = 0; i < n_layers_; ++i)
    for (const auto& t : cfg_.targets) {
      const int64_t k = index(i, t);
      out.emplace_back(peft_name(i, t, 'A'), a_[k]);
      out.emplace_back(peft_name(i, t, 'B'), b_[k]);
    }
  return out;
}

void LoraImpl::load_peft_tensors(const NamedTensors& tensors, const std::string& where) {
  std::map<std::string, torch::Tensor> want;
  for (auto& [name, t] : peft_tensors()) want.emplace(name, t);
  std::map<std::string, bool> seen;
  torch::NoGradGuard ng;
  for (const auto& [name, src] : tensors) {
    auto it = want.find(name);
    if (it == want.end())
      throw InputError(where + ": unexpected tensor '" + name + "' (this adapter has rank " + std::to_string(cfg_.rank) +
                       " on " + std::to_string(n_layers_) + " layers)");
    if (seen[name]) throw InputError(where + ": tensor '" + name + "' appears twice");
    seen[name] = true;
    if (src.sizes() != it->second.sizes())
      throw InputError(where + ": tensor '" + name + "' has shape " + c10::str(src.sizes()) + ", expected " +
                       c10::str(it->second.sizes()));
    if (!src.is_floating_point()) throw InputError(where + ": tensor '" + name + "' is not a float tensor");
    const auto conv = src.to(it->second.scalar_type());  // checked after the conversion (F64 can overflow)
    if (!torch::isfinite(conv).all().item<bool>()) throw InputError(where + ": tensor '" + name + "' holds NaN/Inf");
    it->second.copy_(conv);
  }
  for (const auto& [name, t] : want)
    if (!seen.count(name)) throw InputError(where + ": missing tensor '" + name + "'");
}

void LoraImpl::merge_into(baselines::DenseModelImpl& m) const {
  torch::NoGradGuard ng;
  require(m.config().n_layers == n_layers_, "LoRA merge",
          "model has " + std::to_string(m.config().n_layers) + " layers, adapters " + std::to_string(n_layers_));
  for (int64_t i = 0; i < n_layers_; ++i)
    for (const auto& t : cfg_.targets) {
      const int64_t k = index(i, t);
      auto& w = target_linear(m, i, t)->weight;
      auto d = torch::matmul(b_[k].to(torch::kFloat64), a_[k].to(torch::kFloat64)).mul(cfg_.scale() * factor(t));
      require(d.sizes() == w.sizes(), "LoRA merge", "shape mismatch at " + peft_name(i, t, 'A'));
      w.copy_((w.to(torch::kFloat64) + d.to(w.device())).to(w.scalar_type()));
    }
}

}  // namespace lol::layerroute
