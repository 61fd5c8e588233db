#include "layerroute/protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "layerroute/adapter_io.h"
#include "util/json_fields.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::layerroute {

nlohmann::json to_json(const SeedResult& r) {
  return {{"seed", r.seed},
          {"train_seconds", r.train_seconds},
          {"last_step", to_json(r.last)},
          {"eval", r.report.to_json()}};
}

namespace {
// Loads out_dir/seed-<s>/ of an earlier run into `m` and `r` (seed, training time, last
// step); false when the directory holds no adapter.
bool load_trained_seed(const ProtocolOptions& opt, const std::string& dir, GatedModelImpl& m, SeedResult& r) {
  if (!fs::exists(fs::path(dir) / "layerroute.json")) return false;
  const auto where = dir + "/layerroute.json";
  const auto info = read_adapter_info(dir);
  require(to_json(info.lora) == to_json(opt.lora) && to_json(info.gates) == to_json(opt.gates), where,
          "LoRA / gate config differs from this run's; remove the directory or drop --reuse");
  std::error_code ec;
  if (!info.base_dir.empty() && !fs::equivalent(info.base_dir, opt.base_dir, ec))
    throw InputError(where + ": trained on base " + info.base_dir + ", this run's is " + opt.base_dir +
                     "; remove the directory or drop --reuse");
  try {
    const auto& e = info.extra;
    require(e.at("seed").get<uint64_t>() == r.seed, where, "seed differs from the directory's");
    // Records since session 24 hold every training option and the --max-len.
    if (e.contains("train")) {
      TrainOptions want = opt.train;
      want.seed = r.seed;
      // Fields a record lacks count as differences; fields this build no longer writes do not.
      nlohmann::json there = nlohmann::json::object();
      const auto w = to_json(want);
      for (const auto& it : w.items())
        if (e.at("train").contains(it.key())) there[it.key()] = e.at("train").at(it.key());
      const std::string differ = util::json_difference(there, w);
      require(differ.empty(), where, "trained with other options (" + differ + "); remove the directory or drop --reuse");
    }
    if (e.contains("max_len") && opt.max_len > 0)
      require(e.at("max_len").get<int64_t>() == opt.max_len, where,
              "samples were cut to --max-len " + e.at("max_len").dump() + ", this run's is " +
                  std::to_string(opt.max_len) + "; remove the directory or drop --reuse");
    // Records before session 28 hold no loss_tokens: they counted assistant tokens.
    const std::string loss = e.contains("loss_tokens") ? e.at("loss_tokens").get<std::string>() : "assistant";
    require(loss == loss_tokens_name(opt.loss_tokens), where,
            "the loss counted --loss-tokens " + loss + ", this run's is " + loss_tokens_name(opt.loss_tokens) +
                "; remove the directory or drop --reuse");
    for (const auto& [key, value] : opt.data_record.items())
      if (e.contains(key))
        require(e.at(key) == value, where,
                "samples were rendered with " + key + " " + e.at(key).dump() + ", this run's is " + value.dump() +
                    "; remove the directory or drop --reuse");
    const auto& l = e.at("last_step");
    require(l.at("step").get<int64_t>() == opt.train.steps, where,
            "trained for " + l.at("step").dump() + " steps, this run asks for " + std::to_string(opt.train.steps));
    r.train_seconds = e.at("train_seconds").get<double>();
    r.last.step = l.at("step").get<int64_t>();
    r.last.lm_loss = l.at("lm_loss").get<double>();
    r.last.gate_mean = l.at("gate_mean").get<double>();
    r.last.lr = l.at("lr").get<double>();
    r.last.grad_norm = l.at("grad_norm").get<double>();
    r.last.layer_sigma = l.at("layer_sigma").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& ex) {
    throw InputError(where + ": 'extra' is not a protocol seed record (" + ex.what() + ")");
  }
  load_adapter_weights(m, dir);
  return true;
}
}  // namespace

