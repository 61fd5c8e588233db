#include "analysis/lm_eval.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <fstream>

#include <torch/torch.h>

#include "core/finite.h"
#include "training/loss.h"
#include "util/error.h"
#include "util/progress.h"

namespace lol::analysis {

namespace {

struct ModeGuard {  // eval mode, no autograd; restores the training flag
  explicit ModeGuard(training::TrainableModel& m) : m_(m), was_(m.module().is_training()) { m_.module().eval(); }
  ~ModeGuard() { m_.module().train(was_); }
  training::TrainableModel& m_;
  bool was_;
  torch::NoGradGuard ng_;
};

double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t utf8_chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

nlohmann::json LmEvalResult::to_json() const {
  const nlohmann::json none;  // null: no tokenizer counted bytes
  return {{"loss", loss},
          {"perplexity", perplexity},
          {"bits_per_byte", bytes_counted && bytes > 0 ? nlohmann::json(bits_per_byte) : none},
          {"loss_sum", loss_sum},
          {"targets", targets},
          {"bytes", bytes_counted ? nlohmann::json(bytes) : none},
          {"rows", rows},
          {"seconds", seconds}};
}

namespace {

// The shared loop of evaluate_lm and evaluate_lm_sliding: `next()` gives the CPU
// micro-batches, `done()` says when they end.
template <class Next, class Done>
LmEvalResult evaluate_batches(training::TrainableModel& model, Next next, Done done, int64_t n_batches_est,
                              const std::vector<int32_t>& token_bytes, const torch::Device& device,
                              int64_t max_batches, bool progress) {
  ModeGuard guard(model);
  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("eval lm", max_batches > 0 ? std::min(max_batches, n_batches_est) : n_batches_est, progress);
  auto bytes_table = torch::tensor(std::vector<int64_t>(token_bytes.begin(), token_bytes.end()), torch::kInt64);
  LmEvalResult r;
  r.bytes_counted = !token_bytes.empty();
  for (int64_t i = 0; !done() && (max_batches == 0 || i < max_batches); ++i) {
    training::TrainBatch cpu = next();
    // Bytes of the counted targets (on CPU, from the batch before the copy).
    auto tgt = cpu.targets.masked_select(cpu.target_mask);
    if (r.bytes_counted && tgt.numel() > 0) {
      const int64_t top = tgt.max().item<int64_t>();
      if (top >= int64_t(token_bytes.size()))
        throw InputError("evaluation: target token id " + std::to_string(top) + " is outside the tokenizer's " +
                         std::to_string(token_bytes.size()) + " ids (wrong tokenizer for this dataset?)");
      r.bytes += bytes_table.index_select(0, tgt).sum().item<int64_t>();
    }
    training::TrainBatch batch = training::to_device(cpu, device);
    auto logits = model.forward(batch);
    const double loss_sum = training::masked_ce_sum(logits, batch.targets, batch.target_mask).item<double>();
    require_finite(loss_sum, "evaluation: the loss of batch " + std::to_string(i + 1));
    r.loss_sum += loss_sum;
    r.targets += batch.n_targets;
    r.rows += batch.tokens.size(0);
    bar.update(i + 1);
  }
  bar.finish();
  // A loss over no tokens is not a number to report (0 would read as a perfect model).
  if (r.targets == 0)
    throw InputError("evaluation: the split has no predicted tokens (" + std::to_string(r.rows) +
                     " rows, every target masked out): expected a split with loss-mask tokens");
  r.loss = r.loss_sum / double(r.targets);
  r.perplexity = std::exp(r.loss);
  if (r.bytes > 0) r.bits_per_byte = r.loss_sum / std::log(2.0) / double(r.bytes);
  r.seconds = secs_since(t0);
  return r;
}

// The rows of evaluate_lm_sliding, in data order.
class SlidingRows {
 public:
  SlidingRows(const data::SplitData& split, int64_t window, int64_t stride, int64_t batch_size)
      : split_(split), window_(window), stride_(stride), batch_size_(batch_size) {}

  bool done() const { return seq_ >= split_.size(); }

  /// Number of rows of the whole pass.
  int64_t count_rows() const {
    int64_t rows = 0;
    for (int64_t i = 0; i < split_.size(); ++i) {
      const int64_t n = split_.get(i).length;
      rows += n <= window_ ? 1 : 1 + (n - window_ + stride_ - 1) / stride_;
    }
    return rows;
  }

