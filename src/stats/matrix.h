// A dense row-major matrix of doubles: the data type of the LibTorch-free
// statistics in src/stats (probe features: one row per item, one column per feature).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lol::stats {

/// Dense row-major matrix [rows, cols] of doubles.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;  ///< rows * cols values, row r at data[r * cols .. (r+1) * cols)

  Matrix() = default;
  Matrix(int64_t r, int64_t c, double fill = 0.0) : rows(r), cols(c), data(std::size_t(r * c), fill) {}
  double& operator()(int64_t r, int64_t c) { return data[std::size_t(r * cols + c)]; }
  double operator()(int64_t r, int64_t c) const { return data[std::size_t(r * cols + c)]; }
  const double* row(int64_t r) const { return data.data() + r * cols; }
  double* row(int64_t r) { return data.data() + r * cols; }
};

}  // namespace lol::stats
