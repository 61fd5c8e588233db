// Independent tasks that each call the BLAS (one routed depth's expert GEMMs, one
// optimizer update per parameter), run concurrently over the intra-op threads.
//
// At the widths this project trains on a CPU, a GEMM of a few hundred rows split over two
// OpenBLAS threads costs more in worker wake-ups than it gains (docs/benchmarks.md,
// session 9): running whole tasks side by side, each with a single-threaded BLAS, uses
// the cores instead.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

namespace lol {

/// Sets OpenBLAS to one thread for its lifetime (when it had more), then restores it.
/// Process-wide: construct it on the calling thread, outside parallel regions.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

/// Indices of the tasks with cost > 0, highest cost first (ties in index order).
std::vector<int64_t> longest_first(const std::vector<int64_t>& costs);

/// Calls fn(i) for every task i with costs[i] > 0. When `concurrent`, the intra-op pool has
/// more than one thread and this is not already inside a parallel region, the tasks run
/// concurrently on at::get_num_threads() workers, each taking the next task in
/// longest_first order when it is free (OpenBLAS single-threaded meanwhile, each worker
/// with the caller's thread-local state: grad mode, profiler);
/// otherwise serially in index order. fn must not write memory that another task reads or
/// writes. Exceptions from fn propagate (at::parallel_for rethrows the first).
template <typename F>
void run_tasks(const std::vector<int64_t>& costs, bool concurrent, const F& fn) {
  int64_t active = 0;
  for (auto c : costs) active += c > 0;
  const int threads = int(std::min<int64_t>(at::get_num_threads(), active));
  if (!concurrent || threads <= 1 || at::in_parallel_region()) {
    for (size_t i = 0; i < costs.size(); ++i)
      if (costs[i] > 0) fn(int64_t(i));
    return;
  }
  // Workers take the next task (highest cost first) as they become free: a worker whose
  // core is busy with something else does not hold up the others.
  const auto order = longest_first(costs);
  std::atomic<size_t> next{0};
  SingleThreadedBlas single;
  const at::ThreadLocalState state;
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    at::ThreadLocalStateGuard guard(state);
    for (size_t k = next++; k < order.size(); k = next++) fn(order[k]);
  });
}

}  // namespace lol
