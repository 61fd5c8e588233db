#include "training/lol_trainable.h"

#include "core/module_io.h"
#include "lol/checkpoint.h"
#include "nn/block_cost.h"

namespace lol::training {

namespace {
bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
}  // namespace

torch::Tensor LoLTrainable::forward(const TrainBatch& b) {
  LoLBatch lb;
  lb.tokens = b.tokens;
  lb.prompt_len = b.prompt_len;
  lb.router_only = b.router_only;
  lb.doc_ids = b.doc_ids;
  return model_->forward(lb).logits;
}

std::vector<GroupedParam> LoLTrainable::grouped_parameters() {
  std::vector<GroupedParam> out;
  for (auto& p : model_->named_parameters(/*recurse=*/true)) {
    const std::string& n = p.key();
    ParamGroup g = ParamGroup::AdamWNoDecay;
    if (is_block_projection(n, p.value()) && n.find(".mlp.gate.") == std::string::npos) {  // MoE gates: AdamW
      g = ParamGroup::Muon;
    } else if (n == "model.embed_tokens.weight" || n == "lm_head.weight" || n == "model.router.weight" ||
               starts_with(n, "model.routers.") || n.find(".mlp.gate.") != std::string::npos) {
      g = ParamGroup::AdamWDecay;
    }
    out.push_back({n, p.value(), g});
  }
  return out;
}

nlohmann::json LoLTrainable::after_optimizer_step() {
  const bool moe = model_->config().moe_prelude_coda();
  if (reducer_) {
    // One collective per step: the library's window counts, then the MoE prelude/coda loads.
    const int64_t L = model_->config().library_size;
    auto ffn = model_->ffn_pending_load();
    auto sum = reducer_(moe ? torch::cat({model_->pending_load(), ffn.flatten()}) : model_->pending_load());
    sum = sum.to(torch::kCPU, torch::kInt64);
    model_->set_pending_load(sum.narrow(0, 0, L));
    if (moe) model_->set_ffn_pending_load(sum.narrow(0, L, ffn.numel()).reshape(ffn.sizes()));
  }
  auto load = model_->update_balance();
  std::vector<int64_t> v(load.data_ptr<int64_t>(), load.data_ptr<int64_t>() + load.numel());
  nlohmann::json out = {{"expert_load", v}};
  if (moe) {
    auto f = model_->update_ffn_balance().contiguous();
    std::vector<std::vector<int64_t>> rows;
    for (int64_t i = 0; i < f.size(0); ++i)
      rows.emplace_back(f[i].data_ptr<int64_t>(), f[i].data_ptr<int64_t>() + f.size(1));
    out["prelude_coda_expert_load"] = rows;
  }
  return out;
}

void LoLTrainable::discard_step() {
  model_->set_pending_load(torch::zeros({model_->config().library_size}, torch::kInt64));
  auto f = model_->ffn_pending_load();
  model_->set_ffn_pending_load(torch::zeros_like(f));
}

double LoLTrainable::train_flops_per_token(int64_t seq_len) const {
  const auto& c = model_->config();
  // Parameters of one core block, and those a token uses in one prelude/coda block (with
  // an MoE FFN: all but the idle experts).
  const nn::BlockShape core = block_shape(c), outer = prelude_coda_shape(c);
  const double per_block = double(nn::block_parameters(core));
  const double per_full =
      double(nn::block_parameters(outer) - nn::ffn_idle_weights(outer));
  const double a = double(model_->active_depth());
  const double n_full = double(c.n_prelude + c.n_coda);
  const double d = double(c.d_model);
  const double n_active = n_full * per_full + a * per_block + a * d * double(c.library_size) + d * double(c.vocab_size);
  const double ctx_core = double(std::min<int64_t>(c.window, seq_len));
  return 6.0 * n_active + 6.0 * d * (n_full * double(seq_len) + a * ctx_core);
}

void LoLTrainable::save(const std::string& dir, const nlohmann::json& extra) const { save_lol(model_, dir, extra); }

void LoLTrainable::load(const std::string& dir) { load_module(*model_, dir + "/model.safetensors"); }

}  // namespace lol::training
