#include "baselines/compare.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "baselines/flops.h"
#include "dataset/shards.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "training/batcher.h"
#include "training/schedule.h"
#include "training/train_checkpoint.h"
#include "training/trainer.h"
#include "util/error.h"
#include "util/gnuplot.h"
#include "util/json_fields.h"

namespace fs = std::filesystem;

namespace lol::baselines {

namespace {

struct BatchSource {
  data::Dataset ds;
  data::SplitData split;
  std::unique_ptr<training::Batcher> batcher;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string human(double x) {
  const char* units[] = {"", "K", "M", "G", "T", "P", "E"};
  int u = 0;
  while (std::abs(x) >= 1000 && u < 6) {
    x /= 1000;
    ++u;
  }
  return fmt("%.3g", x) + units[u];
}

}  // namespace

nlohmann::json CompareEntry::to_json() const {
  return {{"name", name},
          {"config", config},
          {"architecture", architecture},
          {"parameters", parameters},
          {"active_parameters_per_token", active_parameters},
          {"steps", steps},
          {"tokens", tokens},
          {"flops", flops},
          {"planned_flops", planned_flops},
          {"train_loss_last_10pct", train_loss},
          {"last_train_loss", last_train_loss},
          {"valid_loss", valid_loss},
          {"wall_s", wall_s}};
}

FlopsPlanner::FlopsPlanner(const training::RunConfig& cfg, training::TrainableModel& model) : cfg_(cfg), model_(model) {
  auto src = std::make_shared<BatchSource>(BatchSource{data::Dataset::open(cfg.data.dir), {}, nullptr});
  src->split = src->ds.load(cfg.data.train_split);
  training::BatchLayout layout{cfg.data.batch_size, cfg.data.seq_len, cfg.data.packing == "pack"};
  // The trainer's own batcher arguments (trainer.cpp): same seed, shuffled, wrapping.
  src->batcher = std::make_unique<training::Batcher>(src->split, layout, uint64_t(cfg.train.seed), true, true,
                                                     cfg.data.dir + " split '" + cfg.data.train_split + "'");
  auto* b = src->batcher.get();
  next_ = [b] { return b->next(); };
  state_ = src;
}

void FlopsPlanner::extend(int64_t steps) {
  while (int64_t(steps_.size()) < steps) {
    StepShape s;
    for (int64_t i = 0; i < cfg_.train.grad_accum; ++i) {
      auto mb = next_();
      s.micro.push_back({mb.tokens.size(1), mb.n_tokens});
    }
    steps_.push_back(std::move(s));
  }
}

double FlopsPlanner::step_flops(int64_t step, int64_t total) {
  const int64_t growable = model_.growable_depth();
  if (growable > 0) model_.set_active_depth(training::grown_depth(cfg_.grow, growable, step, total));
  double f = 0;
  for (const auto& [T, n] : steps_[step].micro) f += model_.train_flops_per_token(T) * double(n);
  return f;
}

double FlopsPlanner::run_flops(int64_t steps) {
  extend(steps);
  const int64_t saved = model_.active_depth();
  double f = 0;
  for (int64_t s = 0; s < steps; ++s) f += step_flops(s, steps);
  if (model_.growable_depth() > 0) model_.set_active_depth(saved);
  return f;
}

int64_t FlopsPlanner::steps_for(double budget, int64_t max_steps) {
  if (!(budget > 0)) throw InputError("--flops " + fmt("%g", budget) + ": expected a positive FLOPs budget");
  int64_t hi = 1;
  while (run_flops(hi) < budget) {
    if (hi >= max_steps)
      throw InputError("--flops " + fmt("%g", budget) + ": needs more than " + std::to_string(max_steps) +
                       " steps for " + cfg_.train.out + " (one step costs about " +
                       fmt("%.3g", run_flops(1)) + " FLOPs)");
    hi = std::min(max_steps, hi * 2);
  }
  int64_t lo = hi / 2;  // run_flops(lo) < budget (or lo = 0)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (run_flops(mid) >= budget ? hi : lo) = mid;
  }
  return hi;
}

namespace {

struct Curve {
  std::vector<double> flops, loss;
  double valid_loss = -1;
  int64_t tokens = 0, steps = 0;
  double total_flops = 0;
  double elapsed = 0;  ///< training seconds of the last step, summed over resumed sessions
};

Curve read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the run's metrics");
  Curve c;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("valid_loss")) {
      c.valid_loss = j["valid_loss"].get<double>();
    } else if (j.contains("loss") && !j.contains("nonfinite")) {
      c.flops.push_back(j["flops"].get<double>());
      c.loss.push_back(j["loss"].get<double>());
    }
    if (j.contains("tokens")) c.tokens = std::max(c.tokens, j["tokens"].get<int64_t>());
    if (j.contains("flops")) c.total_flops = std::max(c.total_flops, j["flops"].get<double>());
    if (j.contains("step")) c.steps = std::max(c.steps, j["step"].get<int64_t>());
    if (j.contains("elapsed") && j["elapsed"].is_number()) c.elapsed = std::max(c.elapsed, j["elapsed"].get<double>());
  }
  return c;
}

}  // namespace

