// `lol paths extract` and `lol eval-strategies`: the main job of the project
// (paper 4.1.3-4.1.4): mode routing paths per strategy and strategy control under
// forced routing.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "analysis/mode_paths.h"
#include "analysis/strategy_eval.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "core/runtime.h"
#include "dataset/shards.h"
#include "dataset/task_dataset.h"
#include "io/atomic_file.h"
#include "lol/checkpoint.h"
#include "lol/windows.h"
#include "util/error.h"
#include "util/gnuplot.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

/// Whether two spellings name the same file or directory (as far as can be told).
bool same_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  const auto ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return ea || eb ? a == b : ca == cb;
}

data::TaskSpec spec_of_dataset(const data::Dataset& ds) {
  const auto& info = ds.info();
  if (ds.task() != "maze" && ds.task() != "sudoku")
    throw InputError("--data " + ds.dir() + ": a '" + ds.task() +
                     "' dataset; strategies and mode paths need a task dataset (lol data maze|sudoku)");
  nlohmann::json j = {{"task", ds.task()}, {"size", info.value("meta", nlohmann::json::object()).value("size", 8)}};
  if (info.contains("vocab")) j["vocab"] = info["vocab"];
  return data::task_spec_from_json(j, ds.dir() + "/dataset.json");
}

void plot_path_grids(const std::string& out, const std::map<int, RoutingPath>& paths,
                     const analysis::RoutingStats& st, const data::TaskSpec& spec,
                     analysis::RoutingStats::ModeRule rule) {
  if (!util::gnuplot_available()) {
    std::cerr << "note: gnuplot not found, skipping PNGs (apt-get install gnuplot-nox)\n";
    return;
  }
  for (const auto& [s, p] : paths) {
    // Rows: window index; columns: routed depth (paper Figures 13, 17).
    size_t K = 0;
    for (const auto& row : p.expert) K = std::max(K, row.size());
    std::vector<std::vector<double>> val(K, std::vector<double>(p.depth(), NAN)), agr = val;
    std::vector<std::vector<std::string>> lab(K, std::vector<std::string>(p.depth()));
    auto agreement = st.agreement(s, rule);
    for (int64_t d = 0; d < p.depth(); ++d)
      for (size_t k = 0; k < K; ++k) {
        if (auto fc = p.at(d, int64_t(k))) {
          val[k][d] = double(fc->expert) / std::max<double>(1.0, double(p.library_size - 1));
          lab[k][d] = "E" + std::to_string(fc->expert);
        }
        if (size_t(d) < agreement.size() && k < agreement[d].size() && agreement[d][k] >= 0)
          agr[k][d] = 100.0 * agreement[d][k];  // colour scale in % like the cell labels
      }
    std::vector<std::string> rows, cols;
    for (size_t k = 0; k < K; ++k) rows.push_back("W" + std::to_string(k));
    for (int64_t d = 0; d < p.depth(); ++d) cols.push_back(std::to_string(d + 1));
    std::vector<std::vector<std::string>> alab(K, std::vector<std::string>(p.depth()));
    for (size_t k = 0; k < K; ++k)
      for (int64_t d = 0; d < p.depth(); ++d)
        if (!std::isnan(agr[k][d])) alab[k][d] = std::to_string(int(std::round(agr[k][d])));
    const std::string name = "S" + std::to_string(s) + " " + spec.strategy_name(s);
    util::plot_heatmap(out + "/mode_path_S" + std::to_string(s) + ".png", "Mode path: " + name, val, rows, cols, lab,
                       "routed depth", "window");
    util::plot_heatmap(out + "/agreement_S" + std::to_string(s) + ".png", "Agreement with mode path (%): " + name, agr,
                       rows, cols, alab, "routed depth", "window", 0.0, 100.0);
  }
}

}  // namespace

