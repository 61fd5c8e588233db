// The pieces of one optimizer step shared by the training loop (trainer.h) and the
// training benchmark (train_benchmark.h), so that both time the same code:
// forward + masked loss + backward over the micro-batches, then global gradient
// clipping. The optimizer update itself is Optimizer::step (optimizer.h).
#pragma once
#include <cstdint>
#include <vector>

#include "training/trainable.h"

namespace lol::training {

/// What forward_backward() accumulated over one optimizer step's micro-batches.
struct StepTotals {
  double loss_sum = 0;   ///< summed cross entropy over counted targets (nats)
  int64_t targets = 0;   ///< counted targets (the loss is divided by this)
  int64_t tokens = 0;    ///< non-padding input tokens
  double flops = 0;      ///< TrainableModel::train_flops_per_token estimate * tokens
  double loss() const { return loss_sum / double(targets > 0 ? targets : 1); }
};

/// Runs forward, masked cross entropy and backward for every micro-batch (CPU
/// tensors, copied to `device`), accumulating gradients of (sum of losses) / (all
/// counted targets of the step), i.e. the mean loss per target over the step.
/// Gradients accumulate into the existing .grad tensors (call Optimizer::zero_grad first).
StepTotals forward_backward(TrainableModel& model, const std::vector<TrainBatch>& micro_batches,
                            const torch::Device& device);

/// Global L2 norm of all gradients of `params` (those that have one): each gradient's
/// norm in its dtype (multi-tensor, one call per dtype), combined in float64; when `clip` > 0 and the norm is finite and larger than `clip`, every
/// gradient is scaled by clip / (norm + 1e-6) (the rule of torch.nn.utils.clip_grad_norm_).
/// Returns the norm before clipping (0 when no parameter has a gradient).
double clip_gradients(const std::vector<GroupedParam>& params, double clip);

}  // namespace lol::training
