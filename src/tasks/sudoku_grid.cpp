#include "tasks/sudoku_grid.h"

#include <algorithm>

#include "tasks/task.h"
#include "util/error.h"

namespace lol::tasks {
namespace {

SudokuGeometry build_geometry() {
  SudokuGeometry g{};
  for (int i = 0; i < 81; ++i) {
    g.row[i] = uint8_t(i / 9);
    g.col[i] = uint8_t(i % 9);
    g.box[i] = uint8_t((i / 9) / 3 * 3 + (i % 9) / 3);
  }
  for (int k = 0; k < 9; ++k) {
    for (int j = 0; j < 9; ++j) {
      g.units[k][j] = uint8_t(9 * k + j);                                  // row k
      g.units[9 + k][j] = uint8_t(9 * j + k);                              // column k
      g.units[18 + k][j] = uint8_t((k / 3 * 3 + j / 3) * 9 + k % 3 * 3 + j % 3);  // box k
    }
  }
  for (int i = 0; i < 81; ++i) {
    int n = 0;
    for (int j = 0; j < 81; ++j) {
      if (j != i && (g.row[j] == g.row[i] || g.col[j] == g.col[i] || g.box[j] == g.box[i]))
        g.peers[i][n++] = uint8_t(j);
    }
  }
  return g;
}

std::vector<std::string> make_names(const char* prefix, int n) {
  std::vector<std::string> v;
  for (int k = 1; k <= n; ++k) v.push_back(prefix + std::to_string(k));
  return v;
}

const std::vector<std::string>& cell_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 81; ++i) v.push_back("r" + std::to_string(i / 9 + 1) + "c" + std::to_string(i % 9 + 1));
    return v;
  }();
  return names;
}

const std::vector<std::string>& unit_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = make_names("row", 9);
    for (const auto& s : make_names("col", 9)) v.push_back(s);
    for (const auto& s : make_names("box", 9)) v.push_back(s);
    return v;
  }();
  return names;
}

}  // namespace

const SudokuGeometry& sudoku_geometry() {
  static const SudokuGeometry g = build_geometry();
  return g;
}

const std::string& sudoku_cell_name(int cell) { return cell_names().at(size_t(cell)); }

int parse_sudoku_cell(const std::string& t) {
  if (t.size() != 4 || t[0] != 'r' || t[2] != 'c') return -1;
  if (t[1] < '1' || t[1] > '9' || t[3] < '1' || t[3] > '9') return -1;
  return (t[1] - '1') * 9 + (t[3] - '1');
}

const std::string& sudoku_unit_name(int unit) { return unit_names().at(size_t(unit)); }

int parse_sudoku_unit(const std::string& t) {
  if (t.size() != 4 || t[3] < '1' || t[3] > '9') return -1;
  const int k = t[3] - '1';
  if (t.compare(0, 3, "row") == 0) return k;
  if (t.compare(0, 3, "col") == 0) return 9 + k;
  if (t.compare(0, 3, "box") == 0) return 18 + k;
  return -1;
}

int parse_sudoku_digit(const std::string& t) {
  return (t.size() == 1 && t[0] >= '1' && t[0] <= '9') ? t[0] - '0' : 0;
}

DigitMask sudoku_candidates(const SudokuGrid& g, int cell) {
  DigitMask used = 0;
  for (uint8_t p : sudoku_geometry().peers[cell]) used |= DigitMask(1u << g[p]);
  return DigitMask(kAllDigits & ~used);
}

bool sudoku_consistent(const SudokuGrid& g) {
  const auto& geo = sudoku_geometry();
  for (const auto& u : geo.units) {
    DigitMask seen = 0;
    for (uint8_t c : u) {
      if (g[c] == 0) continue;
      if (g[c] > 9) return false;
      const DigitMask bit = DigitMask(1u << g[c]);
      if (seen & bit) return false;
      seen |= bit;
    }
  }
  return true;
}

