// util/random.h: the portable draws give the same numbers under every standard library.
// The expected values were computed by an independent Python implementation of
// std::mt19937_64 (the standard's parameters; it reproduces the standard's check value,
// the 10000th output 9981545732273789042 for the default seed) and of the rules written
// in util/random.h: Fisher-Yates back to front with rejection-sampled w mod n, and
// Box-Muller from (w >> 11) 2^-53.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "util/random.h"

namespace lol::util {
namespace {

TEST(PortableRandom, GeneratorIsTheStandardsMersenneTwister) {
  std::mt19937_64 g;  // default seed 5489
  g.discard(9999);
  EXPECT_EQ(g(), 9981545732273789042ull);
}

TEST(PortableRandom, UniformBelowMatchesTheDocumentedRule) {
  std::mt19937_64 g(3);
  const std::vector<uint64_t> n = {1, 2, 3, 7, (uint64_t(1) << 63) + 1, ~uint64_t(0)};
  const std::vector<uint64_t> want = {0, 1, 1, 5, 6389378623318638229ull, 10326406840904628101ull};
  for (size_t i = 0; i < n.size(); ++i) EXPECT_EQ(uniform_below(g, n[i]), want[i]) << "n = " << n[i];
  // n <= 1 draws nothing.
  std::mt19937_64 a(9), b(9);
  EXPECT_EQ(uniform_below(a, 0), 0u);
  EXPECT_EQ(uniform_below(a, 1), 0u);
  EXPECT_EQ(a(), b());
}

TEST(PortableRandom, ShuffleIsFisherYatesBackToFront) {
  std::vector<int> v(10);
  std::iota(v.begin(), v.end(), 0);
  std::mt19937_64 g(42);
  portable_shuffle(v.begin(), v.end(), g);
  EXPECT_EQ(v, (std::vector<int>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6}));
  std::vector<int> none, one{5};
  portable_shuffle(none.begin(), none.end(), g);
  portable_shuffle(one.begin(), one.end(), g);
  EXPECT_EQ(one, std::vector<int>{5});
}

TEST(PortableRandom, StandardNormalIsBoxMullerOfTwoWords) {
  std::mt19937_64 g(7);
  for (double want : {1.5913998756469563, 0.3889032347053571, 0.5191723646028278})
    EXPECT_NEAR(standard_normal(g), want, 1e-14);
  // Moments over many draws (sd of the mean ~ 1/sqrt(n)).
  std::mt19937_64 h(11);
  const int n = 200000;
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = standard_normal(h);
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
}

}  // namespace
}  // namespace lol::util
