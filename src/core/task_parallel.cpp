#include "core/task_parallel.h"

#include <algorithm>

#include "core/runtime.h"

namespace lol {

SingleThreadedBlas::SingleThreadedBlas() : saved_(blas_threads()) {
  if (saved_ > 1) set_blas_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (saved_ > 1) set_blas_threads(saved_);
}

std::vector<int64_t> longest_first(const std::vector<int64_t>& costs) {
  std::vector<int64_t> order;
  for (size_t i = 0; i < costs.size(); ++i)
    if (costs[i] > 0) order.push_back(int64_t(i));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return costs[size_t(a)] > costs[size_t(b)]; });
  return order;
}

}  // namespace lol
