// Bucketed gradient all-reduce for data-parallel training (issue 14), the scheme of
// torch.nn.parallel.DistributedDataParallel: gradients are copied into flat buckets
// of at most `bucket_bytes`, each bucket's all-reduce is started as soon as it is
// filled (so communication overlaps the copying of the next bucket), and the results
// are copied back.
#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distributed/communicator.h"

namespace lol::dist {

/// Buckets of parameter indices: consecutive entries of `params` whose `present` flag
/// is set, split when the dtype changes or the bucket would exceed `bucket_bytes`
/// (a single larger tensor gets a bucket of its own). Exposed for tests.
std::vector<std::vector<size_t>> make_buckets(const std::vector<at::Tensor>& params, const std::vector<bool>& present,
                                              int64_t bucket_bytes);

/// Sums `scale` * grad over all ranks into every parameter with `present[i]` set
/// (present must be identical on all ranks: a parameter some rank has a gradient for).
/// A rank without a local gradient for a present parameter contributes zeros and
/// receives the sum as a new gradient; parameters not present keep an undefined
/// gradient everywhere (the optimizer then leaves them untouched, as in a single
/// process). Scale 1/world gives the plain DDP average; the trainer passes
/// local_targets / global_targets so that the result equals one process's gradient of
/// the mean loss over the global batch. Throws DistributedError.
void all_reduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params, const std::vector<bool>& present,
                          double scale, int64_t bucket_bytes = int64_t(25) << 20);

}  // namespace lol::dist
