#include "layerroute/block_lora.h"

#include "nn/attention.h"

namespace lol::layerroute {

namespace {
torch::Tensor proj(torch::nn::Linear& lin, int64_t layer, const char* name, const LoraImpl* lora,
                   const torch::Tensor& x) {
  auto y = lin(x);
  return lora ? lora->add(layer, name, x, y) : y;
}
}  // namespace

void block_qkv(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& h,
               const torch::Tensor& pos, nn::RoPE& rope, torch::Tensor& q, torch::Tensor& k, torch::Tensor& v) {
  auto& at = *blk.self_attn;
  const auto& s = at.shape;
  const int64_t N = h.size(0);
  q = proj(at.q_proj, layer, "q_proj", lora, h);
  k = proj(at.k_proj, layer, "k_proj", lora, h);
  if (s.qk_norm && s.qk_norm_across_heads) {  // OLMo 2/3: one RMSNorm over all heads (frozen)
    q = at.q_norm(q);
    k = at.k_norm(k);
  }
  q = q.view({N, s.n_heads, s.head_dim});
  k = k.view({N, s.n_kv_heads, s.head_dim});
  if (s.qk_norm && !s.qk_norm_across_heads) {  // Qwen3: per-head RMSNorm before RoPE (frozen, never a LoRA target)
    q = at.q_norm(q);
    k = at.k_norm(k);
  }
  if (s.rope) {  // (GPT-2: positions were added to the input embeddings)
    q = rope.apply(q, pos);
    k = rope.apply(k, pos);
  }
  v = proj(at.v_proj, layer, "v_proj", lora, h).view({N, s.n_kv_heads, s.head_dim});
}

torch::Tensor block_o(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& o) {
  auto a = proj(blk.self_attn->o_proj, layer, "o_proj", lora, o);
  return blk.attn_output_norm ? blk.attn_output_norm(a) : a;  // OLMo: the output's RMSNorm
}

torch::Tensor block_mlp(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& x_attn) {
  auto m = blk.ffn_input(x_attn);
  auto& mlp = *blk.mlp;
  auto u = proj(mlp.up_proj, layer, "up_proj", lora, m);
  const auto hidden = mlp.gated() ? nn::gated_activation(proj(mlp.gate_proj, layer, "gate_proj", lora, m), u, mlp.act)
                                  : nn::activation(u, mlp.act);  // GPT-2: down(act(up m))
  auto f = proj(mlp.down_proj, layer, "down_proj", lora, hidden);
  return blk.ffn_output_norm ? blk.ffn_output_norm(f) : f;
}

torch::Tensor cached_attention_mask(int64_t n, int64_t p0, int64_t window, const torch::Device& device) {
  auto allowed = torch::ones({1, n, p0 + n}, torch::TensorOptions(torch::kBool).device(device)).tril(p0);
  if (window > 0) allowed = allowed.triu(p0 - window + 1);  // key j >= query position - W + 1
  return allowed;
}

torch::Tensor block_delta_lora(nn::BlockImpl& blk, int64_t layer, const LoraImpl* lora, const torch::Tensor& x,
                               const nn::SegmentLayout& seg, const torch::Tensor& pos, nn::RoPE& rope,
                               int64_t window) {
  const auto& s = blk.self_attn->shape;
  const int64_t N = x.size(0);
  auto h = blk.attn_input(x);
  torch::Tensor q, k, v;
  block_qkv(blk, layer, lora, h, pos, rope, q, k, v);
  auto qp = seg.to_padded(q).permute({0, 2, 1, 3}).contiguous();  // [S, H, L, hd]
  auto kp = seg.to_padded(k).permute({0, 2, 1, 3}).contiguous();
  auto vp = seg.to_padded(v).permute({0, 2, 1, 3}).contiguous();
  auto allowed = nn::segment_causal_mask(seg.slot_valid, torch::Tensor());  // [S, L, L]
  if (window > 0) {  // slots are positions within the segment (a document)
    const int64_t Lmax = allowed.size(1);
    allowed = allowed & torch::ones({Lmax, Lmax}, allowed.options()).triu(-(window - 1)).unsqueeze(0);
  }
  auto o = nn::masked_attention(qp, kp, vp, allowed, s.softcap);                        // [S, H, L, hd]
  auto flat = seg.from_padded(o.permute({0, 2, 1, 3}).contiguous()).view({N, s.n_heads * s.head_dim});
  auto a = block_o(blk, layer, lora, flat);
  return a + block_mlp(blk, layer, lora, blk.ffn_source(x, x + a));
}

}  // namespace lol::layerroute