void register_paths(CLI::App& app) {
  auto* paths = app.add_subcommand("paths", "Routing paths: extract mode paths per strategy");
  paths->require_subcommand(1);
  struct ExtractArgs {
    std::string model, data, out, split = "valid", device = "cpu";
    int64_t max = 0, batch = 16;
    std::string rule = "mean-prob", extend = "auto";
  };
  auto a = std::make_shared<ExtractArgs>();
  auto* ex = paths->add_subcommand("extract", "Mode path of each strategy from teacher-forced validation runs (paper 4.1.3)");
  ex->add_option("--model", a->model, "Checkpoint or run directory")->required();
  ex->add_option("--data", a->data, "Dataset directory written by `lol data`")->required();
  ex->add_option("--out", a->out, "Output directory for S1.json..S5.json, agreement.json, PNGs")->required();
  ex->add_option("--split", a->split, "Split to use")->default_val("valid");
  ex->add_option("--max", a->max, "Use at most this many sequences (0 = all)")
      ->default_val(0)
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  ex->add_option("--batch", a->batch, "Batch size")->default_val(16)->check(CLI::Range(1, 1 << 16));
  ex->add_option("--extend", a->extend,
                 "Fill windows never observed after the last observed one, up to this window count, with the "
                 "last observed window's experts (the paper's rule for dead-end filling's W3, Fig. 17); "
                 "auto (default) = every window a sequence of the model's max_seq_len can have; 0 = off "
                 "(the router decides there)")
      ->default_val("auto")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        try {
          size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= 0 && n <= (1 << 16)) return "";
        } catch (const std::exception&) {
        }
        return "expected auto or a window count in [0, 65536]";
      });
  ex->add_option("--rule", a->rule,
                 "Expert of each cell: mean-prob (highest mean router probability, paper 4.1.3) or "
                 "most-selected (the expert the model ran most often, balancing bias included)")
      ->default_val("mean-prob")
      ->check(CLI::IsMember({"mean-prob", "most-selected"}));
  ex->add_option("--device", a->device, "cpu or cuda")->default_val("cpu");
  ex->callback([a] {
    auto dev = parse_device(a->device);
    const std::string model_dir = resolve_model_dir(a->model);
    nlohmann::json extra;
    auto model = load_lol(model_dir, dev, &extra);
    require_routed_depth(model, model_dir, "paths extract");
    auto ds = data::Dataset::open(a->data);
    require_model_reads_dataset(model_dir, extra, model->config().vocab_size, ds, "--data " + a->data);
    auto spec = spec_of_dataset(ds);
    auto split = ds.load(a->split);
    require(split.size() > 0, a->data,
            "split '" + a->split + "' holds no sequences (the valid split is drawn by puzzle hash: raise `lol data "
            "--n` or --valid-fraction)");
    require(split.has_labels(), a->data, "split '" + a->split + "' has no strategy labels");
    if (a->split == "test")
      std::cerr << "note: --split test: mode paths from the test puzzles; eval-strategies on the same puzzles scores "
                   "them optimistically (the paper extracts from validation puzzles)\n";
    {  // the sequences must fit the model's context, checked before any forward pass
      const int64_t n = a->max > 0 ? std::min<int64_t>(a->max, split.size()) : split.size();
      const int64_t limit = model->config().max_seq_len;
      for (int64_t j = 0; j < n; ++j)
        if (split.get(j).length > limit)
          throw InputError("--data " + a->data + ": split '" + a->split + "' sequence " + std::to_string(j) + " has " +
                           std::to_string(split.get(j).length) + " tokens, more than the max_seq_len = " +
                           std::to_string(limit) + " of " + model_dir +
                           " (generate puzzles that fit with `lol data ... --max-tokens`)");
    }
    io::create_dirs(a->out, "--out");
    analysis::CollectOptions co;
    co.batch_size = a->batch;
    co.max_sequences = a->max;
    auto st = analysis::collect_routing_stats(model, split, co);
    const auto rule = a->rule == "most-selected" ? analysis::RoutingStats::ModeRule::kMostSelected
                                                 : analysis::RoutingStats::ModeRule::kMeanProbability;
    // auto: one past the largest window index a max_seq_len sequence can reach (last
    // position, largest shift W - 1, a 1-token prompt window).
    const auto& mc = model->config();
    const int64_t extend_to =
        a->extend == "auto" ? window_of(mc.max_seq_len - 1, mc.window - 1, mc.window, 1) + 1 : std::stoll(a->extend);
    std::map<int, RoutingPath> out_paths;
    for (int s = 1; s <= 5; ++s) {
      if (!st.cells.count(s)) {
        std::cerr << "warning: no sequence of strategy S" << s << " in split '" << a->split << "' of " << a->data
                  << ": no mode path for it\n";
        // An earlier extraction's path for it would be taken for this one's.
        for (const std::string& f : {"/S" + std::to_string(s) + ".json", "/mode_path_S" + std::to_string(s) + ".png",
                                    "/agreement_S" + std::to_string(s) + ".png"})
          if (fs::exists(a->out + f)) {
            fs::remove(a->out + f);
            std::cerr << "note: removed " << a->out + f << " of an earlier extraction\n";
          }
        continue;
      }
      auto p = st.mode_path(s, extend_to, rule);
      p.meta = {{"strategy", s}, {"rule", a->rule}, {"strategy_name", spec.strategy_name(s)}, {"task", spec.name},
                {"model", a->model},
                {"data", fs::absolute(a->data).lexically_normal().string()},  // compared by eval-strategies
                {"split", a->split}};
      p.save(a->out + "/S" + std::to_string(s) + ".json");
      out_paths[s] = p;
    }
    io::write_file_atomic(a->out + "/agreement.json", st.to_json(rule).dump(1) + "\n");
    plot_path_grids(a->out, out_paths, st, spec, rule);
    // The first windows of each path on the terminal; the files hold them all.
    constexpr size_t kShownWindows = 64;
    for (const auto& [s, p] : out_paths) {
      std::cout << "S" << s << " (" << spec.strategy_name(s) << ") mode path, window 0..:";
      for (int64_t d = 0; d < p.depth(); ++d) {
        std::cout << "\n  depth " << d + 1 << ":";
        const size_t n = p.expert[d].size();
        for (size_t k = 0; k < std::min(n, kShownWindows); ++k)
          std::cout << " " << (p.expert[d][k] < 0 ? std::string("-") : "E" + std::to_string(p.expert[d][k]));
        if (n > kShownWindows) std::cout << " ... (" << n << " windows; S" << s << ".json holds all)";
      }
      std::cout << "\n";
    }
    std::cout << "wrote " << out_paths.size() << " mode paths to " << a->out << "\n";
  });

  struct EvalArgs {
    std::string model, paths, data, out, device = "cpu", split, filler;
    int64_t n = 200, batch = 32, max_new = 0;
    bool no_unforced = false, full_recompute = false;
  };
  auto e = std::make_shared<EvalArgs>();
  auto* ev = app.add_subcommand("eval-strategies",
                                "Force each strategy's mode path on test puzzles and verify the traces (paper 4.1.3)");
  ev->add_option("--model", e->model, "Checkpoint or run directory")->required();
  ev->add_option("--paths", e->paths, "Directory with S1.json..S5.json (lol paths extract)")->required();
  ev->add_option("--data", e->data, "Dataset directory (its held-out split's JSONL is used)")->required();
  ev->add_option("--split", e->split,
                 "Split whose puzzles are evaluated (default: test, the new puzzles of `lol data --n-test`; "
                 "valid for a dataset without one)");
  auto* n_opt = ev->add_option("--n", e->n, "Number of test puzzles")->default_val(200)->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  ev->add_option("--batch", e->batch, "Generation batch size")->default_val(32)->check(CLI::Range(1, 1 << 16));
  ev->add_option("--max-new", e->max_new, "Generation limit in tokens (0 = from the data)")
      ->default_val(0)
      ->check(CLI::Range(0, 1 << 20));
  ev->add_flag("--no-unforced", e->no_unforced, "Skip unforced generation with the true label");
  ev->add_option("--filler", e->filler,
                 "Neutral label that replaces the strategy label under forcing, used verbatim (default: \"[\", "
                 "one \"...\" per token of the true label, \"]\": no trace position moves; paper 4.1.3)")
      ->check(non_empty("label such as \"[ ... ]\""));
  ev->add_flag("--full-recompute", e->full_recompute,
              "Generate by re-running the whole sequence per token instead of the KV-cached decoder "
              "(same tokens, tested equal; slower)");
  ev->add_option("--out", e->out, "Directory for results.json and PNGs (default: the paths directory)");
  ev->add_option("--device", e->device, "cpu or cuda")->default_val("cpu");
  ev->callback([e, n_opt] {
    auto dev = parse_device(e->device);
    const std::string model_dir = resolve_model_dir(e->model);
    nlohmann::json extra;
    auto model = load_lol(model_dir, dev, &extra);
    require_routed_depth(model, model_dir, "forcing mode paths");
    auto ds = data::Dataset::open(e->data);
    require_model_reads_dataset(model_dir, extra, model->config().vocab_size, ds, "--data " + e->data);
    auto spec = spec_of_dataset(ds);
    // The puzzles are read from DATA/<split>.jsonl.
    const auto jsonl_of = [&](const std::string& split) { return e->data + "/" + split + ".jsonl"; };
    if (e->split.empty()) {
      e->split = fs::exists(jsonl_of("test")) ? "test" : "valid";
      if (e->split == "valid")
        std::cerr << "note: " << e->data << (ds.has_split("test") ? " lists a test split but has no test.jsonl"
                                                                   : " has no test split (written before `lol data "
                                                                     "--n-test`, or with --n-test 0)")
                  << ": evaluating the valid split\n";
    }
    if (e->split.empty() || e->split.find_first_of("/\\") != std::string::npos || e->split[0] == '.')
      throw InputError("--split " + e->split + ": expected a split name (train, valid, test), not a path");
    const std::string jsonl = jsonl_of(e->split);
    if (!fs::is_regular_file(jsonl)) {
      std::string have;
      for (const char* s : {"train", "valid", "test"})
        if (fs::exists(jsonl_of(s))) have += std::string(have.empty() ? "" : ", ") + s;
      throw InputError("--split " + e->split + ": " + jsonl + " does not exist (the splits of " + e->data +
                       " with puzzles: " + (have.empty() ? "none" : have) + ")");
    }
    const std::string other_split =
        e->split != "test" && fs::exists(jsonl_of("test"))
            ? "evaluate new puzzles: --split test"
            : "new puzzles are the test split of `lol data --n-test` (regenerate the dataset with it)";
    if (e->split == "train")
      std::cerr << "warning: split 'train' holds the puzzles " << e->model
                << " was trained on: forced-path scores measure memory as much as control (" << other_split << ")\n";
    if (!fs::is_directory(e->paths))
      throw InputError("--paths " + e->paths + ": expected the directory holding S1.json .. S5.json (`lol paths "
                       "extract --out`); " + (fs::exists(e->paths) ? "it is a file" : "it does not exist"));
    std::vector<std::string> missing;
    for (int s = 1; s <= 5; ++s)
      if (!fs::exists(e->paths + "/S" + std::to_string(s) + ".json")) missing.push_back("S" + std::to_string(s) + ".json");
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      throw InputError("--paths " + e->paths + ": no " + list + " (expected the directory `lol paths extract --out` "
                       "wrote, with S1.json .. S5.json)");
    }
    std::map<int, RoutingPath> paths;
    for (int s = 1; s <= 5; ++s)
      paths[s] = load_routing_path_for(e->paths + "/S" + std::to_string(s) + ".json", model->config().library_size,
                                       model->active_depth());
    const auto meta_string = [](const RoutingPath& p, const char* key) {
      const auto it = p.meta.is_object() ? p.meta.find(key) : p.meta.end();
      return it != p.meta.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    // Paths of another task route another algorithm: refused. A path with fewer rows than
    // the routed depths the model runs leaves the deeper ones to the router: noted.
    for (const auto& [s, p] : paths) {
      const std::string file = e->paths + "/S" + std::to_string(s) + ".json";
      const std::string task = meta_string(p, "task");
      if (!task.empty() && task != spec.name)
        throw InputError(file + ": field 'meta.task' = \"" + task + "\": expected \"" + spec.name + "\", the task of --data " +
                         e->data + " (mode paths of another task)");
      if (p.depth() < model->active_depth())
        std::cerr << "note: " << file << " forces " << p.depth() << " of the " << model->active_depth()
                  << " routed depths " << e->model << " runs; the router picks the experts of the others\n";
    }
    // Paper 4.1.3: mode paths from validation puzzles, tested on new ones.
    for (const auto& [s, p] : paths)
      if (meta_string(p, "split") == e->split && same_path(meta_string(p, "data"), e->data)) {
        std::cerr << "warning: the mode paths were extracted from split '" << e->split << "' of " << e->data
                  << ", the puzzles evaluated here: forced-path scores are optimistic (" << other_split << ")\n";
        break;
      }
    analysis::StrategyEvalOptions opt;
    opt.n_puzzles = e->n;
    opt.batch_size = e->batch;
    opt.max_new_tokens = e->max_new;
    opt.unforced = !e->no_unforced;
    opt.filler = e->filler;
    const std::string out = e->out.empty() ? e->paths : e->out;
    io::create_dirs(out, "--out");
    auto res = analysis::evaluate_strategies(model, spec, paths, jsonl, opt, default_generator(!e->full_recompute));
    auto j = res.to_json(spec);
    int64_t evaluated = 0;
    for (const auto& [s, m] : res.forced) evaluated = std::max(evaluated, m.n);
    j["command"] = {{"model", e->model}, {"paths", e->paths},  {"data", e->data},       {"split", e->split},
                    {"n", e->n},         {"filler", e->filler}, {"puzzles", evaluated}};
    io::write_file_atomic(out + "/results.json", j.dump(1) + "\n");
    std::cout << res.format(spec);
    if (evaluated < e->n)
      std::cerr << "note: --n " << e->n << (n_opt->count() ? "" : " (the default)") << ": " << jsonl << " holds "
                << evaluated << " puzzles; all of them evaluated\n";
    std::cout << "\n" << res.generated_tokens << " tokens generated in " << res.seconds << " s; wrote " << out
              << "/results.json\n";
    if (util::gnuplot_available()) {
      std::vector<std::vector<double>> m(5, std::vector<double>(6, 0.0));
      std::vector<std::vector<std::string>> lab(5, std::vector<std::string>(6));
      for (int s = 1; s <= 5; ++s) {
        int64_t n = 0;
        for (auto x : res.confusion[s]) n += x;
        for (int f = 0; f <= 5; ++f) {
          m[s - 1][f] = n ? 100.0 * double(res.confusion[s][f]) / double(n) : 0.0;
          lab[s - 1][f] = std::to_string(int(std::round(m[s - 1][f])));
        }
      }
      std::vector<std::string> rows, cols{"none"};
      for (int s = 1; s <= 5; ++s) {
        rows.push_back("S" + std::to_string(s) + " " + spec.strategy_name(s));
        cols.push_back("S" + std::to_string(s));
      }
      util::plot_heatmap(out + "/confusion.png", "Forced mode path vs strategy followed (%), " + spec.name, m, rows, cols,
                         lab, "strategy the trace follows", "forced path", 0.0, 100.0);
    }
  });
}

}  // namespace lol::cli
