// `lol data maze|sudoku|verify`: synthetic task datasets (paper Appendix C.3, C.4).
#include <iostream>

#include "cli/commands.h"
#include "dataset/task_dataset.h"
#include "util/error.h"

namespace lol::cli {

void register_data(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Generate and check task datasets (mazes, sudoku)");
  data->require_subcommand(1);

  auto opt = std::make_shared<data::TaskDatasetOptions>();
  auto out = std::make_shared<std::string>();
  for (const char* task : {"maze", "sudoku"}) {
    auto* c = data->add_subcommand(task, std::string("Generate ") + task +
                                             " puzzles solved with all five strategies: JSONL + token shards");
    c->add_option("--n", opt->n_puzzles, "Number of distinct puzzles (5 sequences each)")->default_val(1000);
    if (std::string(task) == "maze") c->add_option("--size", opt->size, "Maze side, 4..16")->default_val(8);
    c->add_option("--seed", opt->seed, "Random seed (output is deterministic for a seed)")->default_val(0);
    c->add_option("--valid-fraction", opt->valid_fraction, "Share of puzzles held out for validation")->default_val(0.1);
    c->add_option("--max-tokens", opt->max_tokens, "Drop sequences longer than this (0 = keep all)")->default_val(0);
    c->add_option("--threads", opt->threads, "Generator threads (sudoku)")->default_val(1)->check(CLI::Range(1, 1024));
    c->add_option("--out", *out, "Output directory")->required();
    std::string t = task;
    c->callback([opt, out, t] {
      opt->task = t;
      auto stats = data::build_task_dataset(*opt, *out);
      std::cout << "wrote " << *out << ": " << stats["sequences_train"] << " train / " << stats["sequences_valid"]
                << " valid sequences (" << stats["puzzles_train"] << " / " << stats["puzzles_valid"]
                << " puzzles), " << stats["tokens_train"] << " train tokens, longest " << stats["max_sequence_tokens"]
                << " tokens\n";
    });
  }

  auto file = std::make_shared<std::string>();
  auto* v = data->add_subcommand("verify", "Check every record of a JSONL file with the task verifier");
  v->add_option("file", *file, "JSONL file written by `lol data`")->required();
  v->callback([file] {
    auto r = data::verify_task_file(*file);
    if (r.records == 0 && r.malformed == 0)
      throw InputError(*file + ": no records (expected JSONL records written by `lol data maze|sudoku`)");
    for (const auto& m : r.messages) std::cerr << m << "\n";
    std::cout << r.records << " records: " << r.passed << " verified, " << r.failed << " failed, " << r.malformed
              << " malformed\n";
    if (r.malformed > 0) throw InputError(*file + ": " + std::to_string(r.malformed) + " malformed record(s)");
    if (r.failed > 0) std::exit(1);
  });
}

}  // namespace lol::cli
