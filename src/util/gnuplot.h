// PNG plots through gnuplot (Debian gnuplot-nox): heatmaps with cell labels and
// line plots. Each call writes the data and script next to the PNG
// (<png>.dat, <png>.gp) so plots can be restyled by hand, then runs gnuplot.
#pragma once
#include <string>
#include <vector>

namespace lol::util {

/// True when a gnuplot binary is on PATH.
bool gnuplot_available();

/// Heatmap of values[r][c] (NaN cells drawn empty) with optional per-cell text
/// labels (same shape, "" = none). Throws std::runtime_error when gnuplot fails.
void plot_heatmap(const std::string& png, const std::string& title, const std::vector<std::vector<double>>& values,
                  const std::vector<std::string>& row_names, const std::vector<std::string>& col_names,
                  const std::vector<std::vector<std::string>>& labels = {}, const std::string& xlabel = "",
                  const std::string& ylabel = "", double vmin = 0.0, double vmax = 1.0);

struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// Line plot of several series. logx/logy select log axes.
void plot_lines(const std::string& png, const std::string& title, const std::vector<Series>& series,
                const std::string& xlabel, const std::string& ylabel, bool logx = false, bool logy = false);

/// Scatter plot: one colour (and key entry) per group of points.
void plot_scatter(const std::string& png, const std::string& title, const std::vector<Series>& groups,
                  const std::string& xlabel, const std::string& ylabel);

/// Shared implementation of plot_lines (points = false) and plot_scatter (points = true).
/// Series without points are left out of the plot and its key; nothing is written when
/// no series has points.
void plot_series(const std::string& png, const std::string& title, const std::vector<Series>& series,
                 const std::string& xlabel, const std::string& ylabel, bool logx, bool logy, bool points);

}  // namespace lol::util
