// Shape-counted cost of one LayerRoute generation (issue 11: the "ideal" speedup that the
// executed-layer count implies, with the work that skipping cannot remove included).
//
// Conventions are those of baselines/flops.h: matmul FLOPs = 2 x multiply-adds; norms,
// softmax, RoPE, element-wise operations and the embedding lookup are not counted.
// For a prompt of P tokens and N generated tokens (decode.h: prefill of the P prompt
// tokens, then N - 1 single-token steps; the N-th token is not fed back):
//   open layer  : 2 x (matmul weights of the block) x (P + N - 1) tokens
//               + 4 x (H head_dim) x (query, key) pairs, P (P + 1) / 2 at prefill plus
//                 P + t keys at decoding step t = 1 .. N - 1 (a sliding layer of window W:
//                 min(position + 1, W) keys per query, baselines::allowed_pairs);
//   closed layer: nothing;
//   fixed       : LM head 2 d V x N (the last prompt position and every decoding step);
//   gates       : 2 d per layer, once at prefill (only when gates are evaluated).
#pragma once
#include <cstdint>
#include <vector>

#include "baselines/dense_config.h"

namespace lol::layerroute {

struct GenerationCost {
  double layer_flops = 0;  ///< the open layers' matmul + attention FLOPs
  double fixed_flops = 0;  ///< LM head (+ gate scores when evaluated)
  double total() const { return layer_flops + fixed_flops; }
};

/// FLOPs of `generate_gated` on model `c` with a `prompt_len`-token prompt and
/// `new_tokens` generated tokens, running the layers whose entry in `open` ([n_layers],
/// nonzero = run) is set; `gates_evaluated` adds the gate scores (learned / bias-only
/// modes). Throws InputError for prompt_len < 1, new_tokens < 1 or `open` not of size
/// n_layers.
GenerationCost generation_cost(const baselines::DenseConfig& c, int64_t prompt_len, int64_t new_tokens,
                               const std::vector<uint8_t>& open, bool gates_evaluated);

}  // namespace lol::layerroute
