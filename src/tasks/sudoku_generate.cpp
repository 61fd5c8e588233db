#include "tasks/sudoku_generate.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <thread>
#include <unordered_set>

#include "tasks/sudoku_random.h"
#include "tasks/sudoku_strategies.h"
#include "util/error.h"

namespace lol::tasks {
namespace {

struct FillState {
  SudokuGrid g{};
  std::array<DigitMask, 27> used{};
  std::mt19937_64* rng;

  bool fill(int i) {
    if (i == 81) return true;
    const auto& geo = sudoku_geometry();
    const int r = geo.row[i], c = 9 + geo.col[i], b = 18 + geo.box[i];
    std::array<uint8_t, 9> order{1, 2, 3, 4, 5, 6, 7, 8, 9};
    portable_shuffle(order.begin(), order.end(), *rng);
    const DigitMask taken = DigitMask(used[r] | used[c] | used[b]);
    for (uint8_t d : order) {
      const DigitMask bit = DigitMask(1u << d);
      if (taken & bit) continue;
      g[i] = d;
      used[r] |= bit; used[c] |= bit; used[b] |= bit;
      if (fill(i + 1)) return true;
      used[r] &= DigitMask(~bit); used[c] &= DigitMask(~bit); used[b] &= DigitMask(~bit);
      g[i] = 0;
    }
    return false;
  }
};

bool solvable_by_all_deductions(const SudokuGrid& p) {
  return solvable_by_naked_singles(p) && solvable_by_crosshatching(p);
}

void check_givens_range(int lo, int hi) {
  require(lo >= 17 && hi <= 81 && lo <= hi, "sudoku options",
          "givens range [" + std::to_string(lo) + ", " + std::to_string(hi) +
              "] must satisfy 17 <= min_givens <= max_givens <= 81");
}

size_t sequence_tokens(const Example& e) { return split_tokens(e.text()).size(); }

}  // namespace

SudokuGrid generate_sudoku_grid(std::mt19937_64& rng) {
  FillState s;
  s.rng = &rng;
  s.fill(0);  // always succeeds: every partial row-major filling of a valid grid extends
  return s.g;
}

std::optional<SudokuGrid> blank_sudoku_cells(std::mt19937_64& rng, const SudokuGrid& solution,
                                             int target_givens) {
  require(sudoku_complete(solution), "blank_sudoku_cells", "solution must be a complete valid grid");
  check_givens_range(target_givens, target_givens);
  std::array<uint8_t, 81> order;
  std::iota(order.begin(), order.end(), uint8_t(0));
  portable_shuffle(order.begin(), order.end(), rng);
  SudokuGrid p = solution;
  int givens = 81;
  for (uint8_t c : order) {
    if (givens == target_givens) break;
    p[c] = 0;
    if (solvable_by_all_deductions(p)) {
      --givens;
    } else {
      p[c] = solution[c];
    }
  }
  if (givens != target_givens) return std::nullopt;
  return p;
}

std::optional<SudokuGrid> make_sudoku_puzzle(std::mt19937_64& rng, const SudokuGrid& solution,
                                             int min_givens, int max_givens, int attempts) {
  check_givens_range(min_givens, max_givens);
  const int target = min_givens + int(uniform_below(rng, uint64_t(max_givens - min_givens + 1)));
  for (int a = 0; a < attempts; ++a) {
    if (auto p = blank_sudoku_cells(rng, solution, target)) return p;
  }
  return std::nullopt;
}

SudokuGrid generate_sudoku_puzzle(std::mt19937_64& rng, const SudokuDatasetOptions& opt) {
  check_givens_range(opt.min_givens, opt.max_givens);
  const int target = opt.min_givens + int(uniform_below(rng, uint64_t(opt.max_givens - opt.min_givens + 1)));
  for (;;) {
    const SudokuGrid solution = generate_sudoku_grid(rng);
    for (int a = 0; a < 4; ++a) {
      if (auto p = blank_sudoku_cells(rng, solution, target)) return *p;
    }
  }
}

std::string sudoku_label(int strategy) {
  require(strategy >= 1 && strategy <= kNumSudokuStrategies, "sudoku label",
          "strategy " + std::to_string(strategy) + ", expected 1..5");
  return "[ S" + std::to_string(strategy) + " ]";
}

namespace {

/// The five examples of a puzzle; nullopt when a strategy fails (S5: or needs more
/// than s5_max_steps steps, when that is > 0). `why` gets the reason.
std::optional<std::vector<Example>> build_examples(const SudokuGrid& puzzle, size_t s5_max_steps,
                                                   std::string* why) {
  std::vector<Example> out;
  const std::string question = sudoku_question(puzzle);
  const uint64_t id = sudoku_hash(puzzle);
  SudokuGrid solution{};
  for (int s = 1; s <= kNumSudokuStrategies; ++s) {
    SudokuTrace t = solve_sudoku_strategy(puzzle, s, s5_max_steps);
    if (!t.solved) {
      if (why) *why = "strategy S" + std::to_string(s) + " (" + sudoku_strategy_name(s) + ") does not solve it";
      return std::nullopt;
    }
    if (s == 1) solution = t.grid;
    if (t.grid != solution) {
      if (why) *why = "strategies disagree on its solution";
      return std::nullopt;
    }
    Example e;
    e.question = question;
    e.label = sudoku_label(s);
    e.trace = sudoku_trace_text(t.steps);
    e.answer = sudoku_answer(t.grid);
    e.strategy = s;
    e.puzzle_id = id;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::vector<Example> make_sudoku_examples(const SudokuGrid& puzzle) {
  std::string why;
  auto ex = build_examples(puzzle, 0, &why);
  require(ex.has_value(), "make_sudoku_examples", "puzzle " + sudoku_compact(puzzle) + ": " + why);
  return std::move(*ex);
}

std::vector<Example> generate_sudoku_dataset(size_t n_puzzles, uint64_t seed, const SudokuDatasetOptions& opt) {
  check_givens_range(opt.min_givens, opt.max_givens);
  require(opt.threads >= 1, "sudoku options", "threads must be >= 1, got " + std::to_string(opt.threads));
  std::vector<Example> out;
  out.reserve(n_puzzles * kNumSudokuStrategies);
  std::unordered_set<std::string> seen;
  const size_t threads = size_t(opt.threads);
  const uint64_t max_candidates = 1000 + 20 * uint64_t(n_puzzles);
  uint64_t next = 0;  // index of the next candidate
  size_t accepted = 0;
  while (accepted < n_puzzles) {
    require(next < max_candidates, "sudoku options",
            "only " + std::to_string(accepted) + " of " + std::to_string(next) +
                " candidate puzzles fit max_sequence_tokens = " + std::to_string(opt.max_sequence_tokens) +
                "; raise it (or set 0 for no limit)");
    // Candidates [next, next + batch) are independent (candidate k depends on seed
    // and k only): build them in parallel, accept them in k order.
    const size_t batch = std::max(threads, std::min<size_t>(n_puzzles - accepted, 64 * threads));
    std::vector<SudokuGrid> puzzles(batch);
    std::vector<std::vector<Example>> examples(batch);
    std::vector<std::exception_ptr> errors(threads);
    auto work = [&](size_t t) {
      try {
        for (size_t k = t; k < batch; k += threads) {
          std::mt19937_64 rng(splitmix64(seed + next + k));
          puzzles[k] = generate_sudoku_puzzle(rng, opt);
          // Each step takes >= 3 tokens with its ";", so longer S5 traces cannot fit.
          const size_t s5_cap = opt.max_sequence_tokens ? opt.max_sequence_tokens / 3 + 1 : 0;
          if (auto ex = build_examples(puzzles[k], s5_cap, nullptr)) examples[k] = std::move(*ex);
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    if (threads == 1) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      for (size_t t = 0; t < threads; ++t) pool.emplace_back(work, t);
      for (auto& th : pool) th.join();
    }
    for (auto& e : errors) if (e) std::rethrow_exception(e);
    for (size_t k = 0; k < batch && accepted < n_puzzles; ++k) {
      if (examples[k].empty()) continue;  // S5 over the step cap
      if (opt.max_sequence_tokens) {
        size_t longest = 0;
        for (const auto& e : examples[k]) longest = std::max(longest, sequence_tokens(e));
        if (longest > opt.max_sequence_tokens) continue;
      }
      if (!seen.insert(sudoku_compact(puzzles[k])).second) continue;
      for (auto& e : examples[k]) out.push_back(std::move(e));
      ++accepted;
    }
    next += batch;
  }
  return out;
}

}  // namespace lol::tasks
