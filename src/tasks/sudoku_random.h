// Portable random helpers for the sudoku generator (paper Appendix C.3).
//
// std::uniform_int_distribution and std::shuffle are implementation-defined (their
// output differs between libstdc++, libc++ and MSVC), so a dataset generated from
// a seed would not be reproducible across standard libraries. These helpers only
// use raw 64-bit words of std::mt19937_64, whose output the standard fixes.
#pragma once
#include <cstdint>
#include <random>
#include <utility>

#include "util/random.h"

namespace lol::tasks {

/// Uniform integer in [0, n) for n >= 1, by rejection sampling: draws 64-bit words
/// w and rejects those in the incomplete top block (w >= 2^64 - (2^64 mod n)) so
/// that w mod n is exactly uniform. Expected draws < 2 for any n. n == 0 returns 0.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t reject_from = uint64_t(0) - (uint64_t(0) - n) % n;  // 2^64 - (2^64 mod n), 0 if n | 2^64
  for (;;) {
    const uint64_t w = rng();
    if (reject_from == 0 || w < reject_from) return w % n;
  }
}

/// Fisher-Yates shuffle of [first, last) driven by uniform_below (back to front:
/// position i swaps with a uniform position in [0, i]).
template <class It>
void portable_shuffle(It first, It last, std::mt19937_64& rng) {
  const auto n = last - first;
  for (auto i = n - 1; i > 0; --i) {
    const auto j = static_cast<decltype(i)>(uniform_below(rng, uint64_t(i) + 1));
    using std::swap;
    swap(first[i], first[j]);
  }
}

/// SplitMix64 (util/random.h): derives independent per-puzzle seeds from (dataset
/// seed, candidate index).
using util::splitmix64;

}  // namespace lol::tasks
