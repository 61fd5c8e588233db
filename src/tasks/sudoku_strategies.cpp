#include "tasks/sudoku_strategies.h"

#include <array>

#include "util/error.h"

namespace lol::tasks {
namespace {

/// Grid plus per-unit digit masks, for O(1) candidate look-ups.
struct MaskState {
  const SudokuGeometry& geo = sudoku_geometry();
  SudokuGrid g{};
  std::array<DigitMask, 27> used{};  // digits present in each unit (rows, cols, boxes)
  int blanks = 0;
  bool consistent = true;  // no unit holds a digit twice (and every cell is 0..9)

  explicit MaskState(const SudokuGrid& grid) : g(grid) {
    for (int i = 0; i < 81; ++i) {
      if (g[i] == 0) { ++blanks; continue; }
      if (g[i] > 9) { consistent = false; g[i] = 0; ++blanks; continue; }
      const DigitMask bit = DigitMask(1u << g[i]);
      if ((used[geo.row[i]] | used[9 + geo.col[i]] | used[18 + geo.box[i]]) & bit) consistent = false;
      used[geo.row[i]] |= bit;
      used[9 + geo.col[i]] |= bit;
      used[18 + geo.box[i]] |= bit;
    }
  }
  DigitMask cand(int i) const {
    return DigitMask(kAllDigits & ~(used[geo.row[i]] | used[9 + geo.col[i]] | used[18 + geo.box[i]]));
  }
  void place(int i, int d) {
    const DigitMask bit = DigitMask(1u << d);
    g[i] = uint8_t(d);
    used[geo.row[i]] |= bit;
    used[9 + geo.col[i]] |= bit;
    used[18 + geo.box[i]] |= bit;
    --blanks;
  }
  void clear(int i) {
    const DigitMask keep = DigitMask(~(1u << g[i]));
    used[geo.row[i]] &= keep;
    used[9 + geo.col[i]] &= keep;
    used[18 + geo.box[i]] &= keep;
    g[i] = 0;
    ++blanks;
  }
};

inline int single_digit(DigitMask m) { return __builtin_ctz(m); }
inline bool is_single(DigitMask m) { return m && !(m & (m - 1)); }
inline std::string dstr(int d) { return std::string(1, char('0' + d)); }

SudokuTrace finish(const MaskState& s, std::vector<std::string>* steps) {
  SudokuTrace t;
  t.solved = s.blanks == 0 && s.consistent;
  t.grid = s.g;
  if (steps) t.steps = std::move(*steps);
  return t;
}

SudokuTrace naked_singles(const SudokuGrid& puzzle, bool emit) {
  MaskState s(puzzle);
  std::vector<std::string> steps;
  while (s.blanks > 0 && s.consistent) {
    bool progress = false;
    for (int i = 0; i < 81; ++i) {
      if (s.g[i]) continue;
      const DigitMask m = s.cand(i);
      if (!is_single(m)) continue;
      const int d = single_digit(m);
      s.place(i, d);
      progress = true;
      if (emit) steps.push_back(sudoku_cell_name(i) + " = { " + dstr(d) + " }");
    }
    if (!progress) break;
  }
  return finish(s, emit ? &steps : nullptr);
}

/// Tries unit u and digit d; fills and returns the cell when d is a hidden single.
int hidden_single(MaskState& s, int u, int d) {
  const DigitMask bit = DigitMask(1u << d);
  if (s.used[u] & bit) return -1;
  int where = -1;
  for (uint8_t c : s.geo.units[u]) {
    if (s.g[c] || !(s.cand(c) & bit)) continue;
    if (where >= 0) return -1;
    where = c;
  }
  if (where >= 0) s.place(where, d);
  return where;
}

SudokuTrace hidden_singles(const SudokuGrid& puzzle, bool emit) {
  MaskState s(puzzle);
  std::vector<std::string> steps;
  while (s.blanks > 0 && s.consistent) {
    bool progress = false;
    for (int u = 0; u < 27; ++u) {
      for (int d = 1; d <= 9; ++d) {
        const int c = hidden_single(s, u, d);
        if (c < 0) continue;
        progress = true;
        if (emit) steps.push_back(sudoku_unit_name(u) + " " + dstr(d) + " -> " + sudoku_cell_name(c));
      }
    }
    if (!progress) break;
  }
  return finish(s, emit ? &steps : nullptr);
}

SudokuTrace crosshatching(const SudokuGrid& puzzle, bool emit) {
  MaskState s(puzzle);
  std::vector<std::string> steps;
  while (s.blanks > 0 && s.consistent) {
    bool progress = false;
    for (int d = 1; d <= 9; ++d) {
      for (int b = 0; b < 9; ++b) {
        const int c = hidden_single(s, 18 + b, d);
        if (c < 0) continue;
        progress = true;
        if (emit) steps.push_back(dstr(d) + " " + sudoku_unit_name(18 + b) + " -> " + sudoku_cell_name(c));
      }
    }
    if (!progress) break;
  }
  return finish(s, emit ? &steps : nullptr);
}

SudokuTrace propagation(const SudokuGrid& puzzle, bool emit) {
  MaskState s(puzzle);
  std::vector<std::string> steps;
  if (!s.consistent) return finish(s, nullptr);
  std::array<DigitMask, 81> cand{};
  std::array<bool, 81> queued{};
  std::array<uint8_t, 81> queue{};
  int head = 0, tail = 0;
  for (int i = 0; i < 81; ++i) {
    if (s.g[i]) continue;
    cand[i] = s.cand(i);
    if (is_single(cand[i])) { queue[tail++] = uint8_t(i); queued[i] = true; }
  }
  const auto& geo = sudoku_geometry();
  while (head < tail) {
    const int i = queue[head++];
    if (!is_single(cand[i])) break;  // emptied by a contradiction (cannot happen on a valid puzzle)
    const int d = single_digit(cand[i]);
    const DigitMask bit = DigitMask(1u << d);
    s.place(i, d);
    std::string step;
    if (emit) step = "set " + sudoku_cell_name(i) + " = " + dstr(d);
    bool first = true;
    for (uint8_t p : geo.peers[i]) {
      if (s.g[p] || !(cand[p] & bit)) continue;
      cand[p] &= DigitMask(~bit);
      if (!is_single(cand[p]) || queued[p]) continue;
      queued[p] = true;
      queue[tail++] = p;
      if (emit) {
        step += first ? " : " : " ";
        step += sudoku_cell_name(p) + " -> { " + dstr(single_digit(cand[p])) + " }";
      }
      first = false;
    }
    if (emit) steps.push_back(std::move(step));
  }
  return finish(s, emit ? &steps : nullptr);
}

struct Backtracker {
  MaskState s;
  std::vector<int> cells;
  std::vector<std::string> steps;
  size_t max_steps;
  bool aborted = false;

