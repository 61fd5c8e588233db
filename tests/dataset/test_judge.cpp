// `lol data judge` (dataset/judge.h): continuations generated elsewhere get the verdicts
// the task verifiers give `lol eval-strategies` (paper 4.1.3, Figure 14; docs/tasks.md
// "Verdict fields"). Every record of a generated dataset, requested under each of the
// five strategies, is its own strategy's exact trace and legal, faithful and correct;
// <pad> tokens count into `padding`; tokens after <eos> are ignored; a wrong answer is
// not correct; bad lines are refused with file:line and the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "dataset/dataset_test_util.h"
#include "dataset/judge.h"
#include "dataset/task_dataset.h"
#include "tasks/task.h"

namespace lol::data {
namespace {

std::vector<nlohmann::json> records(const std::string& jsonl) {
  std::vector<nlohmann::json> out;
  std::istringstream in(lol_test::read_text(jsonl));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<nlohmann::json> judge(const std::vector<nlohmann::json>& lines, tasks::VerdictTally* summary = nullptr) {
  std::ostringstream in_text, out;
  for (const auto& l : lines) in_text << l.dump() << "\n";
  std::istringstream in(in_text.str());
  const auto s = judge_continuations(in, "judge.jsonl", out);
  if (summary) *summary = s;
  std::vector<nlohmann::json> v;
  std::istringstream back(out.str());
  for (std::string line; std::getline(back, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

std::vector<nlohmann::json> task_records(const std::string& task, const test::TmpDir& t) {
  TaskDatasetOptions o;
  o.task = task;
  o.size = 5;
  o.n_puzzles = task == "maze" ? 4 : 1;
  o.seed = 3;
  o.valid_fraction = 0;
  o.n_test = 0;
  o.progress = false;
  build_task_dataset(o, t / task);
  return records(t / (task + "/train.jsonl"));
}

/// The first record's strategy, prompt (question + its label), trace and answer.
struct Record {
  int strategy;
  std::string prompt, trace, answer;
};
Record first_record(const std::vector<nlohmann::json>& recs) {
  const auto& r = recs.at(0);
  return {r["strategy"].get<int>(), r["question"].get<std::string>() + " " + r["label"].get<std::string>(),
          r["trace"].get<std::string>(), r["answer"].get<std::string>()};
}

class JudgeEveryStrategy : public ::testing::TestWithParam<std::string> {};

TEST_P(JudgeEveryStrategy, CanonicalTracesUnderEveryRequest) {
  test::TmpDir t;
  const auto recs = task_records(GetParam(), t);
  ASSERT_GE(recs.size(), 5u);
  const TaskSpec spec = task_spec(GetParam(), 5);
  std::vector<nlohmann::json> in;
  for (const auto& r : recs)
    for (int s = 1; s <= 5; ++s)
      for (const std::string& label : {r["label"].get<std::string>(), spec.filler_label, std::string()})
        in.push_back({{"question", r["question"].get<std::string>() + (label.empty() ? "" : " " + label)},
                      {"strategy", s},
                      {"generated", r["trace"].get<std::string>() + " " + r["answer"].get<std::string>()}});
  tasks::VerdictTally sum;
  const auto v = judge(in, &sum);
  ASSERT_EQ(v.size(), in.size());
  EXPECT_EQ(sum.n, int64_t(in.size()));
  EXPECT_EQ(sum.as_requested, int64_t(recs.size()) * 3);  // one request in five is the record's own
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& r = recs[i / 15];
    const int requested = in[i]["strategy"];
    const int own = r["strategy"];
    EXPECT_EQ(v[i]["line"], int64_t(i) + 1);
    EXPECT_EQ(v[i]["followed"], own) << in[i].dump();
    EXPECT_EQ(v[i]["as_requested"], requested == own) << in[i].dump();
    EXPECT_TRUE(v[i]["legal"].get<bool>() && v[i]["faithful"].get<bool>() && v[i]["correct"].get<bool>())
        << in[i].dump() << "\n" << v[i].dump();
    EXPECT_EQ(v[i]["padding"], 0.0);
    // The error names the requested strategy's violation when another strategy's trace is given.
    EXPECT_EQ(v[i]["error"].get<std::string>().empty(), requested == own) << v[i].dump();
  }
}

TEST_P(JudgeEveryStrategy, PaddingTokensAfterEosAndWrongAnswers) {
  test::TmpDir t;
  const auto [own, q, trace, answer] = first_record(task_records(GetParam(), t));
  const size_t n_tokens = tasks::split_tokens(trace + " " + answer).size() - 1;  // before <eos>
  std::string wrong = answer.substr(0, answer.rfind(" <eos>"));
  wrong = wrong.substr(0, wrong.rfind(' ')) + " <eos>";  // the answer's last token dropped
  const auto v = judge({{{"question", q}, {"strategy", own}, {"generated", "R : <pad> " + trace.substr(4) + " <pad> " + answer}},
                        {{"question", q}, {"strategy", own}, {"generated", trace + " " + answer + " <pad> r1c1 7 A :"}},
                        {{"question", q}, {"strategy", own}, {"generated", trace + " " + wrong}},
                        {{"question", q}, {"strategy", own}, {"generated", ""}}});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0]["followed"], own) << v[0].dump();
  EXPECT_TRUE(v[0]["correct"].get<bool>()) << v[0].dump();
  EXPECT_DOUBLE_EQ(v[0]["padding"].get<double>(), 2.0 / double(n_tokens + 2)) << v[0].dump();
  EXPECT_EQ(v[1]["followed"], own) << v[1].dump();
  EXPECT_EQ(v[1]["error"], "") << v[1].dump();
  EXPECT_EQ(v[1]["padding"], 0.0);
  EXPECT_FALSE(v[2]["correct"].get<bool>()) << v[2].dump();
  EXPECT_NE(v[2]["error"], "") << v[2].dump();
  EXPECT_EQ(v[3]["followed"], 0);
  EXPECT_FALSE(v[3]["legal"].get<bool>() || v[3]["correct"].get<bool>() || v[3]["as_requested"].get<bool>());
  EXPECT_NE(v[3]["error"], "");
}

// The two verifiers read a malformed continuation alike (found by
// tests/reference/verifier_reference.py): no <eos> is an error of its own, a missing
// "R :" leaves the answer judged, and an "A" without ":" ends the trace.
TEST_P(JudgeEveryStrategy, MalformedMarkersAreReadAlikeByBothVerifiers) {
  test::TmpDir t;
  const auto [own, q, trace, answer] = first_record(task_records(GetParam(), t));
  const std::string no_eos = answer.substr(0, answer.rfind(" <eos>"));
  const std::string a_without_colon = "A" + answer.substr(3);  // "A : x ..." -> "A x ..."
  ASSERT_EQ(answer.substr(0, 4), "A : ");
  const auto v = judge({{{"question", q}, {"strategy", own}, {"generated", trace + " " + no_eos}},
                        {{"question", q}, {"strategy", own}, {"generated", trace.substr(4) + " " + answer}},
                        {{"question", q}, {"strategy", own}, {"generated", trace + " " + a_without_colon}}});
  ASSERT_EQ(v.size(), 3u);
  // 1. Everything right but the <eos>.
  EXPECT_EQ(v[0]["followed"], own) << v[0].dump();
  EXPECT_TRUE(v[0]["legal"].get<bool>() && v[0]["faithful"].get<bool>() && v[0]["correct"].get<bool>()) << v[0].dump();
  EXPECT_EQ(v[0]["error"], "missing <eos>") << v[0].dump();
  // 2. No "R :": the trace is not judged, the answer is.
  EXPECT_EQ(v[1]["followed"], 0) << v[1].dump();
  EXPECT_FALSE(v[1]["legal"].get<bool>() || v[1]["as_requested"].get<bool>()) << v[1].dump();
  EXPECT_TRUE(v[1]["correct"].get<bool>()) << v[1].dump();
  EXPECT_EQ(v[1]["error"], "the continuation does not start with 'R :'") << v[1].dump();
  // 3. "A" without ":": the trace is whole, there is no answer.
  EXPECT_EQ(v[2]["followed"], own) << v[2].dump();
  EXPECT_TRUE(v[2]["legal"].get<bool>() && v[2]["faithful"].get<bool>()) << v[2].dump();
  EXPECT_FALSE(v[2]["correct"].get<bool>()) << v[2].dump();
  EXPECT_EQ(v[2]["error"], "no 'A :' answer marker") << v[2].dump();
}

INSTANTIATE_TEST_SUITE_P(Tasks, JudgeEveryStrategy, ::testing::Values("maze", "sudoku"));

TEST(Judge, BadLinesNameTheLineAndTheField) {
  test::TmpDir t;
  const auto recs = task_records("maze", t);
  const nlohmann::json good = {{"question", recs[0]["question"]}, {"strategy", 1}, {"generated", "R : A : <eos>"}};
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = good;
    if (value.is_discarded()) j.erase(key); else j[key] = value;
    return j.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2]", "judge.jsonl:3: not a JSON object"},
      {"{\"question\": \"Q", "judge.jsonl:3: not a JSON object"},
      {with("question", nlohmann::json::value_t::discarded), "judge.jsonl:3: missing field 'question'"},
      {with("generated", 5), "judge.jsonl:3: field 'generated' is 5 (expected the continuation"},
      {with("strategy", 0), "judge.jsonl:3: field 'strategy' is 0 (expected the requested strategy, an integer 1..5)"},
      {with("strategy", "1"), "field 'strategy' is \"1\""},
      {with("strategy", 2.5), "field 'strategy' is 2.5"},
      {with("task", "chess"), "judge.jsonl:3: field 'task' is \"chess\" (expected \"maze\" or \"sudoku\")"},
      {with("question", "Q : r1c1 start r1c1 goal r1c1"), "judge.jsonl:3: field 'question': maze question"},
      {with("task", "sudoku"), "judge.jsonl:3: field 'question': sudoku"},
  };
  for (const auto& [bad, needle] : cases) {
    std::istringstream in(good.dump() + "\n\n" + bad + "\n" + good.dump() + "\n");
    std::ostringstream out;
    lol_test::expect_input_error([&] { judge_continuations(in, "judge.jsonl", out); }, {needle});
  }
}

}  // namespace
}  // namespace lol::data
