#include "baselines/moe_model.h"

#include "baselines/dense_model.h"
#include "baselines/init.h"
#include "core/index_tensor.h"
#include "nn/block.h"
#include "nn/moe_routing.h"
#include "util/error.h"

namespace lol::baselines {

MoEModelImpl::MoEModelImpl(const MoEConfig& c) : rope(c.effective_head_dim(), c.rope_theta, c.rope_scaling), cfg_(c) {
  c.validate("moe model config");
  body_ = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens = body_->register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  layers = body_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layers(); ++i) {
    layers->push_back(nn::Block(c.layer_shape(i)));
    if (c.is_moe_layer(i)) moe_index_.push_back(i);
  }
  norm = body_->register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  reset_parameters(0);
}

void MoEModelImpl::reset_parameters(uint64_t seed) {
  init_transformer_weights(*this, cfg_.n_layers(), seed);
  torch::NoGradGuard ng;
  for (int64_t l = 0; l < int64_t(moe_index_.size()); ++l) {
    moe_layer(l).balance_bias.zero_();
    moe_layer(l).clear_pending_load();
  }
}

nn::SparseMoEImpl& MoEModelImpl::moe_layer(int64_t l) const {
  if (l < 0 || l >= int64_t(moe_index_.size()))
    throw std::out_of_range("moe_layer " + std::to_string(l) + " outside [0, " + std::to_string(moe_index_.size()) +
                            ")");
  return *(*layers)[size_t(moe_index_[size_t(l)])]->as<nn::Block>()->moe;
}

namespace {

/// The model's MoE FFNs, in layer order.
std::vector<nn::SparseMoEImpl*> moes_of(const MoEModelImpl& m) {
  std::vector<nn::SparseMoEImpl*> out;
  for (int64_t l = 0; l < m.config().n_moe_layers(); ++l) out.push_back(&m.moe_layer(l));
  return out;
}

}  // namespace

torch::Tensor MoEModelImpl::pending_load() const { return nn::stack_pending_loads(moes_of(*this), cfg_.n_experts); }

void MoEModelImpl::set_pending_load(const torch::Tensor& load) {
  nn::set_pending_loads(moes_of(*this), load, cfg_.n_experts, "moe model: pending load");
}

torch::Tensor MoEModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids) {
  const auto& c = cfg_;
  check_tokens(tokens, c.vocab_size, c.max_seq_len, "moe model");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const auto dev = embed_tokens->weight.device();
  TokenLayout L(B, T, doc_ids, dev);
  auto s = embed_tokens(tokens.to(dev)).reshape({B * T, c.d_model});
  for (int64_t i = 0; i < c.n_layers(); ++i)
    s = block_forward(*layers[i]->as<nn::Block>(), s, L, c.layer_attention(i), rope);
  auto h = norm(s.view({B, T, c.d_model}));
  return c.tie_word_embeddings ? torch::matmul(h, embed_tokens->weight.t()) : lm_head(h);
}

std::vector<std::vector<int64_t>> MoEModelImpl::update_balance() {
  std::vector<std::vector<int64_t>> out;
  for (int64_t l = 0; l < int64_t(moe_index_.size()); ++l) {
    auto load = moe_layer(l).update_balance(cfg_.balance_update_rate);
    out.emplace_back(load.data_ptr<int64_t>(), load.data_ptr<int64_t>() + load.numel());
  }
  return out;
}

void MoEModelImpl::clear_pending_load() {
  for (int64_t l = 0; l < int64_t(moe_index_.size()); ++l) moe_layer(l).clear_pending_load();
}

}  // namespace lol::baselines
