// Language-model evaluation (src/analysis/lm_eval.h) with tiny random LoL models:
// loss / perplexity / bits per byte against per-document forward passes computed
// here, choice scoring against manual log-probabilities, the lm-eval request split,
// and `lol corpus` -> `lol train` (packed) -> `lol eval lm|choice` end to end.
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "analysis/lm_eval.h"
#include "core/tensor_io.h"
#include "dataset/corpus.h"
#include "dataset/shards.h"
#include "dataset/text_tokenizer.h"
#include "inference/tiny_models.h"
#include "io/atomic_file.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "training/lol_trainable.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using namespace lol;

/// Writes the first `n` documents of the shared multilingual validation file to `out`;
/// false (with a test failure naming it) when the shared data is missing.
bool write_multilingual_head(int n, const std::string& out) {
  const std::string src = std::string(LOL_SOURCE_DIR) + "/../shared/data/corpora/multilingual_valid.jsonl";
  if (!fs::exists(src)) {
    ADD_FAILURE() << "shared data missing: " << src;
    return false;
  }
  std::ifstream in(src);
  std::string line, head;
  for (int i = 0; i < n && std::getline(in, line); ++i) head += line + "\n";
  io::write_file_atomic(out, head);
  return true;
}

LoLConfig byte_config() {
  LoLConfig c = test::tiny_config();
  c.vocab_size = 259;  // bytes + <pad> <bos> <eos>
  return c;
}

/// Sum over positions t < L-1 of -log p(tokens[t+1] | tokens[..t]) for one document
/// run alone through the model, and the number of predicted tokens.
std::pair<double, int64_t> doc_nll(LoLModel& m, const std::vector<int32_t>& ids) {
  torch::NoGradGuard ng;
  LoLBatch b;
  b.tokens = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kInt64).unsqueeze(0);
  auto logp = torch::log_softmax(m->forward(b).logits[0].to(torch::kFloat64), -1);
  double s = 0;
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) s -= logp[int64_t(t)][ids[t + 1]].item<double>();
  return {s, int64_t(ids.size()) - 1};
}

/// log p(cont | ctx) summed, from one forward of ctx + cont.
double manual_loglik(LoLModel& m, const std::vector<int32_t>& ctx, const std::vector<int32_t>& cont) {
  torch::NoGradGuard ng;
  std::vector<int64_t> all(ctx.begin(), ctx.end());
  all.insert(all.end(), cont.begin(), cont.end());
  LoLBatch b;
  b.tokens = torch::tensor(all, torch::kInt64).unsqueeze(0);
  auto logp = torch::log_softmax(m->forward(b).logits[0].to(torch::kFloat64), -1);
  double s = 0;
  for (std::size_t j = 0; j < cont.size(); ++j) s += logp[int64_t(ctx.size() + j - 1)][cont[j]].item<double>();
  return s;
}

TEST(LmEval, LossPerplexityAndBitsPerByteMatchPerDocumentForwards) {
  reftest::TempDir t("lm_eval");
  io::write_file_atomic(t / "docs.txt",
                        "In the beginning God created the heaven and the earth.\n\n"
                        "And the earth was without form, and void;\nand darkness was upon the face of the deep.\n\n"
                        "Gr\xC3\xBC\xC3\x9F Gott! \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 "
                        "\xE6\x97\xA5\xE6\x9C\xAC\n\nshort\n\nAnd God said, Let there be light: and there was light.");
  data::CorpusOptions o;
  o.files = {t / "docs.txt"};
  o.valid_fraction = 0;
  o.add_eos = true;  // EOS targets count in the loss but decode to 0 bytes
  o.progress = false;
  data::build_corpus(o, t / "ds");
  auto ds = data::Dataset::open(t / "ds");
  auto split = ds.load("train");
  ASSERT_EQ(split.size(), 5);
  tokenizers::ByteTokenizer tok;
  const auto token_bytes = data::token_byte_lengths(tok);
  ASSERT_EQ(token_bytes[258], 0);  // <eos>
  ASSERT_EQ(token_bytes['a'], 1);

  LoLModel m = test::tiny_model(byte_config(), 11);
  double nll = 0;
  int64_t n = 0, bytes = 0;
  for (int64_t i = 0; i < split.size(); ++i) {
    const auto v = split.get(i);
    std::vector<int32_t> ids(v.tokens, v.tokens + v.length);
    auto [s, k] = doc_nll(m, ids);
    nll += s;
    n += k;
    for (std::size_t p = 1; p < ids.size(); ++p) bytes += token_bytes[std::size_t(ids[p])];
  }
  training::LoLTrainable model(m);
  // One padded row per document, and all documents packed into one document-blocked row.
  for (bool pack : {false, true}) {
    training::BatchLayout layout{2, pack ? 512 : 0, pack};
    const auto r = analysis::evaluate_lm(model, split, layout, token_bytes, torch::kCPU);
    EXPECT_EQ(r.targets, n) << pack;
    EXPECT_EQ(r.bytes, bytes) << pack;
    EXPECT_NEAR(r.loss_sum, nll, 1e-4 * nll) << pack;
    EXPECT_NEAR(r.loss, nll / double(n), 1e-4) << pack;
    EXPECT_NEAR(r.perplexity, std::exp(nll / double(n)), 1e-3 * r.perplexity) << pack;
    EXPECT_NEAR(r.bits_per_byte, nll / std::log(2.0) / double(bytes), 1e-4) << pack;
    EXPECT_DOUBLE_EQ(r.perplexity, std::exp(r.loss));
  }
  // A byte table shorter than the vocabulary is an input error, not a crash.
  EXPECT_THROW(analysis::evaluate_lm(model, split, {2, 0, false}, std::vector<int32_t>(100, 1), torch::kCPU),
               InputError);
  // A split whose loss masks are all zero has no loss to report: an input error, not loss 0.
  {
    data::ShardWriter w(t / "masked", "train", 259);
    w.add({'a', 'b', 'c', 'd'}, {0, 0, 0, 0});
    w.add({'e', 'f'}, {0, 0});
    const auto files = w.finish();
    ASSERT_EQ(files.size(), 1u);
    data::SplitData masked;
    masked.append_shard(t / "masked" + "/" + files[0], 259);
    ASSERT_EQ(masked.size(), 2);
    for (bool pack : {false, true}) {
      try {
        analysis::evaluate_lm(model, masked, {2, pack ? 16 : 0, pack}, token_bytes, torch::kCPU);
        ADD_FAILURE() << "expected InputError, pack " << pack;
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no predicted tokens"), std::string::npos) << e.what();
      }
    }
  }
}

