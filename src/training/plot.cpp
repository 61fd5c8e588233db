#include "training/plot.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "io/atomic_file.h"
#include "training/metrics_log.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::training {

namespace {
// A gnuplot single-quoted string. It has no escapes, so a line break would end the
// command and start another: control characters become spaces.
std::string quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += "''";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "'";
}

std::string sh_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += "'\\''";
    else o += c;
  }
  return o + "'";
}

std::string label_of(const std::string& path) {
  // A run's metrics.jsonl is named by its run directory, any other file by its stem.
  fs::path p = fs::absolute(path).lexically_normal();
  std::string parent = p.parent_path().filename().string();
  return p.filename() != "metrics.jsonl" || parent.empty() ? p.stem().string() : parent;
}
}  // namespace

std::string gnuplot_script(const PlotOptions& opt, const std::string& data_dir) {
  if (opt.x != "step" && opt.x != "tokens" && opt.x != "flops" && opt.x != "elapsed")
    throw InputError("--x " + opt.x + ": expected step, tokens, flops or elapsed");
  if (opt.inputs.empty()) throw InputError("lol plot: no metrics files given");
  const auto ends_with = [&](const char* ext) { return opt.out.size() >= 4 && opt.out.compare(opt.out.size() - 4, 4, ext) == 0; };
  const bool svg = ends_with(".svg");
  // The format follows the name: a PNG written to "curves" or "curves.pdf" would mislead.
  if (!svg && !ends_with(".png"))
    throw InputError("--out " + opt.out + ": expected a file name ending in .png or .svg");
  for (char c : opt.out)
    if (static_cast<unsigned char>(c) < 0x20)
      throw InputError("--out: the file name contains a control character (line break, tab, ...)");
  const fs::path parent = fs::path(opt.out).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw InputError("--out " + opt.out + ": directory " + parent.string() + " does not exist");
  std::string s;
  s += svg ? "set terminal svg size 1000,600 dynamic enhanced\n" : "set terminal pngcairo size 1000,600 enhanced\n";
  s += "set output " + quote(opt.out) + "\n";
  // Titles and run names are literal text (noenhanced): no sub/superscripts from _ or ^,
  // no escapes from a backslash.
  s += "set title " + quote(opt.title) + " noenhanced\n";
  s += "set xlabel " + quote(opt.x == "elapsed" ? "elapsed (s)" : opt.x) + "\nset ylabel 'cross entropy (nats/token)'\n";
  s += "set grid\nset key top right\n";
  if (opt.log_y) s += "set logscale y\n";
  if (opt.x == "flops" || opt.x == "tokens") s += "set format x '%.1e'\n";
  std::string plots;
  for (size_t i = 0; i < opt.inputs.size(); ++i) {
    // A run directory stands for its metrics.jsonl.
    const std::string input =
        fs::is_directory(opt.inputs[i]) ? (fs::path(opt.inputs[i]) / "metrics.jsonl").string() : opt.inputs[i];
    std::error_code ec;
    if (fs::exists(opt.out, ec) && fs::equivalent(opt.out, input, ec))
      throw InputError("--out " + opt.out + ": is the input " + input + " (expected another file for the image)");
    const auto records = read_metrics(input);
    for (size_t k = 0; k < records.size(); ++k)
      for (const char* f : {"loss", "valid_loss", "step", opt.x.c_str()})
        if (records[k].contains(f) && !records[k][f].is_number() && !records[k][f].is_null())
          throw InputError(input + ": record " + std::to_string(k + 1) + ": field '" + f + "' = " +
                           records[k][f].dump() + ": expected a number");
    const std::string train_dat = data_dir + "/train-" + std::to_string(i) + ".dat";
    const std::string valid_dat = data_dir + "/valid-" + std::to_string(i) + ".dat";
    std::string tr, va;
    size_t n_train = 0, n_valid = 0;
    // A record without the x field (an evaluation record of an older run has no
    // "elapsed") takes it from the records that have it: the last one of its step, else
    // linear in the step between the nearest steps before and after; none is invented
    // beyond the first or last step that has it.
    std::map<int64_t, double> x_at_step;
    for (const auto& r : records)
      if (r.contains("step") && r["step"].is_number_integer() && r.contains(opt.x) && r[opt.x].is_number())
        x_at_step[r["step"].get<int64_t>()] = r[opt.x].get<double>();
    const auto x_for_step = [&](int64_t step) -> std::string {
      const auto after = x_at_step.lower_bound(step);
      if (after == x_at_step.end()) return "";
      if (after->first == step) return nlohmann::json(after->second).dump();
      if (after == x_at_step.begin()) return "";
      const auto before = std::prev(after);
      const double f = double(step - before->first) / double(after->first - before->first);
      return nlohmann::json(before->second + f * (after->second - before->second)).dump();
    };
    for (const auto& r : records) {
      std::string xv;
      if (r.contains(opt.x) && r[opt.x].is_number()) xv = r[opt.x].dump();
      else if (r.contains("step") && r["step"].is_number_integer()) xv = x_for_step(r["step"].get<int64_t>());
      if (xv.empty()) continue;
      if (r.contains("loss") && r["loss"].is_number()) tr += xv + " " + r["loss"].dump() + "\n", ++n_train;
      if (r.contains("valid_loss") && r["valid_loss"].is_number()) va += xv + " " + r["valid_loss"].dump() + "\n", ++n_valid;
    }
    if (n_train == 0 && n_valid == 0)
      throw InputError(input + ": no records with '" + opt.x + "' and 'loss' or 'valid_loss'");
    if (opt.log_y)
      for (const auto& r : records)
        for (const char* k : {"loss", "valid_loss"})
          if (r.contains(k) && r[k].is_number() && !(r[k].get<double>() > 0))
            throw InputError("--log-y: " + input + " has " + k + " = " + r[k].dump() +
                             ", which a logarithmic axis cannot show (expected losses > 0)");
    io::write_file_atomic(train_dat, tr);
    io::write_file_atomic(valid_dat, va);
    const std::string label = label_of(input);
    const std::string lc = " lc " + std::to_string(i + 1);
    if (n_train) plots += std::string(plots.empty() ? "" : ", ") + quote(train_dat) + " using 1:2 with lines" + lc +
                          " title " + quote(label + " train") + " noenhanced";
    if (n_valid) plots += std::string(plots.empty() ? "" : ", ") + quote(valid_dat) + " using 1:2 with linespoints pt 7" +
                          lc + " dt 2 title " + quote(label + " valid") + " noenhanced";
  }
  s += "plot " + plots + "\n";
  return s;
}

void plot_metrics(const PlotOptions& opt) {
  if (opt.out.empty()) throw InputError("lol plot: --out is required");
  char tmpl[] = "/tmp/lol-plot-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("lol plot: cannot create a temporary directory");
  const std::string dir = tmpl;
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string script = gnuplot_script(opt, dir);
  io::write_file_atomic(dir + "/plot.gp", script);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw std::runtime_error("lol plot: gnuplot not found (install the Debian package gnuplot-nox)");
  const std::string cmd = "gnuplot " + sh_quote(dir + "/plot.gp") + " 2>" + sh_quote(dir + "/err.txt");
  if (std::system(cmd.c_str()) != 0) {
    std::string err;
    try {
      err = io::read_file(dir + "/err.txt");
    } catch (const std::exception&) {
    }
    std::error_code ec;
    fs::remove(opt.out, ec);  // no empty or partial image under the requested name
    throw std::runtime_error("lol plot: gnuplot failed: " + err);
  }
  if (!fs::exists(opt.out)) throw std::runtime_error("lol plot: gnuplot wrote no " + opt.out);
}

}  // namespace lol::training
