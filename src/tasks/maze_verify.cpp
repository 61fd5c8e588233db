#include "tasks/maze_verify.h"

#include <algorithm>
#include <cstdlib>
#include <deque>

#include "util/error.h"

namespace lol::tasks {

namespace {

using Cells = std::vector<int>;

std::string at(const Maze& m, size_t i, int cell) {
  return "step " + std::to_string(i + 1) + " (" + maze_cell_name(cell, m.size) + ")";
}

// FIFO queue of sibling groups: the next dequeued cell must belong to the
// earliest group that still has members; order inside a group is free.
class FifoGroups {
 public:
  void add_group(Cells children) {
    if (!children.empty()) groups_.push_back(std::move(children));
  }
  // Removes `c` from the front group; false when it is not there.
  bool take(int c) {
    if (groups_.empty()) return false;
    Cells& g = groups_.front();
    auto it = std::find(g.begin(), g.end(), c);
    if (it == g.end()) return false;
    g.erase(it);
    if (g.empty()) groups_.pop_front();
    return true;
  }
  std::string expected(const Maze& m) const {
    if (groups_.empty()) return "nothing (the queue is empty)";
    std::string s;
    for (int c : groups_.front()) s += (s.empty() ? "" : " or ") + maze_cell_name(c, m.size);
    return s;
  }

