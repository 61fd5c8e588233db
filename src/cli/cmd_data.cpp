// `lol data maze|sudoku|verify|judge`: synthetic task datasets (paper Appendix C.3, C.4)
// and the verifier for continuations generated elsewhere.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "dataset/judge.h"
#include "dataset/task_dataset.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
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
    if (std::string(task) == "maze") c->add_option("--size", opt->size, "Maze side, 4..16")->default_val(8)->check(CLI::Range(4, 16));
    c->add_option("--seed", opt->seed, "Random seed (output is deterministic for a seed)")->default_val(0);
    c->add_option("--valid-fraction", opt->valid_fraction, "Share of puzzles held out for validation")->default_val(0.1);
    c->add_option("--n-test", opt->n_test,
                  "New puzzles, generated after the --n ones, in a test split for eval-strategies "
                  "(-1 = --n / 10, at least 1; 0 = none)")
        ->default_val(-1)
        ->check(CLI::Range(int64_t(-1), int64_t(1) << 24));
    c->add_option("--max-tokens", opt->max_tokens,
                  "Keep only puzzles whose five sequences all have at most this many tokens (0 = keep all)")
        ->default_val(0);
    // Maze generation is sequential (and fast); only sudoku has generator threads.
    if (std::string(task) == "sudoku")
      c->add_option("--threads", opt->threads, "Generator threads")->default_val(1)->check(CLI::Range(1, 1024));
    c->add_option("--out", *out, "Output directory")->required();
    auto no_progress = std::make_shared<bool>(false);
    c->add_flag("--no-progress", *no_progress, "No progress bar");
    std::string t = task;
    c->callback([opt, out, t, no_progress] {
      opt->task = t;
      opt->progress = !*no_progress;
      auto stats = data::build_task_dataset(*opt, *out);
      const bool test = stats.contains("sequences_test");
      std::cout << "wrote " << *out << ": " << stats["sequences_train"] << " train / " << stats["sequences_valid"]
                << " valid" << (test ? " / " + stats["sequences_test"].dump() + " test" : std::string())
                << " sequences (" << stats["puzzles_train"] << " / " << stats["puzzles_valid"]
                << (test ? " / " + stats["puzzles_test"].dump() : std::string()) << " puzzles), "
                << stats["tokens_train"] << " train tokens, longest " << stats["max_sequence_tokens"] << " tokens\n";
      // The split is by puzzle hash: few puzzles may leave none for validation.
      if (opt->valid_fraction > 0 && stats["puzzles_valid"].get<int64_t>() == 0)
        std::cerr << "note: --n " << opt->n_puzzles << " with --valid-fraction " << opt->valid_fraction
                  << " put no puzzle in the valid split (the split is by puzzle hash); `lol paths extract` and "
                     "training's evaluation read valid: raise --n or --valid-fraction\n";
      if (opt->n_puzzles > 0 && stats["puzzles_train"].get<int64_t>() == 0)
        std::cerr << "note: --n " << opt->n_puzzles
                  << " put no puzzle in the train split (the split is by puzzle hash): `lol train` needs one; "
                     "raise --n\n";
    });
  }

  auto file = std::make_shared<std::string>();
  auto* v = data->add_subcommand("verify", "Check every record of a JSONL file (or a dataset directory's train.jsonl, "
                                           "valid.jsonl and test.jsonl) with the task verifier");
  v->add_option("path", *file, "JSONL file or dataset directory written by `lol data`")->required();
  v->callback([file] {
    std::vector<std::string> files{*file};
    if (!std::filesystem::exists(*file))
      throw InputError(*file + ": no such file or directory (expected a JSONL file or a dataset directory written by "
                               "`lol data maze|sudoku`)");
    const std::filesystem::path given(*file);
    if (given.filename() == "dataset.json" && std::filesystem::is_regular_file(given))
      throw InputError(*file + ": the dataset's description file, not its records: pass the directory holding it (`lol data verify " +
                       (given.has_parent_path() ? given.parent_path().string() : std::string(".")) + "`)");
    if (std::filesystem::is_directory(*file)) {
      files.clear();
      for (const char* name : {"train.jsonl", "valid.jsonl", "test.jsonl"})
        if (std::filesystem::exists(*file + "/" + name)) files.push_back(*file + "/" + name);
      // Files dataset.json lists must be there.
      const std::string info_path = *file + "/dataset.json";
      if (std::filesystem::exists(info_path)) {
        const auto info = io::read_json_file(info_path);
        const auto meta = info.is_object() ? info.find("meta") : info.end();
        if (meta != info.end() && meta->is_object() && meta->contains("jsonl") && (*meta)["jsonl"].is_object())
          for (const auto& [split, name] : (*meta)["jsonl"].items())
            if (name.is_string() && !std::filesystem::exists(*file + "/" + name.get<std::string>()))
              throw InputError(info_path + ": field 'meta.jsonl." + split + "' names " + name.get<std::string>() +
                               ", which is not in " + *file);
      }
      if (files.empty())
        throw InputError(*file + ": a directory without train.jsonl or valid.jsonl (expected a JSONL file or a "
                                 "dataset directory written by `lol data maze|sudoku`)");
    }
    bool failed = false;
    int64_t total = 0;
    for (const std::string& f : files) {
      auto r = data::verify_task_file(f);
      total += r.records + r.malformed;
      // A dataset's valid.jsonl may be empty (--valid-fraction 0); a file named alone may not.
      if (r.records == 0 && r.malformed == 0 && (files.size() == 1 || (&f == &files.back() && total == 0)))
        throw InputError(f + ": no records (expected JSONL records written by `lol data maze|sudoku`)");
      for (const auto& m : r.messages) std::cerr << m << "\n";
      std::cout << (files.size() > 1 ? f + ": " : std::string()) << r.records << " records: " << r.passed
                << " verified, " << r.failed << " failed, " << r.malformed << " malformed";
      if (r.incomplete_puzzles > 0) std::cout << "; " << r.incomplete_puzzles << " puzzle(s) without all five strategies";
      std::cout << "\n";
      if (r.malformed > 0) throw InputError(f + ": " + std::to_string(r.malformed) + " malformed record(s)");
      failed = failed || r.failed > 0 || r.incomplete_puzzles > 0;
    }
    // A puzzle belongs to one split (train, valid and test are disjoint by construction):
    // compared by question, whatever the records' puzzle_id says.
    if (files.size() > 1) {
      std::map<std::string, std::string> owner;
      for (const std::string& f : files) {
        std::ifstream in(f);
        int64_t lineno = 0;
        for (std::string line; std::getline(in, line);) {
          ++lineno;
          const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
          if (!j.is_object() || !j.contains("question") || !j["question"].is_string()) continue;
          const auto [it, fresh] = owner.emplace(j["question"].get<std::string>(), f);
          if (!fresh && it->second != f) {
            std::cerr << f << ":" << lineno << ": its puzzle (question) is also in " << it->second
                      << " (the splits must not share puzzles)\n";
            failed = true;
            it->second = f;  // one message per pair of files and puzzle
          }
        }
      }
    }
    if (failed) std::exit(1);
  });

  auto judge_in = std::make_shared<std::string>();
  auto judge_out = std::make_shared<std::string>();
  auto* j = data->add_subcommand(
      "judge", "Judge generated continuations with the task verifier (the verdicts of eval-strategies' confusion "
               "table, docs/tasks.md): JSONL of {question, strategy, generated[, task]} -> one verdict per line");
  j->add_option("path", *judge_in,
                "JSONL file ('-' = standard input); each line {\"question\": \"Q : ... [ label ]\", \"strategy\": 1..5, "
                "\"generated\": \"R : ... A : ... <eos>\"[, \"task\": \"maze\"|\"sudoku\"]}")
      ->required();
  j->add_option("--out", *judge_out, "Write the verdicts here (atomically) instead of standard output");
  j->callback([judge_in, judge_out] {
    std::ifstream file;
    if (*judge_in != "-") {
      if (std::filesystem::is_directory(*judge_in))
        throw InputError(*judge_in + ": a directory (expected a JSONL file of {question, strategy, generated} lines)");
      file.open(*judge_in);
      if (!file) throw InputError(*judge_in + ": cannot open file (expected a JSONL file of {question, strategy, generated} lines)");
    }
    std::istream& in = *judge_in == "-" ? std::cin : file;
    const std::string where = *judge_in == "-" ? std::string("<stdin>") : *judge_in;
    std::ostringstream verdicts;  // written only once every line is judged
    const auto s = data::judge_continuations(in, where, verdicts);
    if (s.n == 0) throw InputError(where + ": no records (expected JSONL lines {question, strategy, generated})");
    if (judge_out->empty())
      std::cout << verdicts.str() << std::flush;
    else
      io::write_file_atomic(*judge_out, verdicts.str());
    auto pct = [&](int64_t k) { return std::to_string(int64_t(100.0 * double(k) / double(s.n) + 0.5)) + "%"; };
    // as_requested: maze, the exact trace; sudoku, every step in the requested syntax.
    std::cerr << s.n << " continuations: " << pct(s.as_requested) << " as requested, " << pct(s.legal) << " legal, "
              << pct(s.faithful) << " rule-faithful, " << pct(s.correct) << " correct answers, " << pct(s.trajectory) << " all four"
              << (judge_out->empty() ? std::string() : " (verdicts in " + *judge_out + ")") << "\n";
  });
}

}  // namespace lol::cli
