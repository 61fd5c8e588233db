// Host index lists -> int64 index tensors (for index_select / index_add on any device).
#pragma once
#include <torch/types.h>

#include <vector>

namespace lol {

/// [n] int64 tensor on `device` holding a copy of `v` (n = v.size()).
inline torch::Tensor index_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  auto t = torch::from_blob(const_cast<int64_t*>(v.data()), {int64_t(v.size())}, torch::kInt64).clone();
  return device.is_cpu() ? t : t.to(device);
}

}  // namespace lol
