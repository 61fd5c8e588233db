// Helpers shared by the sudoku tests.
#pragma once
#include <cstdint>
#include <string>

#include "tasks/sudoku_grid.h"

namespace lol_test {

/// The grid of an 81-character row-major string, '.' for an empty cell (the inverse of
/// lol::tasks::sudoku_compact).
inline lol::tasks::SudokuGrid from_compact(const std::string& s) {
  lol::tasks::SudokuGrid g{};
  for (int i = 0; i < 81; ++i) g[i] = s[i] == '.' ? 0 : uint8_t(s[i] - '0');
  return g;
}

}  // namespace lol_test
