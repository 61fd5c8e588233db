// Language-model evaluation (issue 7; the paper evaluates its text models with
// lm-evaluation-harness, LoL section 4.1):
//  - evaluate_lm: mean cross entropy per predicted token on a token split,
//    perplexity exp(loss), and bits per byte = (summed loss / ln 2) / (decoded
//    bytes of the predicted tokens), which does not depend on the tokenizer;
//  - evaluate_choice: multiple-choice log-likelihood tasks in the
//    lm-evaluation-harness convention (ARC, HellaSwag, PIQA, ...): every choice
//    is scored by the summed log-probability of its tokens after the context;
//    acc takes the best sum, acc_norm the best sum per character of the
//    continuation; standard errors of the mean over examples.
// Works with any TrainableModel (training/trainable.h); evaluation mode, no router
// noise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "dataset/shards.h"
#include "tokenizers/tokenizer.h"
#include "training/batcher.h"
#include "training/trainable.h"

namespace lol::analysis {

struct LmEvalResult {
  double loss = 0;           ///< mean cross entropy per counted target, nats
  double perplexity = 0;     ///< exp(loss)
  double bits_per_byte = 0;  ///< summed loss / ln 2 / bytes (0, and null in JSON, when bytes = 0)
  double loss_sum = 0;       ///< summed cross entropy, nats
  int64_t targets = 0;       ///< predicted tokens counted
  int64_t bytes = 0;         ///< decoded bytes of the counted target tokens
  bool bytes_counted = false;  ///< false when no tokenizer gave byte lengths (JSON: bytes, bits_per_byte null)
  int64_t rows = 0;          ///< rows evaluated
  double seconds = 0;
  nlohmann::json to_json() const;
};

/// Evaluates `model` on `split` with the rows of `layout` (the trainer's Batcher in
/// data order, no shuffling: "pack" rows are document-blocked), over at most
/// `max_batches` micro-batches (0 = all). `token_bytes[id]` is the decoded length of
/// token id in bytes (dataset/text_tokenizer.h token_byte_lengths; size >= the
/// model's vocabulary); empty = no byte counts (a task dataset's word vocabulary:
/// loss and perplexity only, bytes_counted false). The model is left in the mode it was in. Throws
/// lol::InputError when token_bytes is too short for a target id, or when no
/// target is counted (an empty split, or every loss mask zero); NonFiniteError when
/// a batch's loss is NaN/Inf.
LmEvalResult evaluate_lm(training::TrainableModel& model, const data::SplitData& split,
                         const training::BatchLayout& layout, const std::vector<int32_t>& token_bytes,
                         const torch::Device& device, int64_t max_batches = 0, bool progress = false);

/// Sliding-window evaluation (the "strided" perplexity of Hugging Face's perplexity
/// guide; lm-evaluation-harness's rolling log-likelihood with stride window - 1):
/// every sequence of `split` is evaluated on its own. A sequence of at most `window`
/// tokens is one row. A longer one is read in rows of `window` tokens: the first is
/// [0, window); each next row ends `stride` tokens further (the last one at the
/// sequence's end) and counts only the tokens no earlier row predicted. So every
/// token after a sequence's first (where loss_mask allows) is predicted exactly once,
/// position p with the min(p, window - stride) or more tokens before it as context.
/// Rows go `batch_size` to a micro-batch, padded to the longest. Other arguments and
/// the result as for evaluate_lm (rows counts the windows). Throws lol::InputError
/// when window < 2 or stride is outside [1, window - 1] (a stride of window would
/// leave the first token of every later row unpredicted), plus evaluate_lm's errors.
LmEvalResult evaluate_lm_sliding(training::TrainableModel& model, const data::SplitData& split, int64_t window,
                                 int64_t stride, int64_t batch_size, const std::vector<int32_t>& token_bytes,
                                 const torch::Device& device, int64_t max_batches = 0, bool progress = false);

/// One multiple-choice example: the context, the candidate continuations and the
/// index of the correct one.
struct ChoiceExample {
  std::string context;
  std::vector<std::string> choices;
  int64_t gold = 0;
};

/// Reads a JSONL file of {"context": str, "choices": [str, ...], "gold": int}
/// (aliases: "query" for context, "label" for gold). Throws lol::InputError naming
/// file:line and the field for a missing or mistyped field, fewer than 2 choices, an
/// empty choice, or gold outside [0, choices).
std::vector<ChoiceExample> read_choice_file(const std::string& path);

/// Context and continuation token ids of a request, the lm-evaluation-harness way:
/// trailing spaces of the context move to the continuation (`delimiter` + choice);
/// context_ids = encode(context), continuation_ids = encode(context +
/// continuation) minus its first |context_ids| tokens. An empty context becomes
/// the tokenizer's EOS (else BOS) token. Throws lol::InputError when the
/// continuation has no token, or the context is empty and the tokenizer has
/// neither token.
std::pair<std::vector<int32_t>, std::vector<int32_t>> choice_request(const tokenizers::Tokenizer& tok,
                                                                      const std::string& context,
                                                                      const std::string& continuation);

/// Summed log-probability (nats) of every request's continuation given its context:
/// sum over j of log p(cont[j] | ctx, cont[:j]). The input row is (ctx + cont)
/// without its last token, cut from the left to `max_len` tokens; rows are batched
/// `batch_size` at a time (padding has doc id -1). Output [requests]. Throws
/// NonFiniteError when a log-likelihood is NaN/Inf (the model's activations overflowed),
/// InputError for a continuation id outside the model's vocabulary. Log-probabilities
/// are float32, float64 for a float64 model. feed_last = true keeps the last token in
/// the row (its logits unused), as transformers' perplexity recipe feeds the whole
/// window (`model(window, labels=window)`): the same values for every model but one
/// whose RoPE depends on the call's length (longrope, nn/rope_scaling.h).
std::vector<double> continuation_logliks(training::TrainableModel& model,
                                         const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& requests,
                                         int64_t max_len, const torch::Device& device, int64_t batch_size = 16,
                                         bool feed_last = false);

struct ChoiceExampleScore {
  std::vector<double> logliks;  ///< per choice, nats
  std::vector<int64_t> chars;   ///< Unicode characters of each choice (delimiter excluded, as lm-eval)
  int64_t pred = 0, pred_norm = 0;
};

struct ChoiceEvalResult {
  int64_t n = 0;
  double acc = 0, acc_stderr = 0;            ///< argmax summed log-likelihood
  double acc_norm = 0, acc_norm_stderr = 0;  ///< argmax log-likelihood per character
  std::vector<ChoiceExampleScore> examples;
  nlohmann::json to_json() const;  ///< the summary (no per-example scores)
};

/// Scores every example (ties go to the lowest index, as numpy's argmax).
/// Standard error of a mean of 0/1 outcomes x_i: sqrt(sum (x_i - mean)^2 / (n - 1)) /
/// sqrt(n) (lm-evaluation-harness's mean_stderr; 0 for n < 2).
ChoiceEvalResult evaluate_choice(training::TrainableModel& model, const tokenizers::Tokenizer& tok,
                                 const std::vector<ChoiceExample>& examples, int64_t max_len,
                                 const torch::Device& device, const std::string& delimiter = " ",
                                 int64_t batch_size = 16, bool progress = false);

/// Standard error of the mean of `x` (see evaluate_choice).
double mean_stderr(const std::vector<double>& x);

}  // namespace lol::analysis