std::string compare_markdown(const std::vector<CompareEntry>& es, double budget) {
  std::string s = "| model | architecture | parameters | active params/token | steps | tokens | training FLOPs | "
                  "train loss (last 10%) | valid loss | wall time (s) |\n"
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& e : es) {
    s += "| " + e.name + " | " + e.architecture + " | " + human(double(e.parameters)) + " | " +
         human(double(e.active_parameters)) + " | " + std::to_string(e.steps) + " | " + human(double(e.tokens)) + " | " +
         human(e.flops) + " | " + fmt("%.4f", e.train_loss) + " | " +
         (e.valid_loss >= 0 ? fmt("%.4f", e.valid_loss) : std::string("-")) + " | " + fmt("%.0f", e.wall_s) + " |\n";
  }
  s += "\nBudget: " + human(budget) + " training FLOPs per model (" + fmt("%.4g", budget) + ").\n";
  return s;
}

CompareResult run_compare(const CompareOptions& opt) {
  if (opt.configs.empty()) throw InputError("--configs: expected at least one run config");
  if (opt.data_dir.empty()) throw InputError("--data: expected a dataset directory");
  if (opt.out_dir.empty()) throw InputError("--out: expected an output directory");
  if (!(opt.flops_budget > 0)) throw InputError("--flops " + fmt("%g", opt.flops_budget) + ": expected > 0");
  // What the comparison sets itself cannot be overridden (it was dropped silently).
  for (const auto& o : opt.overrides) {
    const std::string key = o.substr(0, o.find('='));
    const std::string owner = key == "data.dir"      ? "--data"
                              : key == "train.out"   ? "--out (OUT/<config name>)"
                              : key == "train.steps" ? "--flops (each model's steps are planned to the budget)"
                                                     : "";
    if (!owner.empty())
      throw InputError("--set " + o + ": compare sets " + key + " from " + owner + "; leave it out of --set");
  }
  const fs::path plan_path = fs::path(opt.out_dir) / "compare_plan.json";
  if (opt.resume && !fs::exists(plan_path))
    throw InputError("--resume: --out " + opt.out_dir + " holds no comparison (no compare_plan.json); start one without --resume");
  if (!opt.resume && fs::exists(plan_path))
    throw InputError("--out " + opt.out_dir + ": holds a comparison (compare_plan.json): continue it with --resume, or choose another --out");
  // Load and check every config before training anything.
  std::vector<training::RunConfig> cfgs;
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& path : opt.configs) {
    const std::string name = fs::path(path).stem().string();
    if (!seen.insert(name).second)
      throw InputError("--configs: two configs are named '" + name + "' (file stems must differ)");
    auto ov = opt.overrides;
    ov.push_back("data.dir=" + opt.data_dir);
    ov.push_back("train.out=" + (fs::path(opt.out_dir) / name).string());
    // The budget plans train.steps; until then the config's own value (which may be
    // smaller than its schedule's warmup) stands in at the largest allowed, and the
    // warmup is checked against the planned steps below.
    ov.push_back("train.steps=" + std::to_string(opt.max_steps));
    auto cfg = training::RunConfig::load(path, ov);
    if (!cfg.init_from.empty())
      throw InputError(path + ": field 'init_from' = \"" + cfg.init_from +
                       "\": lol compare trains each model from a new initialisation, planned from its 'model' section "
                       "(expected a 'model' section)");
    if (!cfgs.empty()) {
      const auto& ref = cfgs.front();
      const auto a = ref.to_json(), b = cfg.to_json();
      if (a["data"] != b["data"])
        throw InputError(path + ": section 'data' = " + b["data"].dump() + " differs from " + opt.configs.front() +
                         "'s " + a["data"].dump() + ": every model must see the same batches");
      if (ref.train.seed != cfg.train.seed || ref.train.grad_accum != cfg.train.grad_accum)
        throw InputError(path + ": train.seed / train.grad_accum differ from " + opt.configs.front() +
                         "'s: every model must see the same batches in the same order");
      if (ref.train.eval_batches != cfg.train.eval_batches)
        throw InputError(path + ": train.eval_batches = " + std::to_string(cfg.train.eval_batches) + " differs from " +
                         opt.configs.front() + "'s " + std::to_string(ref.train.eval_batches) +
                         ": every model's validation loss must be measured on the same batches");
    }
    if (!opt.resume && (fs::exists(fs::path(cfg.train.out) / "latest") || !training::list_checkpoints(cfg.train.out).empty()))
      throw InputError("--out " + opt.out_dir + ": " + cfg.train.out +
                       " already holds a run (continue the comparison with --resume, or choose another --out)");
    cfgs.push_back(std::move(cfg));
    names.push_back(name);
  }
  // Plan steps per model.
  auto ds = data::Dataset::open(opt.data_dir);
  std::vector<CompareEntry> entries;
  for (size_t i = 0; i < cfgs.size(); ++i) {
    auto& cfg = cfgs[i];
    training::BatchLayout layout{cfg.data.batch_size, cfg.data.seq_len, cfg.data.packing == "pack"};
    const int64_t seq = layout.pack ? cfg.data.seq_len : std::max<int64_t>(cfg.data.seq_len, 1);
    auto model = training::make_model(cfg.model, opt.configs[i] + ": model", ds.vocab_size(), seq,
                                      uint64_t(cfg.train.seed));
    FlopsPlanner plan(cfg, *model);
    CompareEntry e;
    e.name = names[i];
    e.config = opt.configs[i];
    e.architecture = model->architecture();
    const auto cm = cost_model_from_json(model->config_json(), opt.configs[i]);
    e.parameters = model->num_parameters();
    e.active_parameters = cm.active_parameters;
    e.steps = plan.steps_for(opt.flops_budget, opt.max_steps);
    e.planned_flops = plan.run_flops(e.steps);
    cfg.train.steps = e.steps;
    if (cfg.schedule.warmup_steps > e.steps)
      throw InputError(opt.configs[i] + ":schedule: field 'warmup_steps' = " + std::to_string(cfg.schedule.warmup_steps) +
                       ": expected <= the " + std::to_string(e.steps) + " steps planned for --flops " +
                       fmt("%g", opt.flops_budget) + " (e.g. --set schedule.warmup_steps=" +
                       std::to_string(e.steps / 10) + ")");
    entries.push_back(e);
    if (opt.progress)
      std::fprintf(stderr, "lol compare: %s (%s, %s parameters): %lld steps, %s FLOPs planned\n", e.name.c_str(),
                   e.architecture.c_str(), human(double(e.parameters)).c_str(), (long long)e.steps,
                   human(e.planned_flops).c_str());
  }

  // The plan: what --resume must find unchanged (every model's resolved run config
  // with its planned steps, and the command's own settings).
  nlohmann::json plan = {{"flops_budget", opt.flops_budget}, {"data", opt.data_dir},     {"configs", opt.configs},
                         {"overrides", opt.overrides},       {"max_steps", opt.max_steps}, {"models", nlohmann::json::array()}};
  for (size_t i = 0; i < cfgs.size(); ++i) {
    auto run = cfgs[i].to_json();
    run["train"].erase("progress");
    plan["models"].push_back({{"name", names[i]}, {"steps", entries[i].steps}, {"run", run}});
  }
  if (opt.resume) {
    // Field by field (JSON pointers: "/models/1/run/optim/lr = 0.01 there, 0.02 here").
    const nlohmann::json there = io::read_json_file(plan_path.string()).flatten(), here = plan.flatten();
    const std::string diff = util::json_difference(there, here);
    if (!diff.empty())
      throw InputError("--resume: " + plan_path.string() + ": the comparison there differs from this command (" + diff +
                       ")");
  }
  fs::create_directories(opt.out_dir);  // after every refusal: a refused comparison writes nothing
  if (!opt.resume) io::write_file_atomic(plan_path.string(), plan.dump(2) + "\n");
  CompareResult result;
  std::vector<util::Series> curves;
  for (size_t i = 0; i < cfgs.size(); ++i) {
    auto& e = entries[i];
    cfgs[i].train.progress = opt.progress;
    // --resume: a model with a checkpoint continues from it (a finished one trains no
    // further step); one killed before its first checkpoint starts again.
    const bool started = opt.resume && !training::list_checkpoints(cfgs[i].train.out).empty();
    if (!started && opt.resume && fs::exists(cfgs[i].train.out)) fs::remove_all(cfgs[i].train.out);
    const auto r = training::run_training(cfgs[i], started ? cfgs[i].train.out : "", opt.hooks);
    if (r.interrupted) {
      result.interrupted = true;
      break;
    }
    const Curve c = read_metrics(cfgs[i].train.out + "/metrics.jsonl");
    e.wall_s = c.elapsed;
    e.tokens = c.tokens;
    e.flops = c.total_flops;
    e.valid_loss = c.valid_loss;
    if (!c.loss.empty()) {
      const size_t k = std::max<size_t>(1, c.loss.size() / 10);
      double s = 0;
      for (size_t j = c.loss.size() - k; j < c.loss.size(); ++j) s += c.loss[j];
      e.train_loss = s / double(k);
      e.last_train_loss = c.loss.back();
    }
    curves.push_back({e.name, c.flops, c.loss});
    // Tables after every model, so a partial comparison is readable.
    nlohmann::json j = {{"flops_budget", opt.flops_budget}, {"data", opt.data_dir}, {"models", nlohmann::json::array()}};
    for (size_t k = 0; k <= i; ++k) j["models"].push_back(entries[k].to_json());
    io::write_file_atomic(opt.out_dir + "/compare.json", j.dump(2) + "\n");
    std::vector<CompareEntry> done(entries.begin(), entries.begin() + int64_t(i) + 1);
    io::write_file_atomic(opt.out_dir + "/compare.md", compare_markdown(done, opt.flops_budget));
    result.entries.push_back(e);
  }
  if (result.interrupted) return result;
  if (util::gnuplot_available())
    util::plot_lines(opt.out_dir + "/loss_vs_flops.png", "training loss vs training FLOPs", curves,
                     "training FLOPs", "training loss", /*logx=*/true, /*logy=*/false);
  return result;
}

}  // namespace lol::baselines
