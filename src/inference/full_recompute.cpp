#include "inference/full_recompute.h"

#include <string>

#include "inference/token_chooser.h"
#include "util/error.h"

namespace lol::inference {

Generation generate_full_recompute(training::TrainableModel& model, const std::vector<int64_t>& prompt,
                                   const GenerateOptions& opt) {
  const auto cfg = model.config_json();
  const int64_t vocab = cfg.value("vocab_size", int64_t(0)), max_seq_len = cfg.value("max_seq_len", int64_t(0));
  if (prompt.empty()) throw InputError("generate: empty prompt");
  for (auto t : prompt)
    if (t < 0 || t >= vocab)
      throw InputError("generate: token id " + std::to_string(t) + " outside [0, vocab_size = " + std::to_string(vocab) + ")");
  if (opt.max_new_tokens < 0) throw InputError("generate: max_new_tokens must be >= 0");
  if (int64_t(prompt.size()) + opt.max_new_tokens > max_seq_len)
    throw InputError("generate: prompt (" + std::to_string(prompt.size()) + ") + new tokens (" +
                     std::to_string(opt.max_new_tokens) + ") exceeds max_seq_len = " + std::to_string(max_seq_len));
  validate_sampling(opt.sampling, "generate");
  model.module().eval();
  torch::NoGradGuard no_grad;
  const auto dev = model.module().parameters().at(0).device();
  TokenChooser chooser(prompt, vocab, opt.sampling, opt.seed, opt.stop_tokens);
  std::vector<int64_t> seq = prompt;
  Generation g;
  while (int64_t(g.tokens.size()) < opt.max_new_tokens && !chooser.stopped()) {
    const int64_t n = int64_t(seq.size());
    training::TrainBatch batch;
    batch.tokens = torch::tensor(seq, torch::kInt64).unsqueeze(0).to(dev);
    batch.doc_ids = torch::zeros({1, n}, torch::TensorOptions(torch::kInt64).device(dev));
    const auto logits = model.forward(batch)[0][n - 1];  // [vocab]
    const int64_t id =
        chooser.choose(logits, "generate: the logits for new token " + std::to_string(g.tokens.size() + 1));
    g.tokens.push_back(id);
    seq.push_back(id);
    if (opt.on_token) opt.on_token(0, id);
  }
  g.stopped = chooser.stopped();
  return g;
}

}  // namespace lol::inference
