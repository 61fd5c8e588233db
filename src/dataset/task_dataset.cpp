#include "dataset/task_dataset.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_map>

#include "dataset/shards.h"
#include "tasks/maze.h"
#include "tasks/maze_generate.h"
#include "tasks/maze_strategies.h"
#include "tasks/maze_tokenize.h"
#include "tasks/maze_verify.h"
#include "tasks/sudoku_generate.h"
#include "tasks/sudoku_grid.h"
#include "tasks/sudoku_tokenize.h"
#include "tasks/sudoku_verify.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "util/error.h"
#include "util/progress.h"

namespace fs = std::filesystem;

namespace lol::data {

std::string TaskSpec::strategy_name(int s) const {
  static const char* maze[] = {"?", "BFS", "DFS walk", "A*", "bidirectional BFS", "dead-end filling"};
  static const char* sudoku[] = {"?", "naked singles", "hidden singles", "crosshatching", "propagation", "backtracking"};
  if (s < 1 || s > 5) return "none";
  return name == "maze" ? maze[s] : sudoku[s];
}

std::string TaskSpec::label(int s) const {
  if (name == "maze") return tasks::maze_strategy_label(s, size);
  return tasks::sudoku_label(s);
}

TaskSpec task_spec(const std::string& task, int maze_size) {
  TaskSpec t;
  t.name = task;
  if (task == "maze") {
    if (maze_size < 4 || maze_size > 16)
      throw InputError("maze size " + std::to_string(maze_size) + ": expected 4 <= size <= 16");
    t.size = maze_size;
    t.vocab = tasks::maze_vocab(maze_size);
    t.filler_label = tasks::kMazeFillerLabel;
    auto v = t.vocab;
    t.tokenize = [v](const tasks::Example& e) { return tasks::tokenize_maze_example(e, v); };
    t.verify = [](const std::string& q, int s, const std::string& g) { return tasks::verify_maze(q, s, g); };
  } else if (task == "sudoku") {
    t.vocab = tasks::sudoku_vocab();
    t.filler_label = tasks::kSudokuFillerLabel;
    auto v = t.vocab;
    t.tokenize = [v](const tasks::Example& e) { return tasks::tokenize_sudoku_example(e, v); };
    t.verify = [](const std::string& q, int s, const std::string& g) { return tasks::verify_sudoku(q, s, g); };
  } else {
    throw InputError("unknown task '" + task + "': expected maze or sudoku");
  }
  return t;
}

nlohmann::json task_spec_json(const TaskSpec& spec) {
  return {{"task", spec.name}, {"size", spec.size}, {"vocab", spec.vocab.to_json()}};
}

TaskSpec task_spec_from_json(const nlohmann::json& j, const std::string& where) {
  require(j.is_object() && j.contains("task") && j["task"].is_string(), where, "missing string field 'task'");
  int size = j.value("size", 8);
  std::string task = j["task"].get<std::string>();
  TaskSpec t = task_spec(task, task == "maze" ? size : 8);
  if (j.contains("vocab")) {
    auto stored = tasks::Vocab::from_json(j["vocab"], where);
    require(stored.tokens() == t.vocab.tokens(), where,
            "stored vocabulary differs from the built-in " + task + " vocabulary (was the data made by another version?)");
  }
  return t;
}

nlohmann::json example_to_json(const tasks::Example& e, const std::string& task) {
  return {{"task", task},         {"puzzle_id", e.puzzle_id}, {"strategy", e.strategy}, {"question", e.question},
          {"label", e.label},     {"trace", e.trace},         {"answer", e.answer}};
}

tasks::Example example_from_json(const nlohmann::json& j, const std::string& where) {
  require(j.is_object(), where, "record must be a JSON object");
  tasks::Example e;
  for (const char* k : {"question", "label", "trace", "answer"})
    require(j.contains(k) && j[k].is_string(), where, std::string("missing string field '") + k + "'");
  require(j.contains("strategy"), where, "missing integer field 'strategy'");
  require(j["strategy"].is_number_integer(), where,
          "field 'strategy' = " + j["strategy"].dump() + ": expected an integer 1..5");
  e.question = j["question"];
  e.label = j["label"];
  e.trace = j["trace"];
  e.answer = j["answer"];
  e.strategy = j["strategy"];
  require(e.strategy >= 1 && e.strategy <= 5, where, "field 'strategy' = " + std::to_string(e.strategy) + ": expected 1..5");
  if (j.contains("puzzle_id")) {
    require(j["puzzle_id"].is_number_unsigned(), where,
            "field 'puzzle_id' = " + j["puzzle_id"].dump() + ": expected an integer >= 0");
    e.puzzle_id = j["puzzle_id"];
  }
  return e;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

nlohmann::json build_task_dataset(const TaskDatasetOptions& opt, const std::string& out) {
  TaskSpec spec = task_spec(opt.task, opt.size);
  require(opt.n_puzzles >= 1, "--n", "expected at least 1 puzzle");
  require(opt.valid_fraction >= 0 && opt.valid_fraction < 1, "--valid-fraction", "expected 0 <= fraction < 1");
  require(opt.max_tokens >= 0, "--max-tokens",
          std::to_string(opt.max_tokens) + ": expected 0 (keep all) or a length >= 1");
  require(opt.n_test >= -1, "--n-test " + std::to_string(opt.n_test), "expected >= 0 (or -1 = --n / 10)");
  const int64_t n_test = opt.n_test >= 0 ? opt.n_test : std::max<int64_t>(1, opt.n_puzzles / 10);
  require_no_dataset(out, "--out");
  // Checked before minutes of generation: the directory is created only after it.
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw InputError("--out " + out + ": exists and is not a directory (expected a new or empty dataset directory)");
  ProgressBar bar("generate " + opt.task + " puzzles", opt.n_puzzles + n_test, opt.progress);
  std::vector<tasks::Example> examples;
  nlohmann::json gen_stats = nlohmann::json::object();
  if (opt.task == "maze") {
    tasks::MazeDatasetStats st;
    try {
      examples = tasks::generate_maze_dataset(opt.n_puzzles + n_test, opt.size, opt.seed, &st, opt.max_tokens);
    } catch (const InputError& e) {
      if (opt.max_tokens == 0) throw;
      throw InputError("--max-tokens " + std::to_string(opt.max_tokens) + ": " + e.what());
    }
    gen_stats = {{"draws", st.draws}, {"duplicates", st.duplicates}, {"accepted", st.accepted}, {"rejected", st.rejected}};
  } else {
    tasks::SudokuDatasetOptions so;
    so.max_sequence_tokens = size_t(opt.max_tokens);
    so.threads = std::max(1, opt.threads);
    try {
      examples = tasks::generate_sudoku_dataset(size_t(opt.n_puzzles + n_test), opt.seed, so);
    } catch (const InputError& e) {
      if (std::string(e.what()).find("max_sequence_tokens") == std::string::npos) throw;
      throw InputError("--max-tokens " + std::to_string(opt.max_tokens) + ": " + e.what());
    }
  }
  bar.update(opt.n_puzzles + n_test);
  bar.finish(std::to_string(examples.size()) + " sequences");
  const io::DirLock lock(out, "--out");  // one writer per dataset directory
  require_no_dataset(out, "--out");  // again: another writer may have finished meanwhile

  // The generators are prefix-stable (the first n puzzles do not depend on how many
  // follow): puzzles 0..n-1 are split into train and valid by a hash of their id as
  // without a test split, puzzles n.. are the test split.
  enum Split { kTrain, kValid, kTest };
  const char* split_names[] = {"train", "valid", "test"};
  const int n_splits = n_test > 0 ? 3 : 2;
  std::vector<std::unique_ptr<ShardWriter>> shards;
  std::vector<std::unique_ptr<io::AtomicFile>> jsonl;
  for (int k = 0; k < n_splits; ++k) {
    shards.push_back(std::make_unique<ShardWriter>(out, split_names[k], spec.vocab.size()));
    jsonl.push_back(std::make_unique<io::AtomicFile>(out + "/" + split_names[k] + ".jsonl"));
  }
  int64_t puzzles[3] = {0, 0, 0}, max_len = 0, ordinal = -1;
  std::vector<int64_t> per_strategy(6, 0);
  uint64_t last_puzzle = ~0ull;
  const uint64_t cut = uint64_t(opt.valid_fraction * 1e6);
  Split split = kTrain;
  for (const auto& e : examples) {
    if (e.puzzle_id != last_puzzle || ordinal < 0) {  // a puzzle's sequences are consecutive
      ++ordinal;
      last_puzzle = e.puzzle_id;
      split = ordinal >= opt.n_puzzles                               ? kTest
              : (mix64(e.puzzle_id ^ opt.seed) % 1000000) < cut ? kValid
                                                                   : kTrain;
      ++puzzles[split];
    }
    auto te = spec.tokenize(e);
    // The generators keep only puzzles whose five sequences all fit (a puzzle keeps
    // every strategy), counting Example::text()'s words, which tokenize one id each.
    if (opt.max_tokens > 0 && int64_t(te.ids.size()) > opt.max_tokens)
      throw std::logic_error("task dataset: a generated sequence of " + std::to_string(te.ids.size()) +
                             " tokens exceeds --max-tokens " + std::to_string(opt.max_tokens));
    shards[split]->add(te.ids, te.loss_mask, te.router_only, te.prompt_len, e.strategy);
    jsonl[split]->write(example_to_json(e, opt.task).dump() + "\n");
    max_len = std::max<int64_t>(max_len, int64_t(te.ids.size()));
    per_strategy[e.strategy]++;
  }
  for (auto& f : jsonl) f->commit();
  nlohmann::json stats = {{"max_sequence_tokens", max_len},
                          {"per_strategy", std::vector<int64_t>(per_strategy.begin() + 1, per_strategy.end())},
                          {"generator", gen_stats}};
  nlohmann::json splits = nlohmann::json::object(), jsonl_names = nlohmann::json::object();
  for (int k = 0; k < n_splits; ++k) {
    const std::string name = split_names[k];
    stats["puzzles_" + name] = puzzles[k];
    stats["sequences_" + name] = shards[k]->sequences();
    stats["tokens_" + name] = shards[k]->tokens();
    splits[name] = shards[k]->finish();
    jsonl_names[name] = name + ".jsonl";
  }
  nlohmann::json info = {{"format", "lol-dataset"},
                         {"version", 1},
                         {"task", opt.task},
                         {"vocab_size", spec.vocab.size()},
                         {"vocab", spec.vocab.to_json()},
                         {"splits", splits},
                         {"stats", stats},
                         {"meta",
                          {{"size", spec.size > 0 ? spec.size : 9},  // the grid side (sudoku: 9)
                           {"max_tokens", opt.max_tokens},
                           {"seed", opt.seed},
                           {"n_puzzles", opt.n_puzzles},
                           {"valid_fraction", opt.valid_fraction},
                           {"n_test", n_test},
                           {"jsonl", jsonl_names}}}};
  write_dataset_info(out, info, lock.found_earlier_writer());
  return stats;
}

VerifyReport verify_task_file(const std::string& path) {
  VerifyReport r;
  std::ifstream in(path);
  auto note = [&](const std::string& m) {
    if (r.messages.size() < 50) r.messages.push_back(m);
  };
  if (!in) {
    r.malformed = 1;
    note(path + ": cannot open file");
    return r;
  }
  std::string line;
  int64_t lineno = 0;
  struct Seen {
    int64_t first_line = 0;
    unsigned strategies = 0;  // bit s: a record of strategy s
    unsigned repeated = 0;    // bit s: strategy s seen again
    int64_t repeat_line = 0;  // the first line that repeats a strategy
  };
  std::unordered_map<uint64_t, Seen> puzzles;  // by puzzle_id (or the question's std::hash)
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    r.records++;
    try {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": not valid JSON (truncated line?): " + e.what());
      }
      auto e = example_from_json(j, where);
      Seen& seen = puzzles[j.contains("puzzle_id") ? e.puzzle_id : std::hash<std::string>()(e.question)];
      if (seen.first_line == 0) seen.first_line = lineno;
      if (seen.strategies >> e.strategy & 1u) {
        if (seen.repeat_line == 0) seen.repeat_line = lineno;
        seen.repeated |= 1u << e.strategy;
      }
      seen.strategies |= 1u << e.strategy;
      std::string task = j.value("task", std::string(e.question.find(" start ") != std::string::npos ? "maze" : "sudoku"));
      int size = 8;
      if (task == "maze") size = tasks::Maze::from_question(e.question).size;
      TaskSpec spec = task_spec(task, size);
      spec.tokenize(e);  // every token must be in the vocabulary
      auto v = spec.verify(e.question + " " + e.label, e.strategy, e.trace + " " + e.answer);
      // The label is the strategy's own (the routing's conditioning signal), and the answer
      // ends the sequence.
      const std::string want_label = spec.label(e.strategy);
      const auto answer_tokens = tasks::split_tokens(e.answer);
      std::string wrong;
      // puzzle_id is the hash of the question (the split assignment and the check that
      // splits share no puzzle rely on it).
      uint64_t want_id = e.puzzle_id;
      if (j.contains("puzzle_id"))
        want_id = task == "maze" ? tasks::maze_fnv1a(e.question)
                                 : tasks::sudoku_hash(tasks::parse_sudoku_question(e.question, where));
      if (e.puzzle_id != want_id)
        wrong = "puzzle_id " + std::to_string(e.puzzle_id) + " is not the hash of its question (expected " +
                std::to_string(want_id) + ")";
      else if (e.label != want_label)
        wrong = "label '" + e.label + "' is not strategy S" + std::to_string(e.strategy) + "'s label '" + want_label + "'";
      else if (answer_tokens.empty() || answer_tokens.back() != "<eos>")
        wrong = "answer: missing <eos> at the end";
      if (wrong.empty() && v.followed_strategy == e.strategy && v.strategy_as_requested && v.trace_legal &&
          v.rule_faithful && v.answer_correct) {
        r.passed++;
      } else {
        r.failed++;
        note(where + ": strategy S" + std::to_string(e.strategy) + " record fails verification: " +
             (!wrong.empty() ? wrong
                             : v.error.empty() ? "trace follows strategy " + std::to_string(v.followed_strategy)
                                               : v.error));
      }
    } catch (const InputError& ex) {
      r.malformed++;
      std::string m = ex.what();
      note(m.rfind(where, 0) == 0 ? m : where + ": " + m);
    } catch (const std::exception& ex) {
      r.malformed++;
      note(where + ": " + ex.what());
    }
  }
  std::vector<std::pair<int64_t, const Seen*>> incomplete;
  for (const auto& [id, seen] : puzzles)
    if (seen.strategies != 0x3eu || seen.repeated) incomplete.emplace_back(seen.first_line, &seen);
  std::sort(incomplete.begin(), incomplete.end());
  r.incomplete_puzzles = int64_t(incomplete.size());
  for (const auto& [first_line, seen] : incomplete) {
    auto names = [](unsigned mask) {
      std::string out;
      for (int s = 1; s <= 5; ++s)
        if (mask >> s & 1u) out += (out.empty() ? "S" : ", S") + std::to_string(s);
      return out;
    };
    const std::string have = names(seen->strategies);
    note(path + ":" + std::to_string(first_line) + ": the puzzle of this record has " +
         (seen->repeated != 0 ? "strategy " + names(seen->repeated) + " more than once (again at line " +
                                    std::to_string(seen->repeat_line) + "; records of " + have + ")"
                              : "records of " + have + " only") +
         " (expected one record of each strategy S1..S5)");
  }
  return r;
}

}  // namespace lol::data
