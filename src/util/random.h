// Seed mixing shared by the data, task and training code: SplitMix64's finaliser
// (Steele, Lea & Flood 2014), a bijective 64-bit mix, and independent seeds derived
// from one run seed. No LibTorch.
#pragma once
#include <cstdint>

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

}  // namespace lol::util