  bool check() const {
    std::array<DigitMask, 81> cand{};
    for (int i = 0; i < 81; ++i) {
      if (s.g[i]) continue;
      cand[i] = s.cand(i);
      if (!cand[i]) return false;
    }
    const auto& geo = s.geo;
    for (int u = 0; u < 27; ++u) {
      DigitMask m = s.used[u];
      for (uint8_t c : geo.units[u]) m |= cand[c];
      if ((m & kAllDigits) != kAllDigits) return false;
    }
    return true;
  }
  void emit(std::string step) {
    steps.push_back(std::move(step));
    if (max_steps && steps.size() > max_steps) aborted = true;
  }
  bool run(size_t k) {
    if (k == cells.size()) return true;
    const int i = cells[k];
    const DigitMask m = s.cand(i);
    for (int d = 1; d <= 9 && !aborted; ++d) {
      if (!(m & (1u << d))) continue;
      s.place(i, d);
      if (!check()) {
        s.clear(i);
        emit(sudoku_cell_name(i) + " = " + dstr(d) + " x");
        continue;
      }
      emit(sudoku_cell_name(i) + " = " + dstr(d));
      if (aborted) return false;
      if (run(k + 1)) return true;
      s.clear(i);
    }
    if (!aborted) emit(sudoku_cell_name(i) + " back");
    return false;
  }
};

}  // namespace

const std::string& sudoku_strategy_name(int strategy) {
  static const std::array<std::string, 5> names = {"naked singles", "hidden singles", "crosshatching",
                                                    "propagation", "backtracking"};
  require(strategy >= 1 && strategy <= kNumSudokuStrategies, "sudoku strategy",
          "got " + std::to_string(strategy) + ", expected 1..5");
  return names[size_t(strategy - 1)];
}

SudokuTrace solve_naked_singles(const SudokuGrid& p) { return naked_singles(p, true); }
SudokuTrace solve_hidden_singles(const SudokuGrid& p) { return hidden_singles(p, true); }
SudokuTrace solve_crosshatching(const SudokuGrid& p) { return crosshatching(p, true); }
SudokuTrace solve_propagation(const SudokuGrid& p) { return propagation(p, true); }

SudokuTrace solve_backtracking(const SudokuGrid& puzzle, size_t max_steps) {
  Backtracker b{MaskState(puzzle), {}, {}, max_steps};
  SudokuTrace t;
  if (!b.s.consistent) {
    t.grid = b.s.g;
    return t;
  }
  for (int i = 0; i < 81; ++i) if (!b.s.g[i]) b.cells.push_back(i);
  t.solved = b.run(0) && !b.aborted;
  t.grid = b.s.g;
  t.steps = std::move(b.steps);
  return t;
}

SudokuTrace solve_sudoku_strategy(const SudokuGrid& puzzle, int strategy, size_t max_steps) {
  switch (strategy) {
    case 1: return solve_naked_singles(puzzle);
    case 2: return solve_hidden_singles(puzzle);
    case 3: return solve_crosshatching(puzzle);
    case 4: return solve_propagation(puzzle);
    case 5: return solve_backtracking(puzzle, max_steps);
    default:
      throw InputError("sudoku strategy: got " + std::to_string(strategy) + ", expected 1..5");
  }
}

bool sudoku_forward_check(const SudokuGrid& g) {
  MaskState s(g);
  if (!s.consistent) return false;
  Backtracker b{s, {}, {}, 0};
  return b.check();
}

std::string sudoku_trace_text(const std::vector<std::string>& steps) {
  std::string out = "R :";
  for (size_t k = 0; k < steps.size(); ++k) {
    out += k ? " ; " : " ";
    out += steps[k];
  }
  return out;
}

bool solvable_by_naked_singles(const SudokuGrid& p) { return naked_singles(p, false).solved; }

bool solvable_by_crosshatching(const SudokuGrid& p) {
  // Box-major instead of S3's digit-major order: the closure of hidden-single
  // deductions does not depend on the order. Per box, the digits allowed in exactly
  // one blank cell come out of a bit-sliced count over the box's candidate masks.
  MaskState s(p);
  if (!s.consistent) return false;
  bool progress = true;
  while (s.blanks > 0 && progress) {
    progress = false;
    for (int b = 18; b < 27; ++b) {
      for (;;) {
        const auto& cells = s.geo.units[b];
        std::array<DigitMask, 9> cand{};
        DigitMask once = 0, twice = 0;
        for (int k = 0; k < 9; ++k) {
          if (s.g[cells[k]]) continue;
          cand[k] = s.cand(cells[k]);
          twice |= once & cand[k];
          once |= cand[k];
        }
        const DigitMask hidden = DigitMask(once & ~twice & ~s.used[b]);
        if (!hidden) break;
        const int d = single_digit(DigitMask(hidden & -hidden));
        for (int k = 0; k < 9; ++k) {
          if (cand[k] >> d & 1) { s.place(cells[k], d); break; }
        }
        progress = true;
      }
    }
  }
  return s.blanks == 0;
}

bool solvable_by_hidden_singles(const SudokuGrid& p) { return hidden_singles(p, false).solved; }

}  // namespace lol::tasks
