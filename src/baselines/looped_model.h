// Looped (depth-recurrent, Huginn-style) transformer baseline (paper 4.3.1; Geiping
// et al.): e = prelude(embed(x)); s_0 random (or zero); R times
// s <- core(adapter([s, e])), where core is the recurrent block of n_recur nn::Blocks
// and adapter a linear map [2d -> d] (input injection); logits = lm_head(norm(coda(s))).
// R is fixed or sampled per training step (LoopedConfig) and chosen freely at
// inference. Tensor names:
//   model.embed_tokens.weight, model.prelude.{i}.*, model.adapter.weight [d, 2d]
//   (columns [0, d) act on the state s, [d, 2d) on the prelude output e),
//   model.core.{j}.*, model.coda.{i}.*, model.norm.weight, lm_head.weight (untied only);
// block tensors use the Hugging Face Llama names (nn/block.h).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "baselines/attention_layout.h"
#include "baselines/looped_config.h"
#include "nn/block.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"

namespace lol::baselines {

class LoopedModelImpl : public torch::nn::Module {
 public:
  explicit LoopedModelImpl(const LoopedConfig& cfg);
  /// Re-initialises every weight (baselines/init.h; layers = P + R k + C) from `seed`.
  void reset_parameters(uint64_t seed);

  /// tokens [batch, seq] int64, doc_ids [batch, seq] or undefined (-1 = padding) ->
  /// logits [batch, seq, vocab]. `recurrence` > 0 runs that many iterations; 0 uses
  /// the training rule in training mode (fixed R or a sample, drawn from the default
  /// CPU generator) and inference_recurrence() in eval mode. A "random" initial state is
  /// drawn from the default generator of the model's device in training mode; in eval
  /// mode it is a fixed draw per position within the document (eval_initial_state()), so
  /// evaluations repeat exactly and do not depend on the batch, on later tokens, or on
  /// where a packed document sits in its row. Throws InputError for
  /// bad tokens.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids = {}, int64_t recurrence = 0);

  /// Iterations used in eval mode when forward() is not told (default config.recurrence).
  void set_inference_recurrence(int64_t r);
  int64_t inference_recurrence() const { return inference_r_; }
  /// Iterations run by the last forward().
  int64_t last_recurrence() const { return last_r_; }
  /// Iterations of the last forward() that received gradients.
  int64_t last_backprop_iterations() const { return last_grad_r_; }
  /// A training-mode R: config.recurrence ("fixed") or a Poisson-lognormal sample.
  int64_t sample_recurrence() const;
  const LoopedConfig& config() const { return cfg_; }
  /// positions [n] int64 (each token's position within its document, on the model's
  /// device) -> [n, d_model]: the eval-mode s_0 before scaling by the state std, N(0, 1)
  /// drawn once for all max_seq_len positions from a CPU generator seeded with
  /// kEvalStateSeed (the same values on every device), row t for position t.
  torch::Tensor eval_initial_state(const torch::Tensor& positions);
  static constexpr uint64_t kEvalStateSeed = 0x5eed;

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList prelude{nullptr}, core{nullptr}, coda{nullptr};
  torch::nn::Linear adapter{nullptr};
  nn::RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  ///< nullptr when tie_word_embeddings
  nn::RoPE rope;

 private:
  LoopedConfig cfg_;
  std::shared_ptr<torch::nn::Module> body_;
  int64_t inference_r_, last_r_ = 0, last_grad_r_ = 0;
  torch::Tensor eval_state_;  ///< eval_initial_state()'s table, on the last device asked (not a buffer: not saved)
};
TORCH_MODULE(LoopedModel);

}  // namespace lol::baselines
