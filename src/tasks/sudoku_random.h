// Portable random helpers for the sudoku generator (paper Appendix C.3): the draws of
// util/random.h, which use only raw 64-bit words of std::mt19937_64 (the standard
// fixes its output), so a dataset generated from a seed is the same under every
// standard library.
#pragma once
#include <cstdint>
#include <random>
#include <utility>

#include "util/random.h"

namespace lol::tasks {

/// util/random.h's portable draws (the sudoku generator's, first written here).
using util::portable_shuffle;
using util::uniform_below;

/// SplitMix64 (util/random.h): derives independent per-puzzle seeds from (dataset
/// seed, candidate index).
using util::splitmix64;

}  // namespace lol::tasks
