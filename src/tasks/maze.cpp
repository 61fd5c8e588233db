#include "tasks/maze.h"

#include <cmath>

#include "tasks/task.h"
#include "util/error.h"

namespace lol::tasks {

const char* maze_dir_token(MazeDir d) {
  switch (d) {
    case kMazeNorth:
      return "N";
    case kMazeEast:
      return "E";
    case kMazeSouth:
      return "S";
    case kMazeWest:
      return "W";
  }
  return "?";
}

MazeDir maze_opposite(MazeDir d) {
  switch (d) {
    case kMazeNorth:
      return kMazeSouth;
    case kMazeEast:
      return kMazeWest;
    case kMazeSouth:
      return kMazeNorth;
    case kMazeWest:
      return kMazeEast;
  }
  return d;
}

namespace {

// Neighbour of `cell` in direction d ignoring walls; -1 outside the grid.
int grid_step(int cell, MazeDir d, int size) {
  const int r = cell / size, c = cell % size;
  switch (d) {
    case kMazeNorth:
      return r > 0 ? cell - size : -1;
    case kMazeEast:
      return c + 1 < size ? cell + 1 : -1;
    case kMazeSouth:
      return r + 1 < size ? cell + size : -1;
    case kMazeWest:
      return c > 0 ? cell - 1 : -1;
  }
  return -1;
}

int dir_from_token(const std::string& t) {
  if (t == "N") return kMazeNorth;
  if (t == "E") return kMazeEast;
  if (t == "S") return kMazeSouth;
  if (t == "W") return kMazeWest;
  return 0;
}

// Parses a positive decimal without sign or leading zero; -1 on failure.
int parse_positive(const std::string& s, size_t begin, size_t end) {
  if (begin >= end || end - begin > 3 || s[begin] == '0') return -1;
  int v = 0;
  for (size_t i = begin; i < end; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Appends "r<row>c<col>" without temporary strings.
void append_cell(std::string& out, int cell, int size) {
  char buf[16];
  int n = 0, r = cell / size + 1, c = cell % size + 1;
  buf[n++] = 'r';
  if (r >= 10) buf[n++] = char('0' + r / 10);
  buf[n++] = char('0' + r % 10);
  buf[n++] = 'c';
  if (c >= 10) buf[n++] = char('0' + c / 10);
  buf[n++] = char('0' + c % 10);
  out.append(buf, size_t(n));
}

}  // namespace

int Maze::neighbor(int cell, MazeDir d) const {
  if (!(open[cell] & d)) return -1;
  return grid_step(cell, d, size);
}

int Maze::neighbors(int cell, std::array<int, 4>& out) const {
  int n = 0;
  for (MazeDir d : kMazeDirOrder) {
    int nb = neighbor(cell, d);
    if (nb >= 0) out[n++] = nb;
  }
  return n;
}

bool Maze::adjacent(int a, int b) const {
  if (a < 0 || b < 0 || a >= cells() || b >= cells()) return false;
  for (MazeDir d : kMazeDirOrder)
    if (neighbor(a, d) == b) return true;
  return false;
}

bool Maze::is_perfect() const {
  const int n = cells();
  if (size < kMazeMinSize || size > kMazeMaxSize || int(open.size()) != n) return false;
  int passages = 0;
  for (int c = 0; c < n; ++c) {
    for (MazeDir d : kMazeDirOrder) {
      if (!(open[c] & d)) continue;
      int nb = grid_step(c, d, size);
      if (nb < 0 || !(open[nb] & maze_opposite(d))) return false;
      ++passages;
    }
  }
  if (passages != 2 * (n - 1)) return false;
  // Connected: a flood fill from cell 0 reaches every cell.
  std::vector<uint8_t> seen(n, 0);
  std::vector<int> stack = {0};
  seen[0] = 1;
  int reached = 1;
  std::array<int, 4> nb;
  while (!stack.empty()) {
    int c = stack.back();
    stack.pop_back();
    int k = neighbors(c, nb);
    for (int i = 0; i < k; ++i)
      if (!seen[nb[i]]) {
        seen[nb[i]] = 1;
        ++reached;
        stack.push_back(nb[i]);
      }
  }
  return reached == n;
}

std::string Maze::to_question() const {
  std::string q = "Q :";
  q.reserve(size_t(cells()) * 12 + 32);
  for (int c = 0; c < cells(); ++c) {
    q += ' ';
    append_cell(q, c, size);
    for (MazeDir d : kMazeDirOrder)
      if (open[c] & d) {
        q += ' ';
        q += maze_dir_token(d);
      }
  }
  q += " start " + maze_cell_name(start, size) + " goal " + maze_cell_name(goal, size);
  return q;
}

Maze Maze::from_question(const std::string& question) {
  const std::vector<std::string> all = split_tokens(question);
  std::vector<std::string> t;
  for (const auto& w : all) {
    if (w == "[") break;
    t.push_back(w);
  }
  auto where = [](size_t i) { return "maze question, token " + std::to_string(i + 1); };
  if (!(t.size() >= 2 && t[0] == "Q" && t[1] == ":")) throw InputError("maze question: must start with 'Q :'");

  // First pass: the grid side from the number of cell tokens before "start".
  size_t n_cells = 0, i = 2;
  while (i < t.size() && t[i] != "start") {
    if (!dir_from_token(t[i])) ++n_cells;
    ++i;
  }
  const int size = int(std::lround(std::sqrt(double(n_cells))));
  if (!(size * size == int(n_cells) && size >= kMazeMinSize && size <= kMazeMaxSize))
    throw InputError("maze question: expected N*N cells with 4 <= N <= 16 before 'start', found " +
                     std::to_string(n_cells));

  Maze m;
  m.size = size;
  m.open.assign(n_cells, 0);
  int cell = -1;
  for (i = 2; i < t.size() && t[i] != "start"; ++i) {
    if (int d = dir_from_token(t[i])) {
      if (cell < 0) throw InputError(where(i) + ": direction '" + t[i] + "' before the first cell");
      if (m.open[cell] & d) throw InputError(where(i) + ": direction '" + t[i] + "' repeated");
      if (grid_step(cell, MazeDir(d), size) < 0)
        throw InputError(where(i) + ": direction '" + t[i] + "' of " + maze_cell_name(cell, size) + " leaves the grid");
      m.open[cell] |= uint8_t(d);
      continue;
    }
    ++cell;
    if (parse_maze_cell(t[i], size) != cell)
      throw InputError(where(i) + ": expected cell '" + maze_cell_name(cell, size) + "' (row-major order), got '" +
                       t[i] + "'");
  }
  for (int c = 0; c < m.cells(); ++c)
    for (MazeDir d : kMazeDirOrder)
      if (m.open[c] & d) {
        int nb = grid_step(c, d, size);
        if (!(m.open[nb] & maze_opposite(d)))
          throw InputError("maze question: " + maze_cell_name(c, size) + " is open to " + maze_dir_token(d) + " but " +
                           maze_cell_name(nb, size) + " is not open to " + maze_dir_token(maze_opposite(d)));
      }
  if (!(i + 4 == t.size() && t[i] == "start" && t[i + 2] == "goal"))
    throw InputError("maze question: expected the question to end with 'start <cell> goal <cell>'");
  m.start = parse_maze_cell(t[i + 1], size);
  m.goal = parse_maze_cell(t[i + 3], size);
  if (m.start < 0) throw InputError(where(i + 1) + ": start '" + t[i + 1] + "' is not a cell of the grid");
  if (m.goal < 0) throw InputError(where(i + 3) + ": goal '" + t[i + 3] + "' is not a cell of the grid");
  if (m.start == m.goal) throw InputError("maze question: start and goal must differ");
  return m;
}

std::string maze_cell_name(int cell, int size) {
  std::string s;
  append_cell(s, cell, size);
  return s;
}

int parse_maze_cell(const std::string& token, int size) {
  if (token.size() < 4 || token[0] != 'r') return -1;
  size_t cpos = token.find('c', 1);
  if (cpos == std::string::npos) return -1;
  int r = parse_positive(token, 1, cpos);
  int c = parse_positive(token, cpos + 1, token.size());
  if (r < 1 || c < 1 || r > size || c > size) return -1;
  return (r - 1) * size + (c - 1);
}

std::string maze_cells_text(const std::vector<int>& cells, int size) {
  std::string out;
  out.reserve(cells.size() * 5);
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) out += ' ';
    append_cell(out, cells[i], size);
  }
  return out;
}

std::vector<int> maze_solution_path(const Maze& maze) {
  const int n = maze.cells();
  std::vector<int> parent(n, -2);
  std::vector<int> queue;
  queue.reserve(n);
  queue.push_back(maze.start);
  parent[maze.start] = -1;
  std::array<int, 4> nb;
  for (size_t head = 0; head < queue.size() && parent[maze.goal] == -2; ++head) {
    int c = queue[head];
    int k = maze.neighbors(c, nb);
    for (int i = 0; i < k; ++i)
      if (parent[nb[i]] == -2) {
        parent[nb[i]] = c;
        queue.push_back(nb[i]);
      }
  }
  if (parent[maze.goal] == -2)
    throw InputError("maze: goal " + maze_cell_name(maze.goal, maze.size) + " is unreachable");
  std::vector<int> path;
  for (int c = maze.goal; c != -1; c = parent[c]) path.push_back(c);
  return {path.rbegin(), path.rend()};
}

uint64_t maze_fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace lol::tasks
