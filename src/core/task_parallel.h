// Independent tasks that each call the BLAS (one routed depth's expert GEMMs, one
// optimizer update per parameter), run concurrently over the intra-op threads.
//
// At the widths this project trains on a CPU, a GEMM of a few hundred rows split over two
// OpenBLAS threads costs more in worker wake-ups than it gains (docs/benchmarks.md,
// session 9): running whole tasks side by side, each with a single-threaded BLAS, uses
// the cores instead.
#pragma once
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

/// Assignment of tasks to `threads` workers: longest (highest cost) first onto the least
/// loaded worker; tasks of cost <= 0 are left out. Returns one task list per worker (in
/// the order each worker runs them).
std::vector<std::vector<int64_t>> plan_tasks(const std::vector<int64_t>& costs, int threads);

/// Calls fn(i) for every task i with costs[i] > 0. When `concurrent`, the intra-op pool has
/// more than one thread and this is not already inside a parallel region, the tasks run
/// concurrently (plan_tasks over at::get_num_threads() workers, OpenBLAS single-threaded
/// meanwhile, each worker with the caller's thread-local state: grad mode, profiler);
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
  const auto plan = plan_tasks(costs, threads);
  SingleThreadedBlas single;
  const at::ThreadLocalState state;
  at::parallel_for(0, threads, 1, [&](int64_t wb, int64_t we) {
    at::ThreadLocalStateGuard guard(state);
    for (int64_t w = wb; w < we; ++w)
      for (int64_t i : plan[size_t(w)]) fn(i);
  });
}

}  // namespace lol
