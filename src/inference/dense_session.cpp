#include "inference/dense_session.h"

#include <algorithm>

#include "core/index_tensor.h"
#include "baselines/dense_model.h"
#include "inference/block_step.h"
#include "inference/feed_checks.h"
#include "inference/ops.h"
#include "nn/mask_fill.h"
#include "nn/rope.h"
#include "nn/block.h"
#include "util/error.h"

namespace lol::inference {

PackedModel pack_dense_model(baselines::DenseModelImpl& m, int64_t positions) {
  const auto& c = m.config();
  if (c.attention == "strided")
    throw InputError("dense model: attention \"" + c.attention +
                     "\": cached decoding implements full causal and sliding-window attention only");
  PackedModel p;
  p.attn_head_dim = c.effective_head_dim();
  p.attn_rotary_dim = c.rotary_dim();
  LoLConfig& k = p.cfg;  // the fields the decoder reads; the rest describes "no routed core"
  k.vocab_size = c.vocab_size;
  k.d_model = c.d_model;
  k.n_heads = c.n_heads;
  k.n_kv_heads = c.n_kv_heads;
  k.ffn_hidden = c.ffn_hidden;
  k.n_prelude = c.n_layers;
  k.n_coda = 0;
  k.library_size = 0;
  k.core_depth = 0;
  k.rope_theta = c.rope_theta;
  p.rope_scaling = c.rope_scaling;
  k.norm_eps = c.norm_eps;
  k.tie_embeddings = c.tie_word_embeddings;
  k.max_seq_len = c.max_seq_len;
  p.trained_depth = 0;
  p.embed = m.embed_tokens->weight.detach().clone();
  p.head = m.lm_head ? m.lm_head->weight.detach().clone() : p.embed;
  if (m.lm_head && m.lm_head->bias.defined()) p.head_bias = m.lm_head->bias.detach().clone();  // (Phi)
  p.norm = m.norm->weight.detach().clone();
  if (m.norm->is_layer_norm()) p.norm_bias = m.norm->bias.detach().clone();
  if (m.embed_positions) p.pos_embed = m.embed_positions->weight.detach().clone();
  for (auto& layer : *m.layers) p.prelude.push_back(pack_block(*layer->as<nn::Block>()));
  p.rope_local_theta = c.rope_local_theta;
  for (int64_t i = 0; i < c.n_layers; ++i) p.prelude[size_t(i)].local_rope = c.local_rope(i);
  p.embed_scale = baselines::embedding_scale(c);
  p.final_softcap = c.final_logit_softcap;
  p.embed_multiplier = c.embedding_multiplier;
  p.logits_scaling = c.logits_scaling;
  p.logit_scale = c.logit_scale;
  p.ensure_rope(positions);
  return p;
}

DenseDecodeSession::DenseDecodeSession(baselines::DenseModel model, const DenseSessionOptions& opt) {
  c10::InferenceMode guard;
  if (opt.batch_size < 1) throw InputError("batch size " + std::to_string(opt.batch_size) + ": expected >= 1");
  max_len_ = opt.max_len > 0 ? opt.max_len : model->config().max_seq_len;
  if (max_len_ < 1 || max_len_ > (int64_t(1) << 24))
    throw InputError("max_len " + std::to_string(max_len_) + ": expected 1 <= max_len <= 2^24");
  w_ = pack_dense_model(*model, max_len_);
  if (w_.pos_embed.defined() && max_len_ > w_.pos_embed.size(0))
    throw InputError("max_len " + std::to_string(max_len_) + ": the model's learned position embeddings cover " +
                     std::to_string(w_.pos_embed.size(0)) + " positions (max_seq_len)");
  const auto& c = w_.cfg;
  const int64_t cap = std::min<int64_t>(max_len_, 64);
  for (int64_t i = 0; i < c.n_prelude; ++i) cache_.emplace_back(opt.batch_size, c.n_kv_heads, w_.head_dim(), cap, w_.options());
  for (int64_t i = 0; i < c.n_prelude; ++i) {
    const auto a = model->config().layer_attention(i);
    window_.push_back(a.kind == baselines::AttentionKind::Sliding ? a.window : 0);
  }
  len_.assign(opt.batch_size, 0);
  if (w_.rope_scaling.type == "longrope") history_.assign(opt.batch_size, {});
  if (opt.cpu_kernels) cpu_ = CpuDecoder::create(w_);
}

void DenseDecodeSession::reset(int64_t row) {
  if (row < 0 || row >= batch_size())
    throw InputError("row " + std::to_string(row) + ": expected 0 <= row < batch size " + std::to_string(batch_size()));
  len_[row] = 0;  // slots past the row's length are never read; they are overwritten
  if (!history_.empty()) history_[row].clear();
}

torch::Tensor DenseDecodeSession::step(const std::vector<int64_t>& tokens) {
  check_step_tokens(int64_t(tokens.size()), batch_size());
  std::vector<DenseRowInput> in(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) in[r] = {int64_t(r), {tokens[r]}};
  return feed(in);
}

torch::Tensor DenseDecodeSession::feed(const std::vector<DenseRowInput>& inputs, bool all_logits) {
  c10::InferenceMode guard;
  const auto& c = w_.cfg;
  const auto opt = w_.options();
  const auto dev = opt.device();
  // ---- validate and lay out the new tokens: one causal segment per input
  std::vector<int64_t> tokens, pos, rows, offset{0}, replayed, base;
  std::vector<const std::vector<int64_t>*> fed;
  std::vector<uint8_t> seen(batch_size(), 0);
  for (const auto& in : inputs) {
    if (in.tokens.empty()) continue;
    check_feed_row(in.row, seen);
    const int64_t n = int64_t(in.tokens.size());
    check_feed_tokens(in.row, in.tokens, len_[in.row], max_len_, c.vocab_size);
    // LongRoPE's switch (see feed's comment): the row's cached tokens are fed again.
    const int64_t original = w_.rope_scaling.original_max_position_embeddings;
    const bool replay = !history_.empty() && len_[in.row] > 0 && len_[in.row] <= original && len_[in.row] + n > original;
    const int64_t have = replay ? 0 : len_[in.row];  // the segment's first position
    if (replay) tokens.insert(tokens.end(), history_[in.row].begin(), history_[in.row].end());
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
    for (int64_t p = have; pos.size() < tokens.size(); ++p) pos.push_back(p);
    replayed.push_back(replay ? int64_t(history_[in.row].size()) : 0);
    base.push_back(have);
    fed.push_back(&in.tokens);
    rows.push_back(in.row);
    offset.push_back(int64_t(tokens.size()));
  }
  const int64_t N = int64_t(tokens.size()), A = int64_t(rows.size());
  if (A == 0) return torch::zeros({0, c.vocab_size}, opt);
  const bool fast = cpu_ && N == A;  // a decoding step: the fused kernels apply

  std::vector<AttnSegment> segs(A);
  std::vector<DecodeToken> toks(fast ? N : 0);
  int64_t need = 0;
  for (int64_t a = 0; a < A; ++a) {
    segs[a] = {rows[a], base[a], offset[a], offset[a + 1] - offset[a]};
    if (fast) toks[a] = {rows[a], pos[a], base[a], true};
    need = std::max(need, base[a] + segs[a].count);
  }
  // Sliding layers: the same tokens, each seeing only its last W keys.
  const int64_t W = window_.empty() ? 0 : *std::max_element(window_.begin(), window_.end());
  std::vector<DecodeToken> toks_w;
  if (fast && W > 0) {
    toks_w = toks;
    for (auto& t : toks_w) t.first = std::max<int64_t>(0, t.base + 1 - W);
  }
  AttnPlan plan, plan_w;
  std::pair<torch::Tensor, torch::Tensor> rope, rope_local;
  torch::Tensor tokens_t, pos_t;
  if (!fast) {
    plan = AttnPlan::build(segs, N, nullptr, opt);
    if (W > 0) plan_w = AttnPlan::build(segs, N, nullptr, opt, W);
    // Each row's sequence length (its last position + 1) picks longrope's factors.
    std::vector<int64_t> long_rows;
    for (int64_t a = 0; a < A; ++a)
      if (w_.rope_scaling.uses_long_factors(base[a] + segs[a].count))
        for (int64_t i = offset[a]; i < offset[a + 1]; ++i) long_rows.push_back(i);
    const auto t = index_tensors({&tokens, &pos, &long_rows}, dev);  // one upload on a GPU
    tokens_t = t[0];
    pos_t = t[1];
    auto rope_rows = w_.rope_table.index_select(0, t[1]);
    if (!long_rows.empty())  // those tokens' rows from the long table
      rope_rows.index_copy_(0, t[2], w_.rope_table_long.index_select(0, t[1].index_select(0, t[2])));
    rope = nn::rotation_factors(rope_rows);
    if (w_.rope_table_local.defined()) rope_local = nn::rotation_factors(w_.rope_table_local.index_select(0, t[1]));
  } else {
    tokens_t = index_tensor(tokens, dev);
  }
  for (auto& kv : cache_) kv.reserve(need);

  torch::Tensor x = w_.embed.index_select(0, tokens_t);
  x = baselines::scale_embedding_rows(x, w_.embed_scale);  // Gemma: times sqrt(d)
  x = baselines::multiply_embedding_rows(x, w_.embed_multiplier);  // Granite
  if (w_.pos_embed.defined()) {  // GPT-2's learned positions
    if (!pos_t.defined()) pos_t = index_tensor(pos, dev);
    x = x + w_.pos_embed.index_select(0, pos_t);
  }
  for (int64_t l = 0; l < c.n_prelude; ++l) {
    const bool sliding = window_[l] > 0;
    const PackedBlock& b = w_.prelude[l];
    if (fast) {
      auto y = torch::empty_like(x);
      cpu_->block(b, nullptr, x, y, sliding ? toks_w.data() : toks.data(), nullptr, cache_[l]);
      x = y;
    } else {
      x = x + block_delta({{&b, {}}}, nullptr, x, cache_[l], sliding ? plan_w : plan, b.local_rope ? rope_local : rope, c);
    }
  }
  for (int64_t a = 0; a < A; ++a) {
    len_[rows[a]] = base[a] + offset[a + 1] - offset[a];
    if (!history_.empty()) history_[rows[a]].insert(history_[rows[a]].end(), fed[a]->begin(), fed[a]->end());
  }
  torch::Tensor h = x;
  const bool any_replayed = std::any_of(replayed.begin(), replayed.end(), [](int64_t r) { return r > 0; });
  if (!all_logits && N != A) {
    std::vector<int64_t> last(A);
    for (int64_t a = 0; a < A; ++a) last[a] = offset[a + 1] - 1;
    h = x.index_select(0, index_tensor(last, dev));
  } else if (all_logits && any_replayed) {  // the new tokens' rows only
    std::vector<int64_t> fresh;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t i = offset[a] + replayed[a]; i < offset[a + 1]; ++i) fresh.push_back(i);
    h = x.index_select(0, index_tensor(fresh, dev));
  }
  const auto hn = w_.norm_bias.defined() ? torch::layer_norm(h, {w_.norm.size(0)}, w_.norm, w_.norm_bias, c.norm_eps)
                                         : rms_norm(h, w_.norm, c.norm_eps);
  return baselines::final_logits(dense(hn, w_.head, w_.head_bias), w_.logit_scale, w_.logits_scaling,
                                 w_.final_softcap);
}

int64_t DenseDecodeSession::cache_bytes() const {
  int64_t b = 0;
  for (const auto& kv : cache_) b += kv.bytes();
  return b;
}

}  // namespace lol::inference
