// A process group of a data-parallel job on PyTorch's c10d (issue 14,
// docs/distributed.md): rank 0 hosts a c10d::TCPStore at MASTER_ADDR:MASTER_PORT,
// every rank joins it and builds the collective backend chosen by the training
// device -- c10d::ProcessGroupGloo for CPU tensors, c10d::ProcessGroupNCCL for CUDA
// (only in builds configured with -DLOL_CUDA=ON; elsewhere an InputError says so).
//
// Every collective is blocking from the caller's view and bounded by the job's
// timeout (DistEnv::timeout): a peer that exited makes it fail at once (connection
// reset), a peer that stalled makes it fail after the timeout. Failures are thrown as
// DistributedError naming this rank, the operation and the cause, so that a dead rank
// ends the job with a clear message instead of a hang.
#pragma once
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <ATen/core/Tensor.h>

#include "distributed/env.h"

namespace lol::dist {

/// A collective failed (peer exited, stalled beyond the timeout, or the rendezvous
/// did not complete). The CLI exits with status 4.
class DistributedError : public std::runtime_error {
 public:
  explicit DistributedError(const std::string& what) : std::runtime_error(what) {}
};

enum class ReduceOp { Sum, Max, Min };

class Communicator;

/// An all-reduce in flight (Communicator::all_reduce_async). wait() blocks until it
/// completed (the tensor then holds the result) or throws DistributedError.
class PendingOp {
 public:
  PendingOp(PendingOp&&) noexcept;
  PendingOp& operator=(PendingOp&&) noexcept;
  ~PendingOp();
  void wait();

 private:
  friend class Communicator;
  struct Impl;
  explicit PendingOp(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Communicator {
 public:
  /// Joins the job described by `env` (env.world_size >= 1): rank 0 starts the
  /// TCPStore server and waits up to env.timeout for the others. `device` selects the
  /// backend (CPU: Gloo; CUDA: NCCL). Throws DistributedError when the rendezvous
  /// fails or times out, InputError for a CUDA device in a build without NCCL.
  static std::unique_ptr<Communicator> connect(const DistEnv& env, const c10::Device& device);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  /// "gloo" or "nccl".
  const std::string& backend() const { return backend_; }
  /// Device the backend communicates on (CPU for Gloo, cuda:LOCAL_RANK for NCCL).
  const c10::Device& device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// In-place all-reduce of a dense tensor of any shape with the same shape and dtype on
  /// every rank; copied to device() and back if it lives elsewhere. `what` names the
  /// operation in errors. Throws DistributedError.
  void all_reduce(at::Tensor& t, ReduceOp op, const std::string& what);
  /// Starts an in-place Sum all-reduce of a contiguous tensor on device(); the
  /// tensor must stay alive and untouched until wait(). Throws InputError for a tensor
  /// on another device or not contiguous.
  PendingOp all_reduce_async(at::Tensor& t, const std::string& what);
  /// Overwrites `t` on every rank with rank `root`'s values. Throws DistributedError.
  void broadcast(at::Tensor& t, int root, const std::string& what);
  /// Every rank's string, indexed by rank (strings may differ in length).
  std::vector<std::string> all_gather_strings(const std::string& s, const std::string& what);
  /// Returns when every rank has reached the barrier. Throws DistributedError.
  void barrier(const std::string& what);

  /// "rank R/W" for messages.
  std::string label() const;

 private:
  struct Impl;
  Communicator() = default;
  [[noreturn]] void fail(const std::string& what, const std::exception& cause, double seconds);
  friend class PendingOp;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
  std::string backend_;
  c10::Device device_{c10::kCPU};
  std::chrono::milliseconds timeout_{0};
};

}  // namespace lol::dist
