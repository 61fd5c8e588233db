#include "lol/windows.h"

namespace lol {

int64_t window_shift(int64_t depth, int64_t window, int64_t stride) { return ((depth - 1) * stride) % window; }

int64_t window_of(int64_t j, int64_t delta, int64_t window, int64_t prompt_len) {
  if (prompt_len > 0) {
    if (j < prompt_len) return 0;
    return 1 + (j - prompt_len + delta) / window;
  }
  return (j + delta) / window;
}

std::vector<std::pair<int64_t, int64_t>> window_ranges(int64_t n, int64_t depth, int64_t window, int64_t stride,
                                                       int64_t prompt_len) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t delta = window_shift(depth, window, stride);
  int64_t cur = -1;
  for (int64_t j = 0; j < n; ++j) {
    int64_t k = window_of(j, delta, window, prompt_len);
    if (k != cur) {
      out.push_back({j, j + 1});
      cur = k;
    } else {
      out.back().second = j + 1;
    }
  }
  return out;
}

}  // namespace lol
