// Host index lists -> int64 index tensors (for index_select / index_add on any device).
#pragma once
#include <torch/types.h>

#include <initializer_list>
#include <vector>

namespace lol {

/// [n] int64 tensor on `device` holding a copy of `v` (n = v.size()). On a GPU the upload
/// does not wait for the device's queue (non_blocking: CUDA stages pageable host memory
/// before the call returns, so `v` may be freed right after).
inline torch::Tensor index_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  auto t = torch::from_blob(const_cast<int64_t*>(v.data()), {int64_t(v.size())}, torch::kInt64);
  return device.is_cpu() ? t.clone() : t.to(device, /*non_blocking=*/true);
}

/// Several index lists in one upload: out[i] = [lists[i]->size()] int64 on `device`, views
/// of one buffer (one host-to-device copy instead of one per list on a GPU).
inline std::vector<torch::Tensor> index_tensors(std::initializer_list<const std::vector<int64_t>*> lists,
                                                const torch::Device& device) {
  int64_t n = 0;
  for (const auto* v : lists) n += int64_t(v->size());
  std::vector<int64_t> all;
  all.reserve(size_t(n));
  for (const auto* v : lists) all.insert(all.end(), v->begin(), v->end());
  auto buf = index_tensor(all, device);
  std::vector<torch::Tensor> out;
  out.reserve(lists.size());
  int64_t off = 0;
  for (const auto* v : lists) {
    out.push_back(buf.narrow(0, off, int64_t(v->size())));
    off += int64_t(v->size());
  }
  return out;
}

}  // namespace lol
