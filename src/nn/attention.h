// Grouped-query self-attention without biases (optional q/k/v biases for Qwen2,
// optional RMSNorm of q and k before RoPE: per head for Qwen3 and Gemma 3, over the whole
// projection for OLMo 2/3), operating on flat token
// arrays cut into causal segments (nn/segments.h).
//
// Masking rules (paper 3.2): a query at slot i of a segment sees keys at slots
// j <= i of the same segment whose `key_visible` flag is set (router-only tokens
// are never visible as keys, paper 4.1.3). A query with no visible key outputs 0.
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "nn/rmsnorm.h"
#include "nn/rope.h"
#include "nn/segments.h"

#include "nn/weight_stacks.h"

namespace lol::nn {

struct AttentionShape {
  int64_t d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;
  /// Qwen3's q_norm / k_norm: an RMSNorm over head_dim (weights [head_dim], epsilon
  /// norm_eps) applied to every query and key head after the projection, before RoPE.
  bool qk_norm = false;
  /// OLMo 2/3's q_norm / k_norm (with qk_norm): one RMSNorm over the whole projection
  /// instead of each head (weights [n_heads head_dim] and [n_kv_heads head_dim]).
  bool qk_norm_across_heads = false;
  double norm_eps = 1e-6;  ///< nn::Block sets it to BlockShape::norm_eps
  /// > 0: attention logit soft-capping (Gemma 2): each scaled score s becomes
  /// softcap * tanh(s / softcap) before the mask and softmax (the composed attention
  /// path then runs instead of the direct CPU kernel). 0: none.
  double softcap = 0;
  bool o_bias = false;  ///< o_proj has a bias (GPT-2)
  /// false: no rotary embedding (positions enter through learned absolute embeddings, GPT-2).
  bool rope = true;
};

/// Core masked softmax attention on padded segments.
/// q [S, H, Lq, hd], k/v [S, Hkv, Lk, hd] with H % Hkv == 0 (kv head j serves heads
/// j*G .. j*G+G-1, G = H/Hkv, as HF repeat_kv), allowed [S, Lq, Lk] bool.
/// Returns [S, H, Lq, hd]; rows with no allowed key are exactly 0.
/// softcap > 0: scores s -> softcap * tanh(s / softcap) first (AttentionShape::softcap).
torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& allowed, double softcap = 0);

/// Number of threads at::parallel_for gives the CPU kernels of src/nn (attention,
/// RMSNorm, RoPE, SwiGLU) for `tasks` work items: min(tasks, at::get_num_threads())
/// when they are built with OpenMP (CMakeLists.txt, LOL_KERNELS_OPENMP), else 1.
int kernel_threads(int64_t tasks = 64);

/// Causal mask of a segment batch: allowed[s, i, j] = j <= i && slot_valid[s, j] && key_visible[s, j].
/// slot_valid / key_visible [S, L] bool (key_visible may be undefined = all visible).
torch::Tensor segment_causal_mask(const torch::Tensor& slot_valid, const torch::Tensor& key_visible);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionShape& shape);

  /// x [N, d_model] (flat tokens after the input norm), pos [N] int64 RoPE positions,
  /// layout: causal segments over the N rows, key_visible [N] bool (undefined = all).
  /// Returns o_proj(attention) [N, d_model]; rows in no segment get o_proj(0).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos, const SegmentLayout& layout,
                        const torch::Tensor& key_visible, RoPE& rope);

  /// q/k/v projections (then q_norm / k_norm when shape.qk_norm) with RoPE applied:
  /// x [N, d] -> q [N, H, hd], k/v [N, Hkv, hd].
  void project(const torch::Tensor& x, const torch::Tensor& pos, RoPE& rope, torch::Tensor& q, torch::Tensor& k,
               torch::Tensor& v);

  AttentionShape shape;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  /// Only when shape.qk_norm: [head_dim] each, or [n_heads head_dim] / [n_kv_heads head_dim]
  /// with shape.qk_norm_across_heads.
  RMSNorm q_norm{nullptr}, k_norm{nullptr};
};
TORCH_MODULE(Attention);

/// Grouped attention for one routed depth's experts: x [N, d_model] is cut into
/// consecutive row blocks of sizes[g] rows (sum N) and block g is projected (q/k/v and
/// o) with experts[g]'s weights; RoPE and the attention over `layout` run once for all
/// rows (attention does not depend on the expert once q/k/v are projected; the layout's
/// segments may span groups). Equal to AttentionImpl::forward when there is one group;
/// the experts must share one AttentionShape. Returns [N, d_model]. Throws
/// lol::InputError when the sizes do not match (nn::grouped_linear). pos_bound: see
/// RoPE::apply (0 = unknown). stacks: see nn::grouped_linear.
torch::Tensor grouped_attention(const std::vector<AttentionImpl*>& experts, const std::vector<int64_t>& sizes,
                                const torch::Tensor& x, const torch::Tensor& pos, const SegmentLayout& layout,
                                const torch::Tensor& key_visible, RoPE& rope, int64_t pos_bound = 0,
                                WeightStacks* stacks = nullptr);

/// The grouped q/k/v projections (and q_norm / k_norm) with RoPE: x [N, d] -> q [N, H, hd], k/v [N, Hkv, hd],
/// rows cut into blocks of sizes[g] as in grouped_attention. Throws lol::InputError when
/// the sizes do not match the rows (nn::grouped_linear); c10::Error for qk_norm with more
/// than one group (only dense models have it). pos_bound: see RoPE::apply.
void grouped_project(const std::vector<AttentionImpl*>& experts, const std::vector<int64_t>& sizes,
                     const torch::Tensor& x, const torch::Tensor& pos, RoPE& rope, torch::Tensor& q, torch::Tensor& k,
                     torch::Tensor& v, int64_t pos_bound = 0, WeightStacks* stacks = nullptr);

}  // namespace lol::nn
