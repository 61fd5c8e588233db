// Equal-depth dense strided-window reference for LoL's routing overhead (issue 12):
// the LoL model of the same configuration with the router taken out. Routed depth
// l (1-based) always runs its own block l on every window (D distinct blocks, no
// library sharing, no router, no FiLM, alpha = 1), with the same strided windows
// (paper section 3.2.1, lol/windows.h) as attention segments; prelude and coda use
// full causal attention per row. Used by `lol bench train --arch dense` only: the
// ratio of LoL's step time to this model's is the routing overhead.
#pragma once
#include <map>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "lol/config.h"
#include "nn/block.h"
#include "training/trainable.h"

namespace lol::training {

class DenseWindowModelImpl : public torch::nn::Module {
 public:
  /// Uses every LoLConfig field except library_size, untied_router, router noise and
  /// balancing (core_depth blocks are created). Weights: normal(0, 0.02), norms 1.
  explicit DenseWindowModelImpl(const LoLConfig& cfg, uint64_t seed = 0);

  /// tokens [batch, seq] int64 (each row one document, no prompt window) ->
  /// logits [batch, seq, vocab]. Throws InputError when seq > max_seq_len.
  torch::Tensor forward(const torch::Tensor& tokens);

  const LoLConfig& config() const { return cfg_; }
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList prelude{nullptr}, core{nullptr}, coda{nullptr};
  nn::RMSNorm norm{nullptr};
  nn::RoPE rope;

 private:
  struct Layout {
    torch::Tensor pos;                    // [B*T] int64
    nn::SegmentLayout full;               // one segment per row
    std::vector<nn::SegmentLayout> core;  // per routed depth: its windows
  };
  const Layout& layout(int64_t B, int64_t T, const torch::Device& dev);
  LoLConfig cfg_;
  std::map<std::pair<int64_t, int64_t>, Layout> layouts_;  // by (B, T), built once
};
TORCH_MODULE(DenseWindowModel);

/// TrainableModel over DenseWindowModel, with LoL's optimizer groups (Muon for the
/// attention/MLP matrices, AdamW elsewhere). Ignores doc_ids, prompt_len and
/// router_only (benchmark batches hold one document per row). save()/load() are not
/// supported (std::logic_error): this model exists for benchmarks only.
class DenseWindowTrainable : public TrainableModel {
 public:
  explicit DenseWindowTrainable(DenseWindowModel m) : model_(std::move(m)) {}
  std::string architecture() const override { return "dense_window"; }
  torch::nn::Module& module() override { return *model_; }
  torch::Tensor forward(const TrainBatch& batch) override { return model_->forward(batch.tokens); }
  std::vector<GroupedParam> grouped_parameters() override;
  /// Same estimate as LoLTrainable's without the router term.
  double train_flops_per_token(int64_t seq_len) const override;
  void save(const std::string& dir, const nlohmann::json& extra) const override;
  void load(const std::string& dir) override;
  nlohmann::json config_json() const override;

 private:
  DenseWindowModel model_;
};

}  // namespace lol::training
