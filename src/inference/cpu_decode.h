// Fused CPU kernels for decoding steps (one new token per row), float32 or float64:
// a whole decoder block (RMSNorm, FiLM, fused q/k/v, RoPE, KV-cache write, attention
// over the cached keys, o_proj, SwiGLU MLP or top-k routed SwiGLU experts (an MoE FFN:
// LoL's MoE prelude / coda, Hugging Face Mixtral / OLMoE / Qwen2-MoE / Qwen3-MoE), residual with
// alpha; and the LayerNorm
// architectures' LayerNorms, biases, ungated MLP, no RoPE, parallel blocks) in plain loops and
// direct BLAS calls. Batch-1 decoding is bound by reading the weights once per token
// plus per-operation overhead; this path removes the overhead of ~40 tensor
// operations per block. Arithmetic is that of block_delta (nn::Block) up to rounding
// (RMSNorm statistics in float32, as nn::RMSNorm).
#pragma once
#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "inference/kv_cache.h"
#include "inference/packed_model.h"

namespace lol::inference {

/// Where one new token goes.
struct DecodeToken {
  int64_t row = 0;       ///< cache row
  int64_t pos = 0;       ///< RoPE position (position in the sequence)
  int64_t base = 0;      ///< keys already cached for the token's attention segment
  bool visible = true;   ///< written to the cache (false: router-only token)
  int64_t first = 0;     ///< first key slot attended (a sliding window of W keys: max(0, base + 1 - W))
};

class CpuDecoder {
 public:
  virtual ~CpuDecoder() = default;
  /// y = x + alpha_t * (attn + mlp)(x) for rows x [n, d] (contiguous, in the model's
  /// dtype) and tokens toks[n]; alpha null = 1. Writes each visible token's key/value
  /// at slot `base` of its cache row (the cache must have base + 1 slots). y may not
  /// alias x. film is null outside the routed core.
  virtual void block(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& x, torch::Tensor& y,
                     const DecodeToken* toks, const double* alpha, KVCache& cache) = 0;
  /// Kernels for `w` (which must outlive them), or null when they do not apply
  /// (device other than CPU, dtype other than float32/float64, LOL_CPU_KERNELS=0).
  static std::unique_ptr<CpuDecoder> create(const PackedModel& w);
};

}  // namespace lol::inference
