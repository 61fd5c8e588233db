#include "tasks/sudoku_verify.h"

#include <algorithm>

#include "tasks/sudoku_strategies.h"
#include "util/error.h"

namespace lol::tasks {
namespace {

/// One parsed step; `strategy` is 0 when the tokens match no step syntax.
struct Step {
  int strategy = 0;
  int cell = -1;
  int digit = 0;
  int unit = -1;          // S2 / S3
  bool rejected = false;  // S5 "= d x"
  bool back = false;      // S5 "back"
  std::vector<std::pair<int, int>> implied;  // S4 "peer -> { d }"
};

using Tokens = std::vector<std::string>;

Step parse_step(const Tokens& t, size_t b, size_t e) {
  Step s;
  const size_t n = e - b;
  if (n == 0) return s;
  auto at = [&](size_t k) -> const std::string& { return t[b + k]; };
  if (at(0) == "set") {  // S4: set cell = d [ : cell -> { d } ... ]
    if (n < 4 || at(2) != "=") return s;
    s.cell = parse_sudoku_cell(at(1));
    s.digit = parse_sudoku_digit(at(3));
    if (s.cell < 0 || !s.digit) return s;
    if (n > 4) {
      if (at(4) != ":" || n == 5 || (n - 5) % 5 != 0) return s;
      for (size_t k = 5; k < n; k += 5) {
        const int c = parse_sudoku_cell(at(k));
        const int d = parse_sudoku_digit(at(k + 3));
        if (c < 0 || at(k + 1) != "->" || at(k + 2) != "{" || !d || at(k + 4) != "}") return s;
        s.implied.emplace_back(c, d);
      }
    }
    s.strategy = 4;
    return s;
  }
  if (const int u = parse_sudoku_unit(at(0)); u >= 0) {  // S2: unit d -> cell
    if (n != 4 || at(2) != "->") return s;
    s.unit = u;
    s.digit = parse_sudoku_digit(at(1));
    s.cell = parse_sudoku_cell(at(3));
    if (s.digit && s.cell >= 0) s.strategy = 2;
    return s;
  }
  if (const int d = parse_sudoku_digit(at(0)); d) {  // S3: d boxN -> cell
    if (n != 4 || at(2) != "->") return s;
    s.digit = d;
    s.unit = parse_sudoku_unit(at(1));
    s.cell = parse_sudoku_cell(at(3));
    if (s.unit >= 18 && s.cell >= 0) s.strategy = 3;
    return s;
  }
  s.cell = parse_sudoku_cell(at(0));
  if (s.cell < 0 || n < 2) return s;
  if (n == 2) {  // S5: cell back
    if (at(1) == "back") { s.back = true; s.strategy = 5; }
    return s;
  }
  if (at(1) != "=") return s;
  if (at(2) == "{") {  // S1: cell = { d }
    s.digit = n == 5 ? parse_sudoku_digit(at(3)) : 0;
    if (s.digit && at(4) == "}") s.strategy = 1;
    return s;
  }
  s.digit = parse_sudoku_digit(at(2));  // S5: cell = d [x]
  if (!s.digit) return s;
  if (n == 3) s.strategy = 5;
  if (n == 4 && at(3) == "x") { s.rejected = true; s.strategy = 5; }
  return s;
}

/// The content of a continuation: tokens before the first "<eos>" minus "<pad>".
struct Parsed {
  Tokens tokens;         // content tokens
  size_t total = 0;      // tokens before <eos>, pads included
  size_t pads = 0;
  bool eos = false;      // an <eos> ended the text
};

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

Parsed strip(const std::string& text) {
  Parsed p;
  p.tokens.reserve(text.size() / 3);
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    while (i < n && is_space(text[i])) ++i;
    if (i == n) break;
    size_t j = i;
    while (j < n && !is_space(text[j])) ++j;
    const size_t len = j - i;
    if (len == 5 && text.compare(i, 5, "<eos>") == 0) {
      p.eos = true;
      break;
    }
    ++p.total;
    if (len == 5 && text.compare(i, 5, "<pad>") == 0) {
      ++p.pads;
    } else {
      p.tokens.emplace_back(text, i, len);
    }
    i = j;
  }
  return p;
}

/// Splits tokens [b, e) on ";" into steps.
std::vector<Step> parse_steps(const Tokens& t, size_t b, size_t e) {
  std::vector<Step> steps;
  if (b >= e) return steps;  // empty trace
  size_t start = b;
  for (size_t k = b; k <= e; ++k) {
    if (k == e || t[k] == ";") {
      steps.push_back(parse_step(t, start, k));
      start = k + 1;
    }
  }
  return steps;
}

/// Strategy shared by every step, 0 when none (empty trace, a bad step, mixed syntax).
int common_syntax(const std::vector<Step>& steps) {
  if (steps.empty()) return 0;
  const int s = steps.front().strategy;
  for (const auto& st : steps) if (st.strategy != s) return 0;
  return s;
}

inline bool has(DigitMask m, int d) { return (m >> d) & 1u; }
inline DigitMask only(int d) { return DigitMask(1u << d); }

bool s5_check(const SudokuGrid& g, int cell, int d) {
  if (!has(sudoku_candidates(g, cell), d)) return false;
  SudokuGrid h = g;
  h[cell] = uint8_t(d);
  return sudoku_forward_check(h);
}

/// Replays the steps of strategy s; sets legal / faithful and the first error.
void replay(const SudokuGrid& puzzle, const SudokuGrid& solution, int s, const std::vector<Step>& steps,
            Verdict& v) {
  const auto& geo = sudoku_geometry();
  SudokuGrid g = puzzle;
  bool legal = true, faithful = true;
  auto fail_legal = [&](size_t k, const std::string& why) {
    if (legal && v.error.empty()) v.error = "step " + std::to_string(k + 1) + ": " + why;
    legal = false;
  };
  auto fail_rule = [&](size_t k, const std::string& why) {
    if (faithful && v.error.empty()) v.error = "step " + std::to_string(k + 1) + ": " + why;
    faithful = false;
  };
  for (size_t k = 0; k < steps.size() && legal; ++k) {
    const Step& st = steps[k];
    const std::string& name = sudoku_cell_name(st.cell);
    if (puzzle[st.cell]) { fail_legal(k, name + " is a given"); break; }
    if (s == 5) {
      if (st.back) {
        g[st.cell] = 0;
        bool dead = false;
        for (int i = 0; i < 81; ++i) dead |= g[i] && g[i] != solution[i];
        if (!dead) fail_rule(k, name + " back: the current placements still lead to the solution");
        continue;
      }
      g[st.cell] = 0;
      if (st.rejected) {
        if (s5_check(g, st.cell, st.digit)) fail_rule(k, name + " = " + std::to_string(st.digit) + " x: the check passes");
        continue;
      }
      if (!has(sudoku_candidates(g, st.cell), st.digit)) {
        fail_legal(k, name + " = " + std::to_string(st.digit) + " clashes with its row, column or box");
        break;
      }
      if (!s5_check(g, st.cell, st.digit)) fail_rule(k, name + " = " + std::to_string(st.digit) + ": the check fails");
      g[st.cell] = uint8_t(st.digit);
      continue;
    }
    if (g[st.cell]) { fail_legal(k, name + " is already filled"); break; }
    const DigitMask cand = sudoku_candidates(g, st.cell);
    if (!has(cand, st.digit)) {
      fail_legal(k, name + " = " + std::to_string(st.digit) + " clashes with its row, column or box");
      break;
    }
    if (s == 1 || s == 4) {
      if (cand != only(st.digit)) fail_rule(k, name + " has more than one candidate");
    } else {  // S2, S3: the only place of the digit in the unit
      const auto& cells = geo.units[st.unit];
      if (std::find(cells.begin(), cells.end(), st.cell) == cells.end()) {
        fail_rule(k, name + " is not in " + sudoku_unit_name(st.unit));
      } else {
        for (uint8_t c : cells) {
          if (c != st.cell && !g[c] && has(sudoku_candidates(g, c), st.digit)) {
            fail_rule(k, std::to_string(st.digit) + " also fits " + sudoku_cell_name(c) + " in " +
                             sudoku_unit_name(st.unit));
            break;
          }
        }
      }
    }
    SudokuGrid before = g;
    g[st.cell] = uint8_t(st.digit);
    if (s == 4) {
      std::vector<int> listed;
      for (auto [p, d] : st.implied) {
        const auto& pe = geo.peers[st.cell];
        const bool peer = std::find(pe.begin(), pe.end(), p) != pe.end();
        const bool repeated = std::find(listed.begin(), listed.end(), p) != listed.end();
        listed.push_back(p);
        if (!peer || g[p] || repeated || !has(sudoku_candidates(before, p), st.digit) ||
            sudoku_candidates(g, p) != only(d)) {
          fail_rule(k, sudoku_cell_name(p) + " -> { " + std::to_string(d) + " } does not follow from setting " + name);
          break;
        }
      }
    }
  }
  if (legal && g != solution) {
    if (v.error.empty()) v.error = "the trace does not end at the solution";
    legal = false;
  }
  v.trace_legal = legal;
  v.rule_faithful = legal && faithful;
}

/// followed_strategy of the trace tokens [b, e) already parsed into `steps`.
int identify_steps(const SudokuGrid& puzzle, const Tokens& t, size_t b, size_t e, const std::vector<Step>& steps) {
  const int s = common_syntax(steps);
  if (!s) return 0;
  const SudokuTrace ref = solve_sudoku_strategy(puzzle, s, steps.size() + 1);
  if (!ref.solved || ref.steps.size() != steps.size()) return 0;
  // Tokens hold no spaces, so equal token sequences <=> equal single-space joins.
  std::string expected, got;
  for (size_t k = 0; k < ref.steps.size(); ++k) {
    if (k) expected += " ; ";
    expected += ref.steps[k];
  }
  for (size_t k = b; k < e; ++k) {
    if (k > b) got += ' ';
    got += t[k];
  }
  return got == expected ? s : 0;
}

}  // namespace

