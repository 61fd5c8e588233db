// A read-only snapshot of a LoL model's weights laid out for incremental decoding:
// the q/k/v projections of every block are concatenated into one matrix, and so are
// the SwiGLU gate/up projections, so that one decoding step runs one matrix product
// per weight (paper Appendix A architecture: RMSNorm, RoPE, SwiGLU, bias-free
// attention). RoPE tables are precomputed exactly as nn::RoPE builds them.
//
// The snapshot copies the fused matrices when it is built: later changes to the
// model's parameters are not seen (build a new snapshot / DecodeSession).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "lol/config.h"
#include "nn/activation.h"
#include "nn/rope_scaling.h"

namespace lol {
class LoLModelImpl;
}

namespace lol::nn {
class BlockImpl;
}

namespace lol::inference {

/// One decoder block (nn::Block) with fused projections.
struct PackedBlock {
  /// [d] input_layernorm / post_attention_layernorm weights, or undefined (OLMo 2/3: the
  /// attention and the FFN read the residual stream as it is).
  torch::Tensor ln1, ln2;
  torch::Tensor w_qkv;       ///< [(H + 2 Hkv) hd, d]: rows q | k | v
  torch::Tensor b_qkv;       ///< [(H + 2 Hkv) hd] or undefined (bias-free attention)
  torch::Tensor w_o;         ///< [d, H hd]
  /// RMSNorm weights of q and k before RoPE, or undefined: [hd] per head (Qwen3, Gemma 3),
  /// [H hd] / [Hkv hd] over all heads (OLMo 2/3; nn::AttentionShape::qk_norm_across_heads).
  torch::Tensor q_norm, k_norm;
  torch::Tensor w_gate_up;   ///< [2 F, d]: rows gate | up (undefined with an MoE FFN)
  torch::Tensor w_down;      ///< [d, F] (undefined with an MoE FFN)
  // MoE FFN (nn/sparse_moe.h; LoL's MoE prelude/coda, paper 4.3.2); moe_gate undefined = dense.
  torch::Tensor moe_gate;                   ///< [E, d] router
  torch::Tensor moe_bias;                   ///< [E] balancing bias (selection only), float32 or wider
  std::vector<torch::Tensor> expert_gate_up;///< E x [2 F_e, d]
  std::vector<torch::Tensor> expert_down;   ///< E x [d, F_e]
  int64_t top_k = 0;                        ///< experts per token
  bool moe_normalize = false;               ///< selected weights renormalised (nn::MoEShape::normalize_top_k)
  /// The shared expert (Qwen2-MoE) or undefined: [2 F_s, d] gate | up, [d, F_s], its gate [1, d].
  torch::Tensor shared_gate_up, shared_down, shared_gate;
  // Gemma-family dense blocks (nn/block.h, nn/mlp.h):
  torch::Tensor ln_attn_out, ln_ffn_out;    ///< [d] sandwich norms of the attention / FFN outputs, or undefined
  nn::Activation act = nn::Activation::SiLU;  ///< the dense FFN's gate activation
  bool local_rope = false;                  ///< RoPE from PackedModel::rope_table_local (a Gemma 3 sliding layer)
  double attn_softcap = 0;                  ///< > 0: attention logit soft-capping (nn::AttentionShape::softcap)
  // GPT-2's blocks (nn::BlockShape::layer_norm, gated_mlp, mlp_bias, attn.o_bias / rope):
  torch::Tensor ln1_b, ln2_b;               ///< [d] LayerNorm biases: ln1 / ln2 are LayerNorms, or undefined (RMSNorm)
  torch::Tensor b_o;                        ///< [d] o_proj bias, or undefined
  bool gated_mlp = true;                    ///< false: w_gate_up holds up_proj only ([F, d]), ffn = down(act(up m))
  torch::Tensor b_gate_up, b_down;          ///< MLP biases ([2F] or [F] / [d]), or undefined
  bool rope = true;                         ///< false: no rotary embedding (learned positions)
  /// GPT-NeoX's parallel block: the FFN reads the block input (nn::BlockShape::parallel_residual).
  bool parallel_residual = false;
  /// Phi's parallel block: the FFN reads ln1's output too (nn::BlockShape::shared_input_norm; ln2 undefined).
  bool shared_input_norm = false;
  bool is_moe() const { return moe_gate.defined(); }
  /// True for a block of the LayerNorm architectures' features (GPT-2's, GPT-NeoX's,
  /// Phi's, StableLM's: LayerNorms, biases, ungated MLP, no RoPE, parallel blocks), which
  /// the stacked-library path of block_step does not run (dense models only).
  bool gpt2_layout() const {
    return ln1_b.defined() || b_o.defined() || !gated_mlp || b_down.defined() || !rope || parallel_residual ||
           shared_input_norm;
  }
};

/// Packs one pre-norm block's weights (detached copies; q|k|v and gate|up fused, also
/// per expert of an MoE FFN).
PackedBlock pack_block(nn::BlockImpl& b);

/// FiLM parameters of one trained routed depth (paper Appendix A), each [d].
struct PackedFiLM {
  torch::Tensor attn_gamma, attn_beta, ffn_gamma, ffn_beta;
};

/// The library's blocks (PackedBlock) stacked along a leading expert dimension [L, ...]
/// (PackedModel::library[e]'s tensors are views of row e: no second copy). A decoding
/// step off the fused CPU kernels runs several experts' projections as one batched
/// product with them (block_delta). Undefined when the library is empty or MoE.
struct PackedLibrary {
  torch::Tensor ln1, ln2;    ///< [L, d]
  torch::Tensor w_qkv;       ///< [L, (H + 2 Hkv) hd, d]
  torch::Tensor b_qkv;       ///< [L, (H + 2 Hkv) hd] or undefined
  torch::Tensor w_o;         ///< [L, d, H hd]
  torch::Tensor w_gate_up;   ///< [L, 2 F, d]
  torch::Tensor w_down;      ///< [L, d, F]
  bool defined() const { return w_qkv.defined(); }
};

struct PackedModel {
  LoLConfig cfg;
  int64_t trained_depth = 0;         ///< routed depths the model runs (LoLModelImpl::active_depth)
  torch::Tensor embed;               ///< [V, d]
  torch::Tensor head;                ///< [V, d] (the embedding when tied)
  torch::Tensor head_bias;           ///< [V] lm_head bias (Phi), or undefined
  torch::Tensor norm;                ///< [d] final RMSNorm weight
  torch::Tensor norm_bias;           ///< [d] with a final LayerNorm (GPT-2), else undefined
  torch::Tensor pos_embed;           ///< [max positions, d] learned position embeddings (GPT-2), or undefined
  std::vector<PackedBlock> prelude, library, coda;
  PackedLibrary stacked;             ///< the library stacked by expert (library[e] views row e)
  std::vector<PackedFiLM> film;      ///< [core_depth]
  std::vector<torch::Tensor> router; ///< [core_depth] each [L, d] (the same tensor when tied)
  torch::Tensor depth_embed;         ///< [core_depth, d]: row l-1 is e^(l)
  torch::Tensor balance_bias;        ///< [L]
  torch::Tensor rope_table;          ///< [positions, 2, r] in the model dtype (nn::rope_rotation_table)
  /// [positions, 2, r] with longrope's long factors, for calls whose sequence exceeds
  /// rope_scaling.original_max_position_embeddings (built only when `positions` does), or undefined.
  torch::Tensor rope_table_long;
  nn::RopeScaling rope_scaling;      ///< frequency scaling of a loaded Hugging Face model (LoL: none)
  /// r: the rotated leading dimensions of each head (0: all hd; Phi-3's partial_rotary_factor).
  int64_t attn_rotary_dim = 0;
  int64_t attn_head_dim = 0;         ///< hd of a dense model whose head_dim is not d / H (0: cfg.head_dim())
  /// > 0: RoPE base of the blocks with local_rope, unscaled (Gemma 3's sliding layers).
  double rope_local_theta = 0;
  torch::Tensor rope_table_local;    ///< [positions, 2, r] for rope_local_theta, or undefined
  double embed_scale = 1.0;          ///< input embeddings times it, rounded to the dtype (Gemma: sqrt(d))
  double final_softcap = 0;          ///< > 0: logits soft-capped (nn::soft_cap; Gemma 2)
  double embed_multiplier = 1.0;     ///< input embeddings times it, a float64 scalar (Granite)
  double logits_scaling = 1.0;       ///< logits divided by it before the soft cap (Granite)
  double logit_scale = 1.0;          ///< logits times it before logits_scaling (Cohere)

