// The main job end to end on a tiny setting (issue 5): generate 4x4 mazes, train a
// tiny LoL for a few steps, extract mode paths, force them in eval-strategies; check
// that the files and tables exist and are consistent, and that forcing a path
// reproduces it in the routing trace.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/mode_paths.h"
#include "dataset/shards.h"
#include "lol/checkpoint.h"
#include "lol/routing_path.h"

namespace fs = std::filesystem;

namespace {

int run(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()); }

/// Exit status of `cmd` (stdout and stderr into *out).
int run_capture(const std::string& cmd, std::string* out) {
  const std::string log = (fs::temp_directory_path() / ("lol_pipeline_log_" + std::to_string(::getpid()))).string();
  const int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  out->assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

nlohmann::json read_json(const std::string& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

/// Writes `dir`/run.json for a tiny LoL (d 32, L 3, D 2, no growing) with the given window/stride
/// and trains it for `steps` steps on `dir`/data into `dir`/run. Returns the exit status.
int train_tiny(const std::string& lol, const std::string& dir, int window, int stride, int max_seq_len, int batch,
               int steps) {
  nlohmann::json cfg = {
      {"model",
       {{"architecture", "lol"}, {"d_model", 32}, {"n_heads", 2}, {"n_kv_heads", 2}, {"ffn_hidden", 64},
        {"n_prelude", 1}, {"n_coda", 1}, {"library_size", 3}, {"core_depth", 2}, {"window", window},
        {"stride", stride}, {"max_seq_len", max_seq_len}}},
      {"data", {{"dir", dir + "/data"}, {"batch_size", batch}, {"packing", "pad"}}},
      // No growing: every step trains both routed depths (a few steps of the default
      // growing phase would end at depth 1, and the model would run one depth).
      {"grow", {{"fraction", 0}}},
      {"train", {{"steps", steps}, {"out", dir + "/run"}, {"progress", false}, {"seed", 1}}}};
  std::ofstream(dir + "/run.json") << cfg.dump(2);
  return run(lol + " train --config " + dir + "/run.json");
}

/// `lol eval-strategies` on `dir`/run with `dir`/paths, n puzzles per strategy; checks that
/// every forced row of the confusion matrix counts every puzzle. Returns results.json.
nlohmann::json eval_and_check_counts(const std::string& lol, const std::string& dir, int n, int max_new) {
  EXPECT_EQ(run(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir + "/data --n " +
                std::to_string(n) + " --max-new " + std::to_string(max_new) + " --out " + dir + "/eval"),
            0);
  auto res = read_json(dir + "/eval/results.json");
  EXPECT_EQ(res["confusion"].size(), 5u);  // rows S1..S5 (confusion_rows)
  EXPECT_EQ(res["confusion_rows"], nlohmann::json({"S1", "S2", "S3", "S4", "S5"}));
  for (int s = 1; s <= 5; ++s) {
    int64_t row = 0;
    EXPECT_EQ(res["confusion"][s - 1].size(), 6u);
    for (const auto& x : res["confusion"][s - 1]) row += x.get<int64_t>();
    EXPECT_EQ(row, n) << "every forced strategy row counts every puzzle";
    EXPECT_EQ(res["forced"]["S" + std::to_string(s)]["n"].get<int64_t>(), n);
  }
  return res;
}

}  // namespace

TEST(MainJobPipeline, TinyMazeRunProducesConsistentFiles) {
  const std::string lol = LOL_BINARY;
  const std::string dir = (fs::temp_directory_path() / ("lol_pipeline_test_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(run(lol + " data maze --n 40 --size 4 --seed 3 --valid-fraction 0.25 --out " + dir + "/data"), 0);
  auto ds = lol::data::Dataset::open(dir + "/data");
  ASSERT_GT(ds.load("valid").size(), 0);

  ASSERT_EQ(train_tiny(lol, dir, 8, 4, 256, 8, 3), 0);
  // --extend 0: the observed windows only.
  ASSERT_EQ(run(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --out " + dir +
                "/paths --extend 0"),
            0);
  for (int s = 1; s <= 5; ++s) {
    auto p = lol::RoutingPath::load(dir + "/paths/S" + std::to_string(s) + ".json");
    EXPECT_EQ(p.library_size, 3);
    EXPECT_EQ(p.depth(), 2);
    for (int64_t d = 0; d < p.depth(); ++d) {
      ASSERT_GE(p.expert[d].size(), 2u);  // prompt window + at least one trace window
      for (auto e : p.expert[d]) EXPECT_TRUE(e >= 0 && e < 3);
    }
  }
  ASSERT_TRUE(fs::exists(dir + "/paths/agreement.json"));
  // The default, --extend auto (the paper's dead-end filling rule): every window a
  // max_seq_len (256) sequence can have, W = 8: 2 + (256 + 8 - 2) / 8 = 34 windows; the
  // observed cells are unchanged, the later ones repeat the last observed window.
  ASSERT_EQ(run(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --out " + dir + "/paths_ext"),
            0);
  for (int s = 1; s <= 5; ++s) {
    auto p = lol::RoutingPath::load(dir + "/paths/S" + std::to_string(s) + ".json");
    auto e = lol::RoutingPath::load(dir + "/paths_ext/S" + std::to_string(s) + ".json");
    ASSERT_EQ(e.depth(), p.depth());
    for (int64_t d = 0; d < p.depth(); ++d) {
      const auto& row = p.expert[size_t(d)];
      ASSERT_EQ(e.expert[size_t(d)].size(), 34u);
      for (size_t k = 0; k < e.expert[size_t(d)].size(); ++k)
        EXPECT_EQ(e.expert[size_t(d)][k], k < row.size() ? row[k] : row.back()) << "S" << s << " depth " << d;
    }
  }
  EXPECT_EQ(WEXITSTATUS(run(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --out " + dir +
                            "/paths_bad --extend some")),
            2);
  // A new extraction that sees fewer strategies (--max 3: S1..S3 of the first puzzle)
  // removes the earlier S4/S5 files, which eval-strategies would take for its own.
  {
    std::string said;
    ASSERT_EQ(run_capture(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --max 3 --out " + dir +
                              "/paths_ext",
                          &said),
              0)
        << said;
    EXPECT_TRUE(fs::exists(dir + "/paths_ext/S3.json"));
    EXPECT_FALSE(fs::exists(dir + "/paths_ext/S4.json"));
    EXPECT_FALSE(fs::exists(dir + "/paths_ext/S5.json"));
    EXPECT_NE(said.find("note: removed " + dir + "/paths_ext/S5.json of an earlier extraction"), std::string::npos)
        << said;
  }
  auto res = eval_and_check_counts(lol, dir, 3, 40);
  // A correct trajectory (paper 4.1.3) is as requested, rule-faithful and correct.
  for (int s = 1; s <= 5; ++s) {
    const auto& m = res["forced"]["S" + std::to_string(s)];
    for (const char* k : {"strategy_as_requested", "trace_rule_faithful", "answer_correct"})
      EXPECT_LE(m["trajectory_correct"].get<double>(), m[k].get<double>()) << k;
  }
  EXPECT_TRUE(res["forced_mean"].contains("trajectory_correct"));
  // The default split is the test split of new puzzles (--n 40: 4), none of which the
  // paths were extracted from (paper 4.1.3); evaluating the paths' own split warns.
  EXPECT_EQ(res["command"]["split"], "test");
  EXPECT_EQ(ds.load("test").size(), 5 * 4);
  std::string warned;
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/data --split valid --n 1000 --no-unforced --max-new 40 --out " + dir + "/eval_valid",
                        &warned),
            0);
  EXPECT_NE(warned.find("warning: the mode paths were extracted from split 'valid' of " + dir +
                        "/data, the puzzles evaluated here"),
            std::string::npos)
      << warned;
  // Fewer puzzles than --n: all are evaluated, and a note says how many.
  EXPECT_NE(warned.find("note: --n 1000: " + dir + "/data/valid.jsonl holds "), std::string::npos) << warned;
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/data --split tset --n 1 --out " + dir + "/eval_typo",
                        &warned),
            2);
  EXPECT_NE(warned.find("--split tset: " + dir + "/data/tset.jsonl does not exist (the splits of " + dir +
                        "/data with puzzles: train, valid, test)"),
            std::string::npos)
      << warned;
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/data --split ../data/valid --n 1 --out " + dir + "/eval_path",
                        &warned),
            2);
  EXPECT_NE(warned.find("--split ../data/valid: expected a split name (train, valid, test), not a path"),
            std::string::npos)
      << warned;
  // Generation stops at the model's max_seq_len (256 here), whatever --max-new asks.
  ASSERT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/data --n 1 --no-unforced --max-new 1000 --out " + dir + "/eval_long",
                        &warned),
            0)
      << warned;
  {
    auto r = read_json(dir + "/eval_long/results.json");
    EXPECT_EQ(r["max_new_tokens"], 1000);
    ASSERT_FALSE(r["samples"].empty());
    for (const auto& smp : r["samples"]) {
      std::istringstream q(smp["question"].get<std::string>() + " R : " + smp["generated"].get<std::string>());
      int64_t n = 0;
      for (std::string w; q >> w;) ++n;
      EXPECT_LE(n, 256 + 2) << smp.dump();  // "R :" is counted twice when the generation starts with it
    }
  }
  // A malformed test puzzle is the data's error (exit 2, file and line), not a wrong
  // generation; mode paths of another task are refused.
  fs::copy(dir + "/data", dir + "/malformed", fs::copy_options::recursive);
  fs::remove(dir + "/malformed/.lol.lock");
  {
    std::ifstream in(dir + "/data/test.jsonl");
    std::string first, rest, line;
    std::getline(in, first);
    while (std::getline(in, line)) rest += line + "\n";
    auto rec = nlohmann::json::parse(first);
    std::istringstream q(rec["question"].get<std::string>());
    std::vector<std::string> w;
    for (std::string t; q >> t;) w.push_back(t);
    auto it = std::find(w.begin(), w.end(), "r1c1");
    ASSERT_TRUE(it != w.end() && it + 1 != w.end());
    w.erase(it + 1);  // r1c1 loses a passage its neighbour still has
    std::string edited;
    for (const auto& t : w) edited += (edited.empty() ? "" : " ") + t;
    rec["question"] = edited;
    std::ofstream(dir + "/malformed/test.jsonl") << rec.dump() << "\n" << rest;
  }
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/malformed --n 2 --out " + dir + "/eval_malformed",
                        &warned),
            2)
      << warned;
  EXPECT_NE(warned.find("/malformed/test.jsonl:1: field 'question': maze"), std::string::npos) << warned;
  fs::copy(dir + "/paths", dir + "/paths_sudoku", fs::copy_options::recursive);
  {
    auto p = read_json(dir + "/paths_sudoku/S2.json");
    p["meta"]["task"] = "sudoku";
    std::ofstream(dir + "/paths_sudoku/S2.json") << p.dump();
  }
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths_sudoku --data " + dir +
                            "/data --n 1 --out " + dir + "/eval_sudoku",
                        &warned),
            2)
      << warned;
  EXPECT_NE(warned.find("paths_sudoku/S2.json: field 'meta.task' = \"sudoku\": expected \"maze\""), std::string::npos)
      << warned;
  // Label separation needs two sequences of every label (one to train on, one held out).
  ASSERT_EQ(run(lol + " data maze --n 1 --size 4 --seed 3 --valid-fraction 0 --n-test 0 --out " + dir + "/one"), 0);
  ASSERT_EQ(run_capture(lol + " analyze routing --model " + dir + "/run --data " + dir + "/one --split train --out " + dir +
                            "/an_one",
                        &warned),
            0)
      << warned;
  EXPECT_NE(read_json(dir + "/an_one/routing.json")["separation_skipped"].get<std::string>().find("single sequence"),
            std::string::npos);
  // data verify: the splits share no puzzle, and the files dataset.json lists are there.
  fs::copy(dir + "/data", dir + "/overlap", fs::copy_options::recursive);
  {
    std::string first;
    std::getline(std::ifstream(dir + "/data/train.jsonl"), first);
    // The copy's puzzle_id edited: still the same puzzle (and an id that is not its hash).
    auto rec = nlohmann::json::parse(first);
    rec["puzzle_id"] = 42;
    std::ofstream(dir + "/overlap/test.jsonl", std::ios::app) << rec.dump() << "\n";
  }
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/overlap", &warned), 1) << warned;
  EXPECT_NE(warned.find("/overlap/test.jsonl:"), std::string::npos) << warned;
  EXPECT_NE(warned.find(": its puzzle (question) is also in"), std::string::npos) << warned;
  EXPECT_NE(warned.find("puzzle_id 42 is not the hash of its question (expected "), std::string::npos) << warned;
  EXPECT_NE(warned.find("is also in " + dir + "/overlap/train.jsonl (the splits must not share puzzles)"),
            std::string::npos)
      << warned;
  fs::remove(dir + "/overlap/test.jsonl");
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/overlap", &warned), 2) << warned;
  EXPECT_NE(warned.find("field 'meta.jsonl.test' names test.jsonl, which is not in"), std::string::npos) << warned;
  // --paths names the directory; a prompt word outside the task vocabulary names --prompt.
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths/S1.json --data " +
                            dir + "/data --n 1 --out " + dir + "/eval_file",
                        &warned),
            2);
  EXPECT_NE(warned.find("--paths " + dir + "/paths/S1.json: expected the directory holding S1.json .. S5.json"),
            std::string::npos)
      << warned;
  EXPECT_EQ(run_capture(lol + " generate --model " + dir + "/run --prompt 'Q : hello' --max-new 1", &warned), 2);
  EXPECT_NE(warned.find("--prompt: vocab: unknown token 'hello' (not in the task vocabulary of "), std::string::npos)
      << warned;
  // Text scoring on a task model: no tokenizer can fit its word vocabulary.
  std::ofstream(dir + "/q.jsonl") << R"({"context": "It is", "choices": ["fine", "bad"], "gold": 0})" << "\n";
  EXPECT_EQ(run_capture(lol + " eval choice --model " + dir + "/run --data " + dir + "/q.jsonl --tokenizer byte",
                        &warned),
            2);
  EXPECT_NE(warned.find("a model of the 'maze' task (config.json extra.task)"), std::string::npos) << warned;

  // Forcing a path reproduces it in the routing trace.
  std::string latest;
  std::getline(std::ifstream(dir + "/run/latest"), latest);
  auto model = lol::load_lol(dir + "/run/" + latest);
  auto path = lol::RoutingPath::load(dir + "/paths/S2.json");
  auto split = ds.load("valid");
  auto batch = lol::analysis::make_batch(split, {0}, torch::kCPU);
  lol::ForwardOptions fo;
  fo.force = &path;
  fo.trace = true;
  torch::NoGradGuard ng;
  model->eval();
  auto out = model->forward(batch, fo);
  ASSERT_EQ(int64_t(out.trace.size()), path.depth());
  for (int64_t d = 0; d < path.depth(); ++d) {
    const auto& tr = out.trace[d];
    for (size_t w = 0; w < tr.k.size(); ++w) {
      auto fc = path.at(d, tr.k[w]);
      if (!fc) continue;
      EXPECT_EQ(tr.expert[int64_t(w)].item<int64_t>(), fc->expert);
      EXPECT_NEAR(tr.alpha[int64_t(w)].item<float>(), *fc->alpha, 1e-6);
      EXPECT_TRUE(tr.forced[int64_t(w)].item<bool>());
    }
  }
  fs::remove_all(dir);
}

