// Comparisons shared by the kernel tests (fused and grouped operators against composed ones).
#pragma once
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace lol_test {

/// max |a - b| over all elements, computed in float64.
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

/// Expects a and b to have the same length and every pair of tensors to differ by < tol.
inline void expect_all_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tol,
                             const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i], b[i]), tol) << what << ": tensor " << i;
}

}  // namespace lol_test
