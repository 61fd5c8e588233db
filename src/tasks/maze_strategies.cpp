#include "tasks/maze_strategies.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "util/error.h"

namespace lol::tasks {

namespace {

void check_strategy(int strategy) {
  if (!(strategy >= 1 && strategy <= kMazeStrategyCount))
    throw InputError("maze strategy: expected 1..5, got " + std::to_string(strategy));
}

// Open neighbours of `cell` in the given direction order.
int ordered_neighbors(const Maze& m, int cell, const MazeDirOrder& order, std::array<int, 4>& out) {
  int n = 0;
  for (MazeDir d : order) {
    int nb = m.neighbor(cell, d);
    if (nb >= 0) out[n++] = nb;
  }
  return n;
}

// Follows parent links from `cell` back to the root; returns root-first order.
std::vector<int> chain_to_root(const std::vector<int>& parent, int cell) {
  std::vector<int> out;
  for (int c = cell; c != -1; c = parent[c]) out.push_back(c);
  std::reverse(out.begin(), out.end());
  return out;
}

MazeRun rejected(std::string reason) {
  MazeRun r;
  r.reason = std::move(reason);
  return r;
}

int manhattan(const Maze& m, int a, int b) { return std::abs(m.row(a) - m.row(b)) + std::abs(m.col(a) - m.col(b)); }

}  // namespace

const char* maze_strategy_name(int strategy) {
  check_strategy(strategy);
  static const char* names[] = {"BFS", "DFS walk", "A*", "Bidirectional BFS", "Dead-end filling"};
  return names[strategy - 1];
}

std::string maze_strategy_label(int strategy, int size) {
  check_strategy(strategy);
  if (!(size >= kMazeMinSize && size <= kMazeMaxSize))
    throw InputError("maze size: expected 4..16, got " + std::to_string(size));
  auto cell = [size](int r, int c) { return maze_cell_name((r - 1) * size + (c - 1), size); };
  const int n = size;
  std::vector<std::string> cells;
  switch (strategy) {
    case kMazeBfs:
      cells = {cell(1, 1), cell(1, 2), cell(2, 1), cell(1, 3), cell(2, 2), cell(3, 1)};
      break;
    case kMazeDfs:
      cells = {cell(1, 1), cell(1, 2), cell(1, 3), cell(1, 4), cell(1, 3), cell(1, 2)};
      break;
    case kMazeAStar:
      cells = {cell(1, 1), cell(1, 2), cell(2, 2), cell(2, 3), cell(3, 3), cell(3, 4)};
      break;
    case kMazeBidirectional:
      cells = {cell(1, 1), cell(n, n), cell(1, 2), cell(n, n - 1), cell(1, 3), cell(n, n - 2)};
      break;
    default:
      cells = {cell(n, 1), cell(n, 2), cell(n, 3), cell(1, n), cell(2, n), cell(3, n)};
      break;
  }
  std::string out = "[";
  for (const auto& c : cells) out += " " + c;
  return out + " ]";
}

MazeRun maze_bfs(const Maze& m, const MazeDirOrder& order) {
  MazeRun r;
  std::vector<int> parent(m.cells(), -2);
  std::vector<int>& queue = r.trace;  // dequeue order == discovery order
  queue.reserve(m.cells());
  queue.push_back(m.start);
  parent[m.start] = -1;
  std::array<int, 4> nb;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int c = queue[head];
    if (c == m.goal) {
      queue.resize(head + 1);
      r.path = chain_to_root(parent, c);
      r.ok = true;
      return r;
    }
    int k = ordered_neighbors(m, c, order, nb);
    for (int i = 0; i < k; ++i)
      if (parent[nb[i]] == -2) {
        parent[nb[i]] = c;
        queue.push_back(nb[i]);
      }
  }
  return rejected("BFS: goal unreachable");
}

MazeRun maze_dfs(const Maze& m, const MazeDirOrder& order) {
  MazeRun r;
  std::vector<uint8_t> visited(m.cells(), 0);
  std::vector<int> stack = {m.start};
  visited[m.start] = 1;
  r.trace.push_back(m.start);
  std::array<int, 4> nb;
  while (!stack.empty()) {
    const int c = stack.back();
    if (c == m.goal) {
      r.path = stack;
      r.ok = true;
      return r;
    }
    int k = ordered_neighbors(m, c, order, nb), next = -1;
    for (int i = 0; i < k && next < 0; ++i)
      if (!visited[nb[i]]) next = nb[i];
    if (next >= 0) {
      visited[next] = 1;
      stack.push_back(next);
      r.trace.push_back(next);
    } else {
      stack.pop_back();
      if (!stack.empty()) r.trace.push_back(stack.back());
    }
  }
  return rejected("DFS: goal unreachable");
}

