#include "nn/block.h"

#include <algorithm>
#include <string>

#include "core/index_tensor.h"
#include "core/runtime.h"
#include "util/error.h"

namespace lol::nn {

FiLMImpl::FiLMImpl(int64_t d) {
  attn_gamma = register_parameter("attn_gamma", torch::ones({d}));
  attn_beta = register_parameter("attn_beta", torch::zeros({d}));
  ffn_gamma = register_parameter("ffn_gamma", torch::ones({d}));
  ffn_beta = register_parameter("ffn_beta", torch::zeros({d}));
}

BlockImpl::BlockImpl(const BlockShape& s) {
  AttentionShape attn = s.attn;
  attn.norm_eps = s.norm_eps;  // q_norm / k_norm use the block's epsilon
  self_attn = register_module("self_attn", Attention(attn));
  if (s.moe.n_experts > 0) {
    moe = register_module("mlp", SparseMoE(s.attn.d_model, s.ffn_hidden, s.moe.n_experts, s.moe.top_k,
                                           s.moe.router_noise_std, s.moe.normalize_top_k,
                                           s.moe.shared_expert_hidden));
  } else {
    mlp = register_module("mlp", MLP(s.attn.d_model, s.ffn_hidden, s.activation, s.gated_mlp, s.mlp_bias));
  }
  if ((s.layer_norm || !s.gated_mlp || s.mlp_bias) && (s.moe.n_experts > 0 || s.sandwich_norm || !s.input_norms))
    throw InputError("block: GPT-2's LayerNorms / ungated MLP with an MoE FFN or sandwich norms are not implemented");
  const int64_t d = s.attn.d_model;
  if (s.parallel_residual && (s.sandwich_norm || !s.input_norms || s.moe.n_experts > 0))
    throw InputError("block: parallel_residual with sandwich norms, without input norms or with an MoE FFN is not "
                     "implemented (GPT-NeoX's parallel blocks have two input norms and a dense FFN)");
  parallel_residual = s.parallel_residual;
  if (s.shared_input_norm && !s.parallel_residual)
    throw InputError("block: shared_input_norm without parallel_residual: expected a parallel block (Phi's layout)");
  shared_input_norm = s.shared_input_norm;
  if (!s.input_norms && !s.sandwich_norm)
    throw InputError("block: input_norms = false without sandwich_norm: expected the output norms (OLMo 2's layout)");
  if (s.input_norms) input_layernorm = register_module("input_layernorm", RMSNorm(d, s.norm_eps, s.layer_norm));
  if (s.sandwich_norm) {
    if (s.moe.n_experts > 0) throw InputError("block: sandwich norms with an MoE FFN are not implemented");
    attn_output_norm = register_module("post_attention_layernorm", RMSNorm(d, s.norm_eps));
    if (s.input_norms)
      post_attention_layernorm = register_module("pre_feedforward_layernorm", RMSNorm(d, s.norm_eps));
    ffn_output_norm = register_module("post_feedforward_layernorm", RMSNorm(d, s.norm_eps));
  } else if (!s.shared_input_norm) {
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(d, s.norm_eps, s.layer_norm));
  }
}

torch::Tensor BlockImpl::delta(const torch::Tensor& x, const BlockContext& ctx) {
  return grouped_block_delta({this}, {x.size(0)}, x, ctx);
}

torch::Tensor BlockImpl::ffn(const torch::Tensor& h, const torch::Tensor* rows) {
  if (!is_moe()) return mlp(h);
  if (!rows || rows->size(0) == h.size(0)) return moe(h);
  return torch::zeros_like(h).index_add(0, *rows, moe(h.index_select(0, *rows)));
}

