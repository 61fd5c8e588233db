// The maze verifier (paper Figure 14 metrics for mazes) on 1000 random mazes:
// every generated record verifies; corrupted traces are rejected; faithful but
// non-canonical traces are told apart from exact ones; garbage never throws.
#include <gtest/gtest.h>

#include <algorithm>

#include "tasks/maze_generate.h"
#include "tasks/maze_verify.h"
#include "test_maze_helpers.h"
#include "util/error.h"

using namespace lol::tasks;
using lol::tasks::maze_test::accepted_mazes;
using lol::tasks::maze_test::AcceptedMaze;

namespace {

const std::vector<AcceptedMaze>& pool() {
  static const std::vector<AcceptedMaze> p = accepted_mazes(1000, 8, 4242);
  return p;
}

std::string continuation(const Maze& m, const std::vector<int>& trace, const std::vector<int>& answer,
                         bool eos = true) {
  return "R : " + maze_cells_text(trace, m.size) + " A : " + maze_cells_text(answer, m.size) + (eos ? " <eos>" : "");
}

Verdict verify(const AcceptedMaze& a, int s, const std::vector<int>& trace, const std::vector<int>& answer) {
  return verify_maze(a.maze.to_question() + " [ ... ]", s, continuation(a.maze, trace, answer));
}

}  // namespace

TEST(MazeVerify, EveryGeneratedRecordVerifies) {
  int n = 0;
  for (const auto& a : pool()) {
    const std::vector<Example> ex = make_maze_examples(a.maze);
    ASSERT_EQ(ex.size(), 5u);
    for (const Example& e : ex) {
      const Verdict v = verify_maze(e.question + " " + e.label, e.strategy, e.trace + " " + e.answer);
      ASSERT_EQ(v.followed_strategy, e.strategy) << e.text();
      ASSERT_TRUE(v.strategy_as_requested && v.trace_legal && v.rule_faithful && v.answer_correct) << v.error;
      ASSERT_EQ(v.error, "");
      ASSERT_EQ(v.padding, 0.0);
      ++n;
    }
  }
  EXPECT_EQ(n, 5000);
}

TEST(MazeVerify, OneChangedCellIsRejected) {
  std::mt19937_64 rng(1);
  for (const auto& a : pool()) {
    for (int s = 1; s <= 5; ++s) {
      std::vector<int> t = a.sol.runs[s - 1].trace;
      const size_t i = maze_uniform_below(rng, t.size());
      const int old = t[i];
      t[i] = int(maze_uniform_below(rng, a.maze.cells() - 1));
      if (t[i] >= old) ++t[i];
      const Verdict v = verify(a, s, t, a.sol.path);
      EXPECT_FALSE(v.strategy_as_requested) << maze_strategy_name(s);
      EXPECT_FALSE(v.rule_faithful && v.followed_strategy == s);
      EXPECT_TRUE(v.answer_correct);
      EXPECT_NE(v.error, "");
    }
  }
}

TEST(MazeVerify, TwoSwappedStepsAreRejected) {
  std::mt19937_64 rng(2);
  for (const auto& a : pool()) {
    for (int s = 1; s <= 5; ++s) {
      std::vector<int> t = a.sol.runs[s - 1].trace;
      size_t i = maze_uniform_below(rng, t.size()), j = maze_uniform_below(rng, t.size());
      while (t[i] == t[j]) j = maze_uniform_below(rng, t.size());
      std::swap(t[i], t[j]);
      const Verdict v = verify(a, s, t, a.sol.path);
      EXPECT_FALSE(v.strategy_as_requested) << maze_strategy_name(s);
      EXPECT_NE(v.followed_strategy, s);
    }
  }
}

TEST(MazeVerify, IllegalMovesAreRejected) {
  // Replace step i by a cell that is new and touches none of the cells listed before
  // it: no strategy's move model allows that (and for dead-end filling the cell is
  // either on the path or filled twice).
  std::mt19937_64 rng(3);
  int tried = 0;
  for (const auto& a : pool()) {
    const Maze& m = a.maze;
    for (int s = 1; s <= 5; ++s) {
      std::vector<int> t = a.sol.runs[s - 1].trace;
      if (t.size() < 4) continue;
      const size_t i = 2 + maze_uniform_below(rng, t.size() - 3);
      std::vector<int> candidates;
      for (int c = 0; c < m.cells(); ++c) {
        bool ok = c != m.start && c != t[i];
        for (size_t j = 0; j < i && ok; ++j) ok = c != t[j] && !m.adjacent(c, t[j]);
        if (ok) candidates.push_back(c);
      }
      if (candidates.empty()) continue;
      t[i] = candidates[maze_uniform_below(rng, candidates.size())];
      const Verdict v = verify(a, s, t, a.sol.path);
      EXPECT_FALSE(v.trace_legal) << maze_strategy_name(s) << ": " << v.error;
      EXPECT_FALSE(v.rule_faithful);
      EXPECT_FALSE(v.strategy_as_requested);
      EXPECT_EQ(v.followed_strategy, 0);
      ++tried;
    }
  }
  EXPECT_GT(tried, 4500);
}

