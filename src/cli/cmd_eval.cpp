// `lol eval lm` (loss, perplexity, bits per byte on a token dataset split) and
// `lol eval choice` (multiple-choice log-likelihood tasks, lm-evaluation-harness
// convention) for trained models (issue 7). Logic in src/analysis/lm_eval.h; see
// docs/text.md.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/lm_eval.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "core/runtime.h"
#include "dataset/text_tokenizer.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

struct EvalArgs {
  std::string model, data, split = "valid", tokenizer, packing, device = "cpu", out, delimiter = " ";
  int64_t seq_len = 0, stride = 0, batch_size = 8, max_batches = 0;
  int threads = 0;
  bool json = false, no_progress = false;
};

/// The training run's data.seq_len and data.packing (checkpoint run.json), when recorded.
std::pair<int64_t, std::string> trained_layout(const std::string& dir) {
  int64_t seq_len = 0;
  std::string packing;
  if (fs::exists(dir + "/run.json")) {
    const auto run = io::read_json_file(dir + "/run.json");
    if (run.contains("data")) {
      const auto& d = run["data"];
      if (d.contains("seq_len") && d["seq_len"].is_number_integer()) seq_len = d["seq_len"].get<int64_t>();
      if (d.contains("packing") && d["packing"].is_string()) packing = d["packing"].get<std::string>();
    }
  }
  return {seq_len, packing};
}

/// The model's max_seq_len; throws InputError when `seq_len` exceeds it.
int64_t check_max_len(int64_t seq_len, const training::TrainableModel& model, const std::string& flag = "--seq-len") {
  const int64_t max_len = model.config_json().value("max_seq_len", int64_t(1024));
  if (seq_len > max_len)
    throw InputError(flag + " " + std::to_string(seq_len) + ": expected <= the model's max_seq_len = " +
                     std::to_string(max_len));
  return max_len;
}

/// Window of --stride evaluation: --seq-len, else the training run's row length, else
/// min(1024, max_seq_len).
int64_t sliding_window(const EvalArgs& a, const std::string& dir, const training::TrainableModel& model) {
  if (!a.packing.empty())
    throw InputError("--packing " + a.packing + " with --stride: sliding-window evaluation reads each sequence "
                     "on its own (expected one of the two)");
  const int64_t w = a.seq_len > 0 ? a.seq_len : trained_layout(dir).first;
  const int64_t max_len = check_max_len(w, model);
  return w > 0 ? w : std::min<int64_t>(1024, max_len);
}

/// Row layout: --seq-len / --packing, else the training run's (checkpoint run.json), else
/// packed rows of min(1024, max_seq_len).
training::BatchLayout eval_layout(const EvalArgs& a, const std::string& dir, const training::TrainableModel& model) {
  training::BatchLayout l;
  l.batch_size = a.batch_size;
  const auto [trained_len, trained_packing] = trained_layout(dir);
  std::string packing = a.packing.empty() ? trained_packing : a.packing;
  int64_t seq_len = a.seq_len == 0 ? trained_len : a.seq_len;
  const int64_t max_len = check_max_len(seq_len, model);
  if (packing.empty()) packing = "pack";
  if (packing != "pack" && packing != "pad") throw InputError("--packing '" + packing + "': expected pack or pad");
  l.pack = packing == "pack";
  if (seq_len <= 0 && l.pack) seq_len = std::min<int64_t>(1024, max_len);
  l.seq_len = seq_len;
  l.seq_len_setting = "--seq-len";
  return l;
}