void check_protocol_out_dir(const ProtocolOptions& opt) {
  if (opt.out_dir.empty()) return;
  const std::string where = "--out " + opt.out_dir;
  require(!(opt.reuse_trained && opt.overwrite), where, "--reuse and --overwrite exclude each other");
  std::error_code ec;
  if (!fs::exists(opt.out_dir, ec)) return;
  require(fs::is_directory(opt.out_dir, ec), where, "a file (expected the protocol's output directory)");
  if (opt.reuse_trained || opt.overwrite || fs::is_empty(opt.out_dir, ec)) return;
  // What an earlier protocol left there, named in the message (seed directories first).
  std::vector<std::string> seeds, files;
  for (const auto& e : fs::directory_iterator(opt.out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && name.rfind("seed-", 0) == 0) seeds.push_back(name + "/");
    else if (name == "protocol.json" || name == "tables.md") files.push_back(name);
  }
  std::sort(seeds.begin(), seeds.end());
  std::sort(files.begin(), files.end());
  seeds.insert(seeds.end(), files.begin(), files.end());
  std::string held;
  for (size_t i = 0; i < seeds.size() && i < 6; ++i) held += (i ? ", " : "") + seeds[i];
  if (seeds.size() > 6) held += ", ...";
  throw InputError(where + ": not empty" +
                   (held.empty() ? std::string() : " (it holds an earlier protocol's " + held + ")") +
                   "; pass --reuse to evaluate its trained seeds again, --overwrite to train every seed again and "
                   "replace them, or choose a new directory");
}

