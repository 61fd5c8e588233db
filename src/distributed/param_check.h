// Periodic check that every rank of a data-parallel job holds the same parameters
// and buffers (issue 14). Replicas stay bit-identical when every rank applies the
// same reduced gradients with the same arithmetic; a mismatch means a bug, a
// nondeterministic kernel or hardware that rounds differently.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "distributed/communicator.h"

namespace lol::dist {

/// 64-bit hash of a tensor's dtype, shape and raw bytes (copied to the CPU first if
/// needed). Equal tensors hash equally on every platform of the same endianness.
uint64_t tensor_hash(const at::Tensor& t);

struct ReplicaCheck {
  int64_t tensors = 0;        ///< tensors compared
  int64_t mismatched = 0;     ///< tensors whose bits differed from rank 0's
  double max_rel_diff = 0;    ///< max |x - x_rank0| / max(1, max |x_rank0|) over mismatched tensors
  std::vector<std::string> names;  ///< the mismatched tensors (resynchronised from rank 0)
  nlohmann::json to_json() const;
};

/// Compares `tensors` (name, tensor; same list on every rank) across ranks by hash.
/// Mismatched tensors are broadcast from rank 0: when their relative difference is at
/// most `tolerance` every rank takes rank 0's copy (and the result lists them);
/// beyond it, a DistributedError names the tensors and the difference, on every rank.
/// Collective: every rank must call it at the same point.
ReplicaCheck check_replicas(Communicator& comm, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                            double tolerance = 1e-4);

}  // namespace lol::dist
