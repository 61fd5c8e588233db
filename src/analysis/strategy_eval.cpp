#include "analysis/strategy_eval.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/finite.h"
#include "dataset/judge.h"
#include "util/error.h"
#include "util/progress.h"

namespace lol::analysis {

std::vector<std::vector<int64_t>> generate_full_recompute(LoLModel& model, const std::vector<PromptSpec>& prompts,
                                                          const RoutingPath* force, int64_t max_new, int64_t eos) {
  torch::NoGradGuard ng;
  model->eval();
  const auto dev = model->model->embed_tokens->weight.device();
  std::vector<std::vector<int64_t>> out(prompts.size());
  std::vector<bool> done(prompts.size(), false);
  for (int64_t step = 0; step < max_new; ++step) {
    std::vector<size_t> live;
    for (size_t i = 0; i < prompts.size(); ++i)
      if (!done[i]) live.push_back(i);
    if (live.empty()) break;
    int64_t T = 0;
    for (auto i : live) T = std::max<int64_t>(T, int64_t(prompts[i].tokens.size() + out[i].size()));
    const int64_t B = int64_t(live.size());
    auto tokens = torch::zeros({B, T}, torch::kInt64);
    auto doc = torch::full({B, T}, -1, torch::kInt64);
    auto ro = torch::zeros({B, T}, torch::kBool);
    auto pl = torch::zeros({B}, torch::kInt64);
    auto last = torch::zeros({B, 1}, torch::kInt64);
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = prompts[live[b]];
      const auto& g = out[live[b]];
      int64_t n = 0;
      for (size_t t = 0; t < p.tokens.size(); ++t, ++n) {
        tokens[b][n] = p.tokens[t];
        ro[b][n] = p.router_only.empty() ? false : p.router_only[t] != 0;
        doc[b][n] = 0;
      }
      for (auto t : g) {
        tokens[b][n] = t;
        doc[b][n] = 0;
        ++n;
      }
      pl[b] = p.prompt_len;
      last[b][0] = n - 1;
    }
    LoLBatch batch{tokens.to(dev), pl.to(dev), ro.to(dev), doc.to(dev)};
    ForwardOptions fo;
    fo.force = force;
    fo.logits_at = last.to(dev);
    auto logits = model->forward(batch, fo).logits.squeeze(1);  // [B, V]
    require_finite(logits, "strategy evaluation: the logits");
    auto next = logits.argmax(-1).to(torch::kCPU);
    for (int64_t b = 0; b < B; ++b) {
      int64_t t = next[b].item<int64_t>();
      out[live[b]].push_back(t);
      if (t == eos) done[live[b]] = true;
    }
  }
  return out;
}

nlohmann::json StrategyMetrics::to_json() const {
  auto pct = [&](int64_t x) { return n ? 100.0 * double(x) / double(n) : 0.0; };
  return {{"n", n},
          {"strategy_as_requested", pct(as_requested)},
          {"trace_legal", pct(legal)},
          {"trace_rule_faithful", pct(faithful)},
          {"answer_correct", pct(correct)},
          {"trajectory_correct", pct(trajectory)},
          {"padding", n ? padding_sum / double(n) : 0.0}};
}

nlohmann::json StrategyEvalResult::to_json(const data::TaskSpec& spec) const {
  nlohmann::json j;
  j["task"] = spec.name;
  j["filler"] = filler;
  // Rows: the forced strategies S1..S5 (confusion_rows); columns: the strategy the trace
  // follows, "none" first (confusion_columns).
  j["confusion"] = std::vector<std::vector<int64_t>>(confusion.begin() + 1, confusion.end());
  j["confusion_rows"] = {"S1", "S2", "S3", "S4", "S5"};
  j["confusion_columns"] = {"none", "S1", "S2", "S3", "S4", "S5"};
  j["max_new_tokens"] = max_new_tokens;
  j["capped_generations"] = capped_generations;
  nlohmann::json f = nlohmann::json::object(), u = nlohmann::json::object();
  StrategyMetrics fa, ua;
  for (const auto& [s, m] : forced) {
    f["S" + std::to_string(s)] = m.to_json();
  }
  for (const auto& [s, m] : unforced) u["S" + std::to_string(s)] = m.to_json();
  j["forced"] = f;
  j["unforced"] = u;
  auto avg = [](const std::map<int, StrategyMetrics>& ms, const char* key) {
    double s = 0;
    int n = 0;
    for (const auto& [k, m] : ms) {
      s += m.to_json()[key].get<double>();
      n++;
    }
    return n ? s / n : 0.0;
  };
  for (const char* key :
       {"strategy_as_requested", "trace_legal", "trace_rule_faithful", "answer_correct", "trajectory_correct", "padding"}) {
    j["forced_mean"][key] = avg(forced, key);
    if (!unforced.empty()) j["unforced_mean"][key] = avg(unforced, key);
  }
  j["seconds"] = seconds;
  j["generated_tokens"] = generated_tokens;
  j["samples"] = samples;
  return j;
}

