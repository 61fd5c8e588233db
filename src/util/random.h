// Seed mixing shared by the data, task, analysis and training code: SplitMix64's
// finaliser (Steele, Lea & Flood 2014), a bijective 64-bit mix, independent seeds
// derived from one run seed, and portable draws from std::mt19937_64.
//
// std::uniform_int_distribution, std::normal_distribution and std::shuffle are
// implementation-defined (their output differs between libstdc++, libc++ and MSVC), so
// a dataset, a data split or a plot drawn with them from a seed would not be
// reproducible across standard libraries, nor by an independent implementation. The
// helpers below use only raw 64-bit words of std::mt19937_64, whose output the standard
// fixes, by the exact rules written in their comments. No LibTorch.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace lol::util {

/// SplitMix64 output for state `x`: mix(x + golden ratio constant). Bijective, so
/// distinct inputs give distinct outputs. A generator is x_k = seed + k * 0x9E3779B97F4A7C15.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A seed for random stream `stream` of a run seeded with `seed`, independent of the
/// other streams of this seed and of the streams of neighbouring seeds (seed + 1 is
/// not one of them, as it would be with seed + stream).
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) { return splitmix64(splitmix64(seed) ^ splitmix64(~stream)); }

/// Uniform integer in [0, n) for n >= 1, by rejection sampling: draws 64-bit words
/// w and rejects those in the incomplete top block (w >= 2^64 - (2^64 mod n)) so
/// that w mod n is exactly uniform. Expected draws < 2 for any n. n <= 1 returns 0
/// without drawing.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t reject_from = uint64_t(0) - (uint64_t(0) - n) % n;  // 2^64 - (2^64 mod n), 0 if n | 2^64
  for (;;) {
    const uint64_t w = rng();
    if (reject_from == 0 || w < reject_from) return w % n;
  }
}

/// Fisher-Yates shuffle of [first, last) driven by uniform_below, back to front:
/// for i = n-1 down to 1, position i swaps with position uniform_below(rng, i + 1).
template <class It>
void portable_shuffle(It first, It last, std::mt19937_64& rng) {
  const auto n = last - first;
  for (auto i = n - 1; i > 0; --i) {
    const auto j = static_cast<decltype(i)>(uniform_below(rng, uint64_t(i) + 1));
    using std::swap;
    swap(first[i], first[j]);
  }
}

/// A double uniform in [0, 1): the top 53 bits of one word, (w >> 11) * 2^-53.
inline double uniform_unit(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

/// A standard normal draw by the Box-Muller transform of two words u1, u2 (each
/// uniform_unit, u1 first): sqrt(-2 ln(1 - u1)) * cos(2 pi u2). The sine half is
/// discarded, so every draw takes exactly two words.
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = uniform_unit(rng), u2 = uniform_unit(rng);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace lol::util
