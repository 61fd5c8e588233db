#include "layerroute/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/finite.h"
#include "core/module_io.h"
#include "layerroute/cost.h"
#include "layerroute/decode.h"
#include "training/batcher.h"
#include "training/loss.h"
#include "util/error.h"
#include "util/json_finite.h"

namespace lol::layerroute {

double median(std::vector<double> v) {
  require(!v.empty(), "median", "no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {
// Sample indices grouped by Example::source, sources in order of first appearance.
void group_by_source(const std::vector<Example>& samples, std::vector<std::string>& names,
                     std::vector<std::vector<int64_t>>& groups) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto it = std::find(names.begin(), names.end(), samples[i].source);
    const size_t k = size_t(it - names.begin());
    if (it == names.end()) {
      names.push_back(samples[i].source);
      groups.emplace_back();
    }
    groups[k].push_back(int64_t(i));
  }
}
}  // namespace

std::vector<Example> select_heldout(const std::vector<Example>& heldout, int64_t n, uint64_t seed) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> members;
  group_by_source(heldout, names, members);
  const int64_t total = int64_t(heldout.size());
  if (n <= 0 || n > total) n = total;
  std::vector<Example> out;
  if (names.size() < 2) {
    const auto perm = training::epoch_permutation(total, seed, 0);
    for (int64_t i = 0; i < n; ++i) out.push_back(heldout[size_t(perm[size_t(i)])]);
    return out;
  }
  // Quotas: n / k each, the remainder to the first sources, then what a short source
  // cannot fill goes to the others in turn.
  const size_t k = names.size();
  std::vector<int64_t> quota(k, 0);
  for (int64_t left = n; left > 0;) {
    bool any = false;
    for (size_t s = 0; s < k && left > 0; ++s)
      if (quota[s] < int64_t(members[s].size())) {
        ++quota[s];
        --left;
        any = true;
      }
    if (!any) break;
  }
  std::vector<std::vector<int64_t>> picks(k);
  for (size_t s = 0; s < k; ++s) {
    // Each source's own permutation (epoch index = source index: independent draws).
    const auto perm = training::epoch_permutation(int64_t(members[s].size()), seed, int64_t(s));
    for (int64_t i = 0; i < quota[s]; ++i) picks[s].push_back(members[s][size_t(perm[size_t(i)])]);
  }
  for (int64_t i = 0; int64_t(out.size()) < n; ++i)
    for (size_t s = 0; s < k; ++s)
      if (i < int64_t(picks[s].size())) out.push_back(heldout[size_t(picks[s][size_t(i)])]);
  return out;
}

nlohmann::json EvalReport::to_json() const {
  nlohmann::json by_source = nlohmann::json::array();
  for (const auto& s : sources)
    by_source.push_back({{"source", s.source},
                         {"samples", s.samples},
                         {"ppl_base", s.ppl_base},
                         {"ppl_open", s.ppl_open},
                         {"ppl_gated", s.ppl_gated},
                         {"ppl_delta_vs_base", s.ppl_gated - s.ppl_base},
                         {"ppl_delta_vs_open", s.ppl_gated - s.ppl_open},
                         {"executed_mean", s.executed_mean},
                         {"ppl_gated_prompt", s.ppl_gated_prompt},
                         {"ppl_prompt_delta_vs_open", s.ppl_gated_prompt - s.ppl_open},
                         {"executed_mean_prompt", s.executed_mean_prompt}});
  return {{"n_layers", n_layers},
          {"sources", by_source},
          {"samples", samples},
          {"ppl_base", ppl_base},
          {"ppl_open", ppl_open},
          {"ppl_gated", ppl_gated},
          {"ppl_delta_vs_base", ppl_gated - ppl_base},
          {"ppl_delta_vs_open", ppl_gated - ppl_open},
          {"layer_sigma", layer_sigma},
          {"layer_open", layer_open},
          {"nontrivial", util::finite_or_null(nontrivial)},
          {"executed_mean", executed_mean},
          {"ppl_gated_prompt", ppl_gated_prompt},
          {"ppl_prompt_delta_vs_open", ppl_gated_prompt - ppl_open},
          {"executed_mean_prompt", executed_mean_prompt},
          {"ideal_speedup", util::finite_or_null(ideal_speedup)},
          {"decode_executed_mean", decode_executed_mean},
          {"decode_ideal_speedup", util::finite_or_null(decode_ideal_speedup)},
          {"flops_ideal_speedup", flops_ideal_speedup},
          {"flops_fixed_share", flops_fixed_share},
          {"ideal_speedup_fixed", ideal_speedup_fixed},
          {"speedup", speedup},
          {"speedup_over_ideal", util::finite_or_null(realized_over_ideal)},
          {"speedup_over_ideal_flops", realized_over_ideal_flops},
          {"speedup_over_ideal_fixed", ideal_speedup_fixed > 0 ? speedup / ideal_speedup_fixed : 0.0},
          {"t_open_ms", t_open_ms},
          {"t_gated_ms", t_gated_ms},
          {"t_closed_ms", t_closed_ms},
          {"timing_pairs", timing_pairs},
          {"pair_ratios", pair_ratios},
          {"pair_executed", pair_executed}};
}