std::string StrategyEvalResult::format(const data::TaskSpec& spec) const {
  std::ostringstream o;
  o << "Confusion matrix (rows: forced mode path; columns: strategy the generated trace follows; % of puzzles)\n";
  o << std::setw(24) << std::left << "forced \\ follows";
  for (const char* c : {"none", "S1", "S2", "S3", "S4", "S5"}) o << std::setw(7) << std::right << c;
  o << "\n";
  for (int s = 1; s <= 5; ++s) {
    std::string name = "S" + std::to_string(s) + " " + spec.strategy_name(s);
    o << std::setw(24) << std::left << name;
    int64_t n = 0;
    for (auto x : confusion[s]) n += x;
    for (int f = 0; f <= 5; ++f) {
      double p = n ? 100.0 * double(confusion[s][f]) / double(n) : 0.0;
      o << std::setw(7) << std::right << std::fixed << std::setprecision(1) << p;
    }
    o << "\n";
  }
  auto table = [&](const std::map<int, StrategyMetrics>& ms, const std::string& title) {
    o << "\n" << title << "\n";
    // Percentages per strategy; padding is a fraction in the JSON, shown in %.
    const char* keys[6] = {"strategy_as_requested", "trace_legal", "trace_rule_faithful", "answer_correct",
                           "trajectory_correct", "padding"};
    const int widths[6] = {11, 9, 10, 9, 12, 9};
    o << std::setw(24) << std::left << "strategy" << std::setw(10) << std::right << "n" << std::setw(11) << "requested"
      << std::setw(9) << "legal" << std::setw(10) << "faithful" << std::setw(9) << "correct" << std::setw(12)
      << "trajectory" << std::setw(9) << "padding\n";
    double sums[6] = {0, 0, 0, 0, 0, 0};
    for (const auto& [s, m] : ms) {
      auto j = m.to_json();
      o << std::setw(24) << std::left << ("S" + std::to_string(s) + " " + spec.strategy_name(s)) << std::setw(10)
        << std::right << m.n << std::fixed << std::setprecision(1);
      for (int c = 0; c < 6; ++c) {
        const double v = j[keys[c]].get<double>() * (c == 5 ? 100.0 : 1.0);
        sums[c] += v;
        o << std::setw(widths[c]) << v;
      }
      o << "\n";
    }
    double k = ms.empty() ? 1.0 : double(ms.size());
    o << std::setw(24) << std::left << "mean" << std::setw(10) << " " << std::fixed << std::setprecision(1)
      << std::right;
    for (int c = 0; c < 6; ++c) o << std::setw(widths[c]) << sums[c] / k;
    o << "\n";
  };
  table(forced, "Forced mode path, label replaced by the neutral filler (" + filler + ") (%)");
  if (!unforced.empty()) table(unforced, "Unforced, true label in context (%)");
  return o.str();
}

std::string neutral_label(const data::TaskSpec& spec, int strategy) {
  const auto label = tasks::split_tokens(spec.label(strategy));
  const auto filler = tasks::split_tokens(spec.filler_label);
  if (label.size() < 2 || label.front() != "[" || label.back() != "]")
    throw InputError(spec.name + ": strategy label '" + spec.label(strategy) + "' is not bracketed by '[' and ']'");
  if (filler.size() != 3 || filler.front() != "[" || filler.back() != "]")
    throw InputError(spec.name + ": filler label '" + spec.filler_label + "' must be '[ token ]'");
  std::string out = "[";
  for (size_t i = 1; i + 1 < label.size(); ++i) out += " " + filler[1];
  return out + " ]";
}

