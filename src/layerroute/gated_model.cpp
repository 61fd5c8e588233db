#include "layerroute/gated_model.h"

#include <map>

#include "baselines/attention_layout.h"
#include "layerroute/block_lora.h"
#include "util/error.h"
#include "util/random.h"

namespace lol::layerroute {

GateMode parse_gate_mode(const std::string& s, const std::string& flag) {
  if (s == "learned") return GateMode::Learned;
  if (s == "bias-only") return GateMode::BiasOnly;
  if (s == "open") return GateMode::Open;
  if (s == "closed") return GateMode::Closed;
  throw InputError(flag + " = '" + s + "': expected learned, bias-only, open or closed");
}

const char* gate_mode_name(GateMode m) {
  switch (m) {
    case GateMode::Learned: return "learned";
    case GateMode::BiasOnly: return "bias-only";
    case GateMode::Open: return "open";
    case GateMode::Closed: return "closed";
  }
  return "?";
}

int64_t layer_window(const baselines::DenseConfig& c, int64_t layer) {
  const auto a = c.layer_attention(layer);
  return a.kind == baselines::AttentionKind::Sliding ? a.window : 0;
}

void require_layerroute_base(const baselines::DenseConfig& c, const std::string& where) {
  // The gated blocks (block_lora.h) are nn::Block's: the Llama layout, Gemma's (GeGLU,
  // sandwich norms, scaled embeddings, soft-capping, the sliding layers' own RoPE),
  // OLMo 2's, GPT-2's (LayerNorms, learned positions, ungated MLP, biases) and GPT-NeoX's
  // (GPT-2's blocks with partial RoPE and parallel residuals); the
  // attention full causal or sliding-window; dense FFNs (LoRA adapts gate/up/down_proj).
  if (c.n_experts > 0)
    throw InputError(where + ": n_experts " + std::to_string(c.n_experts) +
                     " (mixture-of-experts FFNs: Mixtral, OLMoE, Qwen3-MoE): LayerRoute gates and adapts dense "
                     "decoders (LoRA on each layer's MLP projections); expected a model with dense FFNs");
  for (int64_t i = 0; i < c.n_layers; ++i)
    if (c.layer_attention(i).kind == baselines::AttentionKind::Strided)
      throw InputError(where + ": layer " + std::to_string(i) + " uses strided window attention (window " +
                       std::to_string(c.window) + ", stride " + std::to_string(c.stride) +
                       "); LayerRoute runs full causal or sliding-window layers");
}

GatedModelImpl::GatedModelImpl(baselines::DenseModel b, const LoraConfig& lc, const GateConfig& gc, uint64_t seed)
    : base(std::move(b)) {
  require_layerroute_base(base->config(), "LayerRoute base model");
  for (auto& p : base->parameters()) p.set_requires_grad(false);
  register_module("base", base);
  lora = register_module("lora", Lora(*base, lc, seed));
  gates = register_module("gates", Gates(base->config().n_layers, base->config().d_model, gc, util::derive_seed(seed, kGateSeedStream),
                                         base->embed_tokens->weight.device()));
}

GatedOutput GatedModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& doc_ids,
                                    const GatedOptions& opt) {
  const auto& c = base->config();
  baselines::check_tokens(tokens, c.vocab_size, c.max_seq_len, "LayerRoute model");
  const int64_t B = tokens.size(0), T = tokens.size(1), d = c.d_model, L = c.n_layers;
  const auto dev = base->embed_tokens->weight.device();
  auto docs = doc_ids.defined() ? doc_ids.to(dev) : torch::zeros({B, T}, torch::TensorOptions(torch::kInt64).device(dev));
  baselines::TokenLayout full(B, T, docs, dev);
  auto valid = docs >= 0;  // [B, T]
  if (opt.forced_open.defined())
    require(opt.forced_open.dim() == 2 && opt.forced_open.size(0) == B && opt.forced_open.size(1) == L,
            "LayerRoute model", "forced_open must be [batch, n_layers] = [" + std::to_string(B) + ", " +
                                    std::to_string(L) + "], got " + c10::str(opt.forced_open.sizes()));
  const auto forced = opt.forced_open.defined() ? opt.forced_open.to(dev).to(torch::kBool) : torch::Tensor();
  const LoraImpl* lo = opt.use_lora ? lora.get() : nullptr;

  // [B, T, d] (Gemma: times sqrt(d); GPT-2: + the positions' embeddings)
  auto h = base->embed_at(tokens.to(dev).reshape({B * T}), full.pos()).view({B, T, d});
  GatedOutput out;
  auto f32 = torch::TensorOptions(torch::kFloat32).device(dev);
  std::vector<torch::Tensor> scores, sigmas, opens;
  std::map<std::vector<int64_t>, std::unique_ptr<baselines::TokenLayout>> sub_layouts;

  for (int64_t i = 0; i < L; ++i) {
    auto& blk = *base->layers[i]->as<nn::Block>();
    const int64_t window = layer_window(c, i);
    auto& rope = base->layer_rope(i);  // Gemma 3's sliding layers: their own RoPE base
    torch::Tensor s, sigma, open;
    if (forced.defined()) {
      s = torch::zeros({B}, f32);
      open = forced.select(1, i);
      sigma = open.to(torch::kFloat32);
    } else if (opt.mode == GateMode::Learned || opt.mode == GateMode::BiasOnly) {
      s = gates->score(i, mean_pool(h, valid), opt.mode == GateMode::BiasOnly);
      sigma = torch::sigmoid(s);
      open = gate_open(sigma);
    } else {
      s = torch::zeros({B}, f32);
      sigma = torch::full({B}, opt.mode == GateMode::Open ? 1.0 : 0.0, f32);
      open = gate_open(sigma);
    }
    scores.push_back(s);
    sigmas.push_back(sigma);
    opens.push_back(open);
    if (opt.ste) {
      auto delta =
          block_delta_lora(blk, i, lo, h.view({B * T, d}), full.document_segments(), full.pos(), rope, window);
      auto g = (forced.defined() || opt.mode == GateMode::Open || opt.mode == GateMode::Closed) ? sigma : ste_gate(sigma);
      h = h + g.to(h.scalar_type()).view({B, 1, 1}) * delta.view({B, T, d});
      out.executed_blocks += B;
      continue;
    }
    // Skip: run the block only on the open rows.
    auto rows_t = open.nonzero().view({-1}).to(torch::kCPU);
    const int64_t n_open = rows_t.numel();
    if (n_open == 0) continue;
    out.executed_blocks += n_open;
    if (n_open == B) {
      auto delta =
          block_delta_lora(blk, i, lo, h.view({B * T, d}), full.document_segments(), full.pos(), rope, window);
      h = h + delta.view({B, T, d});
      continue;
    }
    std::vector<int64_t> rows(rows_t.data_ptr<int64_t>(), rows_t.data_ptr<int64_t>() + n_open);
    auto& lay = sub_layouts[rows];
    auto idx = rows_t.to(dev);
    if (!lay) lay = std::make_unique<baselines::TokenLayout>(n_open, T, docs.index_select(0, idx), dev);
    auto x = h.index_select(0, idx).reshape({n_open * T, d});
    auto delta = block_delta_lora(blk, i, lo, x, lay->document_segments(), lay->pos(), rope, window);
    h = h.index_add(0, idx, delta.view({n_open, T, d}));
  }
  out.logits = base->logits(base->norm(h));
  out.scores = torch::stack(scores, 1);
  out.sigma = torch::stack(sigmas, 1);
  out.open = torch::stack(opens, 1);
  return out;
}

}  // namespace lol::layerroute