/// -log p(ids[p] | ids[start..p-1]) for p in [from, to), each from one forward of the
/// row ids[start..end) (end >= to) through the model alone.
double window_nll(LoLModel& m, const std::vector<int32_t>& ids, int64_t start, int64_t end, int64_t from, int64_t to) {
  torch::NoGradGuard ng;
  LoLBatch b;
  b.tokens = torch::tensor(std::vector<int64_t>(ids.begin() + start, ids.begin() + end), torch::kInt64).unsqueeze(0);
  auto logp = torch::log_softmax(m->forward(b).logits[0].to(torch::kFloat64), -1);
  double s = 0;
  for (int64_t p = std::max(from, start + 1); p < to; ++p) s -= logp[p - start - 1][ids[size_t(p)]].item<double>();
  return s;
}

TEST(LmEval, SlidingWindowsPredictEveryTokenOnceWithTheirWindowsContext) {
  // Documents of 5, 23 and 40 tokens (random bytes), windows of 8 tokens.
  reftest::TempDir t("lm_eval_sliding");
  std::vector<std::vector<int32_t>> docs;
  std::mt19937 rng(3);
  for (int n : {5, 23, 40}) {
    std::vector<int32_t> d(static_cast<size_t>(n));
    for (auto& x : d) x = int32_t(rng() % 256);
    docs.push_back(d);
  }
  data::ShardWriter w(t / "ds", "train", 259);
  for (const auto& d : docs) w.add(d, {});
  const auto files = w.finish();
  data::SplitData split;
  for (const auto& f : files) split.append_shard(t / "ds" + "/" + f, 259);
  ASSERT_EQ(split.size(), 3);
  LoLModel m = test::tiny_model(byte_config(), 17);
  training::LoLTrainable model(m);
  const std::vector<int32_t> bytes(259, 1);
  const int64_t window = 8;
  for (int64_t stride : {1, 3, 7}) {
    // Reference: rows ending at e_0 = min(n, window), e_{k+1} = min(n, e_k + stride),
    // each [max(0, e_k - window), e_k), counting the tokens in [e_{k-1}, e_k).
    double nll = 0;
    int64_t rows = 0;
    for (const auto& d : docs) {
      const int64_t n = int64_t(d.size());
      for (int64_t prev = 0, e = std::min(n, window);; prev = e, e = std::min(n, e + stride)) {
        nll += window_nll(m, d, std::max<int64_t>(0, e - window), e, prev, e);
        ++rows;
        if (e == n) break;
      }
    }
    for (int64_t batch : {1, 4}) {
      const auto r = analysis::evaluate_lm_sliding(model, split, window, stride, batch, bytes, torch::kCPU);
      EXPECT_EQ(r.targets, 4 + 22 + 39) << stride;  // every token but each document's first
      EXPECT_EQ(r.bytes, r.targets);
      EXPECT_EQ(r.rows, rows) << stride;
      EXPECT_NEAR(r.loss_sum, nll, 1e-6 * nll) << "stride " << stride << " batch " << batch;
    }
  }
  // Stride 1 is the classic sliding window: token p (p >= window - 1) sees exactly the
  // window - 1 tokens before it.
  {
    double nll = 0;
    for (const auto& d : docs)
      for (int64_t p = 1; p < int64_t(d.size()); ++p) {
        const int64_t start = std::max<int64_t>(0, p - (window - 1));
        nll += window_nll(m, d, start, p + 1, p, p + 1);
      }
    const auto r = analysis::evaluate_lm_sliding(model, split, window, 1, 4, bytes, torch::kCPU);
    EXPECT_NEAR(r.loss_sum, nll, 1e-6 * nll);
  }
  // A window as long as the longest document: one padded row each, as evaluate_lm pads.
  {
    const auto sliding = analysis::evaluate_lm_sliding(model, split, 40, 5, 2, bytes, torch::kCPU);
    const auto padded = analysis::evaluate_lm(model, split, {2, 0, false}, bytes, torch::kCPU);
    EXPECT_EQ(sliding.targets, padded.targets);
    EXPECT_EQ(sliding.rows, 3);
    EXPECT_NEAR(sliding.loss_sum, padded.loss_sum, 1e-6 * padded.loss_sum);
  }
  // Loss masks still apply: only masked-in tokens count.
  {
    data::ShardWriter mw(t / "masked", "train", 259);
    std::vector<uint8_t> mask(docs[2].size(), 0);
    for (std::size_t p = 20; p < mask.size(); ++p) mask[p] = 1;
    mw.add(docs[2], mask);
    const auto mf = mw.finish();
    data::SplitData masked;
    masked.append_shard(t / "masked" + "/" + mf[0], 259);
    const auto r = analysis::evaluate_lm_sliding(model, masked, window, 3, 2, bytes, torch::kCPU);
    EXPECT_EQ(r.targets, 20);
    double nll = 0;
    for (int64_t prev = 0, e = window;; prev = e, e = std::min<int64_t>(40, e + 3)) {
      nll += window_nll(m, docs[2], std::max<int64_t>(0, e - window), e, std::max<int64_t>(prev, 20), e);
      if (e == 40) break;
    }
    EXPECT_NEAR(r.loss_sum, nll, 1e-6 * nll);
  }
  // Strides that would skip tokens, and windows too small, are input errors naming the value.
  for (auto [win, stride] : {std::pair<int64_t, int64_t>{8, 8}, {8, 0}, {1, 1}}) {
    try {
      analysis::evaluate_lm_sliding(model, split, win, stride, 2, bytes, torch::kCPU);
      ADD_FAILURE() << "expected InputError for window " << win << " stride " << stride;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(win < 2 ? "window 1" : "stride " + std::to_string(stride)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(LmEval, ChoiceScoringPicksTheLargerLogLikelihood) {
  LoLModel m = test::tiny_model(byte_config(), 5);
  training::LoLTrainable model(m);
  tokenizers::ByteTokenizer tok;
  const std::vector<std::pair<std::string, std::vector<std::string>>> items = {
      {"The cat", {"sat on the mat", "xq", "ran"}},
      {"Question: what is two plus two? Answer:", {"four", "seven", "a fish"}},
      {"In the beginning ", {"God", "the end"}},  // trailing space moves to the continuation
  };
  std::vector<analysis::ChoiceExample> examples;
  std::vector<std::vector<double>> manual;
  for (std::size_t i = 0; i < items.size(); ++i) {
    analysis::ChoiceExample ex;
    ex.context = items[i].first;
    ex.choices = items[i].second;
    std::vector<double> ll;
    for (const auto& c : ex.choices) {
      auto [ctx, cont] = analysis::choice_request(tok, ex.context, " " + c);
      // Byte tokens: the context loses its trailing spaces, the continuation gains them.
      std::string ctx_text = ex.context;
      while (!ctx_text.empty() && ctx_text.back() == ' ') ctx_text.pop_back();
      EXPECT_EQ(tok.decode(ctx), ctx_text);
      EXPECT_EQ(tok.decode(ctx) + tok.decode(cont), ex.context + " " + c);
      ll.push_back(manual_loglik(m, ctx, cont));
    }
    const auto best = int64_t(std::max_element(ll.begin(), ll.end()) - ll.begin());
    const auto worst = int64_t(std::min_element(ll.begin(), ll.end()) - ll.begin());
    ASSERT_NE(best, worst);
    ex.gold = i == 1 ? worst : best;  // two right, one wrong by construction
    examples.push_back(ex);
    manual.push_back(ll);
  }
  const auto r = analysis::evaluate_choice(model, tok, examples, 512, torch::kCPU, " ", /*batch_size=*/4);
  ASSERT_EQ(r.n, 3);
  for (std::size_t i = 0; i < examples.size(); ++i) {
    ASSERT_EQ(r.examples[i].logliks.size(), manual[i].size());
    for (std::size_t c = 0; c < manual[i].size(); ++c) EXPECT_NEAR(r.examples[i].logliks[c], manual[i][c], 1e-4);
    // Length normalisation by the characters of the choice.
    int64_t best_norm = 0;
    for (std::size_t c = 0; c < manual[i].size(); ++c) {
      EXPECT_EQ(r.examples[i].chars[c], int64_t(examples[i].choices[c].size()));
      if (manual[i][c] / double(examples[i].choices[c].size()) >
          manual[i][std::size_t(best_norm)] / double(examples[i].choices[std::size_t(best_norm)].size()))
        best_norm = int64_t(c);
    }
    EXPECT_EQ(r.examples[i].pred_norm, best_norm);
  }
  EXPECT_DOUBLE_EQ(r.acc, 2.0 / 3.0);
  // Standard error of the mean of {1, 0, 1}: sqrt(1/3) / sqrt(3) = 1/3.
  EXPECT_NEAR(r.acc_stderr, 1.0 / 3.0, 1e-12);

  // A context cut from the left to max_len tokens scores like the cut context.
  auto [ctx, cont] = analysis::choice_request(tok, items[1].first, " four");
  const int64_t max_len = 12;
  const auto cut = analysis::continuation_logliks(model, {{ctx, cont}}, max_len, torch::kCPU);
  std::vector<int32_t> all(ctx);
  all.insert(all.end(), cont.begin(), cont.end());
  const std::size_t keep = std::size_t(max_len) + 1;  // input max_len tokens + the last target
  std::vector<int32_t> tail(all.end() - keep, all.end());
  std::vector<int32_t> tctx(tail.begin(), tail.end() - cont.size());
  EXPECT_NEAR(cut[0], manual_loglik(m, tctx, cont), 1e-4);

  // A choice longer than the input is refused, naming the example and choice (its first
  // tokens were left out of the sum, making it look far more likely); one example has
  // no standard error (null in JSON, n/a in text), not 0.
  std::vector<analysis::ChoiceExample> long_choice = {examples[0]};
  long_choice[0].choices[1] = std::string(40, 'y');
  try {
    analysis::evaluate_choice(model, tok, long_choice, 20, torch::kCPU, " ", 4);  // choice 0 has 15 tokens
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("example 0, choice 1: the continuation has"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has 41 tokens, more than the 20 the input holds (--max-len)"), std::string::npos)
        << e.what();
  }
  const auto one = analysis::evaluate_choice(model, tok, {examples[0]}, 512, torch::kCPU, " ", 4);
  EXPECT_TRUE(std::isnan(one.acc_stderr));
  EXPECT_TRUE(one.to_json()["acc_stderr"].is_null());
  EXPECT_TRUE(r.to_json()["acc_stderr"].is_number());
}

TEST(LmEval, ChoiceFileErrorsNameTheLine) {
  reftest::TempDir t("choice_file");
  io::write_file_atomic(t / "a.jsonl", "{\"context\": \"x\", \"choices\": [\"a\", \"b\"], \"gold\": 1}\n"
                                       "{\"query\": \"x\", \"choices\": [\"a\", \"b\"], \"label\": 2}\n");
  try {
    analysis::read_choice_file(t / "a.jsonl");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a.jsonl:2: field 'gold' = 2"), std::string::npos) << e.what();
  }
  // An empty choice would score the delimiter alone: refused, naming the entry.
  io::write_file_atomic(t / "e.jsonl", "{\"context\": \"x\", \"choices\": [\"a\", \"\"], \"gold\": 0}\n");
  try {
    analysis::read_choice_file(t / "e.jsonl");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("e.jsonl:1: field 'choices': entry 1 is empty"), std::string::npos)
        << e.what();
  }
  // gold and its alias label with different values: refused (which one was used?); equal: fine.
  io::write_file_atomic(t / "g.jsonl", "{\"context\": \"x\", \"choices\": [\"a\", \"b\"], \"gold\": 0, \"label\": 0}\n"
                                       "{\"context\": \"x\", \"choices\": [\"a\", \"b\"], \"gold\": 0, \"label\": 1}\n");
  try {
    analysis::read_choice_file(t / "g.jsonl");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("g.jsonl:2: fields 'gold' = 0 and 'label' = 1 differ"), std::string::npos)
        << e.what();
  }
  EXPECT_NEAR(analysis::mean_stderr({1, 1, 0, 0}), std::sqrt(1.0 / 3.0) / 2.0, 1e-12);
}

TEST(LmEval, CorpusTrainPackedThenEvalCommands) {
  reftest::TempDir t("cli_text");
  ASSERT_TRUE(write_multilingual_head(40, t / "ml.jsonl"));
  auto c = reftest::run_lol("corpus --in " + reftest::quote(t / "ml.jsonl") +
                            " --tokenizer byte --label-field lang --valid-fraction 0.25 --eos --no-progress --out " +
                            reftest::quote(t / "ds"));
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("labels"), std::string::npos) << c.out;
  // An --out that cannot be a directory (a file is in the way): exit 2 naming it.
  auto blocked = reftest::run_lol("corpus --in " + reftest::quote(t / "ml.jsonl") +
                                  " --tokenizer byte --no-progress --out " + reftest::quote(t / "ml.jsonl/ds"));
  EXPECT_EQ(blocked.code, 2) << blocked.out;
  EXPECT_NE(blocked.out.find("ml.jsonl/ds: cannot create directory"), std::string::npos) << blocked.out;
  // A flag no input file would use is refused (it passed silently), in corpus and tokenizer train.
  io::write_file_atomic(t / "plain.txt", "some text\n");
  const auto expect_refused = [](const std::string& args, const std::string& needle) {
    const auto r = reftest::run_lol(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << ": " << r.out;
  };
  expect_refused("corpus --in " + reftest::quote(t / "plain.txt") + " --tokenizer byte --no-progress --text-field body --out " +
                     reftest::quote(t / "x"),
                 "--text-field applies to JSON lines files (*.jsonl, *.ndjson), and none of the 1 input file(s) is one");
  EXPECT_FALSE(fs::exists(t / "x"));
  expect_refused("tokenizer train --in " + reftest::quote(t / "ml.jsonl") +
                     " --vocab-size 300 --no-progress --doc-split line --out " + reftest::quote(t / "x"),
                 "--doc-split applies to plain text files, and every input file is JSON lines");
  // No held-out document: said when the data is written, and by commands that need it.
  auto no_valid = reftest::run_lol("corpus --in " + reftest::quote(t / "plain.txt") +
                                   " --tokenizer byte --no-progress --valid-fraction 0 --out " + reftest::quote(t / "nv"));
  EXPECT_EQ(no_valid.code, 0) << no_valid.out;
  EXPECT_NE(no_valid.out.find("note: no document was held out for validation (--valid-fraction 0 of 1 documents)"),
            std::string::npos)
      << no_valid.out;
  const std::string cfg = std::string(LOL_SOURCE_DIR) + "/configs/text_kjv_cpu.json";
  auto tr = reftest::run_lol(
      "train --config " + reftest::quote(cfg) + " --set data.dir=" + reftest::quote(t / "ds") +
      " --set train.out=" + reftest::quote(t / "run") +
      " --set train.steps=3 --set schedule.warmup_steps=1 --set data.seq_len=64 --set data.batch_size=4"
      " --set model.d_model=32 --set model.ffn_hidden=64 --set model.window=16 --set model.stride=8"
      " --set train.eval_batches=2 --set train.threads=1 --no-progress");
  ASSERT_EQ(tr.code, 0) << tr.out;
  auto ev = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "ds") +
                             " --json --no-progress");
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto j = nlohmann::json::parse(ev.out.substr(ev.out.find('{')));
  EXPECT_EQ(j["seq_len"], 64);
  EXPECT_EQ(j["packing"], "pack");
  EXPECT_GT(j["targets"].get<int64_t>(), 1000);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["loss"].get<double>()), 1e-6 * j["perplexity"].get<double>());
  // Random-ish model on bytes: somewhere near ln(259) nats, and bits per byte > 1.
  EXPECT_GT(j["loss"].get<double>(), 2.0);
  EXPECT_GT(j["bits_per_byte"].get<double>(), 1.0);
  // Sizes that cannot evaluate anything are refused, naming the flag (they used to give
  // "0 targets, perplexity 0" with exit 0, or a division by zero).
  for (const std::string bad : {"--seq-len 1", "--batch-size 0", "--batch-size -3"}) {
    auto e = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "ds") +
                              " --no-progress " + bad);
    EXPECT_EQ(e.code, 2) << bad << ": " << e.out;
    EXPECT_NE(e.out.find(bad.substr(0, bad.find(' '))), std::string::npos) << e.out;
  }
  // Sliding windows: every token after each document's first is predicted (packed rows
  // of 64 lose one target per row boundary inside a document).
  auto sl = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "ds") +
                             " --json --no-progress --seq-len 32 --stride 16");
  ASSERT_EQ(sl.code, 0) << sl.out;
  const auto js = nlohmann::json::parse(sl.out.substr(sl.out.find('{')));
  EXPECT_EQ(js["packing"], "sliding");
  EXPECT_EQ(js["stride"], 16);
  EXPECT_EQ(js["seq_len"], 32);
  {
    auto valid = data::Dataset::open(t / "ds").load("valid");
    EXPECT_EQ(js["targets"].get<int64_t>(), valid.total_tokens() - valid.size());
    EXPECT_GT(js["targets"].get<int64_t>(), j["targets"].get<int64_t>());
  }
  for (const std::string bad : {"--stride 32", "--stride 8 --packing pack"}) {
    auto e = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "ds") +
                              " --no-progress --seq-len 32 " + bad);
    EXPECT_EQ(e.code, 2) << bad << ": " << e.out;
    EXPECT_NE(e.out.find(bad.find("packing") != std::string::npos
                             ? "--packing pack with --stride"
                             : "--stride 32: expected 1 .. 31, less than the window of 32 tokens (--seq-len)"),
              std::string::npos)
        << e.out;
  }
  // Padded rows shorter than a document: the fix is named as this command spells it.
  auto short_rows = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " +
                                     reftest::quote(t / "ds") + " --no-progress --packing pad --seq-len 8");
  EXPECT_EQ(short_rows.code, 2) << short_rows.out;
  EXPECT_NE(short_rows.out.find("tokens, more than --seq-len = 8 (raise --seq-len, or evaluate in sliding windows with --stride)"), std::string::npos)
      << short_rows.out;

  io::write_file_atomic(t / "q.jsonl", "{\"context\": \"Das ist\", \"choices\": [\"gut\", \"schlecht\"], \"gold\": 0}\n"
                                       "{\"context\": \"It is\", \"choices\": [\"fine\", \"bad\", \"odd\"], \"gold\": 2}\n");
  auto ch = reftest::run_lol("eval choice --model " + reftest::quote(t / "run") + " --data " +
                             reftest::quote(t / "q.jsonl") + " --json --no-progress --out " + reftest::quote(t / "per.jsonl"));
  ASSERT_EQ(ch.code, 0) << ch.out;
  const auto cj = nlohmann::json::parse(ch.out.substr(ch.out.find('{')));
  EXPECT_EQ(cj["n"], 2);
  const std::string per = reftest::read_text(t / "per.jsonl");
  EXPECT_EQ(std::count(per.begin(), per.end(), '\n'), 2);
  EXPECT_NE(per.find("\"logliks\""), std::string::npos) << per;
  // Rows longer than the model's context are refused by the flag that asks for them.
  auto too_long = reftest::run_lol("eval choice --model " + reftest::quote(t / "run") + " --data " +
                                   reftest::quote(t / "q.jsonl") + " --no-progress --max-len 1000000");
  EXPECT_EQ(too_long.code, 2) << too_long.out;
  EXPECT_NE(too_long.out.find("--max-len 1000000: expected <= the model's max_seq_len = "), std::string::npos)
      << too_long.out;

  // Every checkpoint carries the tokenizer it was trained with, so generation needs neither
  // --tokenizer nor the dataset (removed here) ...
  std::string latest = reftest::read_text(t / "run/latest");
  latest.erase(latest.find_last_not_of("\n ") + 1);
  EXPECT_TRUE(fs::exists(fs::path(t / "run") / latest / "tokenizer.json")) << latest;
  EXPECT_TRUE(fs::exists(fs::path(t / "run") / latest / "tokenizer_config.json")) << latest;
  fs::remove_all(t / "ds");
  auto gen = reftest::run_lol("generate --model " + reftest::quote(t / "run") + " --prompt 'Das ist' --max-new 4");
  EXPECT_EQ(gen.code, 0) << gen.out;
  // ... a --tokenizer with the same vocabulary is accepted, and one of another vocabulary
  // (GPT-2's: its ids fit no 260-id model and mean other text) is refused, naming the flag.
  auto same = reftest::run_lol("generate --model " + reftest::quote(t / "run") +
                               " --tokenizer byte --prompt 'Das ist' --max-new 4");
  EXPECT_EQ(same.code, 0) << same.out;
  // A --stop text of several tokens says so, with the ids it encodes to.
  auto stop_words = reftest::run_lol("generate --model " + reftest::quote(t / "run") + " --prompt 'Das ist' --stop the");
  EXPECT_EQ(stop_words.code, 2) << stop_words.out;
  EXPECT_NE(stop_words.out.find("--stop 'the': not one token of the model's vocabulary (the tokenizer encodes it as 3 "
                                "tokens: "),
            std::string::npos)
      << stop_words.out;
  // A vocabulary string (the byte-level spelling of byte 0xE9) is taken as that token, with a note:
  // the text "\xC3\xA9" itself is two byte tokens.
  auto stop_entry =
      reftest::run_lol("generate --model " + reftest::quote(t / "run") + " --prompt 'Das ist' --max-new 2 --stop \xC3\xA9");
  EXPECT_EQ(stop_entry.code, 0) << stop_entry.out;
  EXPECT_NE(stop_entry.out.find("is the vocabulary entry of token "), std::string::npos) << stop_entry.out;
  EXPECT_NE(stop_entry.out.find("itself encodes to 2 tokens)"), std::string::npos) << stop_entry.out;
  const std::string gpt2 = std::string(LOL_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2";
  auto other = reftest::run_lol_all(
      {"eval choice --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "q.jsonl") +
           " --no-progress --tokenizer " + reftest::quote(gpt2),
       "generate --model " + reftest::quote(t / "run") + " --tokenizer " + reftest::quote(gpt2) + " --prompt hi"});
  for (const auto& o : other) {
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_NE(o.out.find("--tokenizer " + gpt2 + ": not the vocabulary"), std::string::npos) << o.out;
  }
}