namespace {
struct Puzzle {
  std::string question;
  std::map<int, tasks::Example> by_strategy;
  std::string where;  ///< "file:line" of its first record
};

std::vector<Puzzle> read_puzzles(const std::string& path, int64_t n) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open test file");
  std::vector<Puzzle> out;
  std::map<std::string, size_t> index;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw InputError(path + ":" + std::to_string(lineno) + ": not valid JSON: " + e.what());
    }
    auto e = data::example_from_json(j, path + ":" + std::to_string(lineno));
    auto it = index.find(e.question);
    if (it == index.end()) {
      if (int64_t(out.size()) >= n) continue;
      index[e.question] = out.size();
      out.push_back({e.question, {}, path + ":" + std::to_string(lineno)});
      it = index.find(e.question);
    }
    out[it->second].by_strategy[e.strategy] = e;
  }
  return out;
}
}  // namespace

StrategyEvalResult evaluate_strategies(LoLModel& model, const data::TaskSpec& spec,
                                       const std::map<int, RoutingPath>& paths, const std::string& jsonl,
                                       const StrategyEvalOptions& opt, const GenerateFn& generate) {
  auto t0 = std::chrono::steady_clock::now();
  auto puzzles = read_puzzles(jsonl, opt.n_puzzles);
  if (puzzles.empty()) throw InputError(jsonl + ": no puzzles");
  const int64_t eos = spec.vocab.id("<eos>");
  int64_t max_new = opt.max_new_tokens;
  if (max_new <= 0) {
    int64_t longest = 0;
    for (const auto& p : puzzles)
      for (const auto& [s, e] : p.by_strategy)
        longest = std::max<int64_t>(longest, int64_t(tasks::split_tokens(e.trace + " " + e.answer).size()));
    max_new = longest + longest / 4 + 8;
  }
  StrategyEvalResult res;
  res.confusion.assign(6, std::vector<int64_t>(6, 0));  // row 0 unused: rows are the forced strategies 1..5

  struct Job {
    size_t puzzle;
    int strategy;
    bool forced;
  };
  std::vector<Job> jobs;
  for (int s = 1; s <= 5; ++s) {
    if (!paths.count(s)) throw InputError("no mode path for strategy S" + std::to_string(s));
    for (size_t p = 0; p < puzzles.size(); ++p) jobs.push_back({p, s, true});
  }
  if (opt.unforced)
    for (int s = 1; s <= 5; ++s)
      for (size_t p = 0; p < puzzles.size(); ++p) jobs.push_back({p, s, false});

  res.filler = opt.filler.empty() ? "length-matched " + spec.filler_label : opt.filler;
  // The prompt of a puzzle under a label, tokenized (question, label, "R :").
  auto tokenize_prompt = [&](const std::string& question, const std::string& label) {
    tasks::Example e;
    e.question = question;
    e.label = label;
    e.trace = "R :";
    e.answer = "A : <eos>";
    return spec.tokenize(e);
  };
  // Every question in the task's vocabulary and a valid puzzle (the verifier's own
  // check), before any generation: a malformed test puzzle is the data's fault, not a
  // wrong generation.
  int64_t longest_prompt = 0;
  for (const auto& p : puzzles) {
    try {
      longest_prompt = std::max(longest_prompt, int64_t(tokenize_prompt(p.question, spec.label(1)).prompt_len));
      spec.verify(p.question + " " + spec.label(1), 1, "R : A : <eos>");
    } catch (const InputError& err) {
      throw InputError(p.where + ": field 'question': " + err.what());
    }
  }
  // Generation stops at the model's context (max_seq_len positions): a trace cut there
  // has no <eos> and is judged as such; results count the capped generations.
  const int64_t context = model->config().max_seq_len;
  if (longest_prompt >= context)
    throw InputError(jsonl + ": a prompt of " + std::to_string(longest_prompt) + " tokens leaves no room in the model's " +
                     "max_seq_len = " + std::to_string(context));
  res.max_new_tokens = max_new;
  if (!opt.filler.empty() && !puzzles.empty()) {  // checked before any generation
    try {
      tokenize_prompt(puzzles[0].question, opt.filler);
    } catch (const InputError& err) {
      throw InputError("filler '" + opt.filler + "' (--filler): " + err.what());
    }
  }
  auto prompt_for = [&](const Job& j) {
    const std::string label =
        !j.forced ? spec.label(j.strategy) : (opt.filler.empty() ? neutral_label(spec, j.strategy) : opt.filler);
    const std::string& question = puzzles[j.puzzle].question;
    auto te = tokenize_prompt(question, label);
    PromptSpec p;
    p.tokens.assign(te.ids.begin(), te.ids.begin() + te.prompt_len);
    p.router_only.assign(te.router_only.begin(), te.router_only.begin() + te.prompt_len);
    p.prompt_len = te.prompt_len;
    return std::make_pair(p, question + " " + label);
  };

  // Every prompt as generated (the forced ones hold the filler) must leave room for a token.
  for (const Job& j : jobs) {
    const int64_t n = int64_t(prompt_for(j).first.tokens.size());
    if (n >= context)
      throw InputError(puzzles[j.puzzle].where + ": the prompt of S" + std::to_string(j.strategy) +
                       (j.forced ? " (forced, with the filler)" : "") + " has " + std::to_string(n) +
                       " tokens, leaving no room in the model's max_seq_len = " + std::to_string(context));
  }
  ProgressBar bar("eval strategies", int64_t(jobs.size()), opt.progress);
  int64_t done = 0;
  // Group jobs by (forced, strategy) so that one forced path serves a whole batch.
  for (size_t start = 0; start < jobs.size();) {
    size_t end = start;
    std::vector<PromptSpec> prompts;
    std::vector<std::string> questions;
    while (end < jobs.size() && int64_t(prompts.size()) < opt.batch_size && jobs[end].forced == jobs[start].forced &&
           jobs[end].strategy == jobs[start].strategy) {
      auto [p, q] = prompt_for(jobs[end]);
      prompts.push_back(std::move(p));
      questions.push_back(std::move(q));
      ++end;
    }
    const Job& j0 = jobs[start];
    const RoutingPath* force = j0.forced ? &paths.at(j0.strategy) : nullptr;
    // Each row's room: min(max_new, context - its own prompt). Rows of equal room run
    // together, so that no row is cut to the room of a longer prompt beside it (the
    // verdicts do not depend on --batch); a task's prompts have one length, one call.
    std::vector<int64_t> room(prompts.size());
    std::map<int64_t, std::vector<size_t>> by_room;
    for (size_t i = 0; i < prompts.size(); ++i) {
      room[i] = std::min(max_new, context - int64_t(prompts[i].tokens.size()));
      by_room[room[i]].push_back(i);
    }
    std::vector<std::vector<int64_t>> gen(prompts.size());
    for (const auto& [limit, rows] : by_room) {
      std::vector<PromptSpec> part;
      for (size_t i : rows) part.push_back(prompts[i]);
      auto out = generate(model, part, force, limit, eos);
      for (size_t k = 0; k < rows.size(); ++k) gen[rows[k]] = std::move(out.at(k));
    }
    for (size_t i = 0; i < gen.size(); ++i) {
      const Job& j = jobs[start + i];
      std::vector<int32_t> ids(gen[i].begin(), gen[i].end());
      std::string text;
      for (size_t t = 0; t < ids.size(); ++t) {
        if (ids[t] < 0 || ids[t] >= spec.vocab.size()) continue;
        text += (t ? " " : "") + spec.vocab.token(ids[t]);
      }
      res.generated_tokens += int64_t(ids.size());
      if (room[i] < max_new && int64_t(ids.size()) >= room[i] &&
          std::find(ids.begin(), ids.end(), int32_t(eos)) == ids.end())
        res.capped_generations++;
      tasks::Verdict v;
      try {
        v = spec.verify(questions[i], j.strategy, text);
      } catch (const std::exception& e) {
        v.error = e.what();
      }
      auto& m = (j.forced ? res.forced : res.unforced)[j.strategy];
      m.add(v);
      if (j.forced) res.confusion[j.strategy][std::clamp(v.followed_strategy, 0, 5)]++;
      if (j.puzzle < 2)
        res.samples.push_back({{"forced", j.forced},
                               {"strategy", j.strategy},
                               {"question", questions[i]},
                               {"generated", text},
                               {"reference", puzzles[j.puzzle].by_strategy.count(j.strategy)
                                                 ? puzzles[j.puzzle].by_strategy.at(j.strategy).trace + " " +
                                                       puzzles[j.puzzle].by_strategy.at(j.strategy).answer
                                                 : ""},
                               {"verdict", data::verdict_json(v)}});
    }
    done += int64_t(gen.size());
    bar.update(done);
    start = end;
  }
  bar.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace lol::analysis
