// `lol analyze routing`: expert utilization, routing-path statistics and probes that
// read a per-document binary label from router outputs (paper 4.1.1-4.1.2, Appendix C.2,
// Figures 4, 6, 21, 22, Table 2). Output: routing.json, heatmap and ROC PNGs, a table.
// Documentation: docs/analysis.md.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "analysis/routing_features.h"
#include "analysis/routing_pca.h"
#include "analysis/routing_probes.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "core/runtime.h"
#include "dataset/shards.h"
#include "dataset/task_dataset.h"
#include "io/atomic_file.h"
#include "lol/checkpoint.h"
#include "util/error.h"
#include "util/gnuplot.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

/// Adds the names of one label table (array: index = id; object: {"name": id} or
/// {"id": "name"}) to `out`. Throws InputError naming `where`.
void read_label_table(const nlohmann::json& t, const std::string& where,
                      std::map<int64_t, std::vector<std::string>>& out) {
  if (t.is_array()) {
    for (size_t i = 0; i < t.size(); ++i) {
      require(t[i].is_string(), where, "entry " + std::to_string(i) + ": expected a string");
      out[int64_t(i)].push_back(t[i].get<std::string>());
    }
    return;
  }
  require(t.is_object(), where, "expected an array of names or an object");
  for (const auto& [k, v] : t.items()) {
    if (v.is_number_integer()) {
      out[v.get<int64_t>()].push_back(k);
      continue;
    }
    require(v.is_string(), where, "entry '" + k + "': expected a label id or a name");
    size_t used = 0;
    int64_t id = 0;
    try {
      id = std::stoll(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == k.size() && !k.empty(), where, "key '" + k + "': expected an integer label id");
    out[id].push_back(v.get<std::string>());
  }
}

/// Label id -> names it may be called by on the command line (first = display name).
/// Sources in dataset.json: a top-level "labels" table, meta.label_names, meta.labels
/// (see read_label_table); for task datasets the strategies ("S1", short name).
std::map<int64_t, std::vector<std::string>> label_names(const data::Dataset& ds) {
  std::map<int64_t, std::vector<std::string>> out;
  const std::string file = ds.dir() + "/dataset.json";
  const auto& info = ds.info();
  if (info.contains("labels")) read_label_table(info["labels"], file + ": field 'labels'", out);
  const auto meta = info.value("meta", nlohmann::json::object());
  if (meta.is_object())
    for (const char* key : {"label_names", "labels"})
      if (meta.contains(key)) read_label_table(meta[key], file + ": field 'meta." + key + "'", out);
  const std::string task = ds.task();
  if (task == "maze" || task == "sudoku") {
    auto spec = data::task_spec(task, int(meta.value("size", 8)));
    for (int s = 1; s <= data::TaskSpec::kStrategies; ++s) {
      auto& v = out[s];
      v.push_back("S" + std::to_string(s));
      v.push_back(spec.strategy_name(s));
    }
  }
  return out;
}

std::string display_name(const std::map<int64_t, std::vector<std::string>>& names, int64_t id) {
  auto it = names.find(id);
  if (it == names.end() || it->second.empty()) return std::to_string(id);
  std::string s = it->second[0];
  if (it->second.size() > 1) s += " (" + it->second[1] + ")";
  return s;
}

/// --label-positive: an integer id or a name from label_names().
int64_t parse_positive(const std::string& arg, const std::map<int64_t, std::vector<std::string>>& names) {
  size_t used = 0;
  int64_t id = 0;
  try {
    id = std::stoll(arg, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == arg.size() && !arg.empty()) {
    if (id < 0)
      throw InputError("--label-positive " + arg + ": expected a label id >= 0 or a label name (negative labels mark "
                       "unlabelled sequences)");
    return id;
  }
  std::vector<int64_t> ids;
  for (const auto& [k, v] : names)
    if (std::find(v.begin(), v.end(), arg) != v.end()) ids.push_back(k);
  if (ids.size() == 1) return ids[0];
  if (ids.size() > 1) {
    std::string which;
    for (auto k : ids) which += (which.empty() ? "" : ", ") + std::to_string(k);
    throw InputError("--label-positive '" + arg + "': names several labels of the dataset (ids " + which +
                     "); give the label id");
  }
  std::string known;
  for (const auto& [k, v] : names)
    for (const auto& n : v) known += (known.empty() ? "" : ", ") + n + "=" + std::to_string(k);
  throw InputError("--label-positive '" + arg + "': not an integer and not a label name of the dataset" +
                   (known.empty() ? std::string(" (dataset.json has no label names)") : " (known: " + known + ")"));
}

void plot_utilization(const std::string& png, const std::string& title, const analysis::Utilization& u) {
  auto share = u.share();
  std::vector<std::vector<std::string>> lab(u.depth, std::vector<std::string>(u.library_size));
  std::vector<std::string> rows, cols;
  double vmax = 0;
  for (int64_t d = 0; d < u.depth; ++d) {
    rows.push_back(std::to_string(d + 1));
    for (int64_t m = 0; m < u.library_size; ++m) {
      share[d][m] *= 100.0;  // colour scale in % like the cell labels
      lab[d][m] = std::to_string(int(std::lround(share[d][m])));
      vmax = std::max(vmax, share[d][m]);
    }
  }
  for (int64_t m = 0; m < u.library_size; ++m) cols.push_back("E" + std::to_string(m));
  util::plot_heatmap(png, title, share, rows, cols, u.library_size <= 32 ? lab : decltype(lab){}, "expert",
                     "routed depth", 0.0, std::max(vmax, 1e-9));
}

void plot_profile(const std::string& png, const analysis::Utilization& u) {
  auto prof = u.depth_profile();
  std::vector<std::vector<std::string>> lab(u.library_size, std::vector<std::string>(u.depth));
  std::vector<std::string> rows, cols;
  for (int64_t m = 0; m < u.library_size; ++m) {
    rows.push_back("E" + std::to_string(m));
    for (int64_t d = 0; d < u.depth; ++d) {
      prof[m][d] *= 100.0;  // colour scale in % like the cell labels
      lab[m][d] = std::to_string(int(std::lround(prof[m][d])));
    }
  }
  for (int64_t d = 0; d < u.depth; ++d) cols.push_back(std::to_string(d + 1));
  util::plot_heatmap(png, "Depth profile of each expert (% of its windows)", prof, rows, cols,
                     u.depth <= 32 ? lab : decltype(lab){}, "routed depth", "expert", 0.0, 100.0);
}

void plot_rocs(const std::string& out, const analysis::ProbeReport& rep, const std::string& label_desc) {
  for (const std::string level : {"window", "sequence"}) {
    std::vector<util::Series> series;
    for (const auto& r : rep.rows) {
      if (r.level != level || r.result.test_roc.empty()) continue;
      util::Series s;
      char buf[32];
      std::snprintf(buf, sizeof buf, " (AUROC %.3f)", r.result.test_auroc);
      s.name = r.name + buf;
      for (const auto& p : r.result.test_roc) {
        s.x.push_back(p.fpr);
        s.y.push_back(p.tpr);
      }
      series.push_back(std::move(s));
    }
    if (series.empty()) continue;
    series.push_back({"chance", {0.0, 1.0}, {0.0, 1.0}});
    util::plot_lines(out + "/roc_" + level + ".png", "Test ROC, " + level + " level: " + label_desc, series,
                     "false positive rate", "true positive rate");
  }
}

struct AnalyzeArgs {
  std::string model, data, out, split = "valid", device = "cpu", positive;
  int64_t max = 0, batch = 16, depth = 0, max_tokens = 0;
  int folds = 5;
  double test_fraction = 0.2;
  uint64_t seed = 0;
  bool no_shuffle = false, no_separation = false;
  bool positive_flag = false;  ///< --label-positive was given (even as "")
};

void run_analyze_routing(const AnalyzeArgs& a) {
  require(a.folds >= 2, "--folds", std::to_string(a.folds) + ": expected >= 2");
  require(a.test_fraction > 0 && a.test_fraction < 1, "--test-fraction",
          std::to_string(a.test_fraction) + ": expected 0 < value < 1");
  require(a.batch > 0, "--batch", std::to_string(a.batch) + ": expected > 0");
  auto dev = parse_device(a.device);
  const std::string model_dir = resolve_model_dir(a.model);
  nlohmann::json extra;
  auto model = load_lol(model_dir, dev, &extra);
  if (a.depth != 0) {
    require(a.depth >= 1 && a.depth <= model->config().core_depth, "--depth",
            std::to_string(a.depth) + ": expected 1 <= depth <= core_depth = " +
                std::to_string(model->config().core_depth));
    model->set_active_depth(a.depth);
  }
  require_routed_depth(model, model_dir, "routing analysis", "pass --depth D to run D routed depths");
  auto ds = data::Dataset::open(a.data);
  require_model_reads_dataset(model_dir, extra, model->config().vocab_size, ds, "--data " + a.data);
  auto names = label_names(ds);
  if (a.positive_flag && a.positive.empty())
    throw InputError("--label-positive '': expected a label id or name (leave the flag out for the automatic choice)");
  const int64_t positive_given = a.positive.empty() ? -1 : parse_positive(a.positive, names);
  auto split = ds.load(a.split);
  // The labels of the sequences the features will hold (the first --max, empty ones
  // have no windows), so that every check of them comes before the forward passes.
  std::vector<int64_t> seq_labels;
  for (int64_t j = 0, n = a.max > 0 ? std::min(a.max, split.size()) : split.size(); j < n; ++j)
    if (split.get(j).length > 0) seq_labels.push_back(split.get(j).label);
  require(!seq_labels.empty(), a.data, "split '" + a.split + "' has no non-empty sequences");
  std::set<int64_t> labels;
  int64_t labelled = 0;
  for (auto l : seq_labels)
    if (l >= 0) {
      labels.insert(l);
      ++labelled;
    }
  // Separation and the probes cross-validate over --folds folds of documents.
  std::string separation_skipped;
  if (labels.size() >= 2 && labelled < a.folds) {
    separation_skipped = "split '" + a.split + "' has " + std::to_string(labelled) +
                         " labelled sequences, fewer than --folds " + std::to_string(a.folds);
    require(positive_given < 0, "--folds", std::to_string(a.folds) + ": " + separation_skipped);
  }
  // A label held by one sequence is never both trained on and held out: the classifier's
  // accuracy on it would be measured without having seen it.
  if (labels.size() >= 2 && separation_skipped.empty()) {
    std::map<int64_t, int64_t> per_label;
    for (auto l : seq_labels)
      if (l >= 0) per_label[l]++;
    const auto single = std::find_if(per_label.begin(), per_label.end(), [](const auto& e) { return e.second < 2; });
    if (single != per_label.end())
      separation_skipped = "label " + std::to_string(single->first) + " has a single sequence in split '" + a.split +
                           "': cross-validation by document cannot both train on it and hold it out";
  }
  if (positive_given >= 0) {
    require(labels.count(positive_given) > 0, "--label-positive",
            "label " + std::to_string(positive_given) + " does not occur in split '" + a.split + "'");
    require(labels.size() >= 2, a.data, "split '" + a.split + "' has only one label: no negatives for the probes");
  }
  // The probes' positive label: --label-positive, else the larger of two labels.
  int64_t positive = -1;
  std::string why_not;
  if (labels.empty()) {
    why_not = "the split has no labels";
  } else if (positive_given >= 0) {
    positive = positive_given;
  } else if (labels.size() == 2) {
    positive = *labels.rbegin();
  } else {
    why_not = "labels take " + std::to_string(labels.size()) +
              " values: pass --label-positive NAME|ID to probe one label against the others";
  }
  if (positive >= 0) {
    // A held-out test split plus cross-validation need 2 x folds documents of each class.
    int64_t pos_docs = 0, neg_docs = 0;
    for (auto l : seq_labels) {
      pos_docs += l == positive;
      neg_docs += l >= 0 && l != positive;
    }
    if (pos_docs < 2 * a.folds || neg_docs < 2 * a.folds) {
      why_not = "label " + display_name(names, positive) + " vs rest has " + std::to_string(pos_docs) +
                " positive and " + std::to_string(neg_docs) + " negative labelled sequences; the probes need at least " +
                std::to_string(2 * a.folds) + " of each (2 x --folds " + std::to_string(a.folds) +
                ") for a held-out test split and cross-validation";
      require(positive_given < 0, "--label-positive " + a.positive, why_not);
      positive = -1;
    }
  }
  // Created before the forward passes (a path that cannot be a directory fails first);
  // removed again, while empty, when they fail.
  const bool out_existed = fs::exists(a.out);
  io::create_dirs(a.out, "--out");
  struct RemoveIfRefused {
    std::string dir;
    bool armed;
    ~RemoveIfRefused() {
      std::error_code ec;
      if (armed) fs::remove(dir, ec);  // an empty directory only
    }
  } refused_out{a.out, !out_existed};
  analysis::CollectOptions co;
  co.batch_size = a.batch;
  co.max_sequences = a.max;
  auto f = analysis::collect_routing_features(model, split, co, a.max_tokens);
  if (f.seq_label != seq_labels)
    throw std::logic_error("routing analysis: the features hold other sequences than the split's first non-empty ones");
  // The probes first: options they refuse (a --test-fraction that leaves too few
  // development documents) stop the command before anything is written.
  std::optional<analysis::ProbeReport> probes;
  if (positive >= 0) {
    std::vector<int> y(f.n_sequences());
    for (int64_t s = 0; s < f.n_sequences(); ++s) y[s] = f.seq_label[s] < 0 ? -1 : f.seq_label[s] == positive;
    analysis::ProbeOptions po;
    po.folds = a.folds;
    po.test_fraction = a.test_fraction;
    po.seed = a.seed;
    po.shuffle = !a.no_shuffle;
    probes = analysis::run_routing_probes(f, y, po);
  }
  refused_out.armed = false;
  const bool plots = util::gnuplot_available();
  if (!plots) std::cerr << "note: gnuplot not found, skipping PNGs (apt-get install gnuplot-nox)\n";

  // ---- utilization
  auto util_all = analysis::compute_utilization(f);
  nlohmann::json j = {{"format", "lol-routing-analysis"},
                      {"version", 1},
                      {"command",
                       {{"model", a.model}, {"data", a.data}, {"split", a.split}, {"max", a.max}, {"depth", f.depth}, {"max_tokens", a.max_tokens},
                        {"label_positive", a.positive}, {"folds", a.folds}, {"test_fraction", a.test_fraction},
                        {"seed", a.seed}}},
                      {"model_dir", model_dir},
                      {"sequences", f.n_sequences()},
                      {"window_items", f.n_windows()},
                      {"utilization", util_all.to_json()}};
  nlohmann::json by_label = nlohmann::json::object();
  for (auto l : labels) {
    auto u = analysis::compute_utilization(f, l);
    auto uj = u.to_json();
    uj["name"] = display_name(names, l);
    by_label[std::to_string(l)] = uj;
    if (plots && labels.size() <= 16)
      plot_utilization(a.out + "/utilization_label" + std::to_string(l) + ".png",
                       "Expert utilization, label " + display_name(names, l) + " (% of windows per depth)", u);
  }
  j["utilization_by_label"] = by_label;
  if (plots) {
    plot_utilization(a.out + "/utilization.png", "Expert utilization (% of windows per routed depth)", util_all);
    plot_profile(a.out + "/expert_depth_profile.png", util_all);
  }
  std::cout << "routing: " << f.n_sequences() << " sequences, " << f.n_windows() << " window items, "
            << f.depth << " routed depths, " << f.library_size << " experts\n";
  std::cout << "paths: " << util_all.n_distinct_paths << " distinct, entropy " << util_all.path_entropy_bits
            << " bits (max " << util_all.max_path_entropy_bits << ")\n";
  std::cout << "share of windows per depth (rows) and expert (columns), %:\n";
  auto share = util_all.share();
  for (int64_t d = 0; d < f.depth; ++d) {
    std::cout << "  depth " << d + 1 << ":";
    for (double s : share[d]) {
      char buf[16];
      std::snprintf(buf, sizeof buf, " %5.1f", 100 * s);
      std::cout << buf;
    }
    std::cout << "\n";
  }

  // ---- label separation of window paths (paper 4.1.1, Figure 3)
  if (!separation_skipped.empty() && !a.no_separation) {
    j["separation"] = nullptr;
    j["separation_skipped"] = separation_skipped;
    std::cout << "label separation skipped: " << separation_skipped << "\n";
  } else if (labels.size() >= 2 && !a.no_separation) {
    // The separation tables index labels by id ([labels] x [labels] confusion and distances).
    constexpr int64_t kMaxLabelId = 1023;
    require(*labels.rbegin() <= kMaxLabelId, a.data,
            "split '" + a.split + "': label id " + std::to_string(*labels.rbegin()) +
                ": label separation expects label ids in [0, " + std::to_string(kMaxLabelId) +
                "] (renumber the labels, or pass --no-separation)");
    std::vector<std::string> label_names;
    for (int64_t l = 0; l <= *labels.rbegin(); ++l) label_names.push_back(display_name(names, l));
    analysis::SeparationOptions so;
    so.folds = a.folds;
    so.seed = a.seed;
    so.shuffles = a.no_shuffle ? 0 : so.shuffles;
    auto sj = analysis::label_separation(f, label_names, so, a.out, plots);
    std::printf("\nlabel from window path (nearest centroid, %d-fold CV by document): accuracy %.3f, "
                "balanced %.3f, majority baseline %.3f",
                a.folds, sj["accuracy"].get<double>(),
                sj["balanced_accuracy"].is_null() ? NAN : sj["balanced_accuracy"].get<double>(),
                sj["majority_baseline"].get<double>());
    if (!a.no_shuffle)
      std::printf(", shuffled labels %.3f +- %.3f", sj["shuffled_accuracy_mean"].get<double>(),
                  sj["shuffled_accuracy_sd"].get<double>());
    std::printf("\n");
    std::cout << "nearest label centroid:";
    for (std::size_t l = 0; l < sj["labels"].size(); ++l)  // the labels that occur
      if (!sj["nearest_label"][l].is_null())
        std::cout << " " << sj["labels"][l].get<std::string>() << "->" << sj["nearest_label"][l].get<std::string>();
    std::cout << "\n";
    j["separation"] = sj;
  }

  // ---- probes
  if (positive < 0) {
    j["probes"] = nullptr;
    j["probes_skipped"] = why_not;
    std::cout << "probes skipped: " << why_not << "\n";
  } else {
    const auto& rep = *probes;
    const std::string desc = display_name(names, positive) + " vs rest";
    auto pj = rep.to_json();
    pj["positive_label"] = positive;
    pj["positive_name"] = display_name(names, positive);
    j["probes"] = pj;
    std::cout << "\nprobes: label " << desc << "\n" << rep.format_table();
    if (plots) plot_rocs(a.out, rep, desc);
  }
  io::write_file_atomic(a.out + "/routing.json", j.dump(1) + "\n");
  std::cout << "wrote " << a.out << "/routing.json" << (plots ? " and PNGs" : "") << "\n";
}

}  // namespace

void register_analyze(CLI::App& app) {
  auto* an = app.add_subcommand("analyze", "Analyses of trained models");
  an->require_subcommand(1);
  auto a = std::make_shared<AnalyzeArgs>();
  auto* r = an->add_subcommand(
      "routing", "Expert utilization, routing paths and label probes on router outputs (paper 4.1.2, App. C.2)");
  r->add_option("--model", a->model, "Checkpoint or run directory")->required();
  r->add_option("--data", a->data, "Tokenized dataset directory (lol data / lol corpus)")->required();
  r->add_option("--out", a->out, "Output directory: routing.json and PNGs")->required();
  r->add_option("--split", a->split, "Split to analyse")->default_val("valid");
  r->add_option("--label-positive", a->positive,
                "Label (id or name from dataset.json meta.label_names, or S1..S5 for task data) that is positive; "
                "all other labels are negative");
  r->add_option("--folds", a->folds, "Cross-validation folds on the development documents")->default_val(5);
  r->add_option("--test-fraction", a->test_fraction, "Share of documents held out for the test AUROC")
      ->default_val(0.2);
  r->add_option("--seed", a->seed, "Seed of the document-level splits (the shuffle control uses seed + 1)")
      ->default_val(0);
  r->add_flag("--no-shuffle", a->no_shuffle, "Skip the label-shuffling controls (of the probes and of label separation)");
  r->add_flag("--no-separation", a->no_separation,
              "Skip the multi-label separation score and PCA of window paths (run when >= 2 labels occur)");
  r->add_option("--depth", a->depth,
                "Routed depths to run, 1..core_depth (default: as trained; the active depth of a checkpoint saved "
                "while growing)")
      ->default_val(0);
  r->add_option("--max-tokens", a->max_tokens,
                "Cut longer sequences to their first N tokens (0 = the model's max_seq_len)")
      ->default_val(0);
  r->add_option("--max", a->max, "Use at most this many sequences (0 = all)")
      ->default_val(0)
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  r->add_option("--batch", a->batch, "Batch size of the forward passes")->default_val(16)->check(CLI::Range(1, 1 << 16));
  r->add_option("--device", a->device, "cpu, cuda or cuda:N")->default_val("cpu");
  r->callback([a, r] {
    a->positive_flag = r->count("--label-positive") > 0;
    run_analyze_routing(*a);
  });
}

}  // namespace lol::cli
