// Loss curves from metrics.jsonl files, rendered by gnuplot (`lol plot`).
#pragma once
#include <string>
#include <vector>

namespace lol::training {

struct PlotOptions {
  std::vector<std::string> inputs;  ///< metrics.jsonl files (one curve pair each)
  std::string out;                  ///< .png or .svg
  std::string x = "step";           ///< x axis: step, tokens, flops or elapsed
  bool log_y = false;
  std::string title = "training loss";
};

/// The gnuplot script that plot_metrics() runs, with data files written into
/// `data_dir`. Training loss ("loss") is drawn as lines, validation loss
/// ("valid_loss") as points, one colour per input. Throws InputError naming the file
/// when an input is unreadable or has no loss records, when `x` is unknown, or when
/// `out` does not end in .png or .svg.
std::string gnuplot_script(const PlotOptions& opt, const std::string& data_dir);

/// Writes opt.out by running gnuplot. Throws InputError for bad inputs and
/// std::runtime_error when gnuplot is missing or fails.
void plot_metrics(const PlotOptions& opt);

}  // namespace lol::training