MazeRun maze_astar(const Maze& m, AStarTies ties) {
  MazeRun r;
  const int n = m.cells();
  std::vector<int> g(n, -1), parent(n, -1), order(n, 0), f(n, 0);
  std::vector<int> open = {m.start};
  g[m.start] = 0;
  f[m.start] = manhattan(m, m.start, m.goal);
  int discovered = 1;
  std::array<int, 4> nb;
  auto name = [&](int c) { return maze_cell_name(c, m.size); };
  while (!open.empty()) {
    // best: smallest (f, g, discovery order); fifo: smallest (f, discovery order).
    size_t best = 0, fifo = 0;
    for (size_t i = 1; i < open.size(); ++i) {
      const int c = open[i], b = open[best], q = open[fifo];
      if (std::make_tuple(f[c], g[c], order[c]) < std::make_tuple(f[b], g[b], order[b])) best = i;
      if (std::make_tuple(f[c], order[c]) < std::make_tuple(f[q], order[q])) fifo = i;
    }
    const int c = open[best];
    if (ties == AStarTies::kReject) {
      for (int o : open)
        if (o != c && f[o] == f[c] && g[o] == g[c])
          return rejected("A*: " + name(c) + " and " + name(o) + " tie at f=" + std::to_string(f[c]) +
                          ", g=" + std::to_string(g[c]) + " (order not fixed by the rules)");
      if (open[fifo] != c)
        return rejected("A*: pop order depends on the tie-break at f=" + std::to_string(f[c]) + ": smaller g pops " +
                        name(c) + ", first discovered pops " + name(open[fifo]));
    }
    open.erase(open.begin() + long(best));
    r.trace.push_back(c);
    if (c == m.goal) {
      r.path = chain_to_root(parent, c);
      r.ok = true;
      return r;
    }
    int k = m.neighbors(c, nb);
    for (int i = 0; i < k; ++i)
      if (g[nb[i]] < 0) {
        const int x = nb[i];
        g[x] = g[c] + 1;
        f[x] = g[x] + manhattan(m, x, m.goal);
        parent[x] = c;
        order[x] = discovered++;
        open.push_back(x);
      }
  }
  return rejected("A*: goal unreachable");
}

MazeRun maze_bidirectional(const Maze& m, const MazeDirOrder& order) {
  MazeRun r;
  const int n = m.cells();
  // seen_by[c]: 0 unseen, 1 seen by the start side, 2 by the goal side.
  std::vector<uint8_t> seen_by(n, 0);
  std::vector<int> parent(n, -1);
  std::array<std::vector<int>, 2> queue = {std::vector<int>{m.start}, std::vector<int>{m.goal}};
  std::array<size_t, 2> head = {0, 0};
  seen_by[m.start] = 1;
  seen_by[m.goal] = 2;
  std::array<int, 4> nb;
  for (int side = 0;; side ^= 1) {
    if (head[side] >= queue[side].size()) return rejected("bidirectional BFS: the two searches never meet");
    const int c = queue[side][head[side]++];
    r.trace.push_back(c);
    int k = ordered_neighbors(m, c, order, nb);
    for (int i = 0; i < k; ++i) {
      const int x = nb[i];
      if (seen_by[x] == 2 - side) {  // seen by the other side: meeting
        r.trace.push_back(x);
        std::vector<int> a = chain_to_root(parent, c), b = chain_to_root(parent, x);
        // a runs from this side's root to c, b from the other root to x.
        if (side == 1) std::swap(a, b);
        r.path = a;
        r.path.insert(r.path.end(), b.rbegin(), b.rend());
        r.ok = true;
        return r;
      }
      if (!seen_by[x]) {
        seen_by[x] = uint8_t(side + 1);
        parent[x] = c;
        queue[side].push_back(x);
      }
    }
  }
}

MazeRun maze_dead_end_filling(const Maze& m) {
  MazeRun r;
  const int n = m.cells();
  std::vector<uint8_t> filled(n, 0);
  std::array<int, 4> nb;
  for (bool changed = true; changed;) {
    changed = false;
    for (int c = 0; c < n; ++c) {
      if (filled[c] || c == m.start || c == m.goal) continue;
      int k = m.neighbors(c, nb), free = 0;
      for (int i = 0; i < k; ++i) free += !filled[nb[i]];
      if (free <= 1) {
        filled[c] = 1;
        r.trace.push_back(c);
        changed = true;
      }
    }
  }
  // The answer: walk the unfilled cells from the start to the goal.
  r.path = {m.start};
  for (int prev = -1, c = m.start; c != m.goal;) {
    int k = m.neighbors(c, nb), next = -1, options = 0;
    for (int i = 0; i < k; ++i)
      if (!filled[nb[i]] && nb[i] != prev) {
        next = nb[i];
        ++options;
      }
    if (options != 1 || int(r.path.size()) > n)
      return rejected("dead-end filling: the unfilled cells do not form a single start-goal path");
    prev = c;
    c = next;
    r.path.push_back(c);
  }
  r.ok = true;
  return r;
}

MazeRun maze_run(const Maze& maze, int strategy, AStarTies ties) {
  check_strategy(strategy);
  switch (strategy) {
    case kMazeBfs:
      return maze_bfs(maze);
    case kMazeDfs:
      return maze_dfs(maze);
    case kMazeAStar:
      return maze_astar(maze, ties);
    case kMazeBidirectional:
      return maze_bidirectional(maze);
    default:
      return maze_dead_end_filling(maze);
  }
}

}  // namespace lol::tasks
