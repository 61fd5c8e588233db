// `lol layerroute train|eval` (issue 11, LayerRoute paper seed 004):
//   train --base DIR --data TRAIN.jsonl --out ADAPTER_DIR      gates + LoRA on a frozen model
//   eval  --adapter DIR --data HELDOUT.jsonl                    perplexity, gates, non-triviality, wall clock
//   eval  --base DIR --train-data T.jsonl --data H.jsonl --seeds N --out DIR   the N-seed protocol + tables
// merge, render and generate are in cmd_layerroute_tools.cpp, the flags and inputs they
// share in layerroute_cmd.h. See docs/layerroute.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/layerroute_cmd.h"
#include "cli/model_dir.h"
#include "core/runtime.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "layerroute/adapter_io.h"
#include "layerroute/data.h"
#include "layerroute/decode.h"
#include "layerroute/eval.h"
#include "layerroute/protocol.h"
#include "layerroute/train.h"
#include "tokenizers/hf_json.h"
#include "training/metrics_log.h"
#include "training/train_checkpoint.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace fs = std::filesystem;

namespace lol::cli {
namespace layerroute_cmd {
namespace {

struct ModelArgs {
  int64_t rank = 8;
  double alpha = 16;
  std::string targets = "q_proj,k_proj,v_proj,o_proj";
  std::vector<int64_t> band{8, 16, 24};
  double bias_band = -1, bias_outside = 1;
};

void add_model_flags(CLI::App* c, ModelArgs& m) {
  c->add_option("--rank", m.rank, "LoRA rank r");
  c->add_option("--alpha", m.alpha, "LoRA alpha (scale alpha / r)");
  c->add_option("--targets", m.targets, "comma-separated LoRA targets");
  c->add_option("--band", m.band, "skip band FIRST LAST DEPTH (scaled to the model's depth)")->expected(3);
  c->add_option("--bias-band", m.bias_band, "initial gate bias inside the band");
  c->add_option("--bias-outside", m.bias_outside, "initial gate bias outside the band");
}

layerroute::LoraConfig lora_cfg(const ModelArgs& a) {
  layerroute::LoraConfig c;
  c.rank = a.rank;
  c.alpha = a.alpha;
  c.targets.clear();
  std::stringstream ss(a.targets);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) c.targets.push_back(t);
  c.validate("--rank/--alpha/--targets");
  return c;
}

layerroute::GateConfig gate_cfg(const ModelArgs& a) {
  layerroute::GateConfig g;
  g.band_first = a.band.at(0);
  g.band_last = a.band.at(1);
  g.band_depth = a.band.at(2);
  g.bias_band = a.bias_band;
  g.bias_outside = a.bias_outside;
  g.validate("--band");
  return g;
}

void add_train_flags(CLI::App* c, layerroute::TrainOptions& t) {
  c->add_option("--steps", t.steps, "optimizer steps");
  c->add_option("--batch", t.batch_size, "samples per micro-batch");
  c->add_option("--accum", t.grad_accum, "micro-batches per step");
  c->add_option("--lr", t.lr, "peak learning rate (cosine)");
  c->add_option("--warmup", t.warmup_steps, "linear warmup steps");
  c->add_option("--weight-decay", t.weight_decay, "AdamW weight decay");
  c->add_option("--clip", t.clip, "gradient-norm clip (0 = off)");
  c->add_option("--lambda", t.lambda, "gate regularisation weight");
  c->add_option("--log-every", t.log_every, "log every N steps")->check(CLI::Range(int64_t(1), int64_t(1) << 40));
}

void add_eval_flags(CLI::App* c, layerroute::EvalOptions& e, std::string& gates) {
  c->add_option("--gates", gates, "learned | open | bias-only | closed");
  c->add_option("--timing-samples", e.timing_samples, "samples timed (0 = no timing)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  c->add_option("--repeats", e.repeats, "timed open/gated pairs per sample")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  c->add_option("--new", e.new_tokens, "generated tokens per timed run")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  c->add_option("--max-prompt", e.max_prompt, "prompt tokens kept for timing")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  c->add_option("--eval-batch", e.batch_size, "samples per perplexity forward")->check(CLI::Range(int64_t(1), int64_t(1) << 16));
}

void write_text(const std::string& path, const std::string& s) {
  io::AtomicFile f(path);
  f.write(s);
  f.commit();
}

void print_report(const layerroute::EvalReport& r) {
  std::cout << std::fixed << std::setprecision(4) << "samples " << r.samples << ", layers " << r.n_layers << "\n"
            << "perplexity  backbone " << r.ppl_base << "  open " << r.ppl_open << "  gated " << r.ppl_gated
            << "  (gated - backbone " << std::showpos << r.ppl_gated - r.ppl_base << ", gated - open "
            << r.ppl_gated - r.ppl_open << std::noshowpos << ")\n"
            << "executed layers per sample " << r.executed_mean << " -> ideal speedup " << r.ideal_speedup << "x\n"
            << "gates decided from the prompt (as generation decides): perplexity " << r.ppl_gated_prompt
            << " (gated - open " << std::showpos << r.ppl_gated_prompt - r.ppl_open << std::noshowpos
            << "), executed layers per sample " << r.executed_mean_prompt << "\n";
  for (const auto& s : r.sources)
    std::cout << "  source " << (s.source.empty() ? "(none)" : s.source) << ": " << s.samples
              << " samples, perplexity backbone " << s.ppl_base << "  open " << s.ppl_open << "  gated " << s.ppl_gated
              << "  (gated - open " << std::showpos << s.ppl_gated - s.ppl_open << std::noshowpos << "), executed "
              << s.executed_mean << "; prompt-decided gated " << s.ppl_gated_prompt << ", executed "
              << s.executed_mean_prompt << "\n";
  if (r.timing_pairs > 0) {
    std::ostringstream over_layers;  // a ratio to an infinite ideal (no layer run) is undefined
    if (std::isfinite(r.realized_over_ideal)) over_layers << std::fixed << std::setprecision(4) << 100 * r.realized_over_ideal << "%";
    else over_layers << "n/a (no layer executed)";
    std::cout << "generation: " << r.timing_pairs << " pairs, executed " << r.decode_executed_mean
              << " layers; ideal speedup " << r.decode_ideal_speedup << "x (layer ratio), " << r.flops_ideal_speedup
              << "x (FLOPs, LM head " << 100 * r.flops_fixed_share << "% of the open run), " << r.ideal_speedup_fixed
              << "x (measured fixed time)\n"
              << "median t_open " << r.t_open_ms << " ms, t_gated " << r.t_gated_ms << " ms, t_closed " << r.t_closed_ms
              << " ms; wall-clock speedup " << r.speedup << "x; realized / ideal " << over_layers.str()
              << " (layer ratio), " << 100 * r.realized_over_ideal_flops << "% (FLOPs)\n";
  }
  std::cout << "layer  sigma  open  non-trivial\n";
  for (int64_t i = 0; i < r.n_layers; ++i) {
    const double nontrivial = r.nontrivial[size_t(i)];
    std::cout << std::setw(5) << i << "  " << std::setprecision(3) << r.layer_sigma[size_t(i)] << "  "
              << std::setprecision(2) << r.layer_open[size_t(i)] << "  ";
    if (std::isnan(nontrivial)) std::cout << "n/a (gates forced)\n";
    else std::cout << nontrivial << "\n";
  }
}

/// 64-bit FNV-1a over the training examples as trained on (token ids, loss masks, prompt
/// lengths): a resumed run must see the same data, tokenizer, --system and --max-len.
std::string examples_fingerprint(const std::vector<layerroute::Example>& ex) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& e : ex) {
    mix(e.tokens.size());
    for (auto t : e.tokens) mix(uint64_t(int64_t(t)));
    for (auto m : e.loss_mask) mix(uint64_t(m));
    mix(uint64_t(e.prompt_len));
  }
  std::ostringstream o;
  o << std::hex << std::setw(16) << std::setfill('0') << h;
  return o.str();
}

/// `j`'s fields flattened to dotted paths ("train.lr"), so that a difference names the
/// field rather than a whole section.
nlohmann::json flat_fields(const nlohmann::json& j) {
  nlohmann::json f = nlohmann::json::object();
  if (!j.is_object()) return f;
  const auto flattened = j.flatten();
  for (const auto& [k, v] : flattened.items()) {
    std::string key = k.substr(k.empty() ? 0 : 1);
    std::replace(key.begin(), key.end(), '/', '.');
    f[key] = v;
  }
  return f;
}

/// json_difference of a checkpoint's run.json (`recorded`) and this command's (`now`),
/// by field path. Fields newer builds record (log_every) are not compared when
/// `recorded` lacks them: a checkpoint of an older build does not say, and is accepted.
std::string resume_difference(const nlohmann::json& recorded, const nlohmann::json& now) {
  const auto there = flat_fields(recorded);
  auto here = flat_fields(now);
  for (const char* added : {"log_every"})
    if (!there.contains(added)) here.erase(added);
  return util::json_difference(there, here);
}

void register_train_cmd(CLI::App* lr) {
  struct A {
    std::string base, data, out;
    uint64_t seed = 0;
    int threads = 0;
    int64_t save_every = 100;
    bool no_progress = false, overwrite = false, resume = false;
    DataArgs d;
    ModelArgs m;
    layerroute::TrainOptions t;
  };
  auto a = std::make_shared<A>();
  auto* c = lr->add_subcommand("train", "train skip gates + LoRA on a frozen dense model");
  c->add_option("--base", a->base, "base model: Hugging Face folder (Qwen2, Qwen3, Llama, Mistral, Phi-3, Gemma 1-3, OLMo 2-3, GPT-2, GPT-NeoX, Phi-1/1.5/2, StableLM, Falcon, GPT-J, StarCoder2, GPT-BigCode, Granite, Cohere, OPT) or dense checkpoint")->required();
  c->add_option("--data", a->data, "training JSONL (messages / conversations / question+answer)")->required();
  c->add_option("--out", a->out, "adapter directory to write")->required();
  c->add_option("--seed", a->seed, "seeds gates, adapters and batch order");
  c->add_option("--threads", a->threads, "CPU threads (0 = default)");
  c->add_flag("--no-progress", a->no_progress, "no progress bar");
  auto* overwrite = c->add_flag("--overwrite", a->overwrite,
                                "replace the adapter in a non-empty --out (it is kept until the new one is written) "
                                "and drop an unfinished training's checkpoint");
  c->add_option("--save-every", a->save_every,
                "checkpoint every N steps into OUT/train_state (0 = only on SIGINT/SIGTERM)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  c->add_flag("--resume", a->resume,
              "continue the unfinished training in --out from its checkpoint (same flags; bit-identical result)")
      ->excludes(overwrite);
  add_data_flags(c, a->d);
  add_model_flags(c, a->m);
  add_train_flags(c, a->t);
  c->callback([a] {
    init_runtime(a->threads);
    if (a->out.empty()) throw InputError("--out: empty path (expected the adapter directory to write)");
    a->t.validate("layerroute train");  // before anything is read or written (--steps 0 leaves no partial log)
    a->base = resolve_base(a->base);
    std::error_code ec;
    const fs::path out(a->out), state_dir = out / "train_state";
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      throw InputError("--out " + a->out + ": a file (expected the adapter directory to write)");
    // A complete checkpoint without `latest` is unfinished too (killed before the pointer was written).
    const bool unfinished = fs::exists(state_dir / "latest", ec) || !training::list_checkpoints(state_dir.string()).empty();
    if (a->resume && !unfinished)
      throw InputError("--resume: --out " + a->out + " holds no unfinished training (no train_state/latest); " +
                       (fs::exists(out / "layerroute.json") ? "its training finished" : "start one without --resume"));
    if (!a->resume && fs::exists(out, ec) && !fs::is_empty(out, ec) && !a->overwrite)
      throw InputError("--out " + a->out + ": not empty" +
                       (unfinished ? " (it holds an unfinished training: continue it with --resume)"
                        : fs::exists(out / "layerroute.json") ? " (it holds an adapter)"
                                                               : std::string()) +
                       "; pass --overwrite to replace it, or choose a new directory");
    for (const char* f : {"config.json", "latest", "dataset.json"})
      if (fs::exists(out / f))
        throw InputError("--out " + a->out + ": holds " + f + " (a model, run or dataset, not an adapter); choose a new directory");
    const auto tok = open_tokenizer(a->base, a->d);
    auto train = load_examples(a->data, tok, a->d);
    layerroute::GatedModel m(layerroute::load_base_model(a->base), lora_cfg(a->m), gate_cfg(a->m), a->seed);
    layerroute::LayerRouteTrainable tr(m, a->base);
    auto t = a->t;
    t.seed = a->seed;
    t.progress = !a->no_progress;
    const nlohmann::json extra = {
        {"train", layerroute::to_json(t)}, {"data", a->data}, {"max_len", a->d.max_len}, {"system", a->d.system},
        {"loss_tokens", a->d.loss_tokens},
        {"tokenizer", tokenizer_record(a->d)}, {"chat_format", tok.format.name()}};
    // What a checkpoint must agree with to be continued: everything the run depends on.
    const nlohmann::json run_json = {{"format", "lol-layerroute-train"},
                                     {"base", fs::weakly_canonical(fs::absolute(a->base)).string()},
                                     {"data", fs::weakly_canonical(fs::absolute(a->data)).string()},
                                     {"samples", train.size()},
                                     {"samples_fingerprint", examples_fingerprint(train)},
                                     {"lora", layerroute::to_json(m->lora->config())},
                                     {"gates", layerroute::to_json(m->gates->config())},
                                     {"train", layerroute::to_json(t)},
                                     // The log's cadence: a resumed log equals the uninterrupted one
                                     // only with the same one (--save-every may change: checkpoints only).
                                     {"log_every", t.log_every},
                                     {"max_len", a->d.max_len},
                                     {"system", a->d.system},
                                     {"loss_tokens", a->d.loss_tokens},
                                     {"tokenizer", extra["tokenizer"]}};
    layerroute::TrainCheckpoints ck;
    ck.save_every = a->save_every;
    std::string last_ck, ckdir;
    ck.save = [&](const training::Optimizer& opt, const training::TrainerState& st) {
      last_ck = training::save_checkpoint(state_dir.string(), tr, opt, st, run_json, extra, 1);
    };
    if (a->resume) {
      ckdir = training::resolve_checkpoint(state_dir.string());
      const std::string diff = resume_difference(io::read_json_file(ckdir + "/run.json"), run_json);
      if (!diff.empty())
        throw InputError(ckdir + "/run.json: the unfinished training differs from this command (" + diff +
                         "); resume with the flags and data it was started with, or --overwrite to start again");
    }
    fs::create_directories(out);
    // The log of this run grows in train_log.jsonl.partial; an adapter already in --out
    // (--overwrite) and its log stay as they were until the new adapter is written. A
    // resumed run keeps the lines up to its checkpoint's step.
    const fs::path log_path = out / "train_log.jsonl";
    const fs::path partial = out / "train_log.jsonl.partial";
    // Written as lol train writes metrics.jsonl: a failed write stops the training with an
    // error and leaves no partial line; a resumed run keeps the lines up to its step.
    std::unique_ptr<training::MetricsLog> log;
    if (a->resume) {
      ck.resume = [&, ckdir](training::Optimizer& opt) {
        auto st = training::load_checkpoint(ckdir, tr, opt);
        log = std::make_unique<training::MetricsLog>(partial.string(), st.step);
        return st;
      };
    } else {
      if (fs::exists(state_dir)) fs::remove_all(state_dir);  // --overwrite: an unfinished training's checkpoint
      log = std::make_unique<training::MetricsLog>(partial.string(), -1);
    }
    auto last = layerroute::train_layerroute(
        tr, train, t, [&](const layerroute::TrainLog& l) { log->write(layerroute::to_json(l)); }, &ck);
    log.reset();
    if (last.interrupted) {
      std::cerr << "lol layerroute train: stopped by a signal after step " << last.step << "; saved " << last_ck
                << " (continue with the same command and --resume)\n";
      return;
    }
    auto final_extra = extra;
    final_extra["last_step"] = layerroute::to_json(last);
    layerroute::save_adapter(*m, a->out, a->base, final_extra);
    fs::rename(partial, log_path);
    fs::remove_all(state_dir);
    std::cout << "trained " << last.step << " steps on " << train.size() << " samples: LM loss " << last.lm_loss
              << ", mean gate " << last.gate_mean << "; adapter written to " << a->out << "\n";
  });
}

void register_eval_cmd(CLI::App* lr) {
  struct A {
    std::string adapter, base, data, train_data, out, json, gates = "learned";
    int64_t samples = 100, seeds = 0;
    bool reuse = false, overwrite = false;
    uint64_t first_seed = 0, seed = 0;
    int threads = 0;
    DataArgs d;
    ModelArgs m;
    layerroute::TrainOptions t;
    layerroute::EvalOptions e;
  };
  auto a = std::make_shared<A>();
  auto* c = lr->add_subcommand("eval", "measure a trained adapter, or run the N-seed protocol (--seeds)");
  c->add_option("--adapter", a->adapter, "adapter directory (single evaluation)");
  c->add_option("--base", a->base, "base model (default: the one recorded in the adapter)");
  c->add_option("--data", a->data, "held-out JSONL")->required();
  c->add_option("--samples", a->samples,
                "held-out samples: a seeded selection, equal shares per \"source\" label (0 = all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  auto* seed_flag = c->add_option("--seed", a->seed,
                                  "--adapter: seed of the held-out selection (default: the adapter's training seed)")
                        ->default_str("");
  c->add_option("--seeds", a->seeds, "run the whole protocol (train + eval) over N seeds")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->default_str("");
  c->add_option("--first-seed", a->first_seed, "first protocol seed");
  c->add_option("--train-data", a->train_data, "training JSONL for --seeds");
  c->add_option("--out", a->out, "protocol output directory (seed-S adapters, protocol.json, tables.md)");
  auto* reuse =
      c->add_flag("--reuse", a->reuse, "--seeds: evaluate again the seeds already trained in --out (same options)");
  c->add_flag("--overwrite", a->overwrite,
              "--seeds: allow a non-empty --out: train every seed again, replacing its seed-S/ and protocol.json")
      ->excludes(reuse);
  c->add_option("--json", a->json, "write the single-evaluation report here");
  c->add_option("--threads", a->threads, "CPU threads (0 = default)");
  add_data_flags(c, a->d);
  add_model_flags(c, a->m);
  add_train_flags(c, a->t);
  add_eval_flags(c, a->e, a->gates);
  c->callback([a, seed_flag, c] {
    init_runtime(a->threads);
    a->e.mode = layerroute::parse_gate_mode(a->gates);
    if (a->seeds == 0)  // one adapter: its training options are fixed
      for (const char* f : {"--train-data", "--out", "--first-seed", "--reuse", "--overwrite", "--rank", "--alpha",
                            "--targets", "--band", "--bias-band", "--bias-outside", "--steps", "--batch", "--accum", "--lr", "--warmup",
                            "--weight-decay", "--clip", "--lambda", "--log-every"})
        if (c->count(f) > 0)
          throw InputError(std::string(f) + " applies to the protocol (--seeds N) only; an adapter (--adapter) is "
                                            "evaluated with the options it was trained with");
    if (a->seeds > 0) {
      if (a->base.empty() || a->train_data.empty() || a->out.empty())
        throw InputError("eval --seeds needs --base, --train-data and --out");
      if (seed_flag->count() > 0)
        throw InputError("--seed: the protocol seeds each run's selection with its own seed (use --first-seed)");
      layerroute::ProtocolOptions p;
      p.out_dir = a->out;
      p.reuse_trained = a->reuse;
      p.overwrite = a->overwrite;
      layerroute::check_protocol_out_dir(p);  // before any work
      a->base = resolve_base(a->base);
      const auto tok = open_tokenizer(a->base, a->d);
      p.base_dir = a->base;
      p.seeds = a->seeds;
      p.first_seed = a->first_seed;
      p.eval_samples = a->samples;
      p.lora = lora_cfg(a->m);
      p.gates = gate_cfg(a->m);
      p.train = a->t;
      p.train.progress = false;
      p.eval = a->e;
      p.max_len = a->d.max_len;
      p.loss_tokens = layerroute::parse_loss_tokens(a->d.loss_tokens);
      p.data_record = {{"system", a->d.system}, {"tokenizer", tokenizer_record(a->d)}};
      auto train = load_examples(a->train_data, tok, a->d);
      auto held = load_examples(a->data, tok, a->d);
      fs::create_directories(a->out);
      nlohmann::json all = nlohmann::json::array();
      auto rs = layerroute::run_protocol(p, train, held, [&](const layerroute::SeedResult& r) {
        std::cerr << "seed " << r.seed << ": trained in " << r.train_seconds << " s, LM loss " << r.last.lm_loss
                  << ", speedup " << r.report.speedup << "x, ppl gated " << r.report.ppl_gated << "\n";
        auto seed_json = layerroute::to_json(r);
        seed_json["eval"]["loss_tokens"] = a->d.loss_tokens;  // as single eval --json writes it
        all.push_back(std::move(seed_json));
        write_text((fs::path(a->out) / "protocol.json").string(), all.dump(2) + "\n");
      });
      const auto tables = layerroute::protocol_tables(rs, p.loss_tokens);
      write_text((fs::path(a->out) / "tables.md").string(), tables);
      std::cout << tables;
      return;
    }
    if (a->adapter.empty()) throw InputError("eval needs --adapter DIR (or --seeds N for the protocol)");
    const auto info = layerroute::read_adapter_info(a->adapter);
    const auto trained = layerroute::training_record(info);  // checked before the model is loaded
    a->base = resolve_base(a->base);
    const std::string base = a->base.empty() ? info.base_dir : a->base;
    for (const auto& dir : {a->adapter, base}) require_output_outside_model(a->json, dir, "--json");
    require_output_is_not_input(a->json, a->data, "--json", "--data");
    auto m = load_gated_model_noting_base(a->adapter, a->base);
    DataArgs d = a->d;
    // Samples are rendered as in training (its --system and --tokenizer, recorded in
    // layerroute.json) unless the flags say otherwise.
    if (d.system_flag->count() == 0) d.system = trained.system.value_or(d.system);
    if (d.loss_tokens_flag->count() == 0) d.loss_tokens = trained.loss_tokens.value_or(d.loss_tokens);
    if (d.tokenizer_flag->count() == 0) d.tokenizer = trained.tokenizer.value_or(d.tokenizer);
    const auto tok = open_tokenizer(base, d);
    // Samples are cut as in training unless --max-len says otherwise.
    if (d.max_len_flag->count() == 0 && trained.max_len) {
      d.max_len = *trained.max_len;
      d.max_len_origin = info.file + " extra.max_len";
    }
    // The held-out selection is seeded like the protocol's: by the training seed.
    const uint64_t seed = seed_flag->count() == 0 ? trained.seed.value_or(a->seed) : a->seed;
    auto held = layerroute::select_heldout(load_examples(a->data, tok, d), a->samples, seed);
    auto r = layerroute::evaluate_layerroute(*m, held, a->e);
    std::cout << "loss tokens: " << d.loss_tokens << " (the perplexities count "
              << (d.loss_tokens == "all" ? "every token" : "the assistant tokens") << ")\n";
    print_report(r);
    if (!a->json.empty()) {
      auto j = r.to_json();
      j["loss_tokens"] = d.loss_tokens;
      write_text(a->json, j.dump(2) + "\n");
    }
  });
}

}  // namespace
}  // namespace layerroute_cmd

void register_layerroute(CLI::App& app) {
  auto* lr = app.add_subcommand("layerroute", "LayerRoute: learned layer skipping with LoRA (docs/layerroute.md)");
  lr->require_subcommand(1);
  // Every option's --help shows its default (the subcommands inherit this).
  lr->option_defaults()->always_capture_default();
  layerroute_cmd::register_train_cmd(lr);
  layerroute_cmd::register_eval_cmd(lr);
  layerroute_cmd::register_merge_cmd(lr);
  layerroute_cmd::register_render_cmd(lr);
  layerroute_cmd::register_generate_cmd(lr);
}

}  // namespace lol::cli