bool sudoku_complete(const SudokuGrid& g) {
  return std::none_of(g.begin(), g.end(), [](uint8_t v) { return v == 0; }) && sudoku_consistent(g);
}

int sudoku_givens(const SudokuGrid& g) {
  return int(std::count_if(g.begin(), g.end(), [](uint8_t v) { return v != 0; }));
}

namespace {

struct Counter {
  SudokuGrid g;
  std::array<DigitMask, 9> row{}, col{}, box{};
  int limit, found = 0;
  SudokuGrid* first;

  void run() {
    const auto& geo = sudoku_geometry();
    int best = -1, best_n = 10;
    DigitMask best_m = 0;
    for (int i = 0; i < 81; ++i) {
      if (g[i]) continue;
      const DigitMask m = DigitMask(kAllDigits & ~(row[geo.row[i]] | col[geo.col[i]] | box[geo.box[i]]));
      const int n = __builtin_popcount(m);
      if (n < best_n) { best = i; best_n = n; best_m = m; if (n <= 1) break; }
    }
    if (best < 0) {
      if (found++ == 0 && first) *first = g;
      return;
    }
    for (int d = 1; d <= 9 && found < limit; ++d) {
      const DigitMask bit = DigitMask(1u << d);
      if (!(best_m & bit)) continue;
      g[best] = uint8_t(d);
      row[geo.row[best]] |= bit; col[geo.col[best]] |= bit; box[geo.box[best]] |= bit;
      run();
      row[geo.row[best]] &= DigitMask(~bit); col[geo.col[best]] &= DigitMask(~bit); box[geo.box[best]] &= DigitMask(~bit);
      g[best] = 0;
    }
  }
};

}  // namespace

int count_sudoku_solutions(const SudokuGrid& g, int limit, SudokuGrid* first) {
  if (!sudoku_consistent(g)) return 0;
  const auto& geo = sudoku_geometry();
  Counter c{g, {}, {}, {}, limit, 0, first};
  for (int i = 0; i < 81; ++i) {
    if (!g[i]) continue;
    const DigitMask bit = DigitMask(1u << g[i]);
    c.row[geo.row[i]] |= bit; c.col[geo.col[i]] |= bit; c.box[geo.box[i]] |= bit;
  }
  c.run();
  return c.found;
}

std::string sudoku_question(const SudokuGrid& p) {
  std::string s = "Q :";
  for (uint8_t v : p) {
    s += ' ';
    s += v ? char('0' + v) : '.';
  }
  return s;
}

std::string sudoku_answer(const SudokuGrid& sol) {
  std::string s = "A :";
  for (uint8_t v : sol) {
    s += ' ';
    s += v ? char('0' + v) : '.';
  }
  return s + " <eos>";
}

SudokuGrid parse_sudoku_question(const std::string& text, const std::string& where) {
  const auto toks = split_tokens(text);
  size_t k = 0;
  if (toks.size() >= 2 && toks[0] == "Q" && toks[1] == ":") k = 2;
  SudokuGrid g{};
  for (int i = 0; i < 81; ++i, ++k) {
    require(k < toks.size(), where,
            "expected 81 cells ('.' or 1..9) after 'Q :', found only " + std::to_string(i));
    const std::string& t = toks[k];
    if (t == ".") { g[i] = 0; continue; }
    const int d = parse_sudoku_digit(t);
    require(d != 0, where,
            "cell " + sudoku_cell_name(i) + " (token " + std::to_string(k + 1) + ") is '" + t +
                "', expected '.' or a digit 1..9");
    g[i] = uint8_t(d);
  }
  return g;
}

std::string sudoku_compact(const SudokuGrid& g) {
  std::string s(81, '.');
  for (int i = 0; i < 81; ++i) if (g[i]) s[i] = char('0' + g[i]);
  return s;
}

uint64_t sudoku_hash(const SudokuGrid& g) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t v : g) { h ^= v; h *= 0x100000001b3ull; }
  return h;
}

}  // namespace lol::tasks
