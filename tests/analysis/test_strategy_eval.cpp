// evaluate_strategies' generation limits (docs/routing-paths.md, eval-strategies): each
// generation gets min(max_new_tokens, max_seq_len - its own prompt), whatever --batch
// puts beside it (it was cut to the room of the batch's longest prompt).
#include <algorithm>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "analysis/strategy_eval.h"
#include "analysis_test_util.h"
#include "dataset/task_dataset.h"
#include "tasks/maze_generate.h"
#include "util/error.h"

namespace {

struct Call {
  int64_t prompt_tokens, max_new;
  size_t batch;
};

// Runs evaluate_strategies with a fake generator that records every row's limit and
// fills it with a token that is never <eos>.
std::map<int64_t, int64_t> limits_by_prompt(int64_t batch, int64_t context, std::vector<Call>* calls,
                                            lol::analysis::StrategyEvalResult* result,
                                            std::vector<int> sizes = {4, 6}, std::string filler = "") {
  atest::TempDir tmp("strategy_eval_" + std::to_string(batch));
  const std::string jsonl = tmp.path() + "/test.jsonl";
  {
    std::ofstream out(jsonl);
    // One task's prompts all have one length per size (a perfect maze lists N^2 - 1
    // passages): 4x4 and 6x6 mazes in one file give two lengths.
    for (int size : sizes)
      for (const auto& e : lol::tasks::generate_maze_dataset(3, size, 3))
        out << lol::data::example_to_json(e, "maze").dump() << "\n";
  }
  const auto spec = lol::data::task_spec("maze", 6);
  auto cfg = atest::tiny_config();
  cfg.vocab_size = spec.vocab.size();
  cfg.max_seq_len = context;
  lol::LoLModel model(cfg);
  std::map<int, lol::RoutingPath> paths;
  for (int s = 1; s <= 5; ++s) paths[s] = lol::RoutingPath{};
  lol::analysis::StrategyEvalOptions o;
  o.batch_size = batch;
  o.max_new_tokens = 40;
  o.unforced = false;
  o.progress = false;
  o.filler = filler;
  const int64_t filler_token = spec.vocab.id("r1c1");
  std::map<int64_t, int64_t> limit;  // prompt length -> limit (the same for equal lengths)
  auto fake = [&](lol::LoLModel&, const std::vector<lol::analysis::PromptSpec>& prompts, const lol::RoutingPath*,
                  int64_t max_new, int64_t) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& p : prompts) {
      calls->push_back({int64_t(p.tokens.size()), max_new, prompts.size()});
      EXPECT_LE(int64_t(p.tokens.size()) + max_new, context);
      auto [it, fresh] = limit.emplace(int64_t(p.tokens.size()), max_new);
      EXPECT_EQ(it->second, max_new) << "prompt of " << p.tokens.size() << " tokens";
      out.emplace_back(std::size_t(max_new), filler_token);
    }
    return out;
  };
  *result = lol::analysis::evaluate_strategies(model, spec, paths, jsonl, o, fake);
  return limit;
}

}  // namespace

TEST(StrategyEval, EachGenerationGetsItsOwnRoomWhateverTheBatch) {
  std::vector<Call> one_calls, six_calls;
  lol::analysis::StrategyEvalResult one, six;
  // A context of the longest prompt + 10 caps the long prompts' generations below
  // --max-new 40 (each by its own length), not the short ones' that share their batch.
  std::vector<Call> probe;
  lol::analysis::StrategyEvalResult ignored;
  const auto lengths = limits_by_prompt(1, 1000, &probe, &ignored);
  ASSERT_GE(lengths.size(), 2u) << "the test needs prompts of different lengths";
  const int64_t longest = lengths.rbegin()->first, context = longest + 10;
  const auto by_one = limits_by_prompt(1, context, &one_calls, &one);
  const auto by_six = limits_by_prompt(6, context, &six_calls, &six);
  EXPECT_EQ(by_one, by_six);
  int64_t cut_rows = 0;
  for (const auto& c : six_calls) cut_rows += c.prompt_tokens + 40 > context;
  for (const auto& [prompt, limit] : by_six) EXPECT_EQ(limit, std::min<int64_t>(40, context - prompt)) << prompt;
  EXPECT_GT(cut_rows, 0);
  EXPECT_LT(cut_rows, int64_t(six_calls.size()));  // the short prompts keep --max-new 40 beside long ones
  EXPECT_EQ(one.capped_generations, cut_rows);     // the cut rows reach their limit without <eos>
  EXPECT_EQ(six.capped_generations, cut_rows);
  // Without a cap the batch runs together, at --max-new.
  std::vector<Call> free_calls;
  lol::analysis::StrategyEvalResult free_run;
  limits_by_prompt(6, 1000, &free_calls, &free_run);
  EXPECT_EQ(free_run.capped_generations, 0);
  EXPECT_EQ(free_calls.front().batch, 6u);
  EXPECT_EQ(free_calls.front().max_new, 40);
}

// Prompts of one length under a cap: one call per batch, every row at the same room.
TEST(StrategyEval, EqualRoomRowsRunAsOneBatch) {
  std::vector<Call> probe, calls;
  lol::analysis::StrategyEvalResult ignored, r;
  const auto lengths = limits_by_prompt(6, 1000, &probe, &ignored, {4});
  ASSERT_EQ(lengths.size(), 1u);
  const int64_t context = lengths.begin()->first + 10;
  limits_by_prompt(3, context, &calls, &r, {4});
  ASSERT_EQ(calls.size(), 15u);  // 3 mazes x 5 forced strategies
  for (const auto& c : calls) {
    EXPECT_EQ(c.batch, 3u);
    EXPECT_EQ(c.max_new, 10);
  }
  EXPECT_EQ(r.capped_generations, 15);
}

// A --filler that makes the forced prompts fill max_seq_len: refused before generating.
TEST(StrategyEval, PromptThatFillsTheContextIsRefusedFirst) {
  std::vector<Call> probe, calls;
  lol::analysis::StrategyEvalResult ignored, r;
  const auto lengths = limits_by_prompt(6, 1000, &probe, &ignored, {4});
  const int64_t context = lengths.begin()->first + 2;  // the length-matched filler fits
  std::string filler = "[";
  for (int k = 0; k < 12; ++k) filler += " ...";
  filler += " ]";
  try {
    limits_by_prompt(6, context, &calls, &r, {4}, filler);
    ADD_FAILURE() << "expected lol::InputError";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(forced, with the filler) has "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("leaving no room in the model's max_seq_len = " + std::to_string(context)),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(calls.empty());
}