  /// Snapshot of `m` (same device and dtype as its embedding), RoPE tables for
  /// `positions` positions. Call under NoGradGuard or InferenceMode.
  static PackedModel from(LoLModelImpl& m, int64_t positions);
  /// Grows the RoPE tables to at least `positions` rows (nn::rope_rotation_table). Throws
  /// InputError beyond rope_scaling's position limit.
  void ensure_rope(int64_t positions);

  /// Attention head size hd: d_model / n_heads for LoL, a dense model's own head_dim.
  int64_t head_dim() const { return attn_head_dim > 0 ? attn_head_dim : cfg.head_dim(); }
  /// The rotary dimension r <= hd (the width of the RoPE tables' rows).
  int64_t rotary_dim() const { return attn_rotary_dim > 0 ? attn_rotary_dim : head_dim(); }
  /// The RoPE table of a forward call whose sequence is `seq_len` positions long (its
  /// largest position + 1): rope_table_local for a local_rope block, rope_table_long when
  /// longrope's long factors apply (nn::RopeScaling::uses_long_factors), else rope_table.
  const torch::Tensor& rope_table_for(bool local, int64_t seq_len) const {
    if (local) return rope_table_local;
    return rope_scaling.uses_long_factors(seq_len) ? rope_table_long : rope_table;
  }
  torch::TensorOptions options() const { return embed.options(); }
};

}  // namespace lol::inference