// eval lm counts bytes with the model's vocabulary (a --tokenizer of another one is
// refused) and stops with exit status 3 when a batch's loss is NaN/Inf (finite weights
// that overflow float32), instead of reporting a NaN perplexity.
// A task dataset (maze) has a word vocabulary and no tokenizer: `eval lm` reports loss
// and perplexity over the loss-mask tokens, no bytes (JSON null), and packed rows give
// the loss of one padded row per sequence.
TEST(LmEval, TaskDatasetGivesLossWithoutBytes) {
  reftest::TempDir t("lm_eval_task");
  auto d = reftest::run_lol("data maze --n 30 --size 4 --seed 5 --valid-fraction 0.3 --out " + reftest::quote(t / "data"));
  ASSERT_EQ(d.code, 0) << d.out;
  const auto ds = data::Dataset::open(t / "data");
  nlohmann::json cfg = {{"vocab_size", ds.vocab_size()}, {"d_model", 32}, {"n_heads", 2},       {"n_kv_heads", 2},
                        {"ffn_hidden", 64},              {"n_prelude", 1}, {"n_coda", 1},        {"library_size", 3},
                        {"core_depth", 2},               {"window", 8},    {"stride", 4},        {"max_seq_len", 1024}};
  io::write_file_atomic(t / "model.json", cfg.dump());
  ASSERT_EQ(reftest::run_lol("init --config " + reftest::quote(t / "model.json") + " --seed 2 --out " +
                             reftest::quote(t / "model"))
                .code,
            0);
  const std::string eval = "eval lm --model " + reftest::quote(t / "model") + " --data " + reftest::quote(t / "data") +
                           " --no-progress";
  auto packed = reftest::run_lol(eval + " --json");
  ASSERT_EQ(packed.code, 0) << packed.out;
  EXPECT_NE(packed.out.find("is a maze dataset (a word vocabulary, no tokenizer): bits per byte not reported"),
            std::string::npos)
      << packed.out;
  const auto pj = nlohmann::json::parse(packed.out.substr(packed.out.find('{')));
  EXPECT_TRUE(pj["bits_per_byte"].is_null()) << pj.dump();
  EXPECT_TRUE(pj["bytes"].is_null()) << pj.dump();
  // Targets: the loss-mask tokens after each sequence's first token.
  const auto valid = ds.load("valid");
  int64_t targets = 0;
  for (int64_t i = 0; i < valid.size(); ++i) {
    const auto v = valid.get(i);
    for (int64_t p = 1; p < v.length; ++p) targets += v.loss_mask ? v.loss_mask[p] : 1;
  }
  ASSERT_GT(targets, 0);
  EXPECT_EQ(pj["targets"].get<int64_t>(), targets);
  EXPECT_GT(pj["loss"].get<double>(), 0.5);
  auto padded = reftest::run_lol(eval + " --json --packing pad --seq-len 1024");
  ASSERT_EQ(padded.code, 0) << padded.out;
  const auto dj = nlohmann::json::parse(padded.out.substr(padded.out.find('{')));
  EXPECT_EQ(dj["targets"], pj["targets"]);
  EXPECT_NEAR(dj["loss_sum"].get<double>(), pj["loss_sum"].get<double>(), 1e-4 * pj["loss_sum"].get<double>());
  auto text = reftest::run_lol(eval);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find(std::to_string(targets) + " targets; loss "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find(", bits per byte "), std::string::npos) << text.out;
  // A model trained on other data (config.json extra.task) is refused: its ids mean other tokens.
  auto cj = nlohmann::json::parse(reftest::read_text(t / "model/config.json"));
  cj["extra"] = {{"task", "text"}};
  io::write_file_atomic(t / "model/config.json", cj.dump());
  auto other = reftest::run_lol(eval);
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("task 'maze', but " + t / "model" + " was trained on 'text' data (config.json extra.task)"),
            std::string::npos)
      << other.out;
}

