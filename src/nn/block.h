// Pre-norm decoder block (Llama/Qwen2 layout, HF parameter names):
//   h = x + self_attn(input_layernorm(x)); y = h + mlp(post_attention_layernorm(h)).
// With BlockShape::parallel_residual (GPT-NeoX / Pythia, transformers' GPTNeoXLayer with
// use_parallel_residual) both sublayers read the block input:
//   y = x + self_attn(input_layernorm(x)) + mlp(post_attention_layernorm(x));
// with BlockShape::shared_input_norm as well (Phi-1/1.5/2, transformers' PhiDecoderLayer)
// one norm serves both: y = x + self_attn(n) + mlp(n), n = input_layernorm(x), and the
// block has no post_attention_layernorm.
// With BlockShape::sandwich_norm (Gemma 2/3's layout, transformers' Gemma3DecoderLayer):
//   h = x + attn_output_norm(self_attn(input_layernorm(x)));
//   y = h + ffn_output_norm(mlp(post_attention_layernorm(h))),
// where the members are registered under Gemma's names: attn_output_norm as
// "post_attention_layernorm", post_attention_layernorm (the FFN's input norm) as
// "pre_feedforward_layernorm", ffn_output_norm as "post_feedforward_layernorm".
// With sandwich_norm and no input_norms (OLMo 2/3's layout, transformers'
// Olmo2DecoderLayer) only the output norms remain:
//   h = x + attn_output_norm(self_attn(x)); y = h + ffn_output_norm(mlp(h)).
// Inside LoL's routed core each norm is followed by the routed depth's FiLM
// (paper Appendix A): gamma_s * RMSNorm_s(x) + beta_s, s in {attn, ffn}.
// With BlockShape::moe.n_experts > 0 the FFN is a top-k routed SparseMoE (registered as
// "mlp": mlp.gate.weight, mlp.experts.{e}.*): the MoE baseline's blocks, LoL's MoE
// prelude/coda (LoL paper 4.3.2) and the MoE layers of Hugging Face Mixtral / OLMoE /
// Qwen2-MoE / Qwen3-MoE models (baselines::DenseConfig::layer_block_shape).
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/rmsnorm.h"
#include "nn/sparse_moe.h"

