// The batched generation loop shared by the LoL decoder (generate.cpp) and the dense /
// Hugging Face decoder (dense_generate.cpp): rows of a KV-cached session take prompts
// in a given order, prompts are prefilled together (chunk by chunk), then every live
// row decodes one token per step; a row that stops takes the next prompt at once
// (continuous batching) or, with GenerateOptions::refill = false, once all rows have
// finished ("waves"). Token choice uses sequence_rng(seed, prompt index), so results
// do not depend on the batch size or the order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/finite.h"
#include "inference/generate.h"
#include "inference/sampling.h"

namespace lol::inference {

/// Runs generation for the prompts listed in `order` (prompt indices; every index in
/// [0, n_prompts) once) over `rows` session rows. `Session` is a small adapter with:
///   int64_t prompt_size(int64_t prompt)                 tokens of that prompt
///   const std::vector<int64_t>& prompt_tokens(int64_t prompt)  its token ids
///   void start(int64_t row, int64_t prompt)             reset `row` for `prompt`
///   void queue_prefill(int64_t row, int64_t prompt, int64_t begin, int64_t end)
///                                                       feed prompt tokens [begin, end) next
///   void queue_decode(int64_t row, int64_t token)       feed one generated token next
///   at::Tensor feed()                                   run the queued inputs (in queue order),
///                                                       clear the queue; logits [n_queued, vocab]
///                                                       of each input's last token
///   void finish(int64_t row, Generation& g)             `row`'s sequence ended (e.g. copy its trace)
/// Returns one Generation per prompt, in prompt order. The caller validates options.
/// Throws NonFiniteError when a row's logits hold NaN or Inf (nothing is sampled from them).
template <class Session>
std::vector<Generation> run_batched_generation(Session& s, int64_t rows, const std::vector<int64_t>& order,
                                               const GenerateOptions& opt) {
  const int64_t P = int64_t(order.size()), B = rows;
  std::vector<Generation> out(P);
  if (opt.max_new_tokens == 0 || P == 0) return out;
  std::vector<std::mt19937_64> rng(P);
  for (int64_t i = 0; i < P; ++i) rng[i] = sequence_rng(opt.seed, uint64_t(i));
  std::vector<int64_t> owner(B, -1);    // prompt index held by each row
  std::vector<int64_t> fed(B, 0);       // prompt tokens fed so far (prefill progress)
  std::vector<int64_t> pending(B, -1);  // last chosen token, to be fed next
  int64_t next = 0;
  // Repetition penalty: the distinct token ids of each sequence so far (sorted).
  const bool penalize = opt.sampling.repetition_penalty != 1.0;
  std::vector<std::vector<int64_t>> seen(penalize ? P : 0);

  // Chooses a token for each queued row from its logits row; finishes rows that stop.
  auto choose = [&](const std::vector<int64_t>& chosen_rows, const at::Tensor& logits) {
    auto lf = logits.to(at::kCPU, at::kFloat).contiguous();
    if (penalize && lf.is_same(logits)) lf = lf.clone();  // penalised in place below
    const int64_t V = lf.size(1);
    float* base = lf.data_ptr<float>();
    for (size_t j = 0; j < chosen_rows.size(); ++j) {
      const int64_t row = chosen_rows[j], i = owner[row];
      Generation& g = out[i];
      float* row_logits = base + int64_t(j) * V;
      if (!all_finite(row_logits, V))
        throw_non_finite("generation: the logits of prompt " + std::to_string(i) + " for new token " +
                             std::to_string(g.tokens.size() + 1),
                         logits.scalar_type());
      if (penalize) {
        if (g.tokens.empty()) {
          seen[i] = s.prompt_tokens(i);
          std::sort(seen[i].begin(), seen[i].end());
          seen[i].erase(std::unique(seen[i].begin(), seen[i].end()), seen[i].end());
        }
        apply_repetition_penalty(row_logits, V, seen[i], opt.sampling.repetition_penalty);
      }
      const int64_t tok = sample_token(row_logits, V, opt.sampling, rng[i]);
      if (penalize) {
        auto at_tok = std::lower_bound(seen[i].begin(), seen[i].end(), tok);
        if (at_tok == seen[i].end() || *at_tok != tok) seen[i].insert(at_tok, tok);
      }
      g.tokens.push_back(tok);
      if (opt.on_token) opt.on_token(i, tok);
      const bool stop = std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end();
      if (stop || int64_t(g.tokens.size()) >= opt.max_new_tokens) {
        g.stopped = stop;
        s.finish(row, g);
        owner[row] = -1;
      } else {
        pending[row] = tok;
      }
    }
  };

  while (true) {
    // Free rows take the next prompts (with waves, only once every row is free).
    const bool may_fill = opt.refill || std::all_of(owner.begin(), owner.end(), [](int64_t o) { return o < 0; });
    for (int64_t r = 0; r < B && next < P && may_fill; ++r) {
      if (owner[r] >= 0) continue;
      owner[r] = order[next++];
      s.start(r, owner[r]);
      fed[r] = 0;
      pending[r] = -1;
    }
    // Prefill every row whose prompt is not fully fed, together, chunk by chunk.
    int64_t queued = 0;
    std::vector<int64_t> done_rows, done_at;
    for (int64_t r = 0; r < B; ++r) {
      if (owner[r] < 0) continue;
      const int64_t n = s.prompt_size(owner[r]);
      if (fed[r] >= n) continue;
      const int64_t e = opt.prefill_chunk > 0 ? std::min(n, fed[r] + opt.prefill_chunk) : n;
      if (e == n) {
        done_rows.push_back(r);
        done_at.push_back(queued);
      }
      s.queue_prefill(r, owner[r], fed[r], e);
      ++queued;
      fed[r] = e;
    }
    if (queued > 0) {
      auto logits = s.feed();
      if (!done_rows.empty())
        choose(done_rows, logits.index_select(0, at::tensor(done_at, at::kLong).to(logits.device())));
      continue;
    }
    // Decode: one token for every row with one pending.
    std::vector<int64_t> decode_rows;
    for (int64_t r = 0; r < B; ++r)
      if (owner[r] >= 0 && pending[r] >= 0) {
        s.queue_decode(r, pending[r]);
        decode_rows.push_back(r);
      }
    if (decode_rows.empty()) break;
    choose(decode_rows, s.feed());
  }
  return out;
}

}  // namespace lol::inference