std::vector<SeedResult> run_protocol(const ProtocolOptions& opt, const std::vector<Example>& train,
                                     const std::vector<Example>& heldout,
                                     const std::function<void(const SeedResult&)>& on_seed) {
  check_protocol_out_dir(opt);
  require(opt.seeds >= 1, "layerroute protocol", "--seeds must be >= 1");
  require(!train.empty() && !heldout.empty(), "layerroute protocol", "training and held-out data must be non-empty");
  std::vector<SeedResult> out;
  for (int64_t k = 0; k < opt.seeds; ++k) {
    SeedResult r;
    r.seed = opt.first_seed + uint64_t(k);
    GatedModel m(load_base_model(opt.base_dir), opt.lora, opt.gates, r.seed);
    const auto seed_dir = (fs::path(opt.out_dir) / ("seed-" + std::to_string(r.seed))).string();
    if (!(opt.reuse_trained && !opt.out_dir.empty() && load_trained_seed(opt, seed_dir, *m, r))) {
      LayerRouteTrainable tr(m, opt.base_dir);
      TrainOptions to = opt.train;
      to.seed = r.seed;
      const auto t0 = std::chrono::steady_clock::now();
      r.last = train_layerroute(tr, train, to);
      r.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    m->eval();
    // Held-out selection seeded by the run's seed, equal shares per source.
    r.report = evaluate_layerroute(*m, select_heldout(heldout, opt.eval_samples, r.seed), opt.eval);
    if (!opt.out_dir.empty()) {
      auto extra = to_json(r);
      TrainOptions used = opt.train;
      used.seed = r.seed;
      extra["train"] = to_json(used);
      if (opt.max_len > 0) extra["max_len"] = opt.max_len;
      extra["loss_tokens"] = loss_tokens_name(opt.loss_tokens);
      for (const auto& [key, value] : opt.data_record.items()) extra[key] = value;
      save_adapter(*m, seed_dir, opt.base_dir, extra);
    }
    if (on_seed) on_seed(r);
    out.push_back(std::move(r));
  }
  return out;
}

namespace {
/// "m% +- s%" over the finite values of `v` (a seed whose gated runs executed no layer
/// has no layer-ratio realized/ideal), "n/a" when none is.
std::string percent_mean_std(const std::vector<double>& v);

void mean_std(const std::vector<double>& v, double& mean, double& sd) {
  mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  sd = 0;
  for (double x : v) sd += (x - mean) * (x - mean);
  sd = v.size() > 1 ? std::sqrt(sd / double(v.size() - 1)) : 0.0;
}
std::string percent_mean_std(const std::vector<double>& v) {
  std::vector<double> finite;
  for (double x : v)
    if (std::isfinite(x)) finite.push_back(x);
  if (finite.empty()) return "n/a";
  double m, s;
  mean_std(finite, m, s);
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << 100 * m << "% +- " << 100 * s;
  if (finite.size() < v.size()) o << " (" << finite.size() << " of " << v.size() << " seeds)";
  return o.str();
}
}  // namespace

std::string protocol_tables(const std::vector<SeedResult>& rs, LossTokens loss_tokens) {
  require(!rs.empty(), "protocol tables", "no results");
  std::ostringstream o;
  o << std::fixed;
  o << "Perplexities count " << (loss_tokens == LossTokens::All ? "every token" : "the assistant tokens")
    << " (--loss-tokens " << loss_tokens_name(loss_tokens) << "). \"prompt-decided\": each sample's gates decided "
       "from the prompt tokens the timed generation keeps, as generation decides them.\n\n";
  o << "| seed | train s | final LM loss | gate mean | executed layers | ideal (layers) | ideal (FLOPs) | "
       "wall-clock speedup | realized / ideal (layers) | realized / ideal (FLOPs) | ppl backbone | ppl open | "
       "ppl gated | delta vs backbone | delta vs open | ppl gated (prompt-decided) | executed (prompt-decided) |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  // Without timing (--timing-samples 0) the executed layers and the layer-ratio ideal are
  // the perplexity forward's, and the timing columns are "-".
  bool timed = true;
  for (const auto& r : rs) timed = timed && r.report.timing_pairs > 0;
  std::vector<double> sp, ppl_db, ppl_do, ppl_dp, ex, ratio, ratio_f;
  for (const auto& r : rs) {
    const auto& e = r.report;
    const double ri = e.realized_over_ideal, rf = e.realized_over_ideal_flops;
    const double executed = timed ? e.decode_executed_mean : e.executed_mean;
    o << "| " << r.seed << " | " << std::setprecision(0) << r.train_seconds << " | " << std::setprecision(3)
      << r.last.lm_loss << " | " << r.last.gate_mean << " | " << std::setprecision(2) << executed << " / "
      << e.n_layers << " | " << std::setprecision(3) << (timed ? e.decode_ideal_speedup : e.ideal_speedup) << "x | ";
    if (timed) {
      o << e.flops_ideal_speedup << "x | " << e.speedup << "x | " << std::setprecision(1);
      if (std::isfinite(ri)) o << 100 * ri << "% | ";
      else o << "n/a | ";
      o << 100 * rf << "% | ";
    } else {
      o << "- | - | - | - | ";
    }
    o << std::setprecision(3) << e.ppl_base << " | " << e.ppl_open << " | " << e.ppl_gated << " | " << std::showpos
      << e.ppl_gated - e.ppl_base << " | " << e.ppl_gated - e.ppl_open << std::noshowpos << " | " << e.ppl_gated_prompt
      << " | " << std::setprecision(2) << e.executed_mean_prompt << " / " << e.n_layers << " |\n";
    sp.push_back(e.speedup);
    ppl_db.push_back(e.ppl_gated - e.ppl_base);
    ppl_do.push_back(e.ppl_gated - e.ppl_open);
    ppl_dp.push_back(e.ppl_gated_prompt - e.ppl_open);
    ex.push_back(executed);
    ratio.push_back(ri);
    ratio_f.push_back(rf);
  }
  double m, s;
  o << "\nOver " << rs.size() << " seeds (mean +- std):";
  if (timed) {
    mean_std(sp, m, s);
    o << std::setprecision(3) << " speedup " << m << " +- " << s << " (min " << *std::min_element(sp.begin(), sp.end())
      << ", max " << *std::max_element(sp.begin(), sp.end()) << ");";
    o << " realized/ideal (layers) " << percent_mean_std(ratio) << ";";
    o << " realized/ideal (FLOPs) " << percent_mean_std(ratio_f) << ";";
  } else {
    o << " no wall-clock timing (--timing-samples 0);";
  }
  mean_std(ex, m, s);
  o << std::setprecision(2) << " executed layers " << m << " +- " << s << ";";
  mean_std(ppl_db, m, s);
  o << std::setprecision(3) << " ppl delta vs backbone " << std::showpos << m << std::noshowpos << " +- " << s << ";";
  mean_std(ppl_do, m, s);
  o << " ppl delta vs open " << std::showpos << m << std::noshowpos << " +- " << s << ";";
  mean_std(ppl_dp, m, s);
  o << " prompt-decided ppl delta vs open " << std::showpos << m << std::noshowpos << " +- " << s << ".\n\n";

  // Paper Table 3: perplexity delta (gated - full, the same LoRA) per evaluation split.
  const auto& src = rs[0].report.sources;
  if (!src.empty()) {
    o << "| source | samples | ppl open | ppl gated | delta vs open (mean +- std) | negative in | delta vs backbone "
         "(mean +- std) | prompt-decided delta vs open (mean +- std) |\n|---|---|---|---|---|---|---|---|\n";
    for (size_t k = 0; k < src.size(); ++k) {
      std::vector<double> po, pg, d_open, d_base, d_prompt;
      int64_t negative = 0;
      for (const auto& r : rs) {
        const auto& e = r.report.sources;
        require(k < e.size() && e[k].source == src[k].source, "protocol tables",
                "seeds were evaluated on different sources");
        po.push_back(e[k].ppl_open);
        pg.push_back(e[k].ppl_gated);
        d_open.push_back(e[k].ppl_gated - e[k].ppl_open);
        d_base.push_back(e[k].ppl_gated - e[k].ppl_base);
        d_prompt.push_back(e[k].ppl_gated_prompt - e[k].ppl_open);
        negative += d_open.back() < 0;
      }
      double mo, so, mg, sg, md, sd, mb, sb, mp, sp_;
      mean_std(d_prompt, mp, sp_);
      mean_std(po, mo, so);
      mean_std(pg, mg, sg);
      mean_std(d_open, md, sd);
      mean_std(d_base, mb, sb);
      o << "| " << (src[k].source.empty() ? "(none)" : src[k].source) << " | " << src[k].samples << " | "
        << std::setprecision(3) << mo << " | " << mg << " | " << std::showpos << md << std::noshowpos << " +- " << sd
        << " | " << negative << " / " << rs.size() << " seeds | " << std::showpos << mb << std::noshowpos << " +- "
        << sb << " | " << std::showpos << mp << std::noshowpos << " +- " << sp_ << " |\n";
    }
    o << "\n";
  }

  const int64_t L = rs[0].report.n_layers;
  o << "| layer | gate mean (sigma) | std over seeds | open share | non-trivial share |\n|---|---|---|---|---|\n";
  for (int64_t i = 0; i < L; ++i) {
    std::vector<double> sg, op, nt;
    for (const auto& r : rs) {
      sg.push_back(r.report.layer_sigma[size_t(i)]);
      op.push_back(r.report.layer_open[size_t(i)]);
      nt.push_back(r.report.nontrivial[size_t(i)]);
    }
    double ms, ss, mo, so, mn, sn;
    mean_std(sg, ms, ss);
    mean_std(op, mo, so);
    mean_std(nt, mn, sn);
    o << "| " << i << " | " << std::setprecision(3) << ms << " | " << std::setprecision(4) << ss << " | "
      << std::setprecision(2) << mo << " | ";
    if (std::isnan(mn)) o << "n/a (gates forced) |\n";
    else o << mn << " |\n";
  }
  return o.str();
}

}  // namespace lol::layerroute
