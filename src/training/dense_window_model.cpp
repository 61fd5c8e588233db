#include "training/dense_window_model.h"

#include <cmath>
#include <stdexcept>

#include "lol/model.h"
#include "lol/windows.h"
#include "nn/block_cost.h"
#include "util/error.h"

namespace lol::training {

DenseWindowModelImpl::DenseWindowModelImpl(const LoLConfig& c, uint64_t seed)
    : rope(c.head_dim(), c.rope_theta), cfg_(c) {
  c.validate("dense window model config");
  const auto shape = block_shape(c);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
  prelude = register_module("prelude", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_prelude; ++i) prelude->push_back(nn::Block(shape));
  core = register_module("core", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.core_depth; ++i) core->push_back(nn::Block(shape));
  coda = register_module("coda", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_coda; ++i) coda->push_back(nn::Block(shape));
  norm = register_module("norm", nn::RMSNorm(c.d_model, c.norm_eps));
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : named_parameters()) {
    auto& t = p.value();
    if (p.key().find("norm") != std::string::npos) {
      t.fill_(1.0);
    } else {
      t.copy_(at::normal(0.0, 0.02, t.sizes(), gen));
    }
  }
}

const DenseWindowModelImpl::Layout& DenseWindowModelImpl::layout(int64_t B, int64_t T, const torch::Device& dev) {
  auto it = layouts_.find({B, T});
  if (it != layouts_.end() && it->second.pos.device() == dev) return it->second;
  Layout L;
  L.pos = torch::arange(T, torch::kInt64).repeat({B}).to(dev);
  std::vector<int64_t> rows(B * T), offsets{0};
  for (int64_t i = 0; i < B * T; ++i) rows[i] = i;
  for (int64_t r = 0; r < B; ++r) offsets.push_back((r + 1) * T);
  L.full = nn::SegmentLayout::from_csr(rows, offsets, B * T, dev);
  for (int64_t d = 1; d <= cfg_.core_depth; ++d) {
    std::vector<int64_t> off{0};
    const auto ranges = window_ranges(T, d, cfg_.window, cfg_.stride);
    for (int64_t r = 0; r < B; ++r)
      for (const auto& w : ranges) off.push_back(r * T + w.second);
    L.core.push_back(nn::SegmentLayout::from_csr(rows, off, B * T, dev));
  }
  return layouts_[{B, T}] = std::move(L);
}

torch::Tensor DenseWindowModelImpl::forward(const torch::Tensor& tokens) {
  const auto& c = cfg_;
  if (tokens.dim() != 2) throw InputError("dense window model: tokens must be [batch, seq]");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  if (T > c.max_seq_len)
    throw InputError("sequence length " + std::to_string(T) + " exceeds max_seq_len = " + std::to_string(c.max_seq_len));
  const auto dev = embed_tokens->weight.device();
  const Layout& L = layout(B, T, dev);
  nn::BlockContext full{&L.pos, &L.full, nullptr, &rope, nullptr, nullptr, T};
  auto s = embed_tokens(tokens.to(dev)).reshape({B * T, c.d_model});
  for (auto& m : *prelude) s = m->as<nn::Block>()->forward(s, full);
  for (int64_t d = 0; d < c.core_depth; ++d) {
    nn::BlockContext ctx{&L.pos, &L.core[d], nullptr, &rope, nullptr, nullptr, T};
    s = core[d]->as<nn::Block>()->forward(s, ctx);
  }
  for (auto& m : *coda) s = m->as<nn::Block>()->forward(s, full);
  auto h = norm(s.view({B, T, c.d_model}));
  return torch::matmul(h, embed_tokens->weight.t());
}

std::vector<GroupedParam> DenseWindowTrainable::grouped_parameters() {
  std::vector<GroupedParam> out;
  for (auto& p : model_->named_parameters(/*recurse=*/true)) {
    const std::string& n = p.key();
    ParamGroup g = ParamGroup::AdamWNoDecay;
    if (is_block_projection(n, p.value())) {
      g = ParamGroup::Muon;
    } else if (n == "embed_tokens.weight") {
      g = ParamGroup::AdamWDecay;
    }
    out.push_back({n, p.value(), g});
  }
  return out;
}

double DenseWindowTrainable::train_flops_per_token(int64_t seq_len) const {
  const auto& c = model_->config();
  const double per_block = double(nn::block_parameters(block_shape(c)));
  const double n_full = double(c.n_prelude + c.n_coda), D = double(c.core_depth), d = double(c.d_model);
  const double n_active = (n_full + D) * per_block + d * double(c.vocab_size);
  return 6.0 * n_active + 6.0 * d * (n_full * double(seq_len) + D * double(std::min<int64_t>(c.window, seq_len)));
}

void DenseWindowTrainable::save(const std::string&, const nlohmann::json&) const {
  throw std::logic_error("dense window reference model: save() is not supported (benchmark only)");
}

void DenseWindowTrainable::load(const std::string&) {
  throw std::logic_error("dense window reference model: load() is not supported (benchmark only)");
}

nlohmann::json DenseWindowTrainable::config_json() const {
  auto j = model_->config().to_json();
  j["architecture"] = "dense_window";
  return j;
}

}  // namespace lol::training