namespace {

/// The routed depth's N rows laid out as G equal groups of m = max(sizes) rows (group g's
/// rows first, then padding slots). Padding slots copy row 0: they stay finite through
/// every expert, lie in no attention segment and are dropped at the end, so they change
/// no output, and their gradient (zero) changes no gradient.
struct PaddedGroups {
  torch::Tensor slot_of_row;  ///< [N + 1] int64: padded row of each row, then G * m
  torch::Tensor source_row;   ///< [G * m] int64: row each padded row copies
};

PaddedGroups pad_groups(const std::vector<int64_t>& sizes, int64_t m, const torch::Device& dev) {
  PaddedGroups p;
  const int64_t G = int64_t(sizes.size());
  std::vector<int64_t> slot, source(size_t(G * m), 0);
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < sizes[size_t(g)]; ++j, ++row) {
      slot.push_back(g * m + j);
      source[size_t(g * m + j)] = row;
    }
  slot.push_back(G * m);  // where the layout's empty slots (row N) go
  auto t = index_tensors({&slot, &source}, dev);  // one upload
  p.slot_of_row = t[0];
  p.source_row = t[1];
  return p;
}

/// `layout` (over the N rows) re-indexed to the padded rows.
SegmentLayout pad_layout(const SegmentLayout& layout, const PaddedGroups& p, int64_t padded_rows) {
  SegmentLayout out;
  out.n_tokens = padded_rows;
  out.n_seg = layout.n_seg;
  out.max_len = layout.max_len;
  out.gather = p.slot_of_row.index_select(0, layout.gather);
  out.scatter = torch::full({padded_rows}, layout.n_seg * layout.max_len, p.slot_of_row.options())
                    .index_copy_(0, p.slot_of_row.narrow(0, 0, layout.n_tokens), layout.scatter);
  out.slot_valid = layout.slot_valid;
  return out;
}

torch::Tensor block_delta_body(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                               const torch::Tensor& x, const BlockContext& ctx);

}  // namespace

torch::Tensor grouped_block_delta(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                                  const torch::Tensor& x, const BlockContext& ctx) {
  if (blocks.empty()) throw InputError("grouped_block_delta: no blocks");
  check_groups(sizes, x.size(0), blocks.size(), "grouped_block_delta");
  const int64_t G = int64_t(blocks.size()), N = x.size(0);
  const int64_t m = G > 1 ? *std::max_element(sizes.begin(), sizes.end()) : N;
  // Off the fused CPU kernels (a GPU) several experts run as equal, padded groups: every
  // projection is then one batched product (nn::grouped_linear) instead of one per expert.
  // Only while the padding at most doubles the rows (the FLOPs an unbalanced routing
  // would waste); the per-expert products otherwise.
  if (G > 1 && !cpu_kernel_device(x) && !blocks[0]->is_moe() && N > 0 && G * m <= 2 * N &&
      !equal_groups(sizes)) {
    const auto p = pad_groups(sizes, m, x.device());
    const auto pos = ctx.pos->index_select(0, p.source_row);
    const auto layout = pad_layout(*ctx.layout, p, G * m);
    torch::Tensor kv;
    if (ctx.key_visible) kv = ctx.key_visible->index_select(0, p.source_row);
    BlockContext padded = ctx;
    padded.pos = &pos;
    padded.layout = &layout;
    padded.key_visible = ctx.key_visible ? &kv : nullptr;
    const auto delta =
        block_delta_body(blocks, std::vector<int64_t>(size_t(G), m), x.index_select(0, p.source_row), padded);
    return delta.index_select(0, p.slot_of_row.narrow(0, 0, N));
  }
  return block_delta_body(blocks, sizes, x, ctx);
}

