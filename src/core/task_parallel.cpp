#include "core/task_parallel.h"

#include <algorithm>
#include <numeric>

#include "core/runtime.h"

namespace lol {

SingleThreadedBlas::SingleThreadedBlas() : saved_(blas_threads()) {
  if (saved_ > 1) set_blas_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (saved_ > 1) set_blas_threads(saved_);
}

std::vector<std::vector<int64_t>> plan_tasks(const std::vector<int64_t>& costs, int threads) {
  std::vector<int64_t> order;
  for (size_t i = 0; i < costs.size(); ++i)
    if (costs[i] > 0) order.push_back(int64_t(i));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return costs[size_t(a)] > costs[size_t(b)]; });
  std::vector<std::vector<int64_t>> plan(static_cast<size_t>(std::max(threads, 1)));
  std::vector<int64_t> load(plan.size(), 0);
  for (int64_t i : order) {
    const size_t w = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    plan[w].push_back(i);
    load[w] += costs[size_t(i)];
  }
  return plan;
}

}  // namespace lol
