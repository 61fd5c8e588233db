// Prefill and decode throughput of the dense Llama/Qwen2 transformer (issue 10
// benchmark: Qwen2.5-0.5B-shaped model on CPU), cached decoding vs full recompute.
#pragma once
#include "baselines/dense_model.h"
#include "inference/decode_benchmark.h"

namespace lol::inference {

/// Runs (greedy, eval mode, no gradients) a cached prefill of opt.context random
/// tokens per row, opt.new_tokens cached decode steps, then opt.full_steps steps that
/// each run the whole sequence through DenseModelImpl::hidden and the LM head at the
/// last position (0 skips this phase; its fields stay 0). One untimed warm-up precedes
/// each timed phase. Throws InputError when context + new tokens (+ full steps)
/// exceed max_seq_len (named `limit_name` in the message), or context, new_tokens or batch is < 1.
DecodeBenchResult bench_dense_decode(baselines::DenseModel model, const DecodeBenchOptions& opt,
                                     const std::string& limit_name = "max_seq_len");

}  // namespace lol::inference
