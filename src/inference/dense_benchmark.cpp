#include "inference/dense_benchmark.h"

#include <algorithm>

#include "inference/dense_session.h"
#include "util/error.h"

namespace lol::inference {

DecodeBenchResult bench_dense_decode(baselines::DenseModel model, const DecodeBenchOptions& o,
                                     const std::string& limit_name) {
  const auto& c = model->config();
  check_decode_bench_options(o, c.max_seq_len, 0, limit_name);
  model->eval();
  c10::InferenceMode guard;
  DenseSessionOptions so;
  so.batch_size = o.batch;
  so.max_len = o.context + o.new_tokens + 1;
  DenseDecodeSession sess(model, so);
  DecodeBenchHooks h;
  h.prefill = [&](const std::vector<std::vector<int64_t>>& prompts) {
    std::vector<DenseRowInput> in(size_t(o.batch));
    for (int64_t b = 0; b < o.batch; ++b) {
      sess.reset(b);
      in[size_t(b)] = {b, prompts[size_t(b)]};
    }
    return sess.feed(in);
  };
  h.step = [&](const std::vector<int64_t>& next) { return sess.step(next); };
  const auto dev = model->embed_tokens->weight.device();
  h.full = [&](const torch::Tensor& tok) {
    return model->logits(model->hidden(tok.to(dev)).select(1, tok.size(1) - 1));
  };
  return time_decoding(o, c.vocab_size, h);
}

}  // namespace lol::inference
