// Maze vocabulary and tokenization (paper Appendix A, C.4): fixed word-level
// vocabulary, round trips, loss / router-only masks.
#include <gtest/gtest.h>

#include <set>

#include "tasks/maze_generate.h"
#include "tasks/maze_tokenize.h"
#include "util/error.h"

using namespace lol::tasks;

TEST(MazeTokenize, VocabularyHasTheTaskTokens) {
  for (int n : {4, 8, 16}) {
    const Vocab v = maze_vocab(n);
    EXPECT_EQ(v.size(), 15 + n * n);
    EXPECT_EQ(v.id("<pad>"), 0);
    EXPECT_EQ(v.id("<eos>"), 1);
    for (const char* t : {"Q", ":", "R", "A", "[", "]", "...", "start", "goal", "N", "E", "S", "W"})
      EXPECT_TRUE(v.contains(t)) << t;
    EXPECT_TRUE(v.contains("r" + std::to_string(n) + "c" + std::to_string(n)));
    EXPECT_FALSE(v.contains("r" + std::to_string(n + 1) + "c1"));
    const Vocab back = Vocab::from_json(v.to_json(), "test");
    EXPECT_EQ(back.tokens(), v.tokens());
  }
  EXPECT_THROW(maze_vocab(3), lol::InputError);
  EXPECT_THROW(maze_vocab(17), lol::InputError);
}

TEST(MazeTokenize, ExamplesRoundTripWithMasks) {
  const Vocab v = maze_vocab(16);
  for (int size : {4, 8, 16}) {
    for (const Example& e : generate_maze_dataset(size == 16 ? 4 : 20, size, 5)) {
      const TokenizedExample t = tokenize_maze_example(e, v);
      ASSERT_EQ(t.ids.size(), t.loss_mask.size());
      ASSERT_EQ(t.ids.size(), t.router_only.size());
      EXPECT_EQ(v.decode(t.ids), e.text());
      const size_t nq = split_tokens(e.question).size(), nl = split_tokens(e.label).size();
      const size_t nr = split_tokens(e.trace).size(), na = split_tokens(e.answer).size();
      EXPECT_EQ(size_t(t.prompt_len), nq + nl);
      EXPECT_EQ(t.ids.size(), nq + nl + nr + na);
      for (size_t i = 0; i < t.ids.size(); ++i) {
        EXPECT_EQ(t.router_only[i], i >= nq && i < nq + nl) << i;
        EXPECT_EQ(t.loss_mask[i], i >= nq + nl) << i;
      }
      EXPECT_EQ(v.token(t.ids[nq]), "[");
      EXPECT_EQ(v.token(t.ids[nq + nl - 1]), "]");
      EXPECT_EQ(v.token(t.ids[nq + nl]), "R");
      EXPECT_EQ(v.token(t.ids.back()), "<eos>");
      EXPECT_EQ(t.strategy, e.strategy);
      EXPECT_EQ(t.puzzle_id, e.puzzle_id);
    }
  }
}

TEST(MazeTokenize, FillerLabelAndErrors) {
  const auto ex = generate_maze_dataset(1, 8, 3);
  Example e = ex[0];
  e.label = "[ ... ]";
  const Vocab v = maze_vocab(8);
  const TokenizedExample t = tokenize_maze_example(e, v);
  EXPECT_EQ(t.prompt_len, int32_t(split_tokens(e.question).size() + 3));
  EXPECT_EQ(std::count(t.router_only.begin(), t.router_only.end(), 1), 3);
  EXPECT_THROW(tokenize_maze_example(ex[0], maze_vocab(4)), lol::InputError);  // r5c1.. not in a 4x4 vocabulary
  Example bad = ex[0];
  bad.label = "S1";
  EXPECT_THROW(tokenize_maze_example(bad, v), lol::InputError);
}
