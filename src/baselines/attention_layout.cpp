#include "baselines/attention_layout.h"

#include <algorithm>

#include "lol/windows.h"
#include "nn/linear.h"
#include "util/error.h"

namespace lol::baselines {

AttentionKind parse_attention_kind(const std::string& s, const std::string& where) {
  if (s == "full") return AttentionKind::Full;
  if (s == "sliding") return AttentionKind::Sliding;
  if (s == "strided") return AttentionKind::Strided;
  throw InputError(where + " = \"" + s + "\": expected one of full, sliding, strided");
}

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::Full: return "full";
    case AttentionKind::Sliding: return "sliding";
    case AttentionKind::Strided: return "strided";
  }
  return "?";
}

TokenLayout::TokenLayout(int64_t B, int64_t T, const torch::Tensor& doc_ids, const torch::Device& device)
    : B_(B), T_(T), device_(device) {
  torch::Tensor doc = doc_ids.defined() ? doc_ids.to(torch::kCPU, torch::kInt64).contiguous()
                                        : torch::zeros({B, T}, torch::kInt64);
  if (doc.dim() != 2 || doc.size(0) != B || doc.size(1) != T)
    throw InputError("doc_ids: expected shape [" + std::to_string(B) + ", " + std::to_string(T) + "]");
  const int64_t* dp = doc.data_ptr<int64_t>();
  auto pos = torch::zeros({B * T}, torch::kInt64);
  int64_t* pp = pos.data_ptr<int64_t>();
  std::vector<int64_t> offsets{0};
  for (int64_t r = 0; r < B; ++r) {
    int64_t i = 0;
    while (i < T) {
      const int64_t id = dp[r * T + i];
      int64_t j = i + 1;
      while (j < T && dp[r * T + j] == id) ++j;
      if (id >= 0) {
        docs_.push_back({r, i, j});
        for (int64_t t = i; t < j; ++t) {
          pp[r * T + t] = t - i;
          valid_rows_.push_back(r * T + t);
        }
        offsets.push_back(int64_t(valid_rows_.size()));
      }
      i = j;
    }
  }
  pos_ = pos.to(device);
  valid_rows_t_ = torch::tensor(valid_rows_, torch::kInt64).to(device);
  full_ = nn::SegmentLayout::from_csr(valid_rows_, offsets, B * T, device);
}

const nn::SegmentLayout& TokenLayout::strided_segments(int64_t depth, int64_t window, int64_t stride) {
  const int64_t shift = window_shift(depth, window, stride);
  auto key = std::make_pair(shift, window);
  auto it = strided_.find(key);
  if (it != strided_.end()) return it->second;
  std::vector<int64_t> offsets{0};
  for (const auto& d : docs_) {
    const int64_t base = int64_t(offsets.back());
    for (const auto& w : window_ranges(d.end - d.begin, depth, window, stride)) offsets.push_back(base + w.second);
  }
  // Rows of a document are contiguous in valid_rows_, documents in order: the window
  // offsets above index valid_rows_ directly.
  return strided_[key] = nn::SegmentLayout::from_csr(valid_rows_, offsets, B_ * T_, device_);
}

const torch::Tensor& TokenLayout::sliding_mask(int64_t window) {
  auto it = sliding_.find(window);
  if (it != sliding_.end()) return it->second;
  const int64_t L = full_.max_len;
  auto band = torch::ones({L, L}, torch::TensorOptions(torch::kBool).device(device_)).tril().triu(-(window - 1));
  auto mask = band.unsqueeze(0) & full_.slot_valid.unsqueeze(1);
  return sliding_[window] = mask;
}

torch::Tensor attend(nn::AttentionImpl& attn, const torch::Tensor& h, TokenLayout& L, const LayerAttention& a,
                     nn::RoPE& rope) {
  switch (a.kind) {
    case AttentionKind::Full:
      return nn::grouped_attention({&attn}, {h.size(0)}, h, L.pos(), L.document_segments(), torch::Tensor(), rope, L.seq());
    case AttentionKind::Strided:
      return nn::grouped_attention({&attn}, {h.size(0)}, h, L.pos(), L.strided_segments(a.depth, a.window, a.stride),
                                    torch::Tensor(), rope, L.seq());
    case AttentionKind::Sliding: {
      const auto& seg = L.document_segments();
      const int64_t N = h.size(0);
      torch::Tensor q, k, v;
      nn::grouped_project({&attn}, {h.size(0)}, h, L.pos(), rope, q, k, v, L.seq());
      auto qp = seg.to_padded(q).permute({0, 2, 1, 3}).contiguous();  // [S, H, Lmax, hd]
      auto kp = seg.to_padded(k).permute({0, 2, 1, 3}).contiguous();
      auto vp = seg.to_padded(v).permute({0, 2, 1, 3}).contiguous();
      auto o = nn::masked_attention(qp, kp, vp, L.sliding_mask(a.window), attn.shape.softcap);
      auto flat = seg.from_padded(o.permute({0, 2, 1, 3}).contiguous());  // [N, H, hd]
      return nn::linear(flat.view({N, attn.shape.n_heads * attn.shape.head_dim}), attn.o_proj);
    }
  }
  throw std::logic_error("attend: unknown attention kind");
}

torch::Tensor block_forward(nn::BlockImpl& b, const torch::Tensor& x, TokenLayout& L, const LayerAttention& a,
                            nn::RoPE& rope) {
  // An MoE FFN routes only the tokens (padding is neither computed nor counted).
  const torch::Tensor* ffn_rows = L.n_valid() < x.size(0) ? &L.valid_rows() : nullptr;
  // A window as long as the sequence never binds: the block's own (full causal) forward,
  // the same function on the faster path, so that a model exported with its window
  // dropped (hf::from_dense_config) computes bit for bit what it computed here.
  const bool full = a.kind == AttentionKind::Full || (a.kind == AttentionKind::Sliding && a.window >= L.seq());
  if (a.kind != AttentionKind::Sliding || full) {  // the block's own forward on the pattern's segments
    const nn::SegmentLayout& seg = full ? L.document_segments() : L.strided_segments(a.depth, a.window, a.stride);
    nn::BlockContext ctx{&L.pos(), &seg, nullptr, &rope, nullptr, ffn_rows, L.seq()};
    return b.forward(x, ctx);
  }
  auto att = attend(*b.self_attn, b.attn_input(x), L, a, rope);
  if (b.attn_output_norm) att = b.attn_output_norm(att);  // sandwich norms (nn/block.h)
  auto y = x + att;
  auto m = b.ffn(b.ffn_input(b.ffn_source(x, y)), ffn_rows);
  return y + (b.ffn_output_norm ? b.ffn_output_norm(m) : m);
}

double allowed_pairs(int64_t n, const LayerAttention& a) {
  const double nn_ = double(n);
  switch (a.kind) {
    case AttentionKind::Full: return nn_ * (nn_ + 1) / 2;
    case AttentionKind::Sliding: {
      const double W = double(std::min<int64_t>(a.window, n));
      // positions 0..W-1 see i+1 keys, the remaining n-W see W
      return W * (W + 1) / 2 + (nn_ - W) * W;
    }
    case AttentionKind::Strided: {
      double s = 0;
      for (const auto& w : window_ranges(n, a.depth, a.window, a.stride)) {
        const double len = double(w.second - w.first);
        s += len * (len + 1) / 2;
      }
      return s;
    }
  }
  return 0;
}

}  // namespace lol::baselines
