// `lol train` and `lol plot` (issue 4; docs/training.md).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_dir.h"
#include "dataset/shards.h"
#include "distributed/communicator.h"
#include "distributed/env.h"
#include "training/plot.h"
#include "training/run_config.h"
#include "training/train_checkpoint.h"
#include "training/trainer.h"
#include "io/json_file.h"
#include "util/error.h"

namespace lol::cli {

namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config, resume;
  std::vector<std::string> sets;
  bool no_progress = false;
};

void run_train(const TrainArgs& a) {
  std::string config_path = a.config;
  if (config_path.empty()) {
    if (a.resume.empty()) throw InputError("lol train: --config is required (or --resume RUN_DIR)");
    // Continue with the configuration saved next to the checkpoint.
    config_path = training::resolve_checkpoint(a.resume) + "/run.json";
  }
  auto cfg = training::RunConfig::load(config_path, a.sets);
  if (!a.resume.empty()) {
    // A resumed run continues in the run it resumes (the directory given, or the run
    // directory above a checkpoint directory), not in the train.out its run.json was
    // written with: resuming a copied or moved run must not write into the original.
    // `--set train.out=DIR` still chooses another directory.
    bool out_set = false;
    for (const auto& kv : a.sets) out_set |= kv.rfind("train.out=", 0) == 0;
    if (!out_set) {
      const fs::path given(a.resume);
      fs::path ck(training::resolve_checkpoint(a.resume));
      if (ck.filename().empty()) ck = ck.parent_path();  // "…/step-000100/"
      if (fs::exists(given / "latest"))
        cfg.train.out = given.string();
      else if (ck.has_parent_path() && ck.parent_path().filename() == "checkpoints")
        cfg.train.out = ck.parent_path().parent_path().string();
    }
  }
  if (a.no_progress) cfg.train.progress = false;
  // A run directory starts from its latest checkpoint, as `lol eval` reads it; a Hugging
  // Face folder is named as such (resolve_model_dir).
  if (!cfg.init_from.empty() && fs::is_directory(cfg.init_from)) cfg.init_from = resolve_model_dir(cfg.init_from);
  if (!cfg.init_from.empty() && a.resume.empty() && fs::exists(fs::path(cfg.init_from) / "config.json") &&
      fs::exists(fs::path(cfg.data.dir) / "dataset.json")) {  // else the trainer names what is missing
    // A model continued on new data must read it as it was trained to (task, task
    // vocabulary, text tokenizer), as `lol eval` requires.
    const auto mc = io::read_json_file(cfg.init_from + "/config.json");
    if (mc.is_object())
      require_model_reads_dataset(cfg.init_from, mc.contains("extra") ? mc["extra"] : nlohmann::json(),
                                  mc.value("vocab_size", int64_t(0)), data::Dataset::open(cfg.data.dir),
                                  cfg.source + ": data.dir = " + cfg.data.dir + " (with init_from " + cfg.init_from + ")");
  }
  try {
    auto r = training::run_training(cfg, a.resume);
    if (r.interrupted || dist::read_dist_env().rank != 0) return;  // rank 0 reports for the job
    if (r.already_done) {
      std::fprintf(stderr, "lol train: %s is already at step %lld = train.steps; nothing to do (raise train.steps, "
                   "e.g. --set train.steps=%lld, to continue)\n", r.last_checkpoint.c_str(), (long long)r.steps_done,
                   (long long)r.steps_done * 2);
      return;
    }
    std::fprintf(stderr, "lol train: done, %lld steps, loss %.4f", (long long)r.steps_done, r.last_loss);
    if (r.valid_loss >= 0) std::fprintf(stderr, ", valid loss %.4f, valid acc %.4f", r.valid_loss, r.valid_acc);
    std::fprintf(stderr, "; checkpoint %s\n", r.last_checkpoint.c_str());
  } catch (const training::NonFiniteLossError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    std::exit(3);
  } catch (const dist::DistributedError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(4);  // skip destructors: a backend whose peer died may block in them
  }
}

}  // namespace

void register_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* t = app.add_subcommand("train", "Train a model on token shards (docs/training.md)");
  t->add_option("--config", args->config, "Run configuration (JSON; presets in configs/)");
  t->add_option("--set", args->sets, "Override a config value by dotted key, e.g. --set train.steps=100 (repeatable)")
      ->take_all();
  t->add_option("--resume", args->resume, "Continue a run: its run directory (latest checkpoint) or a checkpoint directory");
  t->add_flag("--no-progress", args->no_progress, "No progress bar on stderr");
  t->footer(
      "Exit status: 0 done or stopped by SIGINT/SIGTERM (checkpoint saved), 2 bad input, "
      "3 non-finite loss (last good checkpoint kept), 4 out of memory, or a data-parallel peer failed or timed "
      "out (docs/distributed.md).");
  t->callback([args] { run_train(*args); });

  auto popts = std::make_shared<training::PlotOptions>();
  auto* p = app.add_subcommand("plot", "Render loss curves from metrics.jsonl files with gnuplot");
  p->add_option("metrics", popts->inputs, "metrics.jsonl files or run directories (one curve each)")->required();
  p->add_option("--out,-o", popts->out, "Output image (.png or .svg)")->required();
  p->add_option("--x", popts->x, "x axis: step, tokens, flops or elapsed")->check(CLI::IsMember({"step", "tokens", "flops", "elapsed"}));
  p->add_flag("--log-y", popts->log_y, "Logarithmic loss axis");
  p->add_option("--title", popts->title, "Plot title");
  p->callback([popts] {
    training::plot_metrics(*popts);
    std::fprintf(stderr, "lol plot: wrote %s\n", popts->out.c_str());
  });
}

}  // namespace lol::cli
