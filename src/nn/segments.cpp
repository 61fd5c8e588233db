#include "nn/segments.h"

#include <algorithm>

#include "core/index_tensor.h"

namespace lol::nn {

SegmentLayout SegmentLayout::from_csr(const std::vector<int64_t>& rows, const std::vector<int64_t>& offsets,
                                      int64_t n_tokens, const torch::Device& device) {
  SegmentLayout L;
  L.n_tokens = n_tokens;
  L.n_seg = int64_t(offsets.size()) - 1;
  if (L.n_seg < 0) L.n_seg = 0;
  for (int64_t s = 0; s < L.n_seg; ++s) L.max_len = std::max(L.max_len, offsets[s + 1] - offsets[s]);
  const int64_t n_slots = L.n_seg * L.max_len;
  // gather and scatter in one buffer: one upload to a GPU; slot_valid is derived there.
  std::vector<int64_t> both(size_t(n_slots + n_tokens));
  int64_t* g = both.data();
  int64_t* sc = g + n_slots;
  std::fill(g, sc, n_tokens);
  std::fill(sc, sc + n_tokens, n_slots);
  for (int64_t s = 0; s < L.n_seg; ++s) {
    for (int64_t j = offsets[s]; j < offsets[s + 1]; ++j) {
      int64_t slot = s * L.max_len + (j - offsets[s]);
      g[slot] = rows[j];
      sc[rows[j]] = slot;
    }
  }
  auto buf = index_tensor(both, device);
  L.gather = buf.narrow(0, 0, n_slots);
  L.scatter = buf.narrow(0, n_slots, n_tokens);
  L.slot_valid = L.gather.ne(n_tokens).view({L.n_seg, L.max_len});
  return L;
}

SegmentLayout SegmentLayout::build(const std::vector<std::vector<int64_t>>& segments, int64_t n_tokens,
                                   const torch::Device& device) {
  std::vector<int64_t> rows, offsets{0};
  for (const auto& s : segments) {
    rows.insert(rows.end(), s.begin(), s.end());
    offsets.push_back(int64_t(rows.size()));
  }
  return from_csr(rows, offsets, n_tokens, device);
}

static torch::Tensor append_zero_row(const torch::Tensor& x) {
  auto sizes = x.sizes().vec();
  sizes[0] = 1;
  return torch::cat({x, torch::zeros(sizes, x.options())}, 0);
}

torch::Tensor SegmentLayout::to_padded(const torch::Tensor& x) const {
  auto out = append_zero_row(x).index_select(0, gather);
  auto sizes = x.sizes().vec();
  sizes.erase(sizes.begin());
  sizes.insert(sizes.begin(), {n_seg, max_len});
  return out.view(sizes);
}

torch::Tensor SegmentLayout::from_padded(const torch::Tensor& y) const {
  auto sizes = y.sizes().vec();
  sizes.erase(sizes.begin(), sizes.begin() + 2);
  sizes.insert(sizes.begin(), n_seg * max_len);
  return append_zero_row(y.reshape(sizes)).index_select(0, scatter);
}

}  // namespace lol::nn
