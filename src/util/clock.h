// Wall-clock intervals for benchmarks, progress and timeouts.
#pragma once
#include <chrono>

namespace lol::util {

/// Seconds elapsed on the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lol::util
