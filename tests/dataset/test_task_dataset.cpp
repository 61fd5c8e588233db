// Task datasets (`lol data maze|sudoku`): the test split of new puzzles (paper 4.1.3:
// mode paths from validation puzzles, tested on new grids) leaves train and valid as
// they were without it, and shares no puzzle with them.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "dataset/dataset_test_util.h"
#include "dataset/shards.h"
#include "dataset/task_dataset.h"
#include "util/error.h"

namespace lol::data {
namespace {

namespace fs = std::filesystem;

std::set<uint64_t> puzzle_ids(const std::string& jsonl) {
  std::set<uint64_t> ids;
  std::istringstream in(lol_test::read_text(jsonl));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.insert(nlohmann::json::parse(line)["puzzle_id"].get<uint64_t>());
  return ids;
}

void expect_test_split_of_new_puzzles(const std::string& task, int64_t n, int64_t n_test, int64_t expect_test) {
  test::TmpDir t;
  TaskDatasetOptions o;
  o.task = task;
  o.size = 4;
  o.n_puzzles = n;
  o.seed = 7;
  o.valid_fraction = 0.3;
  o.progress = false;
  o.n_test = 0;
  build_task_dataset(o, t / "plain");
  o.n_test = n_test;
  const auto st = build_task_dataset(o, t / "with_test");
  for (const char* split : {"train.jsonl", "valid.jsonl"})
    EXPECT_EQ(lol_test::read_text(t / ("with_test/" + std::string(split))),
              lol_test::read_text(t / ("plain/" + std::string(split))))
        << task << " " << split << ": the test split must not change the others";
  EXPECT_FALSE(fs::exists(t / "plain/test.jsonl"));
  EXPECT_FALSE(Dataset::open(t / "plain").has_split("test"));
  const auto test_ids = puzzle_ids(t / "with_test/test.jsonl");
  EXPECT_EQ(int64_t(test_ids.size()), expect_test) << task;
  EXPECT_EQ(st["puzzles_test"].get<int64_t>(), expect_test);
  for (const char* split : {"train.jsonl", "valid.jsonl"})
    for (auto id : puzzle_ids(t / ("with_test/" + std::string(split))))
      EXPECT_EQ(test_ids.count(id), 0u) << task << ": puzzle " << id << " of " << split << " is also a test puzzle";
  const auto ds = Dataset::open(t / "with_test");
  ASSERT_TRUE(ds.has_split("test"));
  const auto test = ds.load("test");
  EXPECT_EQ(test.size(), st["sequences_test"].get<int64_t>());
  EXPECT_EQ(test.size(), 5 * expect_test);  // five strategies per puzzle
  EXPECT_TRUE(test.has_labels());
  EXPECT_EQ(ds.info()["meta"]["n_test"].get<int64_t>(), expect_test);
  EXPECT_EQ(ds.info()["meta"]["jsonl"]["test"], "test.jsonl");
}

TEST(TaskDataset, TestSplitHoldsNewPuzzlesAndLeavesTrainAndValidAsTheyWere) {
  expect_test_split_of_new_puzzles("maze", 20, 3, 3);
  expect_test_split_of_new_puzzles("maze", 25, -1, 2);  // default: --n / 10
  expect_test_split_of_new_puzzles("sudoku", 4, -1, 1);  // at least one
}

TEST(TaskDataset, NegativeTestCountIsRefused) {
  test::TmpDir t;
  TaskDatasetOptions o;
  o.size = 4;
  o.n_puzzles = 2;
  o.n_test = -2;
  o.progress = false;
  lol_test::expect_input_error([&] { build_task_dataset(o, t / "d"); }, {"--n-test -2: expected >= 0"});
}

// dataset.json's optional fields are type-checked at open: a wrong type named by field
// and file (an "internal error" from a later reader before), a maze side out of range
// too; a sudoku dataset records its grid side 9 and the --max-tokens cap.
TEST(TaskDataset, WrongTypedInfoFieldsAreRefusedAtOpen) {
  test::TmpDir t;
  TaskDatasetOptions o;
  o.task = "sudoku";
  o.n_puzzles = 3;
  o.seed = 7;
  o.max_tokens = 4000;
  o.progress = false;
  build_task_dataset(o, t / "s");
  const auto ds = Dataset::open(t / "s");
  EXPECT_EQ(ds.info()["meta"]["size"], 9);
  EXPECT_EQ(ds.info()["meta"]["max_tokens"], 4000);
  const std::string path = t / "s/dataset.json";
  const auto good = nlohmann::json::parse(lol_test::read_text(path));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["task"] = 7; }, "field 'task' = 7: expected a task name"},
      {[](nlohmann::json& j) { j["task"] = ""; }, "field 'task' = \"\": expected a task name"},
      {[](nlohmann::json& j) { j["meta"] = "x"; }, "field 'meta': expected an object"},
      {[](nlohmann::json& j) { j["stats"] = 1; }, "field 'stats': expected an object"},
      {[](nlohmann::json& j) { j["vocab"] = "abc"; }, "field 'vocab': expected an object"},
      {[](nlohmann::json& j) { j["labels"] = 3; }, "field 'labels': expected an array of names or an object"},
      {[](nlohmann::json& j) { j["meta"]["size"] = "4"; }, "field 'meta.size' = \"4\": expected an integer"},
      {[](nlohmann::json& j) {
         j["task"] = "maze";
         j["meta"]["size"] = 99;
       },
       "field 'meta.size' = 99: expected the maze side, an integer 4 <= size <= 16"},
  };
  for (const auto& [edit, says] : cases) {
    auto j = good;
    edit(j);
    lol_test::write_text(path, j.dump());
    lol_test::expect_input_error([&] { Dataset::open(t / "s"); }, {path, says});
  }
}

}  // namespace
}  // namespace lol::data