  training::TrainBatch next() {
    std::vector<std::vector<int32_t>> toks;
    std::vector<std::vector<int64_t>> docs;
    std::vector<std::vector<uint8_t>> masks, routers;
    std::vector<int64_t> prompts;
    while (int64_t(toks.size()) < batch_size_ && !done()) {
      const data::SequenceView s = split_.get(seq_);
      // This row: tokens [end - len, end); it counts targets at positions >= counted_.
      const int64_t end = counted_ == 0 ? std::min(s.length, window_) : std::min(s.length, counted_ + stride_);
      const int64_t start = std::max<int64_t>(0, end - window_);
      std::vector<uint8_t> m(size_t(end - start));
      for (int64_t p = start; p < end; ++p) m[size_t(p - start)] = p >= counted_ && (!s.loss_mask || s.loss_mask[p]);
      toks.emplace_back(s.tokens + start, s.tokens + end);
      docs.emplace_back(size_t(end - start), 0);
      masks.push_back(std::move(m));
      routers.push_back(s.router_only ? std::vector<uint8_t>(s.router_only + start, s.router_only + end)
                                      : std::vector<uint8_t>(size_t(end - start), 0));
      prompts.push_back(start == 0 ? s.prompt_len : 0);
      counted_ = end;
      if (end >= s.length) {
        ++seq_;
        counted_ = 0;
      }
    }
    return training::assemble_batch(toks, docs, masks, routers, prompts);
  }