// The same pipeline on sudoku (paper 4.1.3): 9x9 grids, sequences of ~400-800 tokens,
// strategy labels S1..S5; checks the path files' shape and the tables' counts.
TEST(MainJobPipeline, TinySudokuRunProducesConsistentFiles) {
  const std::string lol = LOL_BINARY;
  const std::string dir = (fs::temp_directory_path() / ("lol_pipeline_sudoku_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(run(lol + " data sudoku --n 12 --n-test 2 --seed 5 --valid-fraction 0.25 --max-tokens 800 --out " + dir + "/data"), 0);
  auto ds = lol::data::Dataset::open(dir + "/data");
  const auto valid = ds.load("valid");
  ASSERT_GT(valid.size(), 0);
  ASSERT_EQ(train_tiny(lol, dir, 64, 32, 1024, 4, 2), 0);
  // --extend 0: the observed windows only.
  ASSERT_EQ(run(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --out " + dir +
                "/paths --extend 0"),
            0);
  for (int s = 1; s <= 5; ++s) {
    auto p = lol::RoutingPath::load(dir + "/paths/S" + std::to_string(s) + ".json");
    EXPECT_EQ(p.library_size, 3);
    ASSERT_EQ(p.depth(), 2);
    // A sudoku question alone is ~90 tokens: the prompt window plus several trace windows.
    for (int64_t d = 0; d < p.depth(); ++d) EXPECT_GE(p.expert[d].size(), 5u) << "S" << s;
  }
  auto res = eval_and_check_counts(lol, dir, 2, 24);
  // 24 new tokens cannot finish a sudoku trace: nothing may be scored correct.
  for (int s = 1; s <= 5; ++s) EXPECT_EQ(res["forced"]["S" + std::to_string(s)]["answer_correct"].get<double>(), 0.0);
  EXPECT_EQ(res["task"], "sudoku");
  // The sudoku model on maze puzzles is refused before any generation (it used to print a
  // confusion table of another task's puzzles, exit 0), and nothing is written.
  ASSERT_EQ(run(lol + " data maze --n 4 --size 4 --out " + dir + "/maze"), 0);
  std::string out;
  EXPECT_EQ(run_capture(lol + " eval-strategies --model " + dir + "/run --paths " + dir + "/paths --data " + dir +
                            "/maze --n 1 --out " + dir + "/cross",
                        &out),
            2);
  EXPECT_NE(out.find("--data " + dir + "/maze: task 'maze', but "), std::string::npos) << out;
  EXPECT_NE(out.find("was trained on 'sudoku' data"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/cross"));
  fs::remove_all(dir);
}

// Findings of the third adversarial pass (docs/robustness.md): small datasets, finished
// runs, outputs that cannot be written, records whose label or <eos> is wrong.
TEST(MainJobPipeline, SmallDataFinishedRunsAndUnwritableOutputs) {
  const std::string lol = LOL_BINARY;
  const std::string dir = (fs::temp_directory_path() / ("lol_pipeline_edges_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string out;
  // No held-out puzzle: training skips evaluation instead of failing after the last step.
  ASSERT_EQ(run(lol + " data maze --n 6 --size 4 --valid-fraction 0 --out " + dir + "/data"), 0);
  ASSERT_EQ(train_tiny(lol, dir, 8, 4, 256, 4, 2), 0);
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoints/step-000002/model.safetensors"));
  // Resuming the finished run trains nothing and says so (it printed "loss 0.0000").
  EXPECT_EQ(run_capture(lol + " train --resume " + dir + "/run --no-progress", &out), 0);
  EXPECT_NE(out.find("is already at step 2 = train.steps; nothing to do"), std::string::npos) << out;
  // An empty valid split: paths extract says so (not "no strategy labels"); a dataset
  // whose hash split leaves valid empty gets a note.
  EXPECT_EQ(run_capture(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --out " + dir + "/p0", &out),
            2);
  EXPECT_NE(out.find("split 'valid' holds no sequences"), std::string::npos) << out;
  EXPECT_EQ(run_capture(lol + " data maze --n 2 --size 4 --seed 0 --out " + dir + "/two", &out), 0);
  EXPECT_NE(out.find("put no puzzle in the valid split"), std::string::npos) << out;
  // Regenerating over a dataset, or a length filter that keeps nothing, is refused.
  EXPECT_EQ(run_capture(lol + " data maze --n 6 --size 4 --out " + dir + "/data", &out), 2);
  EXPECT_NE(out.find("already holds a dataset"), std::string::npos) << out;
  EXPECT_EQ(run_capture(lol + " data maze --n 6 --size 4 --max-tokens 1 --out " + dir + "/short", &out), 2);
  EXPECT_NE(out.find("--max-tokens 1: maze dataset: none of the first 1000 distinct mazes of size 4 has all five sequences "
                     "within max_sequence_tokens = 1 (the fewest: "),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir + "/short"));
  // An --out that is a file: exit 2 naming it, before the forward passes.
  std::ofstream(dir + "/afile") << "x";
  EXPECT_EQ(run_capture(lol + " paths extract --model " + dir + "/run --data " + dir + "/data --split train --out " +
                            dir + "/afile",
                        &out),
            2);
  EXPECT_NE(out.find("--out " + dir + "/afile: cannot create directory"), std::string::npos) << out;
  EXPECT_EQ(run_capture(lol + " train --config " + dir + "/run.json --set train.out=" + dir + "/afile/sub", &out), 2);
  EXPECT_NE(out.find("error: train.out " + dir + "/afile/sub: cannot create directory"), std::string::npos) << out;
  // data verify: a label that is not the record's strategy's, and an answer without <eos>.
  std::string good;
  std::getline(std::ifstream(dir + "/data/train.jsonl"), good);
  auto j = nlohmann::json::parse(good);
  const int s = j["strategy"].get<int>();
  {
    std::ofstream bad(dir + "/bad.jsonl");
    auto k = j;
    k["label"] = "[ r1c1 ]";
    bad << k.dump() << "\n";
    k = j;
    std::string a = k["answer"].get<std::string>();
    k["answer"] = a.substr(0, a.rfind(" <eos>"));
    bad << k.dump() << "\n";
  }
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/bad.jsonl", &out), 1);
  EXPECT_NE(out.find("bad.jsonl:1: strategy S" + std::to_string(s) + " record fails verification: label '[ r1c1 ]' is "
                     "not strategy S" + std::to_string(s) + "'s label"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("bad.jsonl:2:"), std::string::npos) << out;
  EXPECT_NE(out.find("missing <eos>"), std::string::npos) << out;
  fs::remove_all(dir);
}

// Issue 3: bad input to `lol data verify` gives an error naming the line, never a crash.
TEST(DataVerifyCli, MalformedLinesAreNamedAndExitCodeIsTwo) {
  const std::string lol = LOL_BINARY;
  const std::string dir = (fs::temp_directory_path() / ("lol_verify_cli_test_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  ASSERT_EQ(run(lol + " data maze --n 6 --size 4 --seed 5 --valid-fraction 0 --no-progress --out " + dir + "/data"), 0);
  ASSERT_EQ(run(lol + " data verify " + dir + "/data/train.jsonl"), 0);
  // A dataset directory: its train.jsonl and (here empty) valid.jsonl.
  ASSERT_EQ(run(lol + " data verify " + dir + "/data"), 0);
  fs::create_directories(dir + "/empty_dir");
  std::string msg;
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/empty_dir", &msg), 2);
  EXPECT_NE(msg.find("without train.jsonl or valid.jsonl"), std::string::npos) << msg;
  std::string good;
  std::getline(std::ifstream(dir + "/data/train.jsonl"), good);
  {
    std::ofstream bad(dir + "/bad.jsonl");
    bad << good << "\n";
    bad << "{\"question\": \"Q : r1c1\n";                                                   // truncated line
    bad << "{\"task\":\"maze\",\"strategy\":1,\"question\":\"Q : r1c1 E\",\"label\":\"[ ]\","  // malformed question
           "\"trace\":\"R :\",\"answer\":\"A : <eos>\"}\n";
    auto j = nlohmann::json::parse(good);
    j["trace"] = j["trace"].get<std::string>() + " r9c9";  // unknown token
    bad << j.dump() << "\n";
  }
  const std::string log = dir + "/log.txt";
  int rc = std::system((lol + " data verify " + dir + "/bad.jsonl > " + log + " 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("bad.jsonl:2:"), std::string::npos) << all;
  EXPECT_NE(all.find("bad.jsonl:3:"), std::string::npos) << all;
  EXPECT_NE(all.find("bad.jsonl:4:"), std::string::npos) << all;
  EXPECT_NE(all.find("1 verified"), std::string::npos) << all;
  // A puzzle missing a strategy's record: exit 1 naming the puzzle's first line and what it has.
  {
    std::ifstream in_train(dir + "/data/train.jsonl");
    std::ofstream four(dir + "/four.jsonl");
    std::string rec;
    for (int k = 0; k < 5 && std::getline(in_train, rec); ++k)
      if (k != 1) four << rec << "\n";  // S2 left out
  }
  std::string said;
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/four.jsonl", &said), 1) << said;
  EXPECT_NE(said.find("four.jsonl:1: the puzzle of this record has records of S1, S3, S4, S5 only (expected one "
                      "record of each strategy S1..S5)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("4 records: 4 verified, 0 failed, 0 malformed; 1 puzzle(s) without all five strategies"),
            std::string::npos)
      << said;
  // A strategy twice: named, with the line that repeats it.
  {
    std::ifstream in_train(dir + "/data/train.jsonl");
    std::ofstream six(dir + "/six.jsonl");
    std::string rec, third;
    for (int k = 0; k < 5 && std::getline(in_train, rec); ++k) {
      six << rec << "\n";
      if (k == 2) third = rec;
    }
    six << third << "\n";  // S3 again, line 6
  }
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/six.jsonl", &said), 1) << said;
  EXPECT_NE(said.find("six.jsonl:1: the puzzle of this record has strategy S3 more than once (again at line 6; "
                      "records of S1, S2, S3, S4, S5)"),
            std::string::npos)
      << said;
  // --max-tokens keeps whole puzzles: this 8x8 maze's DFS walk (S2) is over 330 tokens, so
  // the maze is replaced by one whose five sequences all fit (it lost S2 alone).
  ASSERT_EQ(run(lol + " data maze --n 1 --size 8 --seed 9 --max-tokens 330 --n-test 0 --no-progress --out " + dir +
                "/capped"),
            0);
  EXPECT_EQ(run_capture(lol + " data verify " + dir + "/capped", &said), 0) << said;
  const auto capped = read_json(dir + "/capped/dataset.json");
  EXPECT_EQ(capped["stats"]["per_strategy"].dump(), "[1,1,1,1,1]") << capped.dump();
  EXPECT_LE(capped["stats"]["max_sequence_tokens"].get<int64_t>(), 330);
  EXPECT_GT(capped["stats"]["generator"]["rejected"]["max_tokens"].get<int64_t>(), 0) << capped.dump();
  // A file without records verifies nothing: an input error (exit 2), not a failed record (exit 1).
  std::ofstream(dir + "/empty.jsonl") << "\n  \n";
  rc = std::system((lol + " data verify " + dir + "/empty.jsonl > " + log + " 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream in2(log);
  all.assign((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("empty.jsonl: no records"), std::string::npos) << all;
  fs::remove_all(dir);
}

// `lol data judge`: verdicts to stdout or atomically to --out; a bad line is exit 2 naming
// file:line, and --out is then not written (no half file of verdicts).
TEST(DataJudgeCli, VerdictsToOutOrStdoutAndBadLinesExitTwo) {
  const std::string lol = LOL_BINARY;
  const std::string dir = (fs::temp_directory_path() / ("lol_judge_cli_test_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  ASSERT_EQ(run(lol + " data maze --n 2 --size 4 --seed 5 --valid-fraction 0 --n-test 0 --no-progress --out " + dir +
                "/data"),
            0);
  std::string first;
  std::getline(std::ifstream(dir + "/data/train.jsonl"), first);
  const auto r = nlohmann::json::parse(first);
  const nlohmann::json line = {{"question", r["question"].get<std::string>() + " " + r["label"].get<std::string>()},
                               {"strategy", r["strategy"]},
                               {"generated", r["trace"].get<std::string>() + " " + r["answer"].get<std::string>()}};
  std::ofstream(dir + "/in.jsonl") << line.dump() << "\n" << line.dump() << "\n";
  std::string said;
  ASSERT_EQ(run_capture(lol + " data judge " + dir + "/in.jsonl --out " + dir + "/verdicts.jsonl", &said), 0) << said;
  EXPECT_NE(said.find("2 continuations: 100% as requested, 100% legal, 100% rule-faithful, 100% correct answers, 100% all four"), std::string::npos) << said;
  std::ifstream v(dir + "/verdicts.jsonl");
  int n = 0;
  for (std::string l; std::getline(v, l); ++n) {
    const auto j = nlohmann::json::parse(l);
    EXPECT_EQ(j["line"], n + 1);
    EXPECT_EQ(j["followed"], r["strategy"]);
    EXPECT_TRUE(j["as_requested"].get<bool>() && j["legal"].get<bool>() && j["correct"].get<bool>()) << l;
  }
  EXPECT_EQ(n, 2);
  // Standard input and output.
  ASSERT_EQ(run_capture("cat " + dir + "/in.jsonl | " + lol + " data judge - 2>/dev/null", &said), 0);
  std::string first_verdict;
  std::getline(std::ifstream(dir + "/verdicts.jsonl"), first_verdict);
  EXPECT_EQ(said.substr(0, said.find('\n')), first_verdict);
  std::ofstream(dir + "/bad.jsonl") << line.dump() << "\n{\"question\": \"Q : r1c1\", \"strategy\": 1}\n";
  EXPECT_EQ(run_capture(lol + " data judge " + dir + "/bad.jsonl --out " + dir + "/bad_verdicts.jsonl", &said), 2);
  EXPECT_NE(said.find("bad.jsonl:2: missing field 'generated'"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(dir + "/bad_verdicts.jsonl"));
  EXPECT_EQ(run_capture(lol + " data judge " + dir + "/missing.jsonl", &said), 2);
  EXPECT_NE(said.find("missing.jsonl: cannot open file"), std::string::npos) << said;
  fs::remove_all(dir);
}
