#include "nn/sparse_moe.h"

#include <string>
#include <vector>

#include "core/index_tensor.h"
#include "nn/mlp.h"
#include "nn/moe_routing.h"
#include "util/error.h"

namespace lol::nn {

SparseMoEImpl::SparseMoEImpl(int64_t d, int64_t ffn, int64_t E, int64_t k, double noise, bool normalize,
                             int64_t shared_hidden)
    : top_k_(k), noise_std_(noise), normalize_(normalize) {
  if (E < 1 || k < 1 || k > E)
    throw InputError("sparse MoE: n_experts = " + std::to_string(E) + ", top_k = " + std::to_string(k) +
                     ": expected 1 <= top_k <= n_experts");
  gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(d, E).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < E; ++e) experts->push_back(MLP(d, ffn));
  balance_bias = register_buffer("balance_bias", torch::zeros({E}));
  if (shared_hidden > 0) {
    shared_expert = register_module("shared_expert", MLP(d, shared_hidden));
    shared_expert_gate = register_module("shared_expert_gate", torch::nn::Linear(torch::nn::LinearOptions(d, 1).bias(false)));
  }
  pending_load_ = torch::zeros({E}, torch::kInt64);
}

torch::Tensor SparseMoEImpl::forward(const torch::Tensor& x) {
  const int64_t E = n_experts();
  auto logits = gate(x);
  if (is_training() && noise_std_ > 0) logits = logits + torch::randn_like(logits) * noise_std_;
  auto probs = routing_probabilities(logits);                                               // [n, E]
  auto sel = std::get<1>((probs.detach() + balance_bias.unsqueeze(0)).topk(top_k_, -1));  // [n, k]
  auto weight = selected_weights(probs, sel, normalize_, x.scalar_type());                 // [n, k]
  auto sel_cpu = sel.to(torch::kCPU).contiguous();
  if (is_training()) pending_load_ += torch::bincount(sel_cpu.flatten(), {}, E).to(torch::kInt64);
  // (token, slot) pairs in expert order, each expert's in token order: one gather, one
  // grouped call over the used experts (nn::grouped_mlp), one weighted scatter-add.
  const auto g = group_by_expert(sel_cpu, E);
  std::vector<MLPImpl*> used;
  for (int64_t e : g.expert) used.push_back(experts[e]->as<MLP>());
  auto out = torch::zeros_like(x);
  if (!used.empty()) {
    auto tok_t = index_tensor(g.token, x.device());
    auto w = weight.reshape({-1}).index_select(0, index_tensor(g.slot, x.device())).unsqueeze(1);
    auto y = grouped_mlp(used, g.size, x.index_select(0, tok_t));
    out = out.index_add_(0, tok_t, w * y);
  }
  if (shared_expert) out = out + torch::sigmoid(shared_expert_gate(x)) * shared_expert(x);
  return out;
}

void SparseMoEImpl::set_pending_load(const torch::Tensor& load) {
  if (load.numel() != n_experts())
    throw InputError("sparse MoE: pending load of " + std::to_string(load.numel()) + " counts, expected " +
                     std::to_string(n_experts()));
  pending_load_ = load.to(torch::kCPU, torch::kInt64).reshape({n_experts()}).clone();
}

torch::Tensor SparseMoEImpl::update_balance(double rate) {
  auto load = pending_load_.clone();
  pending_load_.zero_();
  if (load.sum().item<int64_t>() == 0 || rate == 0) return load;
  torch::NoGradGuard ng;
  auto lf = load.to(torch::kFloat32);
  auto step = torch::sign(lf.mean() - lf) * rate;
  balance_bias.add_(step.to(balance_bias.device(), balance_bias.scalar_type()));
  return load;
}

torch::Tensor routing_probabilities(const torch::Tensor& logits) {
  const bool low = logits.scalar_type() == torch::kBFloat16 || logits.scalar_type() == torch::kHalf;
  return low ? torch::softmax(logits, -1, torch::kFloat32) : torch::softmax(logits, -1);
}

torch::Tensor selected_weights(const torch::Tensor& probs, const torch::Tensor& sel, bool normalize,
                               c10::ScalarType dtype) {
  auto w = probs.gather(1, sel);
  if (normalize) w = w / w.sum(-1, true);
  return w.to(dtype);
}

ExpertGroups group_by_expert(const torch::Tensor& sel, int64_t n_experts) {
  const int64_t n = sel.size(0), k = sel.size(1);
  const int64_t* sp = sel.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> pairs(static_cast<size_t>(n_experts));
  for (int64_t i = 0; i < n * k; ++i) pairs[size_t(sp[i])].push_back(i);
  ExpertGroups g;
  g.slot.reserve(size_t(n * k));
  g.token.reserve(size_t(n * k));
  for (int64_t e = 0; e < n_experts; ++e) {
    const auto& pe = pairs[size_t(e)];
    if (pe.empty()) continue;
    for (int64_t i : pe) {
      g.slot.push_back(i);
      g.token.push_back(i / k);
    }
    g.expert.push_back(e);
    g.size.push_back(int64_t(pe.size()));
  }
  return g;
}

torch::Tensor stack_pending_loads(const std::vector<SparseMoEImpl*>& moes, int64_t n_experts) {
  if (moes.empty()) return torch::zeros({0, n_experts}, torch::kInt64);
  std::vector<torch::Tensor> v;
  for (auto* m : moes) v.push_back(m->pending_load());
  return torch::stack(v);
}

void set_pending_loads(const std::vector<SparseMoEImpl*>& moes, const torch::Tensor& load, int64_t n_experts,
                       const std::string& what) {
  const int64_t n = int64_t(moes.size());
  if (load.dim() != 2 || load.size(0) != n || load.size(1) != n_experts)
    throw InputError(what + " of " + std::to_string(load.numel()) + " counts: expected shape [" + std::to_string(n) +
                     ", " + std::to_string(n_experts) + "]");
  for (int64_t i = 0; i < n; ++i) moes[size_t(i)]->set_pending_load(load[i]);
}

}  // namespace lol::nn
