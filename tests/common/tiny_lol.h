// The tiny LoL shape the model, analysis and baseline tests build on: d_model 16,
// SwiGLU hidden 24, 1 prelude + 1 coda block, L = 3 experts, D = 3 routed depths,
// window 4, max_seq_len 64, tied embeddings, one shared router. Each test picks the
// vocabulary, the heads and the stride. Test folders include it as "../common/tiny_lol.h".
#pragma once
#include <cstdint>

#include "lol/config.h"

namespace lol_test {

inline lol::LoLConfig tiny_lol_config(int64_t vocab_size, int64_t n_heads, int64_t n_kv_heads, int64_t stride) {
  lol::LoLConfig c;
  c.vocab_size = vocab_size;
  c.d_model = 16;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.ffn_hidden = 24;
  c.n_prelude = 1;
  c.n_coda = 1;
  c.library_size = 3;
  c.core_depth = 3;
  c.window = 4;
  c.stride = stride;
  c.max_seq_len = 64;
  c.tie_embeddings = true;
  c.untied_router = false;
  return c;
}

}  // namespace lol_test
