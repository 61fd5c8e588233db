// Strided window layout of the routed core (paper section 3.2.1, Algorithm 1 lines 5-6).
#pragma once
#include <cstdint>
#include <vector>

namespace lol {

/// Window shift at routed depth l (1-based): delta_l = ((l-1) * S) mod W.
int64_t window_shift(int64_t depth, int64_t window, int64_t stride);

/// Window index of position j (0-based, relative to the document start) at a depth
/// with shift `delta`. Without a prompt window (prompt_len == 0): floor((j + delta) / W).
/// With a prompt window of p > 0 tokens: positions < p form window 0, later ones are
/// laid out from p with the same shift: 1 + floor((j - p + delta) / W).
int64_t window_of(int64_t j, int64_t delta, int64_t window, int64_t prompt_len);

/// Windows of a sequence of n positions: a list of [begin, end) position ranges in order.
std::vector<std::pair<int64_t, int64_t>> window_ranges(int64_t n, int64_t depth, int64_t window, int64_t stride,
                                                       int64_t prompt_len = 0);

}  // namespace lol
