// Property tests of the sudoku verifier (paper C.3 metrics, Figure 14) on 1000
// random puzzles: every generated record verifies; corrupted traces are rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "tasks/sudoku_generate.h"
#include "tasks/sudoku_random.h"
#include "tasks/sudoku_strategies.h"
#include "tasks/sudoku_tokenize.h"
#include "tasks/sudoku_verify.h"
#include "util/error.h"

using namespace lol::tasks;

namespace {

struct Record {
  SudokuGrid puzzle, solution;
  std::string question;          // with label
  std::vector<std::string> steps[6];  // per strategy 1..5
  std::string answer;
};

const std::vector<Record>& records() {
  static const std::vector<Record> recs = [] {
    const auto ds = generate_sudoku_dataset(1000, 2024);
    std::vector<Record> out;
    for (size_t k = 0; k < ds.size(); k += 5) {
      Record r;
      r.puzzle = parse_sudoku_question(ds[k].question);
      count_sudoku_solutions(r.puzzle, 2, &r.solution);
      r.question = ds[k].question + " " + ds[k].label;
      r.answer = ds[k].answer;
      for (int s = 1; s <= 5; ++s) r.steps[s] = solve_sudoku_strategy(r.puzzle, s).steps;
      out.push_back(std::move(r));
    }
    return out;
  }();
  return recs;
}

std::string continuation(const std::vector<std::string>& steps, const std::string& answer) {
  return sudoku_trace_text(steps) + " " + answer;
}

bool fully_correct(const Verdict& v, int s) {
  return v.followed_strategy == s && v.strategy_as_requested && v.trace_legal && v.rule_faithful &&
         v.answer_correct;
}

/// Replaces the token at position `which` among the tokens satisfying `pred` by `f(token)`.
std::string rewrite_token(const std::string& step, int which, const std::function<bool(const std::string&)>& pred,
                          const std::function<std::string(const std::string&)>& f) {
  auto toks = split_tokens(step);
  int seen = 0;
  for (auto& t : toks) {
    if (pred(t) && seen++ == which) { t = f(t); break; }
  }
  std::string out;
  for (size_t k = 0; k < toks.size(); ++k) out += (k ? " " : "") + toks[k];
  return out;
}

bool is_digit(const std::string& t) { return parse_sudoku_digit(t) != 0; }
bool is_cell(const std::string& t) { return parse_sudoku_cell(t) >= 0; }

/// A step of strategy s placing digit d in `cell` (in that strategy's syntax).
std::string placement(int s, int cell, int d) {
  const auto& geo = sudoku_geometry();
  const std::string c = sudoku_cell_name(cell), ds = std::to_string(d);
  switch (s) {
    case 1: return c + " = { " + ds + " }";
    case 2: return sudoku_unit_name(geo.row[cell]) + " " + ds + " -> " + c;
    case 3: return ds + " " + sudoku_unit_name(18 + geo.box[cell]) + " -> " + c;
    case 4: return "set " + c + " = " + ds;
    default: return c + " = " + ds;
  }
}

}  // namespace

TEST(SudokuVerify, EveryGeneratedRecordVerifies) {
  ASSERT_EQ(records().size(), 1000u);
  for (const Record& r : records()) {
    for (int s = 1; s <= 5; ++s) {
      const Verdict v = verify_sudoku(r.question, s, continuation(r.steps[s], r.answer));
      ASSERT_TRUE(fully_correct(v, s)) << "S" << s << " " << sudoku_compact(r.puzzle) << ": " << v.error;
      ASSERT_EQ(v.padding, 0.0);
      ASSERT_TRUE(v.error.empty()) << v.error;
    }
  }
}

TEST(SudokuVerify, FillerLabelPadsAndMissingEos) {
  const Record& r = records()[0];
  const std::string q = sudoku_question(r.puzzle) + " " + kSudokuFillerLabel;
  for (int s = 1; s <= 5; ++s) {
    std::string text = continuation(r.steps[s], r.answer);
    text = text.substr(0, text.size() - 6);  // no "<eos>"
    EXPECT_TRUE(fully_correct(verify_sudoku(q, s, text), s));
    // Pads between tokens and after the answer: still correct, padding measured.
    const std::string padded = "R : <pad> " + text.substr(4) + " <pad> <pad> <eos> <pad> junk";
    const Verdict v = verify_sudoku(q, s, padded);
    EXPECT_TRUE(fully_correct(v, s)) << v.error;
    const double n = double(split_tokens(text).size() + 3);
    EXPECT_DOUBLE_EQ(v.padding, 3.0 / n);
  }
}