 private:
  std::deque<Cells> groups_;
};

// Neighbours of c not yet marked in `seen`; marks them.
Cells discover(const Maze& m, int c, std::vector<uint8_t>& seen) {
  std::array<int, 4> nb;
  Cells out;
  int k = m.neighbors(c, nb);
  for (int i = 0; i < k; ++i)
    if (!seen[nb[i]]) {
      seen[nb[i]] = 1;
      out.push_back(nb[i]);
    }
  return out;
}

bool touches(const Maze& m, int c, const std::vector<uint8_t>& set) {
  std::array<int, 4> nb;
  int k = m.neighbors(c, nb);
  for (int i = 0; i < k; ++i)
    if (set[nb[i]]) return true;
  return false;
}

MazeTraceCheck fail(std::string why, bool legal = false) {
  MazeTraceCheck r;
  r.legal = legal;
  r.error = std::move(why);
  return r;
}

MazeTraceCheck ok() {
  MazeTraceCheck r;
  r.legal = r.faithful = true;
  return r;
}

// S1 and S3 share the frontier move model.
MazeTraceCheck check_frontier(const Maze& m, int strategy, const Cells& t) {
  const char* who = maze_strategy_name(strategy);
  if (t.empty()) return fail(std::string(who) + ": empty trace");
  if (t[0] != m.start) return fail(std::string(who) + ": the trace must begin at the start");
  std::vector<uint8_t> listed(m.cells(), 0);
  listed[t[0]] = 1;
  for (size_t i = 1; i < t.size(); ++i) {
    if (listed[t[i]]) return fail(std::string(who) + ": " + at(m, i, t[i]) + " repeats a cell");
    if (!touches(m, t[i], listed))
      return fail(std::string(who) + ": " + at(m, i, t[i]) + " is not reachable from the explored cells");
    if (t[i] == m.goal && i + 1 != t.size()) return fail(std::string(who) + ": the trace goes on after the goal");
    listed[t[i]] = 1;
  }
  if (t.back() != m.goal) return fail(std::string(who) + ": the trace does not reach the goal");

  std::vector<uint8_t> seen(m.cells(), 0);
  seen[m.start] = 1;
  if (strategy == kMazeBfs) {
    FifoGroups queue;
    queue.add_group(discover(m, t[0], seen));
    for (size_t i = 1; i < t.size(); ++i) {
      const std::string want = queue.expected(m);
      if (!queue.take(t[i])) return fail("BFS: " + at(m, i, t[i]) + " is out of queue order, expected " + want, true);
      queue.add_group(discover(m, t[i], seen));
    }
    return ok();
  }
  // A*: every popped cell has minimal f among the open cells.
  std::vector<int> g(m.cells(), -1);
  Cells open = {m.start};
  g[m.start] = 0;
  auto f = [&](int c) { return g[c] + std::abs(m.row(c) - m.row(m.goal)) + std::abs(m.col(c) - m.col(m.goal)); };
  for (size_t i = 0; i < t.size(); ++i) {
    auto it = std::find(open.begin(), open.end(), t[i]);
    if (it == open.end()) return fail("A*: " + at(m, i, t[i]) + " is not an open cell", true);
    int fmin = f(open[0]);
    for (int c : open) fmin = std::min(fmin, f(c));
    if (f(t[i]) != fmin)
      return fail("A*: " + at(m, i, t[i]) + " has f=" + std::to_string(f(t[i])) +
                      " but an open cell has f=" + std::to_string(fmin),
                  true);
    open.erase(it);
    for (int c : discover(m, t[i], seen)) {
      g[c] = g[t[i]] + 1;
      open.push_back(c);
    }
  }
  return ok();
}

MazeTraceCheck check_dfs(const Maze& m, const Cells& t) {
  if (t.empty()) return fail("DFS walk: empty trace");
  if (t[0] != m.start) return fail("DFS walk: the trace must begin at the start");
  for (size_t i = 1; i < t.size(); ++i)
    if (!m.adjacent(t[i - 1], t[i]))
      return fail("DFS walk: " + at(m, i, t[i]) + " is not a move through an open passage");
  if (t.back() != m.goal) return fail("DFS walk: the trace does not reach the goal");

  std::vector<uint8_t> visited(m.cells(), 0);
  Cells stack = {m.start};
  visited[m.start] = 1;
  std::array<int, 4> nb;
  for (size_t i = 1; i < t.size(); ++i) {
    if (stack.back() == m.goal) return fail("DFS walk: the walk goes on after reaching the goal", true);
    int k = m.neighbors(stack.back(), nb), unvisited = 0;
    for (int j = 0; j < k; ++j) unvisited += !visited[nb[j]];
    if (unvisited > 0) {
      if (visited[t[i]])
        return fail("DFS walk: " + at(m, i, t[i]) + " steps back while unvisited neighbours remain", true);
      visited[t[i]] = 1;
      stack.push_back(t[i]);
    } else {
      if (stack.size() < 2 || t[i] != stack[stack.size() - 2])
        return fail("DFS walk: " + at(m, i, t[i]) + " does not backtrack to the previous cell", true);
      stack.pop_back();
    }
  }
  return ok();
}

MazeTraceCheck check_bidirectional(const Maze& m, const Cells& t) {
  const char* who = "bidirectional BFS: ";
  if (t.size() < 2) return fail(std::string(who) + "the trace needs at least the start and the meeting cell");
  if (t[0] != m.start) return fail(std::string(who) + "the trace must begin at the start");
  const size_t last = t.size() - 1;
  if (last >= 2 && t[1] != m.goal) return fail(std::string(who) + "the second cell must be the goal");
  // Legality: listed cells of each side and their seen sets (root + neighbours of listed cells).
  std::array<std::vector<uint8_t>, 2> listed = {std::vector<uint8_t>(m.cells(), 0), std::vector<uint8_t>(m.cells(), 0)};
  std::vector<uint8_t> any(m.cells(), 0);
  for (size_t i = 0; i < last; ++i) {
    const int side = int(i % 2), c = t[i];
    if (i >= 2) {
      if (any[c]) return fail(std::string(who) + at(m, i, c) + " repeats a cell");
      if (!touches(m, c, listed[side]))
        return fail(std::string(who) + at(m, i, c) + " is not reachable from its side's explored cells");
    }
    listed[side][c] = any[c] = 1;
  }
  {
    const int side = int((last - 1) % 2), other = 1 - side, c = t[last];
    const int other_root = other == 0 ? m.start : m.goal;
    if (!m.adjacent(t[last - 1], c))
      return fail(std::string(who) + "the last cell " + maze_cell_name(c, m.size) + " is not a neighbour of " +
                  maze_cell_name(t[last - 1], m.size));
    if (listed[side][c] || !(c == other_root || touches(m, c, listed[other])))
      return fail(std::string(who) + "the last cell " + maze_cell_name(c, m.size) +
                  " is not seen by the other side (the searches do not meet)");
  }
  // Rules: per-side FIFO order, and stop at the first expansion that meets the other side.
  std::array<std::vector<uint8_t>, 2> seen = {std::vector<uint8_t>(m.cells(), 0), std::vector<uint8_t>(m.cells(), 0)};
  std::array<FifoGroups, 2> queue;
  seen[0][m.start] = 1;
  seen[1][m.goal] = 1;
  std::array<int, 4> nb;
  for (size_t i = 0; i < last; ++i) {
    const int side = int(i % 2), c = t[i];
    if (i >= 2) {
      const std::string want = queue[side].expected(m);
      if (!queue[side].take(c))
        return fail(std::string(who) + at(m, i, c) + " is out of its side's queue order, expected " + want, true);
    }
    bool meets = false;
    int k = m.neighbors(c, nb);
    for (int j = 0; j < k; ++j) meets = meets || seen[1 - side][nb[j]];
    if (meets && i + 1 != last)
      return fail(std::string(who) + at(m, i, c) + " meets the other side but the search goes on", true);
    if (!meets && i + 1 == last) return fail(std::string(who) + "the search stops before the two sides meet", true);
    queue[side].add_group(discover(m, c, seen[side]));
  }
  return ok();
}

MazeTraceCheck check_dead_end(const Maze& m, const Cells& t) {
  const char* who = "dead-end filling: ";
  const Cells path = maze_solution_path(m);
  std::vector<uint8_t> on_path(m.cells(), 0), filled(m.cells(), 0);
  for (int c : path) on_path[c] = 1;
  for (size_t i = 0; i < t.size(); ++i) {
    const int c = t[i];
    if (c == m.start || c == m.goal) return fail(std::string(who) + at(m, i, c) + " fills the start or the goal");
    if (on_path[c]) return fail(std::string(who) + at(m, i, c) + " fills a cell of the solution path");
    if (filled[c]) return fail(std::string(who) + at(m, i, c) + " repeats a cell");
    filled[c] = 1;
  }
  if (t.size() + path.size() != size_t(m.cells()))
    return fail(std::string(who) + "cells off the solution path remain unfilled");
  std::fill(filled.begin(), filled.end(), 0);
  std::array<int, 4> nb;
  for (size_t i = 0; i < t.size(); ++i) {
    int k = m.neighbors(t[i], nb), free = 0;
    for (int j = 0; j < k; ++j) free += !filled[nb[j]];
    if (free > 1)
      return fail(
          std::string(who) + at(m, i, t[i]) + " is not a dead end (" + std::to_string(free) + " unfilled neighbours)",
          true);
    filled[t[i]] = 1;
  }
  return ok();
}

}  // namespace

MazeTraceCheck check_maze_trace(const Maze& maze, int strategy, const std::vector<int>& trace) {
  if (!(strategy >= 1 && strategy <= kMazeStrategyCount))
    throw InputError("maze strategy: expected 1..5, got " + std::to_string(strategy));
  for (int c : trace)
    if (!(c >= 0 && c < maze.cells()))
      throw InputError("maze trace: cell index " + std::to_string(c) + " out of range");
  switch (strategy) {
    case kMazeBfs:
    case kMazeAStar:
      return check_frontier(maze, strategy, trace);
    case kMazeDfs:
      return check_dfs(maze, trace);
    case kMazeBidirectional:
      return check_bidirectional(maze, trace);
    default:
      return check_dead_end(maze, trace);
  }
}

unsigned maze_matching_strategies(const Maze& maze, const std::vector<int>& trace) {
  unsigned mask = 0;
  for (int s = 1; s <= kMazeStrategyCount; ++s) {
    MazeRun r = maze_run(maze, s, AStarTies::kBreak);
    if (r.ok && r.trace == trace) mask |= 1u << (s - 1);
  }
  return mask;
}

int identify_maze_strategy(const Maze& maze, const std::vector<int>& trace, int preferred) {
  const unsigned mask = maze_matching_strategies(maze, trace);
  if (preferred >= 1 && preferred <= kMazeStrategyCount && (mask >> (preferred - 1) & 1u)) return preferred;
  for (int s = 1; s <= kMazeStrategyCount; ++s)
    if (mask >> (s - 1) & 1u) return s;
  return 0;
}

MazeContinuation parse_maze_continuation(const std::string& generated) {
  MazeContinuation c;
  std::vector<std::string> toks;
  for (auto& w : split_tokens(generated)) {
    if (w == "<eos>") {
      c.has_eos = true;
      break;
    }
    ++c.tokens_before_eos;
    if (w == "<pad>") {
      ++c.pad_tokens;
      continue;
    }
    toks.push_back(std::move(w));
  }
  size_t i = 0;
  if (toks.size() >= 2 && toks[0] == "R" && toks[1] == ":") {
    c.has_trace_marker = true;
    i = 2;
  }
  // The trace ends at the first "A" (no cell is named "A"); the answer follows "A :".
  size_t a = i;
  while (a < toks.size() && toks[a] != "A") ++a;
  c.trace.assign(toks.begin() + long(i), toks.begin() + long(a));
  if (a + 1 < toks.size() && toks[a + 1] == ":") {
    c.has_answer_marker = true;
    c.answer.assign(toks.begin() + long(a) + 2, toks.end());
  }
  return c;
}

bool maze_tokens_to_cells(const std::vector<std::string>& tokens, int size, std::vector<int>& cells, size_t& bad) {
  cells.clear();
  cells.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    int c = parse_maze_cell(tokens[i], size);
    if (c < 0) {
      bad = i;
      return false;
    }
    cells.push_back(c);
  }
  return true;
}