TEST(LmEval, WrongTokenizerAndOverflowingWeights) {
  reftest::TempDir t("lm_eval_bad");
  ASSERT_TRUE(write_multilingual_head(12, t / "ml.jsonl"));
  ASSERT_EQ(reftest::run_lol("corpus --in " + reftest::quote(t / "ml.jsonl") +
                             " --tokenizer byte --valid-fraction 0.5 --no-progress --out " + reftest::quote(t / "ds"))
                .code,
            0);
  const std::string cfg = std::string(LOL_SOURCE_DIR) + "/configs/text_kjv_cpu.json";
  ASSERT_EQ(reftest::run_lol("train --config " + reftest::quote(cfg) + " --set data.dir=" + reftest::quote(t / "ds") +
                             " --set train.out=" + reftest::quote(t / "run") +
                             " --set train.steps=1 --set schedule.warmup_steps=1 --set data.seq_len=32"
                             " --set data.batch_size=2 --set model.d_model=32 --set model.ffn_hidden=64"
                             " --set model.window=16 --set model.stride=8 --set train.eval_batches=1"
                             " --set train.threads=1 --no-progress")
                .code,
            0);
  const std::string eval = "eval lm --model " + reftest::quote(t / "run") + " --data " + reftest::quote(t / "ds") +
                           " --no-progress --max-batches 2";
  const std::string gpt2 = std::string(LOL_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2";
  auto other = reftest::run_lol(eval + " --tokenizer " + reftest::quote(gpt2));
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("--tokenizer " + gpt2 + ": not the vocabulary"), std::string::npos) << other.out;
  // Data of another tokenizer with no more ids than the model's: ids would be read as
  // other text (it gave a loss and exit 0).
  ASSERT_EQ(reftest::run_lol("tokenizer train --in " + reftest::quote(t / "ml.jsonl") +
                             " --vocab-size 259 --no-progress --out " + reftest::quote(t / "tok259"))
                .code,
            0);
  ASSERT_EQ(reftest::run_lol("corpus --in " + reftest::quote(t / "ml.jsonl") + " --tokenizer " +
                             reftest::quote(t / "tok259") + " --valid-fraction 0.5 --no-progress --out " +
                             reftest::quote(t / "ds259"))
                .code,
            0);
  auto foreign = reftest::run_lol("eval lm --model " + reftest::quote(t / "run") + " --data " +
                                  reftest::quote(t / "ds259") + " --no-progress --max-batches 2");
  EXPECT_EQ(foreign.code, 2) << foreign.out;
  EXPECT_NE(foreign.out.find("--data " + (t / "ds259") + ": its tokenizer (" + (t / "ds259") +
                             "/tokenizer.json) is not the one"),
            std::string::npos)
      << foreign.out;
  std::string latest = reftest::read_text(t / "run/latest");
  latest.erase(latest.find_last_not_of("\n ") + 1);
  // `lol train` with init_from refuses that data too (it trained and then labelled the
  // new checkpoint with the other tokenizer), and accepts the model's own.
  const std::string start = (fs::path(t / "run") / latest).string();
  auto continue_on = [&](const std::string& data, const std::string& name) {
    const nlohmann::json rc = {{"init_from", start},
                               {"data", {{"dir", data}, {"seq_len", 32}, {"batch_size", 2}, {"packing", "pack"}}},
                               {"train", {{"steps", 1}, {"threads", 1}, {"eval_batches", 1}, {"out", t / name}}}};
    lol::io::write_file_atomic(t / (name + ".json"), rc.dump());
    return reftest::run_lol("train --config " + reftest::quote(t / (name + ".json")) + " --no-progress");
  };
  auto cont = continue_on(t / "ds259", "cont259");
  EXPECT_EQ(cont.code, 2) << cont.out;
  EXPECT_NE(cont.out.find("data.dir = " + (t / "ds259") + " (with init_from " + start + "): its tokenizer (" +
                          (t / "ds259") + "/tokenizer.json) is not the one"),
            std::string::npos)
      << cont.out;
  EXPECT_FALSE(fs::exists(t / "cont259"));
  auto same = continue_on(t / "ds", "cont");
  EXPECT_EQ(same.code, 0) << same.out;
  const std::string weights = (fs::path(t / "run") / latest / "model.safetensors").string();
  std::map<std::string, std::string> meta;
  auto ts = lol::load_tensors(weights, &meta);
  for (auto& [name, w] : ts)
    if (name == "model.norm.weight") w.fill_(3e38);
  lol::save_tensors(weights, ts, meta);
  auto bad = reftest::run_lol(eval + " --out " + reftest::quote(t / "ev.json"));
  EXPECT_EQ(bad.code, 3) << bad.out;
  EXPECT_NE(bad.out.find("error: evaluation: the loss of batch 1: NaN or Inf values"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(t / "ev.json"));
}

}  // namespace
