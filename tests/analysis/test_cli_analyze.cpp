// `lol analyze routing` end to end on a tiny maze dataset and a freshly initialised
// model: files, JSON fields, exit codes.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis_test_util.h"
#include "dataset/shards.h"

namespace fs = std::filesystem;

namespace {

int run(const std::string& cmd, const std::string& log) {
  int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Writes dataset `dir`: split "train" holds the first `n` (all when n < 0) train
/// sequences of `ds` with masks and prompt lengths as they were and label
/// `label(index, old label)`.
void write_relabelled(const lol::data::Dataset& ds, const std::string& dir, int64_t n,
                      const std::function<int64_t(int64_t, int64_t)>& label) {
  const auto train = ds.load("train");
  lol::data::ShardWriter w(dir, "train", ds.vocab_size());
  for (int64_t i = 0; i < (n < 0 ? train.size() : n); ++i) {
    const auto v = train.get(i);
    std::vector<int32_t> toks(v.tokens, v.tokens + v.length);
    std::vector<uint8_t> loss, ro;  // empty = the default (all 1 / all 0)
    if (v.loss_mask) loss.assign(v.loss_mask, v.loss_mask + v.length);
    if (v.router_only) ro.assign(v.router_only, v.router_only + v.length);
    w.add(toks, loss, ro, v.prompt_len, label(i, v.label));
  }
  auto info = ds.info();
  info["splits"] = {{"train", w.finish()}};
  lol::data::write_dataset_info(dir, info);
}

}  // namespace

TEST(CliAnalyzeRouting, TinyMazeRun) {
  const std::string lol = LOL_BINARY;
  atest::TempDir tmp("cli");
  const std::string log = tmp / "log.txt";
  ASSERT_EQ(run(lol + " data maze --n 40 --size 4 --seed 3 --out " + (tmp / "data"), log), 0) << slurp(log);
  auto ds = lol::data::Dataset::open(tmp / "data");
  nlohmann::json cfg = {{"vocab_size", ds.vocab_size()}, {"d_model", 32},    {"n_heads", 2},     {"n_kv_heads", 2},
                        {"ffn_hidden", 64},              {"n_prelude", 1},   {"n_coda", 1},      {"library_size", 3},
                        {"core_depth", 2},               {"window", 8},      {"stride", 4},      {"max_seq_len", 512}};
  std::ofstream(tmp / "model.json") << cfg.dump();
  ASSERT_EQ(run(lol + " init --config " + (tmp / "model.json") + " --seed 1 --out " + (tmp / "model"), log), 0)
      << slurp(log);
  const std::string base = lol + " analyze routing --model " + (tmp / "model") + " --data " + (tmp / "data") +
                           " --split train --batch 32";
  ASSERT_EQ(run(base + " --label-positive S1 --out " + (tmp / "out"), log), 0) << slurp(log);
  const std::string printed = slurp(log);
  EXPECT_NE(printed.find("ridge: router probabilities"), std::string::npos) << printed;
  auto j = nlohmann::json::parse(slurp(tmp / "out/routing.json"));
  EXPECT_EQ(j["format"], "lol-routing-analysis");
  const int64_t n_train = ds.load("train").size();
  EXPECT_EQ(j["sequences"].get<int64_t>(), n_train);
  EXPECT_EQ(j["utilization"]["routed_depths"], 2);
  EXPECT_EQ(j["utilization"]["library_size"], 3);
  EXPECT_EQ(j["utilization"]["share"].size(), 2u);
  EXPECT_EQ(j["utilization_by_label"].size(), 5u) << "strategies 1..5";
  EXPECT_EQ(j["probes"]["positive_label"], 1);
  ASSERT_EQ(j["probes"]["readouts"].size(), 6u);
  for (const auto& r : j["probes"]["readouts"]) {
    EXPECT_TRUE(r["cv_auroc_mean"].is_number()) << r.dump();
    EXPECT_TRUE(r["test_auroc"].is_number()) << r.dump();
    EXPECT_TRUE(r["shuffled_cv_auroc_mean"].is_number()) << r.dump();
    EXPECT_EQ(r["cv_auroc_folds"].size(), 5u);
    EXPECT_GE(r["test_roc"].size(), 2u);
  }
  // Five strategy labels: the multi-label separation score of window paths ran.
  ASSERT_TRUE(j.contains("separation")) << j.dump().substr(0, 400);
  const auto& sep = j["separation"];
  EXPECT_GE(sep["accuracy"].get<double>(), 0.0);
  EXPECT_LE(sep["accuracy"].get<double>(), 1.0);
  EXPECT_EQ(sep["shuffled_accuracy"].size(), 20u);
  // Only the labels that occur (maze strategies are 1..5: no row for id 0).
  ASSERT_EQ(sep["labels"].size(), 5u) << sep["labels"];
  EXPECT_EQ(sep["labels"][0], "S1 (BFS)");
  EXPECT_EQ(sep["confusion"].size(), 5u);
  for (const auto& w : sep["windows_per_label"]) EXPECT_GT(w.get<int64_t>(), 0);
  int64_t confused = 0;
  for (const auto& row : sep["confusion"])
    for (const auto& v : row) confused += v.get<int64_t>();
  int64_t windows = 0;
  for (const auto& v : sep["windows_per_label"]) windows += v.get<int64_t>();
  EXPECT_EQ(confused, windows);
  EXPECT_EQ(windows, j["window_items"].get<int64_t>());
  const auto& sp = j["probes"]["split"];
  EXPECT_EQ(sp["documents_dev"].get<int64_t>() + sp["documents_test"].get<int64_t>(), n_train);
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    for (const char* png : {"utilization.png", "expert_depth_profile.png", "roc_window.png", "roc_sequence.png",
                            "utilization_label1.png", "pca_paths.png", "separation_confusion.png", "centroid_distances.png"})
      EXPECT_GT(fs::file_size(tmp / (std::string("out/") + png)), 1000u) << png;
  }
  // Unknown label name: exit 2 and the message lists the known names.
  EXPECT_EQ(run(base + " --label-positive S9 --out " + (tmp / "bad"), log), 2);
  EXPECT_NE(slurp(log).find("S1=1"), std::string::npos) << slurp(log);
  EXPECT_EQ(run(base + " --depth 3 --out " + (tmp / "bad"), log), 2) << "the model has 2 routed depths";
  // Five strategies and no --label-positive: utilization only; --depth 1 runs one depth.
  ASSERT_EQ(run(base + " --max 30 --depth 1 --out " + (tmp / "noprobe"), log), 0) << slurp(log);
  auto j2 = nlohmann::json::parse(slurp(tmp / "noprobe/routing.json"));
  EXPECT_TRUE(j2["probes"].is_null());
  EXPECT_EQ(j2["sequences"], 30);
  EXPECT_EQ(j2["utilization"]["routed_depths"], 1);

