// Weight counts of one nn::Block from its BlockShape, written once for every cost model
// (baselines/flops, `lol info` FLOPs, the trainers' FLOPs per token) so that they agree
// with the modules nn::Block builds from the same shape. A dense FFN is a SwiGLU of F
// hidden units; an MoE FFN (shape.moe.n_experts = E > 0) is a gate [E, d] and E SwiGLU
// experts of F hidden units each, of which top_k = k run per token (LoL paper 4.3.2).
#pragma once
#include <cstdint>

#include "nn/block.h"

namespace lol::nn {

/// Attention projection weights q, k, v, o of a block (biases excluded): d hd (2 H + 2 H_kv).
inline int64_t attention_weights(const BlockShape& s) {
  return s.attn.d_model * s.attn.head_dim * (2 * s.attn.n_heads + 2 * s.attn.n_kv_heads);
}

/// Attention projection biases: hd (H + 2 H_kv) with qkv_bias (Qwen2), + d with o_bias (GPT-2).
inline int64_t attention_biases(const BlockShape& s) {
  return (s.attn.qkv_bias ? s.attn.head_dim * (s.attn.n_heads + 2 * s.attn.n_kv_heads) : 0) +
         (s.attn.o_bias ? s.attn.d_model : 0);
}

/// Weights of one SwiGLU expert (or of the dense FFN): gate, up, down = 3 d F; an
/// ungated MLP (GPT-2): up, down = 2 d F (biases: mlp_biases).
inline int64_t swiglu_weights(const BlockShape& s) {
  const int64_t mats = s.gated_mlp ? 3 : 2;
  return mats * s.attn.d_model * s.ffn_hidden;
}

/// MLP biases of a dense FFN (GPT-2): up (F), down (d) and, gated, gate (F).
inline int64_t mlp_biases(const BlockShape& s) {
  return s.mlp_bias ? (s.gated_mlp ? 2 : 1) * s.ffn_hidden + s.attn.d_model : 0;
}

/// Weights of an MoE FFN's shared expert and its gate, which every token uses:
/// 3 d F_s + d (Qwen2-MoE), 0 without one.
inline int64_t shared_expert_weights(const BlockShape& s) {
  const int64_t Fs = s.moe.n_experts > 0 ? s.moe.shared_expert_hidden : 0;
  return Fs > 0 ? 3 * s.attn.d_model * Fs + s.attn.d_model : 0;
}

/// Every FFN weight of a block: 3 d F dense; E d (gate) + E * 3 d F (+ the shared expert)
/// with an MoE FFN.
inline int64_t ffn_weights(const BlockShape& s) {
  const int64_t E = s.moe.n_experts;
  return E > 0 ? E * s.attn.d_model + E * swiglu_weights(s) + shared_expert_weights(s) : swiglu_weights(s);
}

/// FFN weights one token multiplies with: 3 d F dense; E d (gate) + k * 3 d F (+ the shared
/// expert) with an MoE FFN.
inline int64_t ffn_active_weights(const BlockShape& s) {
  const int64_t E = s.moe.n_experts;
  return E > 0 ? E * s.attn.d_model + s.moe.top_k * swiglu_weights(s) + shared_expert_weights(s) : swiglu_weights(s);
}

/// FFN weights a token does not use: (E - k) * 3 d F with an MoE FFN, 0 dense.
inline int64_t ffn_idle_weights(const BlockShape& s) { return ffn_weights(s) - ffn_active_weights(s); }

/// Matmul weights one token multiplies with in a block: attention_weights + ffn_active_weights
/// (forward matmul FLOPs per token = 2 x this, attention scores excluded).
inline int64_t block_active_matmul_weights(const BlockShape& s) { return attention_weights(s) + ffn_active_weights(s); }

/// q_norm / k_norm gains: 2 hd per head (Qwen3, Gemma 3), hd (H + H_kv) across heads
/// (OLMo 2/3), 0 without qk_norm.
inline int64_t qk_norm_parameters(const BlockShape& s) {
  if (!s.attn.qk_norm) return 0;
  return s.attn.qk_norm_across_heads ? s.attn.head_dim * (s.attn.n_heads + s.attn.n_kv_heads) : 2 * s.attn.head_dim;
}

/// Norm gains of a block, d each: 2 pre-norm, 4 sandwich (Gemma 2/3), 2 with the
/// sandwich's output norms only (OLMo 2/3), 1 with a shared input norm (Phi); LayerNorms
/// (GPT-2) have as many biases again.
inline int64_t block_norm_parameters(const BlockShape& s) {
  const int64_t input = s.input_norms ? (s.shared_input_norm ? 1 : 2) : 0;
  return ((s.sandwich_norm ? 2 : 0) + input) * s.attn.d_model * (s.layer_norm ? 2 : 1);
}

/// Every parameter of one nn::Block: attention (with biases and q_norm / k_norm), FFN and
/// the RMSNorm gains.
inline int64_t block_parameters(const BlockShape& s) {
  return attention_weights(s) + attention_biases(s) + qk_norm_parameters(s) + ffn_weights(s) + mlp_biases(s) +
         block_norm_parameters(s);
}

}  // namespace lol::nn
