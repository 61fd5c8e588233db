// The pieces of one decoder block (nn/block.h: Llama/Qwen2's pre-norm layout, Gemma's
// GeGLU with sandwich norms and soft-capped attention, OLMo 2's output norms with q/k
// norms across heads, or GPT-2's LayerNorms, ungated MLP and no RoPE) with LoRA adapters added to the targeted projections (paper 3.1: "when g_i = 1 the block
// runs normally, with LoRA adapters active"). Shared by the gated model's forward
// (gated_model.h) and the KV-cached gated decoder (decode.h). `lora` may be null
// (plain or merged weights). Full causal or sliding-window attention.
#pragma once
#include <cstdint>

#include <torch/types.h>

#include "layerroute/lora.h"
#include "nn/block.h"
#include "nn/rope.h"
#include "nn/segments.h"

namespace lol::layerroute {

/// q/k/v of the block's attention for its inputs h [N, d] (BlockImpl::attn_input): q [N, H, hd]
/// and k, v [N, Hkv, hd], the q/k norms (LoRA on q_proj / k_proj comes before them) and RoPE
/// applied to q and k at positions pos [N] int64.
void block_qkv(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& h,
               const torch::Tensor& pos, nn::RoPE& rope, torch::Tensor& q, torch::Tensor& k, torch::Tensor& v);

/// o_proj (+ LoRA) of the attention output o [N, H * hd] -> [N, d], then the output norm (Gemma 2/3, OLMo).
torch::Tensor block_o(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& o);

/// The FFN input norm (none in OLMo) + MLP (+ LoRA; SwiGLU, Gemma's GeGLU, GPT-2's ungated GELU) of the
/// states the FFN reads (x + attention, or the block input in GPT-NeoX's parallel blocks:
/// nn::BlockImpl::ffn_source), then the output norm (Gemma 2/3, OLMo): x_attn [N, d] -> mlp
/// output [N, d] (the residual is not added).
torch::Tensor block_mlp(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& x_attn);

/// Residual update of block `layer` over causal segments: x [N, d] -> attn + mlp [N, d],
/// equal to nn::BlockImpl::delta (full attention, no FiLM) when lora is null or B = 0;
/// `rope` is the layer's (DenseModelImpl::layer_rope), attention soft-capped as the block's shape says.
/// window > 0: a query sees only the window - 1 slots before its own in its segment
/// (sliding-window attention, transformers' mask: i - W < j <= i).
torch::Tensor block_delta_lora(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& x,
                               const nn::SegmentLayout& seg, const torch::Tensor& pos, nn::RoPE& rope,
                               int64_t window = 0);

/// Causal (and, with window > 0, sliding-window) mask of n queries at positions p0 ..
/// p0 + n - 1 over keys 0 .. p0 + n - 1: [1, n, p0 + n] bool on `device`.
torch::Tensor cached_attention_mask(int64_t n, int64_t p0, int64_t window, const torch::Device& device);

}  // namespace lol::layerroute