int sudoku_step_syntax(const std::vector<std::string>& step_tokens) {
  return parse_step(step_tokens, 0, step_tokens.size()).strategy;
}

int identify_sudoku_strategy(const SudokuGrid& puzzle, const std::string& trace) {
  const Parsed p = strip(trace);
  size_t b = 0, e = p.tokens.size();
  if (e >= 2 && p.tokens[0] == "R" && p.tokens[1] == ":") b = 2;
  for (size_t k = b; k < e; ++k) {
    if (p.tokens[k] == "A") { e = k; break; }
  }
  return identify_steps(puzzle, p.tokens, b, e, parse_steps(p.tokens, b, e));
}

Verdict verify_sudoku(const std::string& question, int requested_strategy, const std::string& generated) {
  const SudokuGrid puzzle = parse_sudoku_question(question, "sudoku verifier question");
  SudokuGrid solution{};
  const int n = count_sudoku_solutions(puzzle, 2, &solution);
  require(n == 1, "sudoku verifier question",
          "puzzle " + sudoku_compact(puzzle) + " has " + (n == 0 ? std::string("no solution") : "several solutions") +
              ", expected exactly one");
  return verify_sudoku(puzzle, solution, requested_strategy, generated);
}

Verdict verify_sudoku(const SudokuGrid& puzzle, const SudokuGrid& solution, int requested_strategy,
                      const std::string& generated) {
  require(requested_strategy >= 1 && requested_strategy <= kNumSudokuStrategies, "sudoku verifier",
          "requested strategy " + std::to_string(requested_strategy) + ", expected 1..5");
  Verdict v;
  const Parsed p = strip(generated);
  v.padding = p.total ? double(p.pads) / double(p.total) : 0.0;
  const Tokens& t = p.tokens;
  // The trace runs from "R :" to the first "A" (no trace token is "A"); the answer
  // follows "A :". Without "R :" the trace is not judged, the answer still is (as in
  // the maze verifier).
  const bool trace_marker = t.size() >= 2 && t[0] == "R" && t[1] == ":";
  if (!trace_marker) v.error = "the continuation does not start with 'R :'";
  size_t a = t.size();
  for (size_t k = trace_marker ? 2 : 0; k < t.size(); ++k) {
    if (t[k] == "A") { a = k; break; }
  }
  if (a + 1 >= t.size() || t[a + 1] != ":") {
    if (v.error.empty()) v.error = "no 'A :' answer marker";
  } else {
    bool ok = t.size() - (a + 2) == 81;
    for (size_t i = 0; ok && i < 81; ++i) ok = parse_sudoku_digit(t[a + 2 + i]) == solution[i];
    v.answer_correct = ok;
  }
  if (!trace_marker) {
    if (!v.answer_correct && v.error.empty()) v.error = "the answer is not the solution";
    return v;
  }
  const auto steps = parse_steps(t, 2, a);
  const int s = common_syntax(steps);
  v.strategy_as_requested = s == requested_strategy;
  if (s == 0) {
    if (v.error.empty()) {
      v.error = steps.empty() ? "the trace is empty" : "the steps match no single strategy's syntax";
      for (size_t k = 0; k < steps.size(); ++k) {
        if (!steps[k].strategy) { v.error = "step " + std::to_string(k + 1) + " matches no step syntax"; break; }
      }
    }
  } else {
    replay(puzzle, solution, s, steps, v);
    v.followed_strategy = identify_steps(puzzle, t, 2, a, steps);
  }
  if (!v.answer_correct && v.error.empty()) v.error = "the answer is not the solution";
  if (v.followed_strategy != requested_strategy && v.error.empty()) {
    v.error = "the trace is not exactly the S" + std::to_string(requested_strategy) + " trace" +
              (v.followed_strategy ? " (it is the S" + std::to_string(v.followed_strategy) + " trace)" : "");
  }
  if (!p.eos && v.error.empty()) v.error = "missing <eos>";
  return v;
}

}  // namespace lol::tasks
