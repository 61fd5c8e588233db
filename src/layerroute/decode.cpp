#include "layerroute/decode.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/finite.h"
#include "inference/token_chooser.h"
#include "layerroute/block_lora.h"
#include "nn/attention.h"
#include "util/error.h"

namespace lol::layerroute {

Generation generate_gated(GatedModelImpl& m, const std::vector<int64_t>& prompt, int64_t new_tokens, GateMode mode,
                          bool use_lora) {
  GatedGenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.mode = mode;
  o.use_lora = use_lora;
  return generate_gated(m, prompt, o);
}

Generation generate_gated(GatedModelImpl& m, const std::vector<int64_t>& prompt, const GatedGenerateOptions& opt) {
  const auto& c = m.base->config();
  const int64_t new_tokens = opt.max_new_tokens;
  const GateMode mode = opt.mode;
  require(!prompt.empty(), "layerroute generate", "empty prompt");
  require(new_tokens >= 0, "layerroute generate", "new_tokens must be >= 0");
  inference::validate_sampling(opt.sampling, "layerroute generate");
  const int64_t P = int64_t(prompt.size()), maxlen = P + new_tokens;
  require(maxlen <= c.max_seq_len, "layerroute generate",
          "prompt (" + std::to_string(P) + ") + new tokens (" + std::to_string(new_tokens) + ") exceeds max_seq_len " +
              std::to_string(c.max_seq_len));
  for (auto t : prompt)
    require(t >= 0 && t < c.vocab_size, "layerroute generate", "token id " + std::to_string(t) + " outside the vocabulary");
  c10::InferenceMode im;
  const auto t0 = std::chrono::steady_clock::now();
  const auto dev = m.base->embed_tokens->weight.device();
  const LoraImpl* lo = opt.use_lora ? m.lora.get() : nullptr;
  const int64_t L = c.n_layers;
  auto iopt = torch::TensorOptions(torch::kInt64).device(dev);
  Generation g;
  g.open.assign(size_t(L), 0);

  // Prefill: decide each gate from the prompt states entering its block.
  auto pos = torch::arange(P, iopt);
  auto h = m.base->embed_at(torch::tensor(prompt, iopt), pos);  // [P, d] (Gemma: times sqrt(d); GPT-2: + positions)
  std::vector<torch::Tensor> kc(static_cast<size_t>(L)), vc(static_cast<size_t>(L));
  // Each layer's sliding window (0: full attention), and the masks of one call: one per
  // distinct window, built when a layer first needs it.
  std::vector<int64_t> window(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) window[size_t(i)] = layer_window(c, i);
  std::map<int64_t, torch::Tensor> masks;
  const auto mask_of = [&](int64_t i, int64_t n, int64_t p0) -> const torch::Tensor& {
    auto& t = masks[window[size_t(i)]];
    if (!t.defined()) t = cached_attention_mask(n, p0, window[size_t(i)], dev);
    return t;
  };

  // Gate input: the mean over the prompt's tokens, pooled as in the batched forward.
  const auto valid = torch::ones({1, P}, torch::TensorOptions(torch::kBool).device(dev));
  for (int64_t i = 0; i < L; ++i) {
    bool open = mode == GateMode::Open;
    if (mode == GateMode::Learned || mode == GateMode::BiasOnly)
      open = gate_open(torch::sigmoid(m.gates->score(i, mean_pool(h.unsqueeze(0), valid), mode == GateMode::BiasOnly)))
                 .item<bool>();
    if (!open) continue;
    g.open[size_t(i)] = 1;
    ++g.executed_layers;
    auto& blk = *m.base->layers[i]->as<nn::Block>();
    const auto& s = blk.self_attn->shape;
    torch::Tensor q, k, v;
    block_qkv(blk, i, lo, blk.attn_input(h), pos, m.base->layer_rope(i), q, k, v);
    kc[size_t(i)] = torch::empty({1, s.n_kv_heads, maxlen, s.head_dim}, h.options());
    vc[size_t(i)] = torch::empty({1, s.n_kv_heads, maxlen, s.head_dim}, h.options());
    kc[size_t(i)].narrow(2, 0, P).copy_(k.permute({1, 0, 2}).unsqueeze(0));
    vc[size_t(i)].narrow(2, 0, P).copy_(v.permute({1, 0, 2}).unsqueeze(0));
    g.cache_bytes += 2 * kc[size_t(i)].numel() * int64_t(kc[size_t(i)].element_size());
    auto o = nn::masked_attention(q.permute({1, 0, 2}).unsqueeze(0).contiguous(), kc[size_t(i)].narrow(2, 0, P),
                                  vc[size_t(i)].narrow(2, 0, P),
                                  mask_of(i, P, 0), s.softcap);  // [1, H, P, hd]
    auto a = block_o(blk, i, lo, o.squeeze(0).permute({1, 0, 2}).reshape({P, s.n_heads * s.head_dim}));
    const auto y = h + a;
    h = y + block_mlp(blk, i, lo, blk.ffn_source(h, y));
  }
  if (new_tokens == 0) {  // prefill only: the gate decisions and the prompt's pass through the open layers
    g.prefill_seconds = g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return g;
  }
  inference::TokenChooser chooser(prompt, c.vocab_size, opt.sampling, opt.seed, opt.stop_tokens);
  const auto choose = [&](const torch::Tensor& logits, int64_t t) {
    const int64_t id = chooser.choose(logits, "layerroute generation: the logits for new token " + std::to_string(t));
    g.tokens.push_back(id);
    if (opt.on_token) opt.on_token(id);
    g.stopped = chooser.stopped();
    return id;
  };
  int64_t tok = choose(m.base->logits(m.base->norm(h.narrow(0, P - 1, 1))), 1);  // [1, V]
  g.prefill_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // n tokens (ids [n]) at positions p0 .. p0 + n - 1 through the open layers only (the
  // gates are decided), their keys and values written to the caches: -> states [n, d].
  const auto pass = [&](const torch::Tensor& ids, int64_t p0) {
    const int64_t n = ids.size(0);
    auto pp = torch::arange(p0, p0 + n, iopt);
    auto x = m.base->embed_at(ids, pp);  // (Gemma: times sqrt(d); GPT-2: + positions)
    masks.clear();
    for (int64_t i = 0; i < L; ++i) {
      if (!g.open[size_t(i)]) continue;
      auto& blk = *m.base->layers[i]->as<nn::Block>();
      const auto& s = blk.self_attn->shape;
      torch::Tensor q, k, v;
      block_qkv(blk, i, lo, blk.attn_input(x), pp, m.base->layer_rope(i), q, k, v);
      kc[size_t(i)].narrow(2, p0, n).copy_(k.permute({1, 0, 2}).unsqueeze(0));
      vc[size_t(i)].narrow(2, p0, n).copy_(v.permute({1, 0, 2}).unsqueeze(0));
      auto o = nn::masked_attention(q.permute({1, 0, 2}).unsqueeze(0).contiguous(), kc[size_t(i)].narrow(2, 0, p0 + n),
                                    vc[size_t(i)].narrow(2, 0, p0 + n),
                                    mask_of(i, n, p0), s.softcap);  // [1, H, n, hd]
      auto a = block_o(blk, i, lo, o.squeeze(0).permute({1, 0, 2}).reshape({n, s.n_heads * s.head_dim}));
      const auto y = x + a;
      x = y + block_mlp(blk, i, lo, blk.ffn_source(x, y));
    }
    return x;
  };

  // Decoding: one token at a time through the open layers only.
  const auto& scaling = c.rope_scaling;
  for (int64_t t = 1; t < new_tokens && !g.stopped; ++t) {
    const int64_t p = P + t - 1;  // position of the token being fed
    torch::Tensor x;
    if (scaling.uses_long_factors(p + 1) && !scaling.uses_long_factors(p)) {
      // LongRoPE's switch: the sequence is recomputed with the long factors, as
      // transformers' Phi3ForCausalLM drops its cache there (inference/dense_session.h).
      std::vector<int64_t> seq(prompt);
      seq.insert(seq.end(), g.tokens.begin(), g.tokens.end());
      x = pass(torch::tensor(seq, iopt), 0).narrow(0, p, 1);
    } else {
      x = pass(torch::full({1}, tok, iopt), p);  // [1, d]
    }
    tok = choose(m.base->logits(m.base->norm(x)), t + 1);  // [1, V]
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

}  // namespace lol::layerroute