  // A label id far beyond the dataset's labels: refused by name before the separation
  // tables (indexed by label id) are sized by it; --no-separation still analyses. Two
  // sequences carry it (a label of one sequence skips the separation: nothing to train on).
  write_relabelled(ds, tmp / "big", -1, [](int64_t i, int64_t label) { return i < 2 ? int64_t(5000000000) : label; });
  const std::string big = lol + " analyze routing --model " + (tmp / "model") + " --data " + (tmp / "big") +
                          " --split train --batch 32 --max 30";
  EXPECT_EQ(run(big + " --out " + (tmp / "big_out"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("label id 5000000000"), std::string::npos) << slurp(log);
  EXPECT_NE(slurp(log).find("--no-separation"), std::string::npos) << slurp(log);
  ASSERT_EQ(run(big + " --no-separation --out " + (tmp / "big_out"), log), 0) << slurp(log);
  EXPECT_TRUE(nlohmann::json::parse(slurp(tmp / "big_out/routing.json"))["separation"].is_null());

  // Two labels with 6 documents each, fewer than the probes' 2 x --folds (10): the
  // automatic probe is skipped with the reason and routing.json is still written; an
  // explicit --label-positive is refused before anything is written.
  write_relabelled(ds, tmp / "two", 12, [](int64_t i, int64_t) { return i % 2; });
  const std::string two = lol + " analyze routing --model " + (tmp / "model") + " --data " + (tmp / "two") +
                          " --split train --batch 32";
  ASSERT_EQ(run(two + " --out " + (tmp / "two_out"), log), 0) << slurp(log);
  const auto j3 = nlohmann::json::parse(slurp(tmp / "two_out/routing.json"));
  EXPECT_TRUE(j3["probes"].is_null());
  EXPECT_NE(j3["probes_skipped"].get<std::string>().find("6 positive and 6 negative"), std::string::npos)
      << j3["probes_skipped"];
  EXPECT_TRUE(j3.contains("separation"));
  EXPECT_EQ(run(two + " --label-positive 1 --out " + (tmp / "two_bad"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("--label-positive"), std::string::npos) << slurp(log);
  EXPECT_FALSE(fs::exists(tmp / "two_bad")) << "refused before --out is created";
  // ... and so before the forward passes, which come after --out is created: an --out
  // that cannot be created is not what the message is about.
  EXPECT_EQ(run(two + " --label-positive 1 --out " + (tmp / "two_out/routing.json/x"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("--label-positive 1: label"), std::string::npos) << slurp(log);
  // Fewer labelled documents than --folds: separation and the automatic probe are
  // skipped with their reasons, utilization is written.
  write_relabelled(ds, tmp / "few", 4, [](int64_t i, int64_t) { return i % 2; });
  ASSERT_EQ(run(lol + " analyze routing --model " + (tmp / "model") + " --data " + (tmp / "few") +
                    " --split train --out " + (tmp / "few_out"),
                log),
            0)
      << slurp(log);
  const auto j4 = nlohmann::json::parse(slurp(tmp / "few_out/routing.json"));
  EXPECT_TRUE(j4["separation"].is_null());
  EXPECT_NE(j4["separation_skipped"].get<std::string>().find("4 labelled sequences, fewer than --folds 5"),
            std::string::npos);
  EXPECT_TRUE(j4["probes"].is_null());
  EXPECT_EQ(j4["utilization"]["routed_depths"], 2);
  // A --test-fraction that leaves fewer development documents than folds: refused
  // before anything is written (it ended in a singular ridge system, exit 1).
  EXPECT_EQ(run(base + " --label-positive S1 --test-fraction 0.95 --out " + (tmp / "tf_out"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("--test-fraction: 0.95"), std::string::npos) << slurp(log);
  EXPECT_FALSE(fs::exists(tmp / "tf_out"));
  // --no-shuffle drops the shuffled controls of separation too; an empty
  // --label-positive is refused, not taken as "not given".
  ASSERT_EQ(run(base + " --max 30 --no-shuffle --out " + (tmp / "ns_out"), log), 0) << slurp(log);
  const auto j5 = nlohmann::json::parse(slurp(tmp / "ns_out/routing.json"));
  EXPECT_TRUE(j5["separation"]["shuffled_accuracy_mean"].is_null());
  EXPECT_TRUE(j5["separation"]["shuffled_accuracy"].empty());
  EXPECT_EQ(run(base + " --label-positive '' --out " + (tmp / "bad"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("--label-positive '': expected a label id or name"), std::string::npos) << slurp(log);
  // A name shared by two labels is refused, naming their ids.
  {
    auto info = nlohmann::json::parse(slurp(tmp / "two/dataset.json"));
    info["meta"]["labels"] = {"aa", "aa"};
    std::ofstream(tmp / "two/dataset.json") << info.dump();
  }
  EXPECT_EQ(run(two + " --label-positive aa --out " + (tmp / "bad"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("names several labels of the dataset (ids 0, 1)"), std::string::npos) << slurp(log);
  // A negative id marks unlabelled sequences: not a label to probe.
  EXPECT_EQ(run(two + " --label-positive -1 --out " + (tmp / "two_bad"), log), 2) << slurp(log);
  EXPECT_NE(slurp(log).find("expected a label id >= 0"), std::string::npos) << slurp(log);
}