namespace {
/// Prompt tokens a timed generation starts from (before the max_prompt cut): the
/// prompt, or the whole sample when it has none; at least one token.
int64_t timed_prompt_len(const Example& e) {
  return std::max<int64_t>(1, e.prompt_len > 0 ? e.prompt_len : int64_t(e.tokens.size()));
}
}  // namespace

EvalReport evaluate_layerroute(GatedModelImpl& m, const std::vector<Example>& samples, const EvalOptions& opt) {
  require(!samples.empty(), "layerroute eval", "no evaluation samples");
  require(opt.batch_size >= 1 && opt.repeats >= 1 && opt.new_tokens >= 1, "layerroute eval",
          "batch_size, repeats and new_tokens must be >= 1");
  require_examples_fit(samples, m.base->config().max_seq_len, "layerroute eval");
  m.eval();
  const int64_t L = m.n_layers();
  EvalReport r;
  r.n_layers = L;
  r.samples = int64_t(samples.size());
  const auto dev = m.base->embed_tokens->weight.device();
  // The timed generations keep each prompt's last max_prompt tokens (room for new_tokens);
  // the prompt-decided perplexity decides from the same tokens, timed or not.
  const int64_t room = m.base->config().max_seq_len - opt.new_tokens;
  require(room >= 1, "layerroute eval",
          "--new " + std::to_string(opt.new_tokens) + " leaves no room for a prompt within max_seq_len " +
              std::to_string(m.base->config().max_seq_len));
  const int64_t max_prompt = std::min(opt.max_prompt, room);
  // Cross-entropy sums per source (batches never mix sources), then the totals.
  struct Sums {
    double ce_base = 0, ce_open = 0, ce_gated = 0, ce_prompt = 0;
    int64_t samples = 0, targets = 0, executed = 0, executed_prompt = 0;
  };
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> groups;
  group_by_source(samples, names, groups);
  std::vector<Sums> by_source(names.size());
  auto sigma_sum = torch::zeros({L}, torch::kFloat64), open_sum = torch::zeros({L}, torch::kFloat64),
       flip_sum = torch::zeros({L}, torch::kFloat64);
  {
    torch::NoGradGuard ng;
    for (size_t g_i = 0; g_i < groups.size(); ++g_i) {
      const auto& grp = groups[g_i];
      auto& acc = by_source[g_i];
      for (size_t s = 0; s < grp.size(); s += size_t(opt.batch_size)) {
        std::vector<const Example*> rows;
        for (size_t k = s; k < std::min(grp.size(), s + size_t(opt.batch_size)); ++k)
          rows.push_back(&samples[size_t(grp[k])]);
        auto b = training::to_device(make_batch(rows), dev);
        GatedOptions base_o{GateMode::Open, false, false, {}}, open_o{GateMode::Open, false, true, {}},
            gated_o{opt.mode, false, true, {}};
        auto ce = [&](const torch::Tensor& logits, const char* model) {
          const double v = training::masked_ce_sum(logits, b.targets, b.target_mask).item<double>();
          require_finite(v, std::string("layerroute evaluation: the loss of the ") + model + " model");
          return v;
        };
        acc.ce_base += ce(m.forward(b.tokens, b.doc_ids, base_o).logits, "base");
        acc.ce_open += ce(m.forward(b.tokens, b.doc_ids, open_o).logits, "all-open adapted");
        auto g = m.forward(b.tokens, b.doc_ids, gated_o);
        acc.ce_gated += ce(g.logits, "gated");
        if (opt.mode == GateMode::Learned || opt.mode == GateMode::BiasOnly) {
          // The decisions the timed generation makes: each sample's prefill over the
          // prompt tokens it keeps (the last max_prompt; the whole sample when it has no
          // prompt), then the perplexity of the whole sample under them.
          std::vector<int64_t> decided;  // [rows, L] row-major
          for (size_t k = 0; k < rows.size(); ++k) {
            const Example& e = *rows[k];
            const int64_t plen = timed_prompt_len(e);
            const std::vector<int64_t> prompt(e.tokens.begin() + std::max<int64_t>(0, plen - max_prompt),
                                              e.tokens.begin() + plen);
            const auto gen = generate_gated(m, prompt, 0, opt.mode, true);
            decided.insert(decided.end(), gen.open.begin(), gen.open.end());
          }
          GatedOptions prompt_o = gated_o;
          prompt_o.forced_open = torch::tensor(decided).view({int64_t(rows.size()), L}) != 0;
          auto gp = m.forward(b.tokens, b.doc_ids, prompt_o);
          acc.ce_prompt += ce(gp.logits, "gated (prompt-decided)");
          acc.executed_prompt += gp.executed_blocks;
        } else {
          acc.ce_prompt += ce(g.logits, "gated");
          acc.executed_prompt += g.executed_blocks;
        }
        acc.samples += int64_t(rows.size());
        acc.targets += b.n_targets;
        acc.executed += g.executed_blocks;
        sigma_sum += g.sigma.sum(0).to(torch::kCPU, torch::kFloat64);
        open_sum += g.open.sum(0).to(torch::kCPU, torch::kFloat64);
        // Non-triviality: decision with the input term vs. bias only (same states).
        auto bias_open = gate_open(torch::sigmoid(m.gates->bias)).unsqueeze(0).expand_as(g.open);
        flip_sum += (g.open != bias_open).sum(0).to(torch::kCPU, torch::kFloat64);
      }
    }
  }
  Sums all;
  for (const auto& a : by_source) {
    all.ce_base += a.ce_base;
    all.ce_open += a.ce_open;
    all.ce_gated += a.ce_gated;
    all.ce_prompt += a.ce_prompt;
    all.executed_prompt += a.executed_prompt;
    all.targets += a.targets;
    all.executed += a.executed;
  }
  auto ppl = [](double ce, int64_t targets) { return std::exp(ce / double(std::max<int64_t>(targets, 1))); };
  if (names.size() >= 2)
    for (size_t g_i = 0; g_i < names.size(); ++g_i) {
      const auto& a = by_source[g_i];
      r.sources.push_back({names[g_i], a.samples, ppl(a.ce_base, a.targets), ppl(a.ce_open, a.targets),
                           ppl(a.ce_gated, a.targets), double(a.executed) / double(a.samples),
                           ppl(a.ce_prompt, a.targets), double(a.executed_prompt) / double(a.samples)});
    }
  const double n = double(samples.size());
  r.ppl_base = ppl(all.ce_base, all.targets);
  r.ppl_open = ppl(all.ce_open, all.targets);
  r.ppl_gated = ppl(all.ce_gated, all.targets);
  r.ppl_gated_prompt = ppl(all.ce_prompt, all.targets);
  const int64_t executed = all.executed;
  auto vec = [&](const torch::Tensor& t) {
    auto c = (t / n).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + L);
  };
  // A NaN gate score closes its gate (NaN > 0.5 is false): the report would be wrong.
  require_finite(sigma_sum, "layerroute evaluation: the gate probabilities sigma");
  r.layer_sigma = vec(sigma_sum);
  r.layer_open = vec(open_sum);
  r.nontrivial = vec(flip_sum);
  // Forced gates flip against the bias by the forcing, not by w_i . h: not a measure.
  if (opt.mode == GateMode::Open || opt.mode == GateMode::Closed)
    r.nontrivial.assign(size_t(L), std::numeric_limits<double>::quiet_NaN());
  r.executed_mean = double(executed) / n;
  r.executed_mean_prompt = double(all.executed_prompt) / n;
  r.ideal_speedup = r.executed_mean > 0 ? double(L) / r.executed_mean : std::numeric_limits<double>::infinity();

  if (opt.timing_samples <= 0) return r;
  // Timing on merged weights (no LoRA side path): the same kernels for both arms.
  baselines::DenseModel merged(m.base->config());
  load_module(*merged, module_state(*m.base), "layerroute eval (base copy)");
  merged->to(dev);
  m.lora->merge_into(*merged);
  merged->eval();
  GatedModel tm(merged, m.lora->config(), m.gates->config(), 0);
  {
    torch::NoGradGuard ng;
    tm->gates->weight.copy_(m.gates->weight);
    tm->gates->bias.copy_(m.gates->bias);
  }
  std::vector<double> t_open, t_gated, t_closed, ratios, ideal_plain, ideal_flops, over_plain, over_flops, fixed_share;
  double dec_exec = 0;
  const auto& cfg = m.base->config();
  const bool gates_evaluated = opt.mode == GateMode::Learned || opt.mode == GateMode::BiasOnly;
  const int64_t nts = std::min<int64_t>(opt.timing_samples, r.samples);
  // Warm-up (allocator, thread pool).
  {
    const auto& e = samples[0];
    std::vector<int64_t> p(e.tokens.begin(), e.tokens.begin() + std::max<int64_t>(1, std::min(e.prompt_len, max_prompt)));
    generate_gated(*tm, p, opt.new_tokens, GateMode::Open, false);
  }
  const std::vector<uint8_t> all_open(size_t(L), 1);
  for (int64_t s = 0; s < nts; ++s) {
    const auto& e = samples[size_t(s)];
    const int64_t plen = timed_prompt_len(e);
    const int64_t start = std::max<int64_t>(0, plen - max_prompt);
    std::vector<int64_t> prompt(e.tokens.begin() + start, e.tokens.begin() + plen);
    const auto open_cost = generation_cost(cfg, int64_t(prompt.size()), opt.new_tokens, all_open, false);
    fixed_share.push_back(open_cost.fixed_flops / open_cost.total());
    for (int64_t k = 0; k < opt.repeats; ++k) {
      Generation go, gg;
      if (k % 2 == 0) {
        go = generate_gated(*tm, prompt, opt.new_tokens, GateMode::Open, false);
        gg = generate_gated(*tm, prompt, opt.new_tokens, opt.mode, false);
      } else {
        gg = generate_gated(*tm, prompt, opt.new_tokens, opt.mode, false);
        go = generate_gated(*tm, prompt, opt.new_tokens, GateMode::Open, false);
      }
      require(go.executed_layers == L, "layerroute eval", "forced-open run did not execute every layer");
      const double ratio = go.seconds / gg.seconds;
      const double plain = gg.executed_layers > 0 ? double(L) / double(gg.executed_layers)
                                                  : std::numeric_limits<double>::infinity();
      const double fl = open_cost.total() /
                        generation_cost(cfg, int64_t(prompt.size()), opt.new_tokens, gg.open, gates_evaluated).total();
      t_open.push_back(go.seconds);
      t_gated.push_back(gg.seconds);
      ratios.push_back(ratio);
      ideal_plain.push_back(plain);
      ideal_flops.push_back(fl);
      if (std::isfinite(plain)) over_plain.push_back(ratio / plain);  // no layer run: no ratio to it
      over_flops.push_back(ratio / fl);
      r.pair_executed.push_back(gg.executed_layers);
      dec_exec += double(gg.executed_layers);
    }
    t_closed.push_back(generate_gated(*tm, prompt, opt.new_tokens, GateMode::Closed, false).seconds);
  }
  r.timing_pairs = int64_t(ratios.size());
  r.pair_ratios = ratios;
  r.speedup = median(ratios);
  r.t_open_ms = 1e3 * median(t_open);
  r.t_gated_ms = 1e3 * median(t_gated);
  r.t_closed_ms = 1e3 * median(t_closed);
  r.decode_executed_mean = dec_exec / double(ratios.size());
  r.decode_ideal_speedup = median(ideal_plain);
  r.flops_ideal_speedup = median(ideal_flops);
  r.realized_over_ideal = over_plain.empty() ? std::numeric_limits<double>::quiet_NaN() : median(over_plain);
  r.realized_over_ideal_flops = median(over_flops);
  r.flops_fixed_share = median(fixed_share);
  const double t_layer = (r.t_open_ms - r.t_closed_ms) / double(L);
  r.ideal_speedup_fixed = t_layer > 0 ? r.t_open_ms / (r.t_closed_ms + r.decode_executed_mean * t_layer) : 0;
  return r;
}

}  // namespace lol::layerroute