 private:
  const data::SplitData& split_;
  int64_t window_, stride_, batch_size_;
  int64_t seq_ = 0;      // the sequence being read
  int64_t counted_ = 0;  // its tokens before this position are counted (0: none read yet)
};

}  // namespace

LmEvalResult evaluate_lm(training::TrainableModel& model, const data::SplitData& split,
                         const training::BatchLayout& layout, const std::vector<int32_t>& token_bytes,
                         const torch::Device& device, int64_t max_batches, bool progress) {
  training::Batcher b(split, layout, 0, /*shuffle=*/false, /*wrap=*/false, "evaluation");
  const int64_t n_rows_est = layout.pack ? (split.total_tokens() + layout.seq_len - 1) / std::max<int64_t>(1, layout.seq_len)
                                         : split.size();
  return evaluate_batches(
      model, [&] { return b.next(); }, [&] { return b.done(); }, (n_rows_est + layout.batch_size - 1) / layout.batch_size,
      token_bytes, device, max_batches, progress);
}

LmEvalResult evaluate_lm_sliding(training::TrainableModel& model, const data::SplitData& split, int64_t window,
                                 int64_t stride, int64_t batch_size, const std::vector<int32_t>& token_bytes,
                                 const torch::Device& device, int64_t max_batches, bool progress) {
  if (window < 2) throw InputError("sliding-window evaluation: window " + std::to_string(window) + ": expected >= 2");
  if (stride < 1 || stride >= window)
    throw InputError("sliding-window evaluation: stride " + std::to_string(stride) + ": expected 1 <= stride <= " +
                     std::to_string(window - 1) + " (window - 1; a stride of the window would leave the first token of "
                     "every later window unpredicted)");
  if (batch_size < 1) throw InputError("sliding-window evaluation: batch size " + std::to_string(batch_size) + ": expected >= 1");
  if (split.size() == 0) throw InputError("evaluation: the split has no sequences");
  SlidingRows rows(split, window, stride, batch_size);
  const int64_t n_rows = rows.count_rows();
  return evaluate_batches(
      model, [&] { return rows.next(); }, [&] { return rows.done(); }, (n_rows + batch_size - 1) / batch_size,
      token_bytes, device, max_batches, progress);
}

std::vector<ChoiceExample> read_choice_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (expected a JSONL file of {context, choices, gold})");
  std::vector<ChoiceExample> out;
  std::string line;
  for (int64_t ln = 1; std::getline(in, line); ++ln) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(ln);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw InputError(where + ": expected a JSON object");
    auto field = [&](const char* name, const char* alias) -> const nlohmann::json* {
      // Both spellings with different values: which one is meant is unknown.
      if (alias && j.contains(name) && j.contains(alias) && j[name] != j[alias])
        throw InputError(where + ": fields '" + name + "' = " + j[name].dump() + " and '" + alias + "' = " +
                         j[alias].dump() + " differ (expected one of them)");
      if (j.contains(name)) return &j[name];
      if (alias && j.contains(alias)) return &j[alias];
      return nullptr;
    };
    ChoiceExample ex;
    const auto* c = field("context", "query");
    if (!c || !c->is_string()) throw InputError(where + ": field 'context' must be a string");
    ex.context = c->get<std::string>();
    const auto* ch = field("choices", nullptr);
    if (!ch || !ch->is_array() || ch->size() < 2) throw InputError(where + ": field 'choices' must be a list of >= 2 strings");
    for (const auto& s : *ch) {
      if (!s.is_string()) throw InputError(where + ": field 'choices' must hold strings");
      // An empty choice has no tokens of its own to score (only the delimiter would be).
      if (s.get<std::string>().empty())
        throw InputError(where + ": field 'choices': entry " + std::to_string(ex.choices.size()) +
                         " is empty (expected a non-empty continuation)");
      ex.choices.push_back(s.get<std::string>());
    }
    const auto* g = field("gold", "label");
    if (!g || !g->is_number_integer()) throw InputError(where + ": field 'gold' must be an integer (index into choices)");
    ex.gold = g->get<int64_t>();
    if (ex.gold < 0 || ex.gold >= int64_t(ex.choices.size()))
      throw InputError(where + ": field 'gold' = " + std::to_string(ex.gold) + ": expected 0 <= gold < " +
                       std::to_string(ex.choices.size()));
    out.push_back(std::move(ex));
  }
  if (out.empty()) throw InputError(path + ": no examples");
  return out;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> choice_request(const tokenizers::Tokenizer& tok,
                                                                      const std::string& context,
                                                                      const std::string& continuation) {
  std::string ctx = context, cont = continuation;
  const std::size_t keep = ctx.find_last_not_of(' ');
  const std::size_t n_trailing = keep == std::string::npos ? ctx.size() : ctx.size() - keep - 1;
  if (n_trailing > 0) {
    cont = ctx.substr(ctx.size() - n_trailing) + cont;
    ctx.resize(ctx.size() - n_trailing);
  }
  std::vector<int32_t> ctx_ids, cont_ids;
  if (ctx.empty()) {
    auto id = tok.eos_id() ? tok.eos_id() : tok.bos_id();
    if (!id) throw InputError("choice: an empty context needs a tokenizer with an EOS or BOS token");
    ctx_ids = {*id};
    cont_ids = tok.encode(cont);
  } else {
    ctx_ids = tok.encode(ctx);
    auto whole = tok.encode(ctx + cont);
    cont_ids.assign(whole.begin() + std::min(whole.size(), ctx_ids.size()), whole.end());
  }
  if (cont_ids.empty()) throw InputError("choice: continuation '" + continuation + "' encodes to no token");
  return {ctx_ids, cont_ids};
}

std::vector<double> continuation_logliks(training::TrainableModel& model,
                                         const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& requests,
                                         int64_t max_len, const torch::Device& device, int64_t batch_size,
                                         bool feed_last) {
  ModeGuard guard(model);
  if (max_len < 1 || batch_size < 1) throw InputError("continuation_logliks: max_len and batch_size must be >= 1");
  std::vector<double> out(requests.size(), 0.0);
  for (std::size_t start = 0; start < requests.size(); start += std::size_t(batch_size)) {
    const std::size_t end = std::min(requests.size(), start + std::size_t(batch_size));
    // Row r: input tokens, the first input position predicting a continuation token.
    std::vector<std::vector<int64_t>> rows;
    std::vector<int64_t> first, n_cont;
    int64_t width = 1;
    for (std::size_t q = start; q < end; ++q) {
      const auto& [ctx, cont] = requests[q];
      std::vector<int64_t> all(ctx.begin(), ctx.end());
      all.insert(all.end(), cont.begin(), cont.end());
      if (!feed_last) all.pop_back();  // the last token is only a target
      const int64_t drop = std::max<int64_t>(0, int64_t(all.size()) - max_len);
      rows.emplace_back(all.begin() + drop, all.end());
      const int64_t nc = int64_t(cont.size());
      // may be < 0 if the continuation alone is too long
      first.push_back(int64_t(rows.back().size()) - nc - (feed_last ? 1 : 0));
      n_cont.push_back(nc);
      width = std::max<int64_t>(width, int64_t(rows.back().size()));
    }
    const int64_t B = int64_t(rows.size());
    auto tokens = torch::zeros({B, width}, torch::kInt64);
    auto doc = torch::full({B, width}, -1, torch::kInt64);
    auto ta = tokens.accessor<int64_t, 2>();
    auto da = doc.accessor<int64_t, 2>();
    for (int64_t r = 0; r < B; ++r)
      for (int64_t t = 0; t < int64_t(rows[r].size()); ++t) {
        ta[r][t] = rows[r][t];
        da[r][t] = 0;
      }
    training::TrainBatch b;
    b.tokens = tokens;
    b.doc_ids = doc;
    b.prompt_len = torch::zeros({B}, torch::kInt64);
    b.router_only = torch::zeros({B, width}, torch::kBool);
    b.targets = torch::full({B, width}, -100, torch::kInt64);
    b.target_mask = torch::zeros({B, width}, torch::kBool);
    b = training::to_device(b, device);
    // Log-probabilities in float32, or float64 for a float64 model; only each position's
    // continuation token's leaves the device.
    auto logits = model.forward(b);
    if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);
    auto next = torch::zeros({B, width}, torch::kInt64);
    auto na = next.accessor<int64_t, 2>();
    const int64_t vocab = logits.size(-1);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < n_cont[r]; ++j) {
        const int64_t id = requests[start + std::size_t(r)].second[std::size_t(j)];
        if (id < 0 || id >= vocab)
          throw InputError("evaluation: continuation " + std::to_string(start + std::size_t(r) + 1) + " holds token id " +
                           std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(vocab));
        if (first[r] + j >= 0) na[r][first[r] + j] = id;
      }
    const auto picked = torch::log_softmax(logits, -1)
                            .gather(-1, next.to(logits.device()).unsqueeze(-1))
                            .squeeze(-1)
                            .to(torch::kFloat64)
                            .to(torch::kCPU);
    auto la = picked.accessor<double, 2>();
    for (int64_t r = 0; r < B; ++r) {
      double s = 0;
      for (int64_t j = 0; j < n_cont[r]; ++j) {
        const int64_t pos = first[r] + j;  // input position whose next token is cont[j]
        if (pos < 0) continue;             // predicted from a cut-off context: not scorable
        s += la[r][pos];
      }
      require_finite(s, "evaluation: the log-likelihood of continuation " + std::to_string(start + std::size_t(r) + 1));
      out[start + std::size_t(r)] = s;
    }
  }
  return out;
}

