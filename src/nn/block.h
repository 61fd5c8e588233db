// Pre-norm decoder block (Llama/Qwen2 layout, HF parameter names):
//   h = x + self_attn(input_layernorm(x)); y = h + mlp(post_attention_layernorm(h)).
// Inside LoL's routed core each norm is followed by the routed depth's FiLM
// (paper Appendix A): gamma_s * RMSNorm_s(x) + beta_s, s in {attn, ffn}.
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/rmsnorm.h"

namespace lol::nn {

struct BlockShape {
  AttentionShape attn;
  int64_t ffn_hidden = 0;
  double norm_eps = 1e-5;
};

/// Depth-dependent FiLM parameters (paper Appendix A), each [d_model].
class FiLMImpl : public torch::nn::Module {
 public:
  explicit FiLMImpl(int64_t d_model);
  torch::Tensor attn_gamma, attn_beta, ffn_gamma, ffn_beta;
};
TORCH_MODULE(FiLM);

/// Everything a block needs besides its input states.
struct BlockContext {
  const torch::Tensor* pos = nullptr;          ///< [N] int64 RoPE positions
  const SegmentLayout* layout = nullptr;       ///< attention segments over the N rows
  const torch::Tensor* key_visible = nullptr;  ///< [N] bool or nullptr (all visible)
  RoPE* rope = nullptr;
  FiLMImpl* film = nullptr;                    ///< nullptr outside the routed core
};

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const BlockShape& shape);
  /// Residual update y - x of the block: x [N, d] -> [N, d].
  torch::Tensor delta(const torch::Tensor& x, const BlockContext& ctx);
  /// y = x + delta(x).
  torch::Tensor forward(const torch::Tensor& x, const BlockContext& ctx) { return x + delta(x, ctx); }

  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

/// Residual updates of one routed depth with one call per operator for all its experts:
/// x [N, d] is cut into consecutive row blocks of sizes[g] rows (sum N) and block g runs
/// blocks[g] (its norms and projections); attention runs once over ctx.layout, whose
/// segments (the depth's windows) lie inside the blocks. Equal to blocks[g]->delta on
/// each block with the layout restricted to it (tests/model/test_fused_ops.cpp). The
/// blocks must share one BlockShape. Returns [N, d]. Throws lol::InputError on
/// mismatched sizes. (LoL paper Algorithm 1 line 16: E_{i}(s) for every window at once.)
torch::Tensor grouped_block_delta(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                                  const torch::Tensor& x, const BlockContext& ctx);

}  // namespace lol::nn