namespace lol::nn {

struct BlockShape {
  AttentionShape attn;
  int64_t ffn_hidden = 0;  ///< gated FFN hidden units (of each expert with an MoE FFN)
  double norm_eps = 1e-5;
  MoEShape moe;            ///< n_experts = 0: dense FFN
  Activation activation = Activation::SiLU;  ///< the dense FFN's gate activation (MoE experts: SiLU)
  /// Gemma 2/3 "sandwich" norms: the attention output and the FFN output are each
  /// RMSNorm-ed before their residual add (see BlockImpl).
  bool sandwich_norm = false;
  /// false (with sandwich_norm, a dense FFN and no FiLM): no input_layernorm and no FFN
  /// input norm, only the output norms (OLMo 2/3, see BlockImpl).
  bool input_norms = true;
  /// GPT-2's blocks: LayerNorms with biases instead of RMSNorms (no FiLM, one block per
  /// group), an ungated MLP (down_proj(act(up_proj x))) and biases on the MLP projections
  /// (attn.o_bias and attn.rope = false complete the layout).
  bool layer_norm = false;
  bool gated_mlp = true;
  bool mlp_bias = false;
  /// GPT-NeoX's parallel blocks: the FFN reads the block input x (through its own norm)
  /// instead of x + attention (see BlockImpl). Needs the input norms and no sandwich norms.
  bool parallel_residual = false;
  /// With parallel_residual: the FFN reads input_layernorm(x) too, no post_attention_layernorm (Phi).
  bool shared_input_norm = false;
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
  /// [m] int64 rows that an MoE FFN routes (the others, e.g. padding, get no FFN update
  /// and are not counted in the expert load); nullptr = every row. Dense FFNs ignore it.
  const torch::Tensor* ffn_rows = nullptr;
  /// Every position in *pos is below it (0 = unknown): spares RoPE a read of max(pos)
  /// back from a GPU (RoPE::apply).
  int64_t pos_bound = 0;
  /// Stacked expert weights shared by the routed depths of one forward pass (nullptr:
  /// stacked per call). See nn::WeightStacks.
  WeightStacks* stacks = nullptr;
};

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const BlockShape& shape);
  /// Residual update y - x of the block: x [N, d] -> [N, d].
  torch::Tensor delta(const torch::Tensor& x, const BlockContext& ctx);
  /// y = x + delta(x).
  torch::Tensor forward(const torch::Tensor& x, const BlockContext& ctx) { return x + delta(x, ctx); }
  /// The FFN on normalised states h [N, d] -> [N, d]: mlp(h), or moe over the rows
  /// `rows` ([m] int64, nullptr = all; the other rows get zeros).
  torch::Tensor ffn(const torch::Tensor& h, const torch::Tensor* rows = nullptr);
  bool is_moe() const { return !moe.is_empty(); }

  /// The attention's and the FFN's input norms (see the file comment for their names
  /// in the sandwich layout; null without BlockShape::input_norms).
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  /// The attention's input: input_layernorm(x), or x itself without input norms. x [N, d] -> [N, d].
  torch::Tensor attn_input(const torch::Tensor& x) { return input_layernorm ? input_layernorm(x) : x; }
  /// The FFN's input: post_attention_layernorm(h), input_layernorm(h) with a shared input
  /// norm (Phi; h is then the block input, ffn_source), or h itself without input norms
  /// (OLMo). h [N, d] -> [N, d].
  torch::Tensor ffn_input(const torch::Tensor& h) {
    return post_attention_layernorm ? post_attention_layernorm(h) : shared_input_norm ? input_layernorm(h) : h;
  }
  /// The states the FFN half reads (before its input norm): the block input x with
  /// parallel_residual (GPT-NeoX), else h = x + attention. Both [N, d].
  const torch::Tensor& ffn_source(const torch::Tensor& x, const torch::Tensor& h) const {
    return parallel_residual ? x : h;
  }
  bool parallel_residual = false;  ///< BlockShape::parallel_residual
  bool shared_input_norm = false;  ///< BlockShape::shared_input_norm
  /// Sandwich layout only (null otherwise): norms of the attention and FFN outputs.
  RMSNorm attn_output_norm{nullptr}, ffn_output_norm{nullptr};
  Attention self_attn{nullptr};
  MLP mlp{nullptr};        ///< dense FFN (null with an MoE FFN)
  SparseMoE moe{nullptr};  ///< MoE FFN, registered as "mlp" (null with a dense FFN)
};
TORCH_MODULE(Block);

/// Residual updates of one routed depth with one call per operator for all its experts:
/// x [N, d] is cut into consecutive row blocks of sizes[g] rows (sum N) and block g runs
/// blocks[g] (its norms and projections); attention runs once over ctx.layout, whose
/// segments (the depth's windows) lie inside the blocks. Equal to blocks[g]->delta on
/// each block with the layout restricted to it (tests/model/test_fused_ops.cpp). The
/// blocks must share one BlockShape. Returns [N, d]. Throws lol::InputError on
/// mismatched sizes, or for several blocks of which one has an MoE FFN (an MoE block
/// runs alone: its tokens are routed per token inside it). Off the fused CPU kernels (a
/// GPU) the groups are padded to max(sizes) rows each (copies of row 0, in no segment, dropped
/// from the result) while that at most doubles the rows, so each projection is one
/// batched product (grouped_linear). (LoL paper Algorithm 1 line 16: E_{i}(s) for every window at once.)
torch::Tensor grouped_block_delta(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                                  const torch::Tensor& x, const BlockContext& ctx);

}  // namespace lol::nn
