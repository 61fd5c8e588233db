// The trainer's optimizer: Muon for the "muon" parameter group and AdamW for the
// others (paper Appendix A), or AdamW for everything (optim.type = "adamw").
// State is a list of named tensors so that checkpoints resume bit-exactly.
#pragma once
#include <string>
#include <vector>

#include "core/tensor_io.h"
#include "training/adamw.h"
#include "training/muon.h"
#include "training/run_config.h"
#include "training/trainable.h"

namespace lol::training {

class Optimizer {
 public:
  /// Throws InputError if a Muon-group parameter is not 2-D or a tensor is listed twice.
  Optimizer(std::vector<GroupedParam> params, const OptimConfig& cfg);

  /// One update of every parameter that has a gradient (parameters without one --
  /// e.g. experts no window chose -- are left untouched, state included, as in
  /// torch.optim). Learning rates are the configured peaks times `lr_scale`. Parameters
  /// are updated in groups by multi-tensor operators: on a GPU, AdamW per device and
  /// dtype and Muon per device, dtype and shape (one batched Newton-Schulz iteration per
  /// group); on the CPU one parameter per group, the groups running concurrently over the
  /// intra-op threads. Each update is independent of the others, so the result does not
  /// depend on the grouping or the thread count beyond the rounding of the products.
  void step(double lr_scale) { step(lr_scale, Grouping::Auto); }

  /// How step() groups the parameters: Auto = PerParameter on the CPU, Batched otherwise.
  /// Batched: one group per algorithm, device, dtype and (Muon) shape; PerParameter: one
  /// parameter per group, groups run concurrently over the intra-op threads.
  enum class Grouping { Auto, PerParameter, Batched };
  /// step() with an explicit grouping (the tests run the GPU's Batched grouping on the CPU).
  void step(double lr_scale, Grouping grouping);
  /// Drops all gradients (set to undefined).
  void zero_grad();

  /// Optimizer state: "<param>.momentum_buffer" (Muon), "<param>.exp_avg",
  /// "<param>.exp_avg_sq", "<param>.step" (AdamW, I64 [1]); parameters that were
  /// never updated have no entries.
  NamedTensors state() const;
  /// Restores state(); throws InputError naming `where` and the tensor on unknown
  /// names or shape mismatches.
  void load_state(const NamedTensors& state, const std::string& where);

  /// Which algorithm updates a parameter: "muon" or "adamw".
  const std::string& algorithm(size_t i) const { return slots_[i].algo; }
  const std::vector<GroupedParam>& params() const { return params_; }

 private:
  struct Slot {
    std::string algo;          // "muon" | "adamw"
    double weight_decay = 0;
    torch::Tensor buf;         // muon momentum
    torch::Tensor exp_avg, exp_avg_sq;
    int64_t step = 0;
  };
  std::vector<GroupedParam> params_;
  std::vector<Slot> slots_;
  OptimConfig cfg_;
};

}  // namespace lol::training