TEST(MazeVerify, WrongAnswersAreRejected) {
  std::mt19937_64 rng(4);
  for (const auto& a : pool()) {
    const int s = 1 + int(maze_uniform_below(rng, 5));
    const std::vector<int>& t = a.sol.runs[s - 1].trace;
    std::vector<int> dropped = a.sol.path, changed = a.sol.path, reversed = a.sol.path;
    dropped.erase(dropped.begin() + 1 + long(maze_uniform_below(rng, dropped.size() - 2)));
    const size_t i = maze_uniform_below(rng, changed.size());
    changed[i] = (changed[i] + 1 + int(maze_uniform_below(rng, a.maze.cells() - 1))) % a.maze.cells();
    std::reverse(reversed.begin(), reversed.end());
    for (const auto& ans : {dropped, changed, reversed, std::vector<int>{}}) {
      const Verdict v = verify(a, s, t, ans);
      EXPECT_FALSE(v.answer_correct);
      EXPECT_TRUE(v.strategy_as_requested && v.trace_legal && v.rule_faithful);  // the trace is still right
      EXPECT_EQ(v.error, "the answer is not the solution path");
    }
  }
}

TEST(MazeVerify, AnotherStrategysTraceIsIdentified) {
  for (const auto& a : pool()) {
    for (int s = 1; s <= 5; ++s)
      for (int other = 1; other <= 5; ++other) {
        if (other == s) continue;
        const Verdict v = verify(a, s, a.sol.runs[other - 1].trace, a.sol.path);
        ASSERT_EQ(v.followed_strategy, other);
        ASSERT_FALSE(v.strategy_as_requested);
        ASSERT_TRUE(v.trace_legal && v.rule_faithful && v.answer_correct);
      }
  }
}

TEST(MazeVerify, FaithfulButNonCanonicalTracesAreNotExact) {
  // Other neighbour orders and other dead-end choices obey each strategy's rules
  // (faithful) without being its canonical trace.
  const MazeDirOrder wsen = {kMazeWest, kMazeSouth, kMazeEast, kMazeNorth};
  int differs[6] = {0, 0, 0, 0, 0, 0};
  for (const auto& a : pool()) {
    const Maze& m = a.maze;
    std::vector<std::pair<int, std::vector<int>>> variants = {
        {kMazeBfs, maze_bfs(m, wsen).trace},
        {kMazeDfs, maze_dfs(m, wsen).trace},
        {kMazeBidirectional, maze_bidirectional(m, wsen).trace},
    };
    // Dead-end filling that always fills the last dead end in row-major order.
    std::vector<uint8_t> filled(m.cells(), 0);
    std::vector<int> de;
    for (;;) {
      int pick = -1;
      std::array<int, 4> nb;
      for (int c = 0; c < m.cells(); ++c) {
        if (filled[c] || c == m.start || c == m.goal) continue;
        int k = m.neighbors(c, nb), free = 0;
        for (int j = 0; j < k; ++j) free += !filled[nb[j]];
        if (free <= 1) pick = c;
      }
      if (pick < 0) break;
      filled[pick] = 1;
      de.push_back(pick);
    }
    variants.push_back({kMazeDeadEnd, de});
    for (const auto& [s, t] : variants) {
      const Verdict v = verify(a, s, t, a.sol.path);
      EXPECT_TRUE(v.trace_legal && v.rule_faithful) << maze_strategy_name(s) << ": " << v.error;
      if (t != a.sol.runs[s - 1].trace) {
        ++differs[s];
        EXPECT_FALSE(v.strategy_as_requested);
      }
    }
  }
  for (int s : {kMazeBfs, kMazeDfs, kMazeBidirectional, kMazeDeadEnd}) EXPECT_GT(differs[s], 100) << s;
}

TEST(MazeVerify, AStarPopsOfHigherFAreNotFaithful) {
  // Pop a neighbour of the start whose f = 1 + h exceeds another neighbour's right
  // after the start: a legal frontier move, but not an A* pop.
  int tested = 0;
  for (const auto& a : pool()) {
    const Maze& m = a.maze;
    std::vector<int> t = a.sol.runs[kMazeAStar - 1].trace;
    auto h = [&](int c) { return std::abs(m.row(c) - m.row(m.goal)) + std::abs(m.col(c) - m.col(m.goal)); };
    std::array<int, 4> nb;
    const int k = m.neighbors(m.start, nb);
    int hmin = 1 << 20, extra = -1;
    for (int j = 0; j < k; ++j) hmin = std::min(hmin, h(nb[j]));
    for (int j = 0; j < k; ++j)
      if (h(nb[j]) > hmin) extra = nb[j];
    if (extra < 0) continue;
    t.erase(std::remove(t.begin(), t.end(), extra), t.end());
    t.insert(t.begin() + 1, extra);
    const MazeTraceCheck c = check_maze_trace(m, kMazeAStar, t);
    EXPECT_TRUE(c.legal) << c.error;
    EXPECT_FALSE(c.faithful);
    const Verdict v = verify(a, kMazeAStar, t, a.sol.path);
    EXPECT_TRUE(v.trace_legal);
    EXPECT_FALSE(v.strategy_as_requested);
    ++tested;
  }
  EXPECT_GT(tested, 100);
}

