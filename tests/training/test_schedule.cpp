// Learning-rate schedules and the growing schedule (paper 3.3, 4.2).
#include <gtest/gtest.h>

#include <cmath>

#include "training/schedule.h"

using namespace lol::training;

TEST(LrSchedule, WarmupIsLinearAndNeverZero) {
  ScheduleConfig s;
  s.type = "constant";
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(lr_factor(s, 0, 100), 0.25);
  EXPECT_DOUBLE_EQ(lr_factor(s, 1, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(s, 3, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(s, 50, 100), 1.0);
}

TEST(LrSchedule, CosineGoesFromPeakToMinimum) {
  ScheduleConfig s;
  s.type = "cosine";
  s.warmup_steps = 10;
  s.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(lr_factor(s, 10, 110), 1.0);                  // first step after warmup
  EXPECT_NEAR(lr_factor(s, 60, 110), 0.1 + 0.9 * 0.5, 1e-12);   // half way
  EXPECT_NEAR(lr_factor(s, 110, 110), 0.1, 1e-12);              // end
  double prev = 2;
  for (int64_t t = 10; t < 110; ++t) {
    double f = lr_factor(s, t, 110);
    EXPECT_LE(f, prev);
    EXPECT_GE(f, 0.1);
    prev = f;
  }
}

TEST(LrSchedule, WarmupStableDecayShapes) {
  ScheduleConfig s;
  s.type = "wsd";
  s.warmup_steps = 0;
  s.min_lr_ratio = 0.0;
  s.decay_fraction = 0.2;
  // 100 steps: stable for 80, cooldown over the last 20.
  EXPECT_DOUBLE_EQ(lr_factor(s, 0, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(s, 79, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(s, 80, 100), 1.0);  // q = 0
  s.decay_shape = "linear";
  EXPECT_NEAR(lr_factor(s, 90, 100), 0.5, 1e-12);
  s.decay_shape = "1-sqrt";
  EXPECT_NEAR(lr_factor(s, 85, 100), 1.0 - std::sqrt(0.25), 1e-12);
  EXPECT_NEAR(lr_factor(s, 90, 100), 1.0 - std::sqrt(0.5), 1e-12);
  // 1-sqrt drops faster than linear early in the cooldown.
  ScheduleConfig lin = s;
  lin.decay_shape = "linear";
  EXPECT_LT(lr_factor(s, 85, 100), lr_factor(lin, 85, 100));
}

TEST(Growing, OneMinusSqrtOverFractionOfTraining) {
  GrowConfig g;
  g.start = 1;
  g.fraction = 0.75;
  const int64_t D = 16, total = 1000;  // growing over the first 750 steps
  EXPECT_EQ(grown_depth(g, D, 0, total), 1);
  // depth(step) = min(16, 1 + floor(16 * (1 - sqrt(1 - step / 750))))
  for (int64_t step : {1, 30, 100, 375, 600, 700, 749}) {
    const int64_t want =
        std::min<int64_t>(16, 1 + int64_t(std::floor(16.0 * (1.0 - std::sqrt(1.0 - step / 750.0)) + 1e-9)));
    EXPECT_EQ(grown_depth(g, D, step, total), want) << "step " << step;
  }
  // Slow start, fast finish (the 1-sqrt shape): at half of the growing phase only
  // 1 - sqrt(1/2) = 29% of the depths have been added.
  EXPECT_EQ(grown_depth(g, D, 375, total), 1 + 4);
  // Depth 1 lasts until f reaches 1/16, i.e. step >= 750 * (1 - (15/16)^2) = 90.8.
  EXPECT_EQ(grown_depth(g, D, 90, total), 1);
  EXPECT_EQ(grown_depth(g, D, 91, total), 2);
  EXPECT_EQ(grown_depth(g, D, 750, total), D);
  EXPECT_EQ(grown_depth(g, D, 999, total), D);
  int64_t prev = 0;
  std::vector<int64_t> steps_at(D + 1, 0);
  for (int64_t s = 0; s < total; ++s) {
    int64_t d = grown_depth(g, D, s, total);
    EXPECT_GE(d, prev);
    EXPECT_LE(d, D);
    steps_at[d]++;
    prev = d;
  }
  // Every depth 1..16 is visited, shallow depths for longer than deep ones.
  for (int64_t d = 1; d <= D; ++d) EXPECT_GT(steps_at[d], 0) << d;
  EXPECT_GT(steps_at[1], steps_at[14]);
}

TEST(Growing, FractionZeroAndStartClamp) {
  GrowConfig g;
  g.fraction = 0;
  EXPECT_EQ(grown_depth(g, 8, 0, 100), 8);
  g.fraction = 0.5;
  g.start = 20;  // larger than the model: clamped, i.e. no growing
  EXPECT_EQ(grown_depth(g, 8, 0, 100), 8);
  g.start = 0;
  EXPECT_EQ(grown_depth(g, 8, 0, 100), 0);
  EXPECT_EQ(grown_depth(g, 8, 49, 100), 7);  // f = 1 - sqrt(1/50) = 0.859 -> floor(9 f) = 7
  EXPECT_EQ(grown_depth(g, 8, 50, 100), 8);
}

TEST(Growing, ShapesAndTheirMeanDepth) {
  // grow.shape: "1-sqrt" (slow start, the default), "sqrt" (fast start), "linear".
  // The mean depth over the growing phase (docs/training.md "Growing") with D = 16.
  const int64_t D = 16, total = 1000, G = 750;
  auto mean_depth = [&](const std::string& shape) {
    GrowConfig g;
    g.shape = shape;
    double sum = 0;
    for (int64_t s = 0; s < G; ++s) sum += double(grown_depth(g, D, s, total));
    return sum / double(G);
  };
  EXPECT_NEAR(mean_depth("1-sqrt"), 5.83, 0.01);
  EXPECT_NEAR(mean_depth("sqrt"), 11.15, 0.01);
  EXPECT_NEAR(mean_depth("linear"), 8.49, 0.01);
  GrowConfig fast;
  fast.shape = "sqrt";
  // f = sqrt(s / 750): depth 1 + floor(16 f); at s = 188 (a quarter) f = 0.5007 -> 9.
  EXPECT_EQ(grown_depth(fast, D, 188, total), 9);
  EXPECT_EQ(grown_depth(fast, D, 0, total), 1);
  EXPECT_EQ(grown_depth(fast, D, G, total), D);
  GrowConfig lin;
  lin.shape = "linear";
  EXPECT_EQ(grown_depth(lin, D, 375, total), 1 + 8);
}
