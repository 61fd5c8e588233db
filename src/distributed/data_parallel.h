// What the training loop (training/trainer.cpp) does differently when it runs as one
// of N data-parallel processes (issue 14, docs/distributed.md). Every method is a
// collective unless stated otherwise: all ranks call it at the same point of the loop.
//
//  - start:  same run configuration on every rank; rank 0's initial weights and
//            buffers broadcast; router-noise generators seeded per rank.
//  - data:   each rank reads a disjoint shard of the data stream (Batcher's Shard).
//  - step:   summed loss/targets/tokens/FLOPs, a stop request on any rank, and the
//            set of parameters with gradients are reduced in one small all-reduce;
//            then gradients are all-reduced in buckets, weighted so that the result
//            is the gradient of the mean loss over the global batch.
//  - LoL:    the expert load is summed over ranks before the balancing update.
//  - check:  parameters and buffers compared across ranks (hash) periodically.
//  - save:   per-rank data positions and generator states gathered into rank 0's
//            checkpoint; only rank 0 writes; every rank resumes from it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "distributed/communicator.h"
#include "distributed/env.h"
#include "distributed/param_check.h"
#include "training/train_step.h"
#include "training/trainable.h"

namespace lol::dist {

/// What a rank restores on resume: its data position and generator states.
struct RankState {
  nlohmann::json position;  ///< Batcher::position()
  std::string rng_cpu, rng_device;
};

/// The RankState of `rank` in a checkpoint's data_position, which is either a plain
/// Batcher position (a single-process run) or {"epoch", "index", "offset" (rank 0's),
/// "world_size", "ranks": [{"position", "rng_cpu", "rng_device"}, ...]} written by a
/// data-parallel run. `rng_cpu`/`rng_device` are the checkpoint's own fields (used by
/// single-process runs). Throws InputError naming `where` when the checkpoint was
/// written by a different number of processes (data shards would not line up).
RankState select_rank_state(const nlohmann::json& data_position, const std::string& rng_cpu,
                            const std::string& rng_device, int rank, int world_size, const std::string& where);

class DataParallel {
 public:
  /// Joins the job when the environment names one (WORLD_SIZE > 1, env.h); nullptr
  /// for a single process. `device` is the requested training device: CUDA devices
  /// become cuda:LOCAL_RANK (see device()). Throws DistributedError / InputError.
  static std::unique_ptr<DataParallel> from_environment(const c10::Device& device);
  DataParallel(std::unique_ptr<Communicator> comm, DistEnv env);

  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->world_size(); }
  bool is_root() const { return rank() == 0; }
  const DistEnv& env() const { return env_; }
  Communicator& comm() { return *comm_; }
  /// cuda (no index) -> cuda:LOCAL_RANK; anything else unchanged. Not a collective.
  static c10::Device rank_device(const c10::Device& requested, const DistEnv& env);

  /// Throws InputError on every rank when the ranks were given different run
  /// configurations (their JSON differs: the trainer passes the run config, the model
  /// config, fingerprints of the data and LOL_DIST_CHECK_EVERY), naming the ranks that
  /// differ from rank 0 and the fields of the first one that differ.
  void require_same_config(const nlohmann::json& run_config);
  /// Overwrites every parameter and buffer with rank 0's values.
  void broadcast_module(torch::nn::Module& m);
  /// Rank r > 0 reseeds the default generators of the CPU and `device` with a seed
  /// derived from (seed, r), so router noise differs between ranks; rank 0 keeps the
  /// single-process stream. Not a collective.
  void seed_rank_generators(uint64_t seed, const c10::Device& device) const;

  /// After forward_backward() on this rank's micro-batches: turns `totals` into the
  /// global totals (sums over ranks), all-reduces the gradients of `params` (bucketed)
  /// and returns the stop signal requested on any rank (SIGINT wins over SIGTERM; 0 =
  /// none), so every rank stops at the same step. `local_stop` is this rank's request.
  int synchronize_step(const std::vector<training::GroupedParam>& params, training::StepTotals& totals,
                       int local_stop);
  /// Sums a statistics tensor (e.g. LoL's expert load [L] int64) over ranks; returns
  /// the sum on the tensor's own device. For TrainableModel::set_statistics_reducer.
  at::Tensor sum(const at::Tensor& t, const std::string& what);
  /// Sums doubles over ranks in place.
  void sum(std::vector<double>& values, const std::string& what);

  /// True when the parameter check is due after `step` completed: every
  /// env().check_every steps, at `save` steps and at the last step. Not a collective.
  bool check_due(int64_t step, bool last, bool save) const;
  /// check_replicas() over the module's parameters and buffers.
  ReplicaCheck check_module(torch::nn::Module& m);

  /// Gathers every rank's data position and generator states into the checkpoint's
  /// data_position (format in select_rank_state). Returns it on every rank.
  nlohmann::json gather_rank_states(const nlohmann::json& position, const std::string& rng_cpu,
                                    const std::string& rng_device);

  void barrier(const std::string& what) { comm_->barrier(what); }

 private:
  std::unique_ptr<Communicator> comm_;
  DistEnv env_;
};

}  // namespace lol::dist