TEST(MazeVerify, DfsBacktrackingTooEarlyIsNotFaithful) {
  for (const auto& a : pool()) {
    const Maze& m = a.maze;
    std::vector<int> t = a.sol.runs[kMazeDfs - 1].trace;
    // start -> first step -> back to start -> the canonical walk: legal moves, but the
    // walker stepped back although the first step had unvisited neighbours or it
    // re-enters a finished branch.
    t.insert(t.begin() + 1, {t[1], m.start});
    const MazeTraceCheck c = check_maze_trace(m, kMazeDfs, t);
    EXPECT_TRUE(c.legal);
    EXPECT_FALSE(c.faithful);
  }
}

TEST(MazeVerify, PaddingMissingEosAndGarbageNeverThrow) {
  std::mt19937_64 rng(9);
  const std::vector<std::string> junk = {"R",   ":", "A",   "<pad>", "<eos>", "r1c1", "r9c9",
                                         "foo", "[", "...", "N",     "r0c0",  "r3c",  "start"};
  for (size_t n = 0; n < 200; ++n) {
    const auto& a = pool()[n];
    const int s = 1 + int(n % 5);
    const Example e = make_maze_examples(a.maze)[s - 1];
    // Pads spread through a correct answer: still correct, padding reported.
    std::vector<std::string> toks = split_tokens(e.trace + " " + e.answer);
    const size_t before = toks.size() - 1;  // tokens before <eos>
    const size_t pads = 1 + maze_uniform_below(rng, 5);
    for (size_t p = 0; p < pads; ++p) toks.insert(toks.begin() + long(maze_uniform_below(rng, before)), "<pad>");
    std::string padded;
    for (const auto& w : toks) padded += w + " ";
    Verdict v = verify_maze(e.question, s, padded + "<pad> <pad>");  // pads after <eos> do not count
    EXPECT_TRUE(v.strategy_as_requested && v.trace_legal && v.rule_faithful && v.answer_correct) << v.error;
    EXPECT_DOUBLE_EQ(v.padding, double(pads) / double(before + pads));
    // Missing <eos>: reported, the rest still scored.
    v = verify_maze(e.question, s, e.trace + " " + e.answer.substr(0, e.answer.size() - 6));
    EXPECT_TRUE(v.answer_correct);
    EXPECT_EQ(v.error, "missing <eos>");
    // Truncated in the trace.
    const std::string full = e.trace + " " + e.answer;
    v = verify_maze(e.question, s, full.substr(0, maze_uniform_below(rng, e.trace.size())));
    EXPECT_FALSE(v.answer_correct);
    EXPECT_NE(v.error, "");
    // Random garbage.
    std::string g;
    const size_t len = maze_uniform_below(rng, 40);
    for (size_t i = 0; i < len; ++i) g += junk[maze_uniform_below(rng, junk.size())] + " ";
    EXPECT_NO_THROW(v = verify_maze(e.question, s, g));
    EXPECT_FALSE(v.answer_correct && v.trace_legal && v.strategy_as_requested);
  }
  const auto& a = pool()[0];
  Verdict v = verify_maze(a.maze.to_question(), 1, "");
  EXPECT_FALSE(v.trace_legal || v.answer_correct);
  EXPECT_EQ(v.padding, 0.0);
  v = verify_maze(a.maze.to_question(), 1, "<pad> <pad> <eos>");
  EXPECT_EQ(v.padding, 1.0);
  EXPECT_THROW(verify_maze(a.maze.to_question(), 0, ""), lol::InputError);
  EXPECT_THROW(verify_maze(a.maze.to_question(), 6, ""), lol::InputError);
  EXPECT_THROW(verify_maze("Q : garbage", 1, ""), lol::InputError);
}

TEST(MazeVerify, IdentifyNamesTheStrategy) {
  for (size_t n = 0; n < 100; ++n) {
    const auto& a = pool()[n];
    for (int s = 1; s <= 5; ++s) {
      EXPECT_EQ(identify_maze_strategy(a.maze, a.sol.runs[s - 1].trace), s);
      EXPECT_EQ(maze_matching_strategies(a.maze, a.sol.runs[s - 1].trace), 1u << (s - 1));
    }
    // The path reversed (goal to start) is no strategy's trace.
    EXPECT_EQ(identify_maze_strategy(a.maze, {a.sol.path.rbegin(), a.sol.path.rend()}), 0);
  }
}
