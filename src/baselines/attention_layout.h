// Token bookkeeping and per-layer attention patterns shared by the baseline models
// (paper 4.2-4.3): documents of a packed batch, RoPE positions within documents,
// and the attention each layer uses:
//   full    - causal attention within the token's document;
//   sliding - causal within the document, a query sees itself and the W-1 previous tokens;
//   strided - LoL's strided windows (paper 3.2.1, lol/windows.h): at strided depth l
//             (1-based) the document is cut into windows of W tokens shifted by
//             delta_l = (l-1) S mod W, and attention is causal inside each window.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "nn/block.h"
#include "nn/rope.h"
#include "nn/segments.h"

namespace lol::baselines {

enum class AttentionKind { Full, Sliding, Strided };

/// "full" | "sliding" | "strided" -> kind; throws InputError naming `where` otherwise.
AttentionKind parse_attention_kind(const std::string& s, const std::string& where);
const char* attention_kind_name(AttentionKind k);

/// Attention pattern of one layer.
struct LayerAttention {
  AttentionKind kind = AttentionKind::Full;
  int64_t window = 0;  ///< W (sliding, strided)
  int64_t stride = 0;  ///< S (strided)
  int64_t depth = 0;   ///< strided depth l >= 1 (strided)
};

/// A document: a maximal run of equal, non-negative doc ids in one row, [begin, end).
struct Document {
  int64_t row = 0, begin = 0, end = 0;
};

/// Per-forward layout of a [batch, seq] token batch as a flat array of batch*seq rows.
class TokenLayout {
 public:
  /// doc_ids [batch, seq] int64 (any device) or undefined (each row one document);
  /// -1 marks padding (in no document: it attends to nothing and nothing attends to it).
  /// Tensors are put on `device`.
  TokenLayout(int64_t batch, int64_t seq, const torch::Tensor& doc_ids, const torch::Device& device);

  int64_t batch() const { return B_; }
  int64_t seq() const { return T_; }
  const std::vector<Document>& documents() const { return docs_; }
  /// [batch*seq] int64 position of each token within its document (0 for padding).
  const torch::Tensor& pos() const { return pos_; }
  /// [n_valid] int64 flat rows that are not padding, in order.
  const torch::Tensor& valid_rows() const { return valid_rows_t_; }
  int64_t n_valid() const { return int64_t(valid_rows_.size()); }
  /// Documents as causal segments (full and sliding attention).
  const nn::SegmentLayout& document_segments() const { return full_; }
  /// Strided windows of depth `depth` (1-based) as causal segments; built once per
  /// (depth shift, W) and cached.
  const nn::SegmentLayout& strided_segments(int64_t depth, int64_t window, int64_t stride);
  /// [n_docs, max_len, max_len] bool: key j visible to query i of the same document
  /// (j <= i, i - j < window); cached per window.
  const torch::Tensor& sliding_mask(int64_t window);

 private:
  int64_t B_ = 0, T_ = 0;
  torch::Device device_;
  std::vector<Document> docs_;
  std::vector<int64_t> valid_rows_;
  torch::Tensor pos_, valid_rows_t_;
  nn::SegmentLayout full_;
  std::map<std::pair<int64_t, int64_t>, nn::SegmentLayout> strided_;  // by (shift, W)
  std::map<int64_t, torch::Tensor> sliding_;
};

/// Self-attention of one layer: h [N, d_model] (after the input norm, N = batch*seq)
/// -> o_proj(attention) [N, d_model] with the layer's pattern. Full and strided
/// attention call nn::Attention::forward on the pattern's segments; sliding attention
/// masks the document segments with the band.
torch::Tensor attend(nn::AttentionImpl& attn, const torch::Tensor& h, TokenLayout& layout, const LayerAttention& a,
                     nn::RoPE& rope);

/// One pre-norm block: x [N, d_model] -> x + attn + ffn (nn/block.h) with the layer's
/// attention pattern (no FiLM); an MoE FFN routes the non-padding rows only.
torch::Tensor block_forward(nn::BlockImpl& block, const torch::Tensor& x, TokenLayout& layout,
                            const LayerAttention& a, nn::RoPE& rope);

/// Attention span of every query of a document of n tokens under pattern `a`, summed
/// over the document's positions (number of (query, key) pairs actually allowed).
/// Used by the FLOPs accounting: full n(n+1)/2, sliding sum_i min(i+1, W), strided
/// sum over windows of len(len+1)/2.
double allowed_pairs(int64_t n, const LayerAttention& a);

}  // namespace lol::baselines
