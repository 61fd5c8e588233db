// Strided window layout (paper 3.2.1, Algorithm 1 lines 5-6) and the prompt window.
#include <gtest/gtest.h>

#include "lol/windows.h"
#include "model/ref_lol.h"

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(Windows, PaperExample_n8_W4_S2) {
  // "with n=8, W=4 and S=2, depth 1 uses the windows {0..3} and {4..7}, depth 2 uses
  //  {0,1}, {2..5} and {6,7}, and depth 3 goes back to the first split".
  EXPECT_EQ(lol::window_ranges(8, 1, 4, 2), (Ranges{{0, 4}, {4, 8}}));
  EXPECT_EQ(lol::window_ranges(8, 2, 4, 2), (Ranges{{0, 2}, {2, 6}, {6, 8}}));
  EXPECT_EQ(lol::window_ranges(8, 3, 4, 2), (Ranges{{0, 4}, {4, 8}}));
  EXPECT_EQ(lol::window_shift(1, 4, 2), 0);
  EXPECT_EQ(lol::window_shift(2, 4, 2), 2);
  EXPECT_EQ(lol::window_shift(3, 4, 2), 0);
  // Figure 2: token 5 (0-based 4) starts a window at depth 1; at depth 2 its window
  // also holds tokens 3 and 4 (0-based 2 and 3).
  EXPECT_EQ(lol::window_of(4, 0, 4, 0), 1);
  EXPECT_EQ(lol::window_of(4, 2, 4, 0), lol::window_of(2, 2, 4, 0));
}

TEST(Windows, FormulaAndPartition) {
  for (int64_t W : {1, 2, 3, 4, 7}) {
    for (int64_t S = 0; S < W; ++S) {
      for (int64_t depth = 1; depth <= 5; ++depth) {
        for (int64_t p : {0, 1, 3, 6, 20}) {
          const int64_t n = 17;
          auto r = lol::window_ranges(n, depth, W, S, p);
          const int64_t delta = ((depth - 1) * S) % W;
          // A partition of 0..n-1 into consecutive ranges, window index = range index.
          ASSERT_FALSE(r.empty());
          EXPECT_EQ(r.front().first, 0);
          EXPECT_EQ(r.back().second, n);
          for (size_t k = 0; k < r.size(); ++k) {
            if (k) EXPECT_EQ(r[k].first, r[k - 1].second);
            for (int64_t j = r[k].first; j < r[k].second; ++j) {
              EXPECT_EQ(lol::window_of(j, delta, W, p), int64_t(k));
              EXPECT_EQ(reftest::ref_window_index(j, depth, W, S, p), int64_t(k));
            }
          }
          if (p == 0) {
            // First window has W - delta tokens (or fewer at the end), inner windows W.
            EXPECT_EQ(r[0].second - r[0].first, std::min(W - delta, n));
            for (size_t k = 1; k + 1 < r.size(); ++k) EXPECT_EQ(r[k].second - r[k].first, W);
          } else {
            // Window 0 is the whole prompt; after it the same layout as without a prompt.
            EXPECT_EQ(r[0], (std::pair<int64_t, int64_t>{0, std::min(p, n)}));
            if (p < n) {
              auto rest = lol::window_ranges(n - p, depth, W, S, 0);
              ASSERT_EQ(rest.size() + 1, r.size());
              for (size_t k = 0; k < rest.size(); ++k)
                EXPECT_EQ(r[k + 1], (std::pair<int64_t, int64_t>{rest[k].first + p, rest[k].second + p}));
            }
          }
        }
      }
    }
  }
}

TEST(Windows, PromptWindowExample) {
  // p = 5, W = 4, S = 2: depth 1 {0..4}{5..8}{9..11}; depth 2 {0..4}{5,6}{7..10}{11}.
  EXPECT_EQ(lol::window_ranges(12, 1, 4, 2, 5), (Ranges{{0, 5}, {5, 9}, {9, 12}}));
  EXPECT_EQ(lol::window_ranges(12, 2, 4, 2, 5), (Ranges{{0, 5}, {5, 7}, {7, 11}, {11, 12}}));
}

TEST(Windows, DegenerateCases) {
  EXPECT_EQ(lol::window_ranges(0, 1, 4, 2), Ranges{});
  EXPECT_EQ(lol::window_ranges(5, 3, 8, 3), (Ranges{{0, 2}, {2, 5}}));  // delta = 6
  EXPECT_EQ(lol::window_ranges(5, 1, 8, 3), (Ranges{{0, 5}}));          // W >= n
  EXPECT_EQ(lol::window_ranges(6, 4, 3, 0), (Ranges{{0, 3}, {3, 6}}));  // S = 0: same at every depth
  EXPECT_EQ(lol::window_ranges(3, 2, 1, 0), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
}
