#include "baselines/looped_model.h"

#include <algorithm>
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "baselines/dense_model.h"
#include "baselines/init.h"
#include "util/error.h"

namespace lol::baselines {

LoopedModelImpl::LoopedModelImpl(const LoopedConfig& c)
    : rope(c.effective_head_dim(), c.rope_theta, c.rope_scaling), cfg_(c), inference_r_(c.recurrence) {
  c.validate("looped model config");
  body_ = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens = body_->register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  const auto shape = c.block_shape();
  prelude = body_->register_module("prelude", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_prelude; ++i) prelude->push_back(nn::Block(shape));
  adapter = body_->register_module(
      "adapter", torch::nn::Linear(torch::nn::LinearOptions(2 * c.d_model, c.d_model).bias(false)));
  core = body_->register_module("core", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_recur; ++i) core->push_back(nn::Block(shape));
  coda = body_->register_module("coda", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_coda; ++i) coda->push_back(nn::Block(shape));
  norm = body_->register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  reset_parameters(0);
}

void LoopedModelImpl::reset_parameters(uint64_t seed) {
  init_transformer_weights(*this, cfg_.n_prelude + cfg_.recurrence * cfg_.n_recur + cfg_.n_coda, seed);
}

void LoopedModelImpl::set_inference_recurrence(int64_t r) {
  if (r < 1) throw InputError("looped model: recurrence " + std::to_string(r) + ": expected >= 1");
  inference_r_ = r;
}

int64_t LoopedModelImpl::sample_recurrence() const {
  const int64_t R = cfg_.recurrence;
  if (cfg_.recurrence_sampling == "fixed" || R <= 1) return R;
  const double s = cfg_.recurrence_sigma;
  const double tau = torch::normal(std::log(double(R - 1)) - 0.5 * s * s, s, {1}).item<double>();
  const int64_t extra = torch::poisson(torch::full({1}, std::exp(tau), torch::kFloat64)).item<int64_t>();
  return std::min<int64_t>(1 + extra, cfg_.effective_max_recurrence());
}

torch::Tensor LoopedModelImpl::eval_initial_state(const torch::Tensor& positions) {
  const auto device = positions.device();
  if (!eval_state_.defined() || eval_state_.device() != device) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(kEvalStateSeed);
    eval_state_ = torch::randn({cfg_.max_seq_len, cfg_.d_model}, gen, torch::kFloat32).to(device);
  }
  return eval_state_.index_select(0, positions).to(embed_tokens->weight.scalar_type());
}

torch::Tensor LoopedModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids, int64_t recurrence) {
  const auto& c = cfg_;
  check_tokens(tokens, c.vocab_size, c.max_seq_len, "looped model");
  if (recurrence < 0) throw InputError("looped model: recurrence " + std::to_string(recurrence) + ": expected >= 0");
  const int64_t R = recurrence > 0 ? recurrence : (is_training() ? sample_recurrence() : inference_r_);
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const auto dev = embed_tokens->weight.device();
  TokenLayout L(B, T, doc_ids, dev);
  const LayerAttention full;
  auto e = embed_tokens(tokens.to(dev)).reshape({B * T, c.d_model});
  for (auto& m : *prelude) e = block_forward(*m->as<nn::Block>(), e, L, full, rope);

  torch::Tensor s = torch::zeros_like(e);
  if (c.state_init == "random")
    s = (is_training() ? torch::randn_like(e) : eval_initial_state(L.pos())) * c.effective_state_std();
  const int64_t grad_from = (c.backprop_depth > 0 && is_training()) ? std::max<int64_t>(0, R - c.backprop_depth) : 0;
  auto iterate = [&](const torch::Tensor& state) {
    auto x = adapter(torch::cat({state, e}, -1));
    for (auto& m : *core) x = block_forward(*m->as<nn::Block>(), x, L, full, rope);
    return x;
  };
  if (grad_from > 0) {
    torch::NoGradGuard ng;
    for (int64_t r = 0; r < grad_from; ++r) s = iterate(s);
  }
  for (int64_t r = grad_from; r < R; ++r) s = iterate(s);  // the no-grad part's state carries no graph
  last_r_ = R;
  last_grad_r_ = R - grad_from;

  for (auto& m : *coda) s = block_forward(*m->as<nn::Block>(), s, L, full, rope);
  auto h = norm(s.view({B, T, c.d_model}));
  return c.tie_word_embeddings ? torch::matmul(h, embed_tokens->weight.t()) : lm_head(h);
}

}  // namespace lol::baselines
