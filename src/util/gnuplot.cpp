#include "util/gnuplot.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace lol::util {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

static std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '\n') {  // a line break in a title or label: gnuplot's "\n" escape
      r += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) {  // other control characters: a space
      r += ' ';
      continue;
    }
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

/// Runs `gnuplot script_path` with stderr into script_path.log (removed when empty) and waits for it. Spawned
/// directly, not through std::system, which ignores SIGINT and SIGQUIT in the caller while
/// the child runs: Ctrl-C during a plot then stops lol as anywhere else (the terminal's
/// signal reaches the whole process group) instead of being lost or reported as a
/// gnuplot failure. Throws std::runtime_error when gnuplot cannot start or fails.
static void run(const std::string& script_path) {
  const std::string log = script_path + ".log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string prog = "gnuplot", arg = script_path;
  char* argv[] = {prog.data(), arg.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start gnuplot for " + script_path + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waiting for gnuplot on " + script_path + ": " + std::strerror(errno));
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)) {
    // Interrupted with us (a handler that only records the signal, as training's, let
    // this process go on): the plot is not made; its half-written PNG is removed.
    std::remove((script_path.substr(0, script_path.size() - 3)).c_str());
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("gnuplot failed on " + script_path + " (see " + log + ")");
  // Kept only when gnuplot said something (warnings).
  std::error_code ec;
  if (std::filesystem::exists(log, ec) && std::filesystem::file_size(log, ec) == 0) std::filesystem::remove(log, ec);
}

void plot_heatmap(const std::string& png, const std::string& title, const std::vector<std::vector<double>>& values,
                  const std::vector<std::string>& row_names, const std::vector<std::string>& col_names,
                  const std::vector<std::vector<std::string>>& labels, const std::string& xlabel,
                  const std::string& ylabel, double vmin, double vmax) {
  const std::string dat = png + ".dat", gp = png + ".gp";
  const size_t R = values.size();
  size_t C = 0;
  for (const auto& r : values) C = std::max(C, r.size());
  {
    std::ofstream d(dat);
    for (size_t r = 0; r < R; ++r) {
      for (size_t c = 0; c < C; ++c) {
        double v = c < values[r].size() ? values[r][c] : NAN;
        std::string lab = (r < labels.size() && c < labels[r].size()) ? labels[r][c] : "";
        d << c << " " << r << " " << (std::isnan(v) ? std::string("NaN") : std::to_string(v)) << " "
          << quote(lab.empty() ? "" : lab) << "\n";
      }
      d << "\n";
    }
  }
  std::ofstream s(gp);
  // Cells shrink beyond 16384 pixels (cairo refuses images above 32767 pixels a side).
  constexpr size_t kMaxSide = 16384;
  int w = int(std::min(kMaxSide, std::max<size_t>(480, 60 * C + 200))),
      h = int(std::min(kMaxSide, std::max<size_t>(360, 40 * R + 160)));
  s << "set terminal pngcairo size " << w << "," << h << " font 'sans,10'\n";
  s << "set output " << quote(png) << "\n";
  s << "set title " << quote(title) << "\n";
  s << "set xlabel " << quote(xlabel) << "\nset ylabel " << quote(ylabel) << "\n";
  s << "set cbrange [" << vmin << ":" << vmax << "]\n";
  s << "set palette defined (0 '#f7fbff', 0.5 '#6baed6', 1 '#08306b')\n";
  s << "set xrange [-0.5:" << (double(C) - 0.5) << "]\nset yrange [" << (double(R) - 0.5) << ":-0.5]\n";
  size_t longest = 0;
  for (const auto& n : col_names) longest = std::max(longest, n.size());
  if (longest > 6) s << "set xtics rotate by 30 right\n";  // long column names would overlap
  s << "set xtics (";
  for (size_t c = 0; c < C; ++c) s << (c ? ", " : "") << quote(c < col_names.size() ? col_names[c] : std::to_string(c)) << " " << c;
  s << ")\nset ytics (";
  for (size_t r = 0; r < R; ++r) s << (r ? ", " : "") << quote(r < row_names.size() ? row_names[r] : std::to_string(r)) << " " << r;
  // No `set datafile missing 'NaN'`: it drops the NaN cells from the image grid, and
  // gnuplot then lays out ragged rows shifted by half a cell; NaN cells stay undrawn anyway.
  s << ")\n";
  // Cell labels in white on the dark upper part of the palette, black elsewhere.
  const double dark = vmin + 0.6 * (vmax - vmin);
  s << "plot " << quote(dat) << " using 1:2:3 with image notitle, " << quote(dat) << " using 1:2:4:($3 > " << dark
    << " ? 0xffffff : 0x000000) with labels textcolor rgb variable font 'sans,9' notitle\n";
  s.close();
  run(gp);
}

void plot_lines(const std::string& png, const std::string& title, const std::vector<Series>& series,
                const std::string& xlabel, const std::string& ylabel, bool logx, bool logy) {
  plot_series(png, title, series, xlabel, ylabel, logx, logy, false);
}

void plot_scatter(const std::string& png, const std::string& title, const std::vector<Series>& groups,
                  const std::string& xlabel, const std::string& ylabel) {
  plot_series(png, title, groups, xlabel, ylabel, false, false, true);
}

void plot_series(const std::string& png, const std::string& title, const std::vector<Series>& series,
                 const std::string& xlabel, const std::string& ylabel, bool logx, bool logy, bool points) {
  const std::string dat = png + ".dat", gp = png + ".gp";
  // gnuplot's `index i` does not count empty data blocks, so a series without points
  // would shift every later series onto the previous one's title: leave them out.
  std::vector<const Series*> drawn;
  for (const auto& se : series)
    if (std::min(se.x.size(), se.y.size()) > 0) drawn.push_back(&se);
  if (drawn.empty()) return;
  {
    std::ofstream d(dat);
    for (const Series* p : drawn) {
      const Series& se = *p;
      d << "# " << se.name << "\n";
      for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) d << se.x[i] << " " << se.y[i] << "\n";
      d << "\n\n";
    }
  }
  std::ofstream s(gp);
  s << "set terminal pngcairo size 900,560 font 'sans,10'\n";
  s << "set output " << quote(png) << "\n";
  s << "set title " << quote(title) << "\nset xlabel " << quote(xlabel) << "\nset ylabel " << quote(ylabel) << "\n";
  s << "set grid\nset key outside right\n";
  if (logx) s << "set logscale x\n";
  if (logy) s << "set logscale y\n";
  s << "plot ";
  for (size_t i = 0; i < drawn.size(); ++i)
    s << (i ? ", " : "") << quote(dat) << " index " << i << " using 1:2 "
      << (points ? "with points pt 7 ps 0.5" : "with lines lw 2") << " title " << quote(drawn[i]->name);
  s << "\n";
  s.close();
  run(gp);
}

}  // namespace lol::util
