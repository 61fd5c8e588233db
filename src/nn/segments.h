// Segment layout: how a flat array of token states is cut into independent
// causal attention segments (documents for full-attention layers, windows for
// the routed core, paper section 3.2.1) and padded to a [n_seg, max_len] batch.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace lol::nn {

/// Padded segment batch over a flat token array of n_tokens rows.
/// Within a segment, slot order is position order (causal attention uses it).
struct SegmentLayout {
  int64_t n_tokens = 0;   ///< rows of the flat array the segments index
  int64_t n_seg = 0;      ///< number of segments
  int64_t max_len = 0;    ///< longest segment
  torch::Tensor gather;   ///< [n_seg * max_len] int64: flat row of each slot, n_tokens for padding slots
  torch::Tensor scatter;  ///< [n_tokens] int64: slot of each row, n_seg*max_len for rows in no segment
  torch::Tensor slot_valid;  ///< [n_seg, max_len] bool

  /// Builds the layout from segments given as lists of flat rows (in position order).
  /// Rows must be distinct across segments and < n_tokens. Tensors go to `device`.
  static SegmentLayout build(const std::vector<std::vector<int64_t>>& segments, int64_t n_tokens,
                             const torch::Device& device);
  /// Same, from a CSR form: rows[offsets[s] .. offsets[s+1]) form segment s.
  static SegmentLayout from_csr(const std::vector<int64_t>& rows, const std::vector<int64_t>& offsets,
                                int64_t n_tokens, const torch::Device& device);

  /// x [n_tokens, ...] -> [n_seg, max_len, ...] with zeros in padding slots.
  torch::Tensor to_padded(const torch::Tensor& x) const;
  /// y [n_seg, max_len, ...] -> [n_tokens, ...] with zeros for rows in no segment.
  torch::Tensor from_padded(const torch::Tensor& y) const;
};

}  // namespace lol::nn