Verdict verify_maze(const std::string& question, int requested_strategy, const std::string& generated) {
  if (!(requested_strategy >= 1 && requested_strategy <= kMazeStrategyCount))
    throw InputError("maze verifier: requested strategy must be 1..5, got " + std::to_string(requested_strategy));
  const Maze maze = Maze::from_question(question);
  if (!maze.is_perfect()) throw InputError("maze verifier: the question's maze is not loop-free and connected");

  Verdict v;
  auto note = [&v](const std::string& e) {
    if (v.error.empty()) v.error = e;
  };
  const MazeContinuation cont = parse_maze_continuation(generated);
  v.padding = cont.tokens_before_eos ? double(cont.pad_tokens) / cont.tokens_before_eos : 0.0;
  if (!cont.has_trace_marker) note("the continuation does not start with 'R :'");
  if (!cont.has_answer_marker) note("no 'A :' answer marker");

  std::vector<int> trace;
  size_t bad = 0;
  if (!maze_tokens_to_cells(cont.trace, maze.size, trace, bad)) {
    note("trace token " + std::to_string(bad + 1) + " '" + cont.trace[bad] + "' is not a cell of this " +
         std::to_string(maze.size) + "x" + std::to_string(maze.size) + " maze");
  } else if (cont.has_trace_marker) {
    v.followed_strategy = identify_maze_strategy(maze, trace, requested_strategy);
    v.strategy_as_requested = v.followed_strategy == requested_strategy;
    const MazeTraceCheck req = check_maze_trace(maze, requested_strategy, trace);
    v.trace_legal = req.legal;
    v.rule_faithful = req.faithful;
    for (int s = 1; s <= kMazeStrategyCount && !(v.trace_legal && v.rule_faithful); ++s) {
      if (s == requested_strategy) continue;
      const MazeTraceCheck other = check_maze_trace(maze, s, trace);
      v.trace_legal = v.trace_legal || other.legal;
      v.rule_faithful = v.rule_faithful || other.faithful;
    }
    note(req.error);
    if (!v.strategy_as_requested)
      note(v.followed_strategy
               ? std::string("the trace is the ") + maze_strategy_name(v.followed_strategy) +
                     " trace, not the requested " + maze_strategy_name(requested_strategy)
               : std::string("the trace is not the canonical ") + maze_strategy_name(requested_strategy) + " trace");
  }
  std::vector<int> answer;
  if (cont.has_answer_marker) {
    if (!maze_tokens_to_cells(cont.answer, maze.size, answer, bad))
      note("answer token " + std::to_string(bad + 1) + " '" + cont.answer[bad] + "' is not a cell of this maze");
    else if (answer == maze_solution_path(maze))
      v.answer_correct = true;
    else
      note("the answer is not the solution path");
  }
  if (!cont.has_eos) note("missing <eos>");
  return v;
}

}  // namespace lol::tasks
