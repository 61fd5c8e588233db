// Sudoku vocabulary and tokenization (paper Appendix A, C.3.1).
#include <gtest/gtest.h>

#include "tasks/sudoku_generate.h"
#include "tasks/sudoku_tokenize.h"
#include "util/error.h"

using namespace lol::tasks;

TEST(SudokuVocab, FixedLayout) {
  const Vocab v = sudoku_vocab();
  EXPECT_EQ(v.size(), 140);
  EXPECT_EQ(v.id("<pad>"), 0);
  EXPECT_EQ(v.id("<eos>"), 1);
  for (const char* t : {"Q", "R", "A", ":", "[", "]", "S1", "S5", "...", ".", "1", "9", ";", "=", "{", "}", "->",
                        "set", "x", "back", "row1", "col9", "box5", "r1c1", "r9c9"})
    EXPECT_TRUE(v.contains(t)) << t;
  EXPECT_FALSE(v.contains("0"));
  EXPECT_EQ(v.id("r9c9"), v.size() - 1);
  const Vocab back = Vocab::from_json(v.to_json(), "vocab.json");
  EXPECT_EQ(back.tokens(), v.tokens());
}

TEST(SudokuVocab, TokenizeRoundTripsAndMasks) {
  const Vocab v = sudoku_vocab();
  const auto ds = generate_sudoku_dataset(20, 3);
  for (const Example& e : ds) {
    const TokenizedExample t = tokenize_sudoku_example(e, v);
    ASSERT_EQ(t.ids.size(), t.loss_mask.size());
    ASSERT_EQ(t.ids.size(), t.router_only.size());
    EXPECT_EQ(v.decode(t.ids), e.text());
    EXPECT_EQ(t.prompt_len, 83 + 3);  // "Q :" + 81 cells, "[ Sx ]"
    EXPECT_EQ(t.strategy, e.strategy);
    EXPECT_EQ(t.puzzle_id, e.puzzle_id);
    for (size_t k = 0; k < t.ids.size(); ++k) {
      const bool in_label = k >= 83 && k < 86;
      EXPECT_EQ(t.router_only[k], in_label ? 1 : 0) << k;
      EXPECT_EQ(t.loss_mask[k], k >= size_t(t.prompt_len) ? 1 : 0) << k;
    }
    EXPECT_EQ(v.token(t.ids[t.prompt_len]), "R");
    EXPECT_EQ(v.token(t.ids.back()), "<eos>");
    EXPECT_EQ(t.ids[83], v.id("["));
    EXPECT_EQ(t.ids[85], v.id("]"));
  }
  Example filler = ds[0];
  filler.label = kSudokuFillerLabel;
  EXPECT_EQ(v.decode(tokenize_sudoku_example(filler, v).ids), filler.text());
  Example bad = ds[0];
  bad.trace = "R : r1c1 = 0";
  EXPECT_THROW(tokenize_sudoku_example(bad, v), lol::InputError);
}