namespace {

torch::Tensor block_delta_body(const std::vector<BlockImpl*>& blocks, const std::vector<int64_t>& sizes,
                               const torch::Tensor& x, const BlockContext& ctx) {
  std::vector<torch::Tensor> ln1, ln2, ln_attn_out, ln_ffn_out;
  std::vector<AttentionImpl*> attn;
  std::vector<MLPImpl*> mlp;
  const bool moe = blocks.at(0)->is_moe();
  for (auto* b : blocks) {
    if (b->is_moe() && blocks.size() > 1)
      throw InputError("grouped_block_delta: " + std::to_string(blocks.size()) +
                       " blocks with an MoE FFN among them: expected an MoE block to run alone");
    if (b->input_layernorm) {
      ln1.push_back(b->input_layernorm->weight);
      if (b->post_attention_layernorm) ln2.push_back(b->post_attention_layernorm->weight);
    }
    if (b->attn_output_norm) {
      ln_attn_out.push_back(b->attn_output_norm->weight);
      ln_ffn_out.push_back(b->ffn_output_norm->weight);
    }
    attn.push_back(b->self_attn.get());
    if (!moe) mlp.push_back(b->mlp.get());
  }
  if (!ln1.empty() && ln1.size() != blocks.size())
    throw InputError("grouped_block_delta: blocks with and without input norms in one group");
  const bool input_norms = !ln1.empty();
  const double eps = blocks.at(0)->attn_output_norm ? blocks[0]->attn_output_norm->eps : blocks[0]->input_layernorm->eps;
  // FiLM (gamma_s * RMSNorm_s(x) + beta_s) runs inside the norms' fused kernel.
  const FiLMImpl* f = ctx.film;
  if (f && !input_norms) throw InputError("grouped_block_delta: FiLM needs the blocks' input norms");
  // GPT-2's LayerNorms (with biases): one block per group, no FiLM (modulated refuses it).
  const bool layer_norm = input_norms && blocks[0]->input_layernorm->is_layer_norm();
  if (layer_norm && blocks.size() > 1) throw InputError("grouped_block_delta: LayerNorm blocks run one per group");
  auto h = layer_norm    ? blocks[0]->input_layernorm->modulated(x, f ? f->attn_gamma : torch::Tensor(), torch::Tensor())
           : input_norms ? rms_norm(x, ln1, sizes, f ? f->attn_gamma : torch::Tensor(),
                                    f ? f->attn_beta : torch::Tensor(), eps, ctx.stacks)
                         : x;
  torch::Tensor kv = ctx.key_visible ? *ctx.key_visible : torch::Tensor();
  auto a = grouped_attention(attn, sizes, h, *ctx.pos, *ctx.layout, kv, *ctx.rope, ctx.pos_bound, ctx.stacks);
  if (ln_attn_out.size() != blocks.size() && !ln_attn_out.empty())
    throw InputError("grouped_block_delta: blocks with and without sandwich norms in one group");
  const bool sandwich = !ln_attn_out.empty();
  const torch::Tensor none;
  if (sandwich) a = rms_norm(a, ln_attn_out, sizes, none, none, eps, ctx.stacks);
  for (auto* b : blocks)
    if (b->parallel_residual != blocks[0]->parallel_residual || b->shared_input_norm != blocks[0]->shared_input_norm)
      throw InputError("grouped_block_delta: parallel and sequential blocks (or shared and own FFN norms) in one group");
  const bool shared = blocks[0]->shared_input_norm;
  if (shared && f) throw InputError("grouped_block_delta: FiLM with a shared input norm is not implemented");
  // The FFN reads x + a, or x itself in a parallel block (GPT-NeoX), or the attention's
  // normalised input h (Phi).
  const torch::Tensor r = blocks[0]->parallel_residual ? x : x + a;
  auto m_in = shared        ? h
              : layer_norm  ? blocks[0]->post_attention_layernorm->forward(r)
              : input_norms ? rms_norm(r, ln2, sizes, f ? f->ffn_gamma : none, f ? f->ffn_beta : none, eps, ctx.stacks)
                            : r;
  auto m = moe ? blocks[0]->ffn(m_in, ctx.ffn_rows) : grouped_mlp(mlp, sizes, m_in, ctx.stacks);
  if (sandwich) m = rms_norm(m, ln_ffn_out, sizes, none, none, eps, ctx.stacks);
  return a + m;
}

}  // namespace

}  // namespace lol::nn