TEST(SudokuVerify, RejectsCorruptedTraces) {
  std::mt19937_64 rng(77);
  int checked = 0;
  for (size_t k = 0; k < records().size(); ++k) {
    const Record& r = records()[k];
    for (int s = 1; s <= 5; ++s) {
      const auto& steps = r.steps[s];
      const size_t n = steps.size();
      auto verdict = [&](const std::vector<std::string>& st, const std::string& ans) {
        return verify_sudoku(r.puzzle, r.solution, s, continuation(st, ans));
      };
      // (1) One changed digit inside a step.
      {
        auto st = steps;
        const size_t i = uniform_below(rng, n);
        const auto toks = split_tokens(st[i]);
        const int nd = int(std::count_if(toks.begin(), toks.end(), is_digit));
        if (nd > 0) {
          const int which = int(uniform_below(rng, uint64_t(nd)));
          const int delta = 1 + int(uniform_below(rng, 8));
          st[i] = rewrite_token(st[i], which, is_digit, [&](const std::string& t) {
            return std::to_string((parse_sudoku_digit(t) - 1 + delta) % 9 + 1);
          });
          const Verdict v = verdict(st, r.answer);
          EXPECT_FALSE(fully_correct(v, s));
          EXPECT_NE(v.followed_strategy, s);
          // The placed digit of S1-S4 (first digit token, or the "set" digit) ends illegal.
          if (s <= 4 && which == 0) EXPECT_FALSE(v.trace_legal) << "S" << s << " " << st[i];
          if (s == 4 && which > 0) EXPECT_FALSE(v.rule_faithful) << st[i];
        }
      }
      // (2) One changed cell.
      {
        auto st = steps;
        const size_t i = uniform_below(rng, n);
        const int delta = 1 + int(uniform_below(rng, 80));
        st[i] = rewrite_token(st[i], 0, is_cell, [&](const std::string& t) {
          return sudoku_cell_name((parse_sudoku_cell(t) + delta) % 81);
        });
        const Verdict v = verdict(st, r.answer);
        EXPECT_FALSE(fully_correct(v, s));
        EXPECT_NE(v.followed_strategy, s);
        if (s <= 4) EXPECT_FALSE(v.trace_legal) << "S" << s << " " << st[i];
      }
      // (3) Two swapped (different) steps.
      {
        auto st = steps;
        const size_t i = uniform_below(rng, n), j = uniform_below(rng, n);
        if (st[i] != st[j]) {
          std::swap(st[i], st[j]);
          const Verdict v = verdict(st, r.answer);
          EXPECT_FALSE(fully_correct(v, s));
          EXPECT_NE(v.followed_strategy, s);
          EXPECT_TRUE(v.strategy_as_requested);
          EXPECT_FALSE(v.error.empty());
        }
      }
      // (4) An illegal placement: a given cell, or a digit its row already holds.
      {
        auto st = steps;
        int given = -1;
        while (given < 0) { const int c = int(uniform_below(rng, 81)); if (r.puzzle[c]) given = c; }
        st.insert(st.begin() + long(uniform_below(rng, n + 1)), placement(s, given, r.puzzle[given]));
        Verdict v = verdict(st, r.answer);
        EXPECT_FALSE(v.trace_legal);
        EXPECT_FALSE(v.rule_faithful);
        EXPECT_EQ(v.followed_strategy, 0);
        auto st2 = steps;
        int blank = -1;
        while (blank < 0) { const int c = int(uniform_below(rng, 81)); if (!r.puzzle[c]) blank = c; }
        int clash = 0;
        for (int j = 0; j < 9 && !clash; ++j) clash = r.puzzle[9 * (blank / 9) + j];
        if (clash) {
          st2.insert(st2.begin(), placement(s, blank, clash));
          v = verdict(st2, r.answer);
          EXPECT_FALSE(v.trace_legal) << st2[0];
          EXPECT_NE(v.followed_strategy, s);
        }
      }
      // (5) A wrong answer, the trace untouched.
      {
        auto toks = split_tokens(r.answer);
        const size_t i = 2 + uniform_below(rng, 81);
        toks[i] = std::to_string(parse_sudoku_digit(toks[i]) % 9 + 1);
        std::string ans;
        for (size_t j = 0; j < toks.size(); ++j) ans += (j ? " " : "") + toks[j];
        const Verdict v = verdict(steps, ans);
        EXPECT_FALSE(v.answer_correct);
        EXPECT_TRUE(v.trace_legal && v.rule_faithful);
        EXPECT_EQ(v.followed_strategy, s);
        // Truncated answers are wrong too.
        EXPECT_FALSE(verdict(steps, "A : 1 2 3 <eos>").answer_correct);
      }
      // (6) Another strategy's trace under this strategy's label.
      {
        const int other = 1 + int((s + uniform_below(rng, 4)) % 5);
        ASSERT_NE(other, s);
        const Verdict v = verdict(r.steps[other], r.answer);
        EXPECT_FALSE(v.strategy_as_requested);
        EXPECT_EQ(v.followed_strategy, other);
        EXPECT_TRUE(v.trace_legal && v.rule_faithful && v.answer_correct);
      }
      // (7) A truncated trace does not reach the solution.
      {
        auto st = steps;
        st.pop_back();
        const Verdict v = verdict(st, r.answer);
        EXPECT_FALSE(v.trace_legal);
        EXPECT_NE(v.followed_strategy, s);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5000);
}

TEST(SudokuVerify, MixedSyntaxAndClaimChecks) {
  const Record& r = records()[1];
  // An S1 trace with one step rewritten in S5 syntax matches no strategy.
  auto st = r.steps[1];
  st[3] = rewrite_token(st[3], 0, [](const std::string& t) { return t == "{"; }, [](const std::string&) { return ""; });
  st[3] = st[3].substr(0, st[3].find(" }")) ;
  ASSERT_EQ(sudoku_step_syntax(split_tokens(st[3])), 5) << st[3];
  Verdict v = verify_sudoku(r.puzzle, r.solution, 1, continuation(st, r.answer));
  EXPECT_FALSE(v.strategy_as_requested || v.trace_legal || v.rule_faithful);
  EXPECT_EQ(v.followed_strategy, 0);
  EXPECT_TRUE(v.answer_correct);
  // S4: dropping every "peer -> { d }" claim keeps the placements legal and faithful
  // (claims are only checked when made) but is not the exact trace.
  auto s4 = r.steps[4];
  for (auto& step : s4) step = step.substr(0, step.find(" :"));
  v = verify_sudoku(r.puzzle, r.solution, 4, continuation(s4, r.answer));
  EXPECT_TRUE(v.trace_legal && v.rule_faithful);
  EXPECT_EQ(v.followed_strategy, 0);
  // S5: marking an accepted placement as rejected is an unfaithful claim.
  auto s5 = r.steps[5];
  for (auto& step : s5) {
    if (split_tokens(step).size() == 3) { step += " x"; break; }
  }
  v = verify_sudoku(r.puzzle, r.solution, 5, continuation(s5, r.answer));
  EXPECT_FALSE(v.rule_faithful);
  EXPECT_EQ(v.followed_strategy, 0);
}

TEST(SudokuVerify, GarbageNeverThrows) {
  const Record& r = records()[2];
  const Vocab vocab = sudoku_vocab();
  std::mt19937_64 rng(5);
  const std::string full = continuation(r.steps[2], r.answer);
  for (int k = 0; k < 2000; ++k) {
    std::string text;
    const int mode = k % 3;
    if (mode == 0) {  // random vocabulary tokens
      const int len = int(uniform_below(rng, 300));
      for (int j = 0; j < len; ++j) text += vocab.token(int32_t(uniform_below(rng, uint64_t(vocab.size())))) + " ";
    } else if (mode == 1) {  // a valid continuation cut anywhere
      text = full.substr(0, uniform_below(rng, full.size() + 1));
    } else {  // a valid continuation with random tokens spliced in
      auto toks = split_tokens(full);
      for (int j = 0; j < 3; ++j)
        toks[uniform_below(rng, toks.size())] = vocab.token(int32_t(uniform_below(rng, uint64_t(vocab.size()))));
      for (auto& t : toks) text += t + " ";
    }
    const int s = 1 + int(uniform_below(rng, 5));
    Verdict v;
    ASSERT_NO_THROW(v = verify_sudoku(r.puzzle, r.solution, s, text)) << text;
    EXPECT_GE(v.padding, 0.0);
    EXPECT_LE(v.padding, 1.0);
    if (v.followed_strategy) EXPECT_TRUE(v.trace_legal);
  }
  EXPECT_NO_THROW(verify_sudoku(r.question, 1, ""));
  EXPECT_NO_THROW(verify_sudoku(r.question, 1, "\xff\xfe garbage \n\t"));
  EXPECT_FALSE(verify_sudoku(r.question, 1, "").trace_legal);
  const Verdict empty = verify_sudoku(r.question, 1, "R : " + r.answer);
  EXPECT_FALSE(empty.trace_legal || empty.strategy_as_requested);
  EXPECT_TRUE(empty.answer_correct);
  EXPECT_EQ(empty.error, "the trace is empty");
}

TEST(SudokuVerify, BadQuestionsAndStrategiesThrow) {
  const Record& r = records()[0];
  const std::string cont = continuation(r.steps[1], r.answer);
  EXPECT_THROW(verify_sudoku("Q : 1 2 3", 1, cont), lol::InputError);
  EXPECT_THROW(verify_sudoku(r.question, 0, cont), lol::InputError);
  EXPECT_THROW(verify_sudoku(r.question, 6, cont), lol::InputError);
  // Blanking everything leaves many solutions.
  EXPECT_THROW(verify_sudoku(sudoku_question(SudokuGrid{}), 1, cont), lol::InputError);
}
