#include "inference/packed_model.h"

#include "lol/model.h"
#include "nn/block.h"
#include "nn/mlp.h"
#include "nn/rope.h"

namespace lol::inference {

namespace {

std::vector<PackedBlock> pack_list(torch::nn::ModuleList& list) {
  std::vector<PackedBlock> out;
  for (auto& m : *list) out.push_back(pack_block(*m->as<nn::Block>()));
  return out;
}

/// The library's blocks, each member stacked by expert into `out` ([L, ...], allocated
/// once; block e's tensors become views of row e), so building it holds one block's
/// copies at a time besides the stack. An MoE library is packed per block (out stays
/// undefined).
std::vector<PackedBlock> pack_library(torch::nn::ModuleList& list, PackedLibrary& out) {
  std::vector<PackedBlock> lib;
  const int64_t L = int64_t(list->size());
  for (int64_t e = 0; e < L; ++e) {
    PackedBlock b = pack_block(*list[size_t(e)]->as<nn::Block>());
    if (!b.is_moe()) {
      auto place = [&](torch::Tensor PackedBlock::*member, torch::Tensor PackedLibrary::*stacked) {
        torch::Tensor& t = b.*member;
        if (!t.defined()) return;
        torch::Tensor& s = out.*stacked;
        if (!s.defined()) {
          auto sizes = t.sizes().vec();
          sizes.insert(sizes.begin(), L);
          s = torch::empty(sizes, t.options());
        }
        s.select(0, e).copy_(t);
        t = s.select(0, e);
      };
      place(&PackedBlock::ln1, &PackedLibrary::ln1);
      place(&PackedBlock::ln2, &PackedLibrary::ln2);
      place(&PackedBlock::w_qkv, &PackedLibrary::w_qkv);
      place(&PackedBlock::b_qkv, &PackedLibrary::b_qkv);
      place(&PackedBlock::w_o, &PackedLibrary::w_o);
      place(&PackedBlock::w_gate_up, &PackedLibrary::w_gate_up);
      place(&PackedBlock::w_down, &PackedLibrary::w_down);
    }
    lib.push_back(std::move(b));
  }
  return lib;
}

}  // namespace

PackedBlock pack_block(nn::BlockImpl& b) {
  PackedBlock p;
  auto& at = *b.self_attn;
  if (b.input_layernorm) {  // (OLMo 2/3's blocks have only the output norms)
    p.ln1 = b.input_layernorm->weight.detach().clone();
    if (b.input_layernorm->is_layer_norm()) p.ln1_b = b.input_layernorm->bias.detach().clone();  // GPT-2
    if (b.post_attention_layernorm) {  // (Phi: the FFN reads ln1's output)
      p.ln2 = b.post_attention_layernorm->weight.detach().clone();
      if (b.post_attention_layernorm->is_layer_norm()) p.ln2_b = b.post_attention_layernorm->bias.detach().clone();
    }
  }
  if (at.o_proj->bias.defined()) p.b_o = at.o_proj->bias.detach().clone();
  p.rope = at.shape.rope;
  p.parallel_residual = b.parallel_residual;
  p.shared_input_norm = b.shared_input_norm;
  p.w_qkv = torch::cat({at.q_proj->weight, at.k_proj->weight, at.v_proj->weight}, 0).detach().contiguous();
  if (at.q_proj->bias.defined())
    p.b_qkv = torch::cat({at.q_proj->bias, at.k_proj->bias, at.v_proj->bias}, 0).detach().contiguous();
  p.w_o = at.o_proj->weight.detach().clone();
  p.attn_softcap = at.shape.softcap;
  if (at.q_norm) {
    p.q_norm = at.q_norm->weight.detach().clone();
    p.k_norm = at.k_norm->weight.detach().clone();
  }
  if (b.attn_output_norm) {
    p.ln_attn_out = b.attn_output_norm->weight.detach().clone();
    p.ln_ffn_out = b.ffn_output_norm->weight.detach().clone();
  }
  if (!b.is_moe()) {
    auto& mlp = *b.mlp;
    p.gated_mlp = mlp.gated();
    p.w_gate_up = (p.gated_mlp ? torch::cat({mlp.gate_proj->weight, mlp.up_proj->weight}, 0) : mlp.up_proj->weight)
                      .detach()
                      .contiguous();
    if (mlp.up_proj->bias.defined())
      p.b_gate_up = (p.gated_mlp ? torch::cat({mlp.gate_proj->bias, mlp.up_proj->bias}, 0) : mlp.up_proj->bias)
                        .detach()
                        .contiguous();
    p.w_down = mlp.down_proj->weight.detach().clone();
    if (mlp.down_proj->bias.defined()) p.b_down = mlp.down_proj->bias.detach().clone();
    p.act = mlp.act;
    return p;
  }
  auto& moe = *b.moe;
  p.moe_gate = moe.gate->weight.detach().clone();
  // (in the routing probabilities' dtype, nn::routing_probabilities: float32 for a 16-bit model)
  p.moe_bias = moe.balance_bias.detach().to(torch::promote_types(p.moe_gate.scalar_type(), torch::kFloat)).clone();
  p.top_k = moe.top_k();
  p.moe_normalize = moe.normalize_top_k();
  if (moe.shared_expert) {
    auto& se = *moe.shared_expert;
    p.shared_gate_up = torch::cat({se.gate_proj->weight, se.up_proj->weight}, 0).detach().contiguous();
    p.shared_down = se.down_proj->weight.detach().clone();
    p.shared_gate = moe.shared_expert_gate->weight.detach().clone();
  }
  for (auto& e : *moe.experts) {
    auto* mlp = e->as<nn::MLP>();
    p.expert_gate_up.push_back(torch::cat({mlp->gate_proj->weight, mlp->up_proj->weight}, 0).detach().contiguous());
    p.expert_down.push_back(mlp->down_proj->weight.detach().clone());
  }
  return p;
}


PackedModel PackedModel::from(LoLModelImpl& m, int64_t positions) {
  PackedModel p;
  p.cfg = m.config();
  p.trained_depth = m.active_depth();
  auto& body = *m.model;
  p.embed = body.embed_tokens->weight.detach().clone();
  p.head = p.cfg.tie_embeddings ? p.embed : m.lm_head->weight.detach().clone();
  p.norm = body.norm->weight.detach().clone();
  p.prelude = pack_list(body.prelude);
  p.library = pack_library(body.library, p.stacked);
  p.coda = pack_list(body.coda);
  for (int64_t d = 0; d < p.cfg.core_depth; ++d) {
    auto* f = body.film[d]->as<nn::FiLM>();
    p.film.push_back({f->attn_gamma.detach().clone(), f->attn_beta.detach().clone(), f->ffn_gamma.detach().clone(),
                      f->ffn_beta.detach().clone()});
    if (p.cfg.untied_router)
      p.router.push_back(body.routers[d]->as<torch::nn::Linear>()->weight.detach().clone());
    else
      p.router.push_back(d == 0 ? body.router->weight.detach().clone() : p.router[0]);
  }
  p.depth_embed = body.depth_embed.detach().clone();
  p.balance_bias = body.balance_bias.detach().to(p.embed.scalar_type()).clone();
  p.ensure_rope(positions);
  return p;
}

void PackedModel::ensure_rope(int64_t positions) {
  if (rope_table.defined() && rope_table.size(0) >= positions) return;
  // The table of nn::RoPE (float32, then cast), so values match bit for bit.
  nn::check_rope_positions(rope_scaling, positions);
  const int64_t rows = std::max<int64_t>(positions, 1);
  const int64_t r = rotary_dim();
  rope_table = nn::rope_rotation_table(r, cfg.rope_theta, rope_scaling, rows, embed.scalar_type(), embed.device());
  if (rope_scaling.uses_long_factors(rows))
    rope_table_long = nn::rope_rotation_table(r, cfg.rope_theta, rope_scaling, rows, embed.scalar_type(),
                                              embed.device(), rows);
  if (rope_local_theta > 0)
    rope_table_local = nn::rope_rotation_table(r, rope_local_theta, {}, rows, embed.scalar_type(), embed.device());
}

}  // namespace lol::inference