void run_eval_lm(const EvalArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  const auto dev = parse_device(a.device);
  const std::string dir = resolve_model_dir(a.model);
  require_output_outside_model(a.out, dir, "--out");
  require_output_outside_dataset(a.out, a.data, "--out");
  auto model = training::load_model(dir);
  model->module().to(dev);
  auto ds = data::Dataset::open(a.data);
  const int64_t model_vocab = model->config_json().value("vocab_size", int64_t(0));
  // The model's training data (config.json extra: task, task vocabulary) must match.
  const auto cfg = io::read_json_file(dir + "/config.json");
  require_model_reads_dataset(dir, cfg.is_object() && cfg.contains("extra") ? cfg["extra"] : nlohmann::json(),
                              model_vocab, ds, "--data " + a.data);
  std::unique_ptr<tokenizers::Tokenizer> tok;
  if (!a.tokenizer.empty()) {
    // Its byte lengths count the model's targets: it must be the model's vocabulary.
    tok = model_tokenizer(dir, a.tokenizer, model_vocab);
  } else if (ds.info().contains("tokenizer")) {
    tok = tokenizers::load_tokenizer((fs::path(a.data) / ds.info()["tokenizer"].get<std::string>()).string());
  } else if (ds.task() == "text") {
    throw InputError(a.data + "/dataset.json names no tokenizer: pass --tokenizer (needed for bits per byte)");
  }  // else a task dataset: a word vocabulary has no byte strings (loss and perplexity only)
  const auto split = ds.load(a.split);
  const auto token_bytes = tok ? data::token_byte_lengths(*tok) : std::vector<int32_t>();
  training::BatchLayout layout;
  analysis::LmEvalResult r;
  if (a.stride > 0) {
    layout.seq_len = sliding_window(a, dir, *model);
    if (a.stride >= layout.seq_len)
      throw InputError("--stride " + std::to_string(a.stride) + ": expected 1 .. " + std::to_string(layout.seq_len - 1) +
                       ", less than the window of " + std::to_string(layout.seq_len) + " tokens (" +
                       (a.seq_len > 0                     ? std::string("--seq-len")
                        : trained_layout(dir).first > 0 ? "the training's row length; --seq-len sets it"
                                                          : "min(1024, max_seq_len); --seq-len sets it") +
                       "): a stride of the whole window would leave the first token of every later window unpredicted");
    r = analysis::evaluate_lm_sliding(*model, split, layout.seq_len, a.stride, a.batch_size, token_bytes, dev,
                                      a.max_batches, !a.no_progress);
  } else {
    layout = eval_layout(a, dir, *model);
    r = analysis::evaluate_lm(*model, split, layout, token_bytes, dev, a.max_batches, !a.no_progress);
  }
  if (!tok)
    std::cerr << "note: " << a.data << " is a " << ds.task()
              << " dataset (a word vocabulary, no tokenizer): bits per byte not reported\n";
  nlohmann::json j = r.to_json();
  j["model"] = dir;
  j["data"] = a.data;
  j["split"] = a.split;
  // pad with no --seq-len: each batch is padded to its longest row (no fixed length).
  j["seq_len"] = layout.seq_len > 0 ? nlohmann::json(layout.seq_len) : nlohmann::json(nullptr);
  j["packing"] = a.stride > 0 ? "sliding" : layout.pack ? "pack" : "pad";
  j["stride"] = a.stride > 0 ? nlohmann::json(a.stride) : nlohmann::json(nullptr);
  if (!a.out.empty()) io::write_file_atomic(a.out, j.dump(1) + "\n");
  if (a.json) {
    std::cout << j.dump(1) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(4) << "split " << a.split << ": " << r.targets << " targets";
  if (r.bytes_counted) std::cout << ", " << r.bytes << " bytes";
  std::cout << "; loss " << r.loss << " nats/token, perplexity " << std::setprecision(3) << r.perplexity;
  if (r.bytes_counted && r.bytes > 0) std::cout << ", bits per byte " << std::setprecision(4) << r.bits_per_byte;
  else if (r.bytes_counted) std::cout << ", bits per byte n/a (no bytes)";
  std::cout << " (" << std::setprecision(1) << r.seconds << " s)\n";
}

void run_eval_choice(const EvalArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  const auto dev = parse_device(a.device);
  const std::string dir = resolve_model_dir(a.model);
  require_output_outside_model(a.out, dir, "--out");
  require_output_is_not_input(a.out, a.data, "--out", "--data");
  auto model = training::load_model(dir);
  model->module().to(dev);
  {
    // A task model (maze, sudoku) reads a word vocabulary, not text: no tokenizer fits it.
    const auto cfg = io::read_json_file(dir + "/config.json");
    if (cfg.is_object() && cfg.contains("extra") && cfg["extra"].is_object() && cfg["extra"].contains("task") &&
        cfg["extra"]["task"].is_string() && cfg["extra"]["task"].get<std::string>() != "text")
      throw InputError(dir + ": a model of the '" + cfg["extra"]["task"].get<std::string>() +
                       "' task (config.json extra.task), whose task vocabulary is not a text tokenizer; eval choice "
                       "scores text with language models (lol corpus, lol train)");
  }
  auto tok = model_tokenizer(dir, a.tokenizer, model->config_json().value("vocab_size", int64_t(0)));
  if (!tok) throw InputError(dir + ": no tokenizer.json here or in the training dataset named by config.json extra; pass --tokenizer");
  const auto examples = analysis::read_choice_file(a.data);
  const int64_t model_max_len = check_max_len(a.seq_len, *model, "--max-len");
  const int64_t max_len = a.seq_len > 0 ? a.seq_len : model_max_len;
  const auto r = analysis::evaluate_choice(*model, *tok, examples, max_len, dev, a.delimiter, a.batch_size,
                                           !a.no_progress);
  if (!a.out.empty()) {
    std::string lines;
    for (std::size_t i = 0; i < r.examples.size(); ++i) {
      const auto& e = r.examples[i];
      lines += nlohmann::json({{"index", i}, {"gold", examples[i].gold}, {"pred", e.pred}, {"pred_norm", e.pred_norm},
                               {"logliks", e.logliks}, {"chars", e.chars}})
                   .dump() +
               "\n";
    }
    io::write_file_atomic(a.out, lines);
  }
  nlohmann::json j = r.to_json();
  j["model"] = dir;
  j["data"] = a.data;
  if (a.json) {
    std::cout << j.dump(1) << "\n";
    return;
  }
  const auto err = [](double v) {
    std::ostringstream o;
    if (std::isfinite(v)) o << std::fixed << std::setprecision(4) << v;
    else o << "n/a";  // one example: no sample standard error
    return o.str();
  };
  std::cout << std::fixed << std::setprecision(4) << r.n << " examples: acc " << r.acc << " +- " << err(r.acc_stderr)
            << ", acc_norm " << r.acc_norm << " +- " << err(r.acc_norm_stderr) << "\n";
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* e = app.add_subcommand("eval", "Evaluate language models: perplexity / bits per byte, multiple choice");
  e->require_subcommand(1);

  auto la = std::make_shared<EvalArgs>();
  auto* lm = e->add_subcommand("lm", "Mean loss, perplexity and bits per byte on a token dataset split");
  lm->add_option("--model", la->model, "Checkpoint directory or training run directory")->required();
  lm->add_option("--data", la->data, "Dataset directory (lol corpus)")->required();
  lm->add_option("--split", la->split, "Split to evaluate")->capture_default_str();
  lm->add_option("--tokenizer", la->tokenizer, "Tokenizer for byte counts (default: the dataset's tokenizer.json)");
  lm->add_option("--seq-len", la->seq_len, "Row length, >= 2 (default: the training run's data.seq_len)")
      ->check(CLI::Range(2, 1 << 20));
  lm->add_option("--packing", la->packing, "pack | pad (default: the training run's)");
  lm->add_option("--stride", la->stride,
                 "Sliding-window evaluation: each sequence on its own, windows of --seq-len tokens advancing this "
                 "many tokens; every token predicted once, with >= seq-len - stride tokens of context (1 .. seq-len - 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  lm->add_option("--batch-size", la->batch_size, "Rows per forward")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  lm->add_option("--max-batches", la->max_batches, "Evaluate at most this many batches (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  lm->add_option("--out", la->out, "Also write the result as JSON to this file");
  lm->add_flag("--json", la->json, "Print JSON");
  lm->add_flag("--no-progress", la->no_progress, "No progress bar");
  lm->add_option("--device", la->device, "cpu | cuda[:N]")->capture_default_str();
  lm->add_option("--threads", la->threads, "CPU threads (default: all available)");
  lm->callback([la] { run_eval_lm(*la); });

  auto ca = std::make_shared<EvalArgs>();
  auto* ch = e->add_subcommand("choice", "Multiple-choice accuracy (JSONL of {context, choices, gold})");
  ch->add_option("--model", ca->model, "Checkpoint directory or training run directory")->required();
  ch->add_option("--data", ca->data, "JSONL file: {\"context\": str, \"choices\": [str], \"gold\": int} per line")
      ->required();
  ch->add_option("--tokenizer", ca->tokenizer, "Tokenizer (default: the model's or its training dataset's)");
  ch->add_option("--delimiter", ca->delimiter, "Put between context and each choice (default: one space)");
  ch->add_option("--max-len", ca->seq_len, "Longest input row, cut from the left (default: max_seq_len)")
      ->check(CLI::Range(2, 1 << 20));
  ch->add_option("--batch-size", ca->batch_size, "Rows per forward")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  ch->add_option("--out", ca->out, "Write per-example log-likelihoods (JSONL) to this file");
  ch->add_flag("--json", ca->json, "Print JSON");
  ch->add_flag("--no-progress", ca->no_progress, "No progress bar");
  ch->add_option("--device", ca->device, "cpu | cuda[:N]")->capture_default_str();
  ch->add_option("--threads", ca->threads, "CPU threads (default: all available)");
  ch->callback([ca] { run_eval_choice(*ca); });
}

}  // namespace lol::cli