double mean_stderr(const std::vector<double>& x) {
  const double n = double(x.size());
  if (x.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  double mean = 0;
  for (double v : x) mean += v;
  mean /= n;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / (n - 1)) / std::sqrt(n);
}

nlohmann::json ChoiceEvalResult::to_json() const {
  const auto or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"n", n},
          {"acc", acc},
          {"acc_stderr", or_null(acc_stderr)},
          {"acc_norm", acc_norm},
          {"acc_norm_stderr", or_null(acc_norm_stderr)}};
}

ChoiceEvalResult evaluate_choice(training::TrainableModel& model, const tokenizers::Tokenizer& tok,
                                 const std::vector<ChoiceExample>& examples, int64_t max_len,
                                 const torch::Device& device, const std::string& delimiter, int64_t batch_size,
                                 bool progress) {
  ChoiceEvalResult res;
  ProgressBar bar("eval choice", int64_t(examples.size()), progress);
  std::vector<double> hit, hit_norm;
  // Examples are scored in groups so that several choices share a forward batch.
  const std::size_t group = std::max<std::size_t>(1, std::size_t(batch_size));
  for (std::size_t s = 0; s < examples.size(); s += group) {
    const std::size_t e = std::min(examples.size(), s + group);
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> reqs;
    for (std::size_t i = s; i < e; ++i)
      for (const auto& c : examples[i].choices) {
        try {
          reqs.push_back(choice_request(tok, examples[i].context, delimiter + c));
        } catch (const InputError& err) {
          throw InputError("example " + std::to_string(i) + ": " + err.what());
        }
        // Tokens before the input window would be left out of the sum, which would make
        // the choice look far more likely than the others (lm-evaluation-harness fails here).
        if (int64_t(reqs.back().second.size()) > max_len)
          throw InputError("example " + std::to_string(i) + ", choice " + std::to_string(&c - examples[i].choices.data()) +
                           ": the continuation has " + std::to_string(reqs.back().second.size()) +
                           " tokens, more than the " + std::to_string(max_len) +
                           " the input holds (--max-len): it cannot be scored whole; raise --max-len or leave the "
                           "example out");
      }
    const auto ll = continuation_logliks(model, reqs, max_len, device, batch_size);
    std::size_t k = 0;
    for (std::size_t i = s; i < e; ++i) {
      ChoiceExampleScore sc;
      for (const auto& c : examples[i].choices) {
        sc.logliks.push_back(ll[k++]);
        sc.chars.push_back(std::max<int64_t>(1, utf8_chars(c)));
      }
      for (std::size_t c = 1; c < sc.logliks.size(); ++c) {
        if (sc.logliks[c] > sc.logliks[std::size_t(sc.pred)]) sc.pred = int64_t(c);
        if (sc.logliks[c] / double(sc.chars[c]) >
            sc.logliks[std::size_t(sc.pred_norm)] / double(sc.chars[std::size_t(sc.pred_norm)]))
          sc.pred_norm = int64_t(c);
      }
      hit.push_back(sc.pred == examples[i].gold ? 1.0 : 0.0);
      hit_norm.push_back(sc.pred_norm == examples[i].gold ? 1.0 : 0.0);
      res.examples.push_back(std::move(sc));
    }
    bar.update(int64_t(e));
  }
  bar.finish();
  res.n = int64_t(examples.size());
  for (double h : hit) res.acc += h;
  for (double h : hit_norm) res.acc_norm += h;
  if (res.n > 0) {
    res.acc /= double(res.n);
    res.acc_norm /= double(res.n);
  }
  res.acc_stderr = mean_stderr(hit);
  res.acc_norm_stderr = mean_stderr(hit_norm);
  return res;
}

}  // namespace lol::analysis
