#include "baselines/moe_model.h"

#include "baselines/dense_model.h"
#include "baselines/init.h"
#include "core/index_tensor.h"
#include "nn/block.h"
#include "nn/mlp.h"
#include "util/error.h"

namespace lol::baselines {

SparseMoEImpl::SparseMoEImpl(int64_t d, int64_t ffn, int64_t E, int64_t k, double noise)
    : top_k_(k), noise_std_(noise) {
  gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(d, E).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < E; ++e) experts->push_back(nn::MLP(d, ffn));
  balance_bias = register_buffer("balance_bias", torch::zeros({E}));
  pending_load_ = torch::zeros({E}, torch::kInt64);
}

torch::Tensor SparseMoEImpl::forward(const torch::Tensor& x) {
  const int64_t E = int64_t(experts->size());
  auto logits = gate(x);
  if (is_training() && noise_std_ > 0) logits = logits + torch::randn_like(logits) * noise_std_;
  auto probs = torch::softmax(logits, -1);                                          // [n, E]
  auto sel = std::get<1>((probs.detach() + balance_bias.unsqueeze(0)).topk(top_k_, -1));  // [n, k]
  auto weight = probs.gather(1, sel);                                                // [n, k]
  auto sel_cpu = sel.to(torch::kCPU).contiguous();
  if (is_training()) pending_load_ += torch::bincount(sel_cpu.flatten(), {}, E).to(torch::kInt64);
  // (token, slot) pairs in expert order, each expert's in token order: one gather, one
  // grouped call over the used experts (nn::grouped_mlp), one weighted scatter-add.
  const int64_t n = sel_cpu.size(0), k = sel_cpu.size(1);
  const int64_t* sp = sel_cpu.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> pairs(static_cast<size_t>(E));  // flat index t * k + slot
  for (int64_t i = 0; i < n * k; ++i) pairs[size_t(sp[i])].push_back(i);
  std::vector<int64_t> flat, tok, sizes;
  std::vector<nn::MLPImpl*> used;
  for (int64_t e = 0; e < E; ++e) {
    if (pairs[size_t(e)].empty()) continue;
    for (int64_t i : pairs[size_t(e)]) {
      flat.push_back(i);
      tok.push_back(i / k);
    }
    sizes.push_back(int64_t(pairs[size_t(e)].size()));
    used.push_back(experts[e]->as<nn::MLP>());
  }
  auto out = torch::zeros_like(x);
  if (used.empty()) return out;
  auto tok_t = index_tensor(tok, x.device());
  auto w = weight.reshape({n * k}).index_select(0, index_tensor(flat, x.device())).unsqueeze(1);
  auto y = nn::grouped_mlp(used, sizes, x.index_select(0, tok_t));
  return out.index_add_(0, tok_t, w * y);
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

MoEBlockImpl::MoEBlockImpl(const TransformerShape& s, int64_t ffn, int64_t E, int64_t k, double noise) {
  const auto shape = s.block_shape();
  self_attn = register_module("self_attn", nn::Attention(shape.attn));
  mlp = register_module("mlp", SparseMoE(s.d_model, ffn, E, k, noise));
  input_layernorm = register_module("input_layernorm", nn::RMSNorm(s.d_model, s.norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", nn::RMSNorm(s.d_model, s.norm_eps));
}

torch::Tensor MoEBlockImpl::forward(const torch::Tensor& x, TokenLayout& L, const LayerAttention& a, nn::RoPE& rope) {
  auto h = x + attend(*self_attn, input_layernorm(x), L, a, rope);
  const auto& rows = L.valid_rows();
  if (rows.size(0) == h.size(0)) return h + mlp(post_attention_layernorm(h));
  auto m = mlp(post_attention_layernorm(h.index_select(0, rows)));
  return h.index_add(0, rows, m);
}

MoEModelImpl::MoEModelImpl(const MoEConfig& c) : rope(c.effective_head_dim(), c.rope_theta), cfg_(c) {
  c.validate("moe model config");
  body_ = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens = body_->register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  layers = body_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layers(); ++i) {
    if (c.is_moe_layer(i)) {
      layers->push_back(MoEBlock(c, c.effective_expert_ffn(), c.n_experts, c.top_k, c.router_noise_std));
    } else {
      layers->push_back(nn::Block(c.block_shape()));
    }
  }
  norm = body_->register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  reset_parameters(0);
}

void MoEModelImpl::reset_parameters(uint64_t seed) {
  init_transformer_weights(*this, cfg_.n_layers(), seed);
  for (int64_t l = 0; l < cfg_.core_depth; ++l) {
    moe_layer(l).mlp->balance_bias.zero_();
    moe_layer(l).mlp->clear_pending_load();
  }
}

MoEBlockImpl& MoEModelImpl::moe_layer(int64_t l) {
  if (l < 0 || l >= cfg_.core_depth)
    throw std::out_of_range("moe_layer " + std::to_string(l) + " outside [0, " + std::to_string(cfg_.core_depth) + ")");
  return *layers[cfg_.n_prelude + l]->as<MoEBlock>();
}

torch::Tensor MoEModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids) {
  const auto& c = cfg_;
  check_tokens(tokens, c.vocab_size, c.max_seq_len, "moe model");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const auto dev = embed_tokens->weight.device();
  TokenLayout L(B, T, doc_ids, dev);
  auto s = embed_tokens(tokens.to(dev)).reshape({B * T, c.d_model});
  for (int64_t i = 0; i < c.n_layers(); ++i) {
    const auto a = c.layer_attention(i);
    if (c.is_moe_layer(i)) {
      s = layers[i]->as<MoEBlock>()->forward(s, L, a, rope);
    } else {
      s = block_forward(*layers[i]->as<nn::Block>(), s, L, a, rope);
    }
  }
  auto h = norm(s.view({B, T, c.d_model}));
  return c.tie_word_embeddings ? torch::matmul(h, embed_tokens->weight.t()) : lm_head(h);
}

std::vector<std::vector<int64_t>> MoEModelImpl::update_balance() {
  std::vector<std::vector<int64_t>> out;
  for (int64_t l = 0; l < cfg_.core_depth; ++l) {
    auto load = moe_layer(l).mlp->update_balance(cfg_.balance_update_rate);
    out.emplace_back(load.data_ptr<int64_t>(), load.data_ptr<int64_t>() + load.numel());
  }
  return out;
}

void MoEModelImpl::clear_pending_load() {
  for (int64_t l = 0; l < cfg_.core_depth; ++l) moe_layer(l).mlp->clear_pending_load();
}

}  // namespace lol::baselines
