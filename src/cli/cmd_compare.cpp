// `lol compare`: FLOPs-matched comparison of run configurations of any architecture
// (LoL, dense, looped, MoE; paper 4.2-4.3, issue 9; docs/baselines.md).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <iostream>
#include <memory>

#include "baselines/compare.h"
#include "cli/commands.h"
#include "util/error.h"

namespace lol::cli {

namespace {

struct CompareArgs {
  std::vector<std::string> configs, sets;
  std::string data, out;
  double flops = 0;
  int64_t max_steps = 1000000;
  bool no_progress = false, resume = false;
};

void run_compare_cmd(const CompareArgs& a) {
  baselines::CompareOptions o;
  o.configs = a.configs;
  o.flops_budget = a.flops;
  o.data_dir = a.data;
  o.out_dir = a.out;
  o.overrides = a.sets;
  o.max_steps = a.max_steps;
  o.progress = !a.no_progress;
  o.resume = a.resume;
  const auto r = baselines::run_compare(o);
  if (r.interrupted) {
    std::fprintf(stderr, "lol compare: stopped after %zu of %zu models (the next one's checkpoint is saved); continue "
                 "with the same command and --resume\n", r.entries.size(), a.configs.size());
    return;
  }
  std::cout << baselines::compare_markdown(r.entries, a.flops);
  std::cout << "wrote " << a.out << "/compare.md, " << a.out << "/compare.json, " << a.out << "/loss_vs_flops.png\n";
}

}  // namespace

void register_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* c = app.add_subcommand("compare",
                               "Train run configs of any architecture to the same FLOPs budget on the same data; "
                               "table + loss-vs-FLOPs plot (docs/baselines.md)");
  c->add_option("--configs", a->configs, "Run config JSON files (the file stem names each model)")
      ->required()
      ->take_all();
  c->add_option("--flops", a->flops, "Training FLOPs budget per model, e.g. 2e13")->required();
  c->add_option("--data", a->data, "Dataset directory (replaces data.dir of every config)")->required();
  c->add_option("--out", a->out, "Output directory: one run per model, compare.md, compare.json, loss_vs_flops.png")
      ->required();
  c->add_option("--set", a->sets, "Override a value of every config, e.g. --set train.threads=2 (repeatable)")
      ->take_all();
  c->add_option("--max-steps", a->max_steps, "Refuse budgets that need more optimizer steps than this")
      ->default_val(1000000)
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  c->add_flag("--no-progress", a->no_progress, "No progress bars");
  c->add_flag("--resume", a->resume,
              "Continue the comparison in --out (same command): finished models are kept, a stopped one resumes "
              "from its checkpoint");
  c->callback([a] { run_compare_cmd(*a); });
}

}  // namespace lol::cli
