#include "training/trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>

#include "core/environment.h"
#include "core/runtime.h"
#include "distributed/data_parallel.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/json_file.h"
#include "tokenizers/hf_json.h"
#include "training/loss.h"
#include "training/metrics_log.h"
#include "training/optimizer.h"
#include "training/schedule.h"
#include "training/stop_signal.h"
#include "training/train_checkpoint.h"
#include "training/train_step.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/progress.h"

namespace fs = std::filesystem;

namespace lol::training {

EvalResult evaluate(TrainableModel& model, const data::SplitData& split, const BatchLayout& layout,
                    int64_t max_batches, const torch::Device& device, Shard shard) {
  torch::NoGradGuard ng;
  const bool was_training = model.module().is_training();
  model.module().eval();
  Batcher b(split, layout, 0, /*shuffle=*/false, /*wrap=*/false, "evaluation", shard);
  double loss = 0;
  int64_t correct = 0, count = 0;
  for (int64_t i = 0; !b.done() && (max_batches == 0 || i < max_batches); ++i) {
    TrainBatch batch = to_device(b.next(), device);
    auto logits = model.forward(batch);
    loss += masked_ce_sum(logits, batch.targets, batch.target_mask).item<double>();
    correct += masked_correct(logits, batch.targets, batch.target_mask);
    count += batch.n_targets;
  }
  model.module().train(was_training);
  EvalResult r;
  r.targets = count;
  if (count > 0) {
    r.loss = loss / double(count);
    r.accuracy = double(correct) / double(count);
  }
  return r;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// config.json "extra" of saved models: what inference needs to read the data again.
nlohmann::json dataset_extra(const data::Dataset& ds) {
  nlohmann::json e = {{"task", ds.task()}, {"dataset_dir", fs::absolute(ds.dir()).lexically_normal().string()}};
  const auto& info = ds.info();
  if (info.contains("vocab")) e["vocab"] = info["vocab"];
  if (info.contains("tokenizer")) e["tokenizer"] = info["tokenizer"];
  return e;
}

/// The tokenizer files every checkpoint carries (tokenizer.json, tokenizer_config.json):
/// those of the resumed checkpoint, else of the dataset's tokenizer (dataset.json
/// "tokenizer"); none for data without a tokenizer (task vocabularies live in extra.vocab).
std::vector<std::pair<std::string, std::string>> tokenizer_files(const data::Dataset& ds,
                                                                 const std::string& resumed_checkpoint) {
  fs::path src;
  if (!resumed_checkpoint.empty() && fs::exists(fs::path(resumed_checkpoint) / "tokenizer.json")) {
    src = resumed_checkpoint;
  } else if (ds.info().contains("tokenizer") && ds.info()["tokenizer"].is_string()) {
    src = fs::path(ds.dir()) / ds.info()["tokenizer"].get<std::string>();
  } else {
    return {};
  }
  const auto tok = tokenizers::load_tokenizer(src.string());
  return {{"tokenizer.json", tok->to_hf_json().dump(2) + "\n"},
          {"tokenizer_config.json", tok->to_hf_config_json().dump(2) + "\n"}};
}

/// The run config a checkpoint was saved with (`ck_dir`/run.json); nullopt when it has
/// none or one of an older format (then the resume notes below are skipped).
std::optional<RunConfig> checkpoint_run_config(const std::string& ck_dir) {
  const std::string ck_run = ck_dir + "/run.json";
  if (!fs::exists(ck_run)) return std::nullopt;
  try {
    return RunConfig::from_json(io::read_json_file(ck_run), ck_run);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

/// A resume on another dataset than the checkpoint's (its config.json extra.dataset_dir,
/// `ck_dir`) or with another train.seed than its run's (`old`) continues from the saved
/// data position, which then indexes another order: a note on stderr says so.
void note_resume_data(const RunConfig& cfg, const std::string& ck_dir, const std::optional<RunConfig>& old) {
  const std::string here = fs::absolute(cfg.data.dir).lexically_normal().string();
  try {
    const auto j = io::read_json_file(ck_dir + "/config.json");
    const auto e = j.is_object() ? j.find("extra") : j.end();
    if (e != j.end() && e->is_object() && e->contains("dataset_dir") && (*e)["dataset_dir"].is_string()) {
      const std::string there = (*e)["dataset_dir"].get<std::string>();
      std::error_code ec;
      if (there != here && !fs::equivalent(there, here, ec))
        std::fprintf(stderr,
                     "note: resuming on data.dir %s; the checkpoint was trained on %s: the saved data position "
                     "continues in the new dataset's order\n",
                     here.c_str(), there.c_str());
    }
  } catch (const InputError&) {  // an older format: no note
  }
  if (old && old->train.seed != cfg.train.seed)
    std::fprintf(stderr,
                 "note: resuming with train.seed %lld (the checkpoint's run: %lld): the batch order from here "
                 "follows the new seed\n",
                 (long long)cfg.train.seed, (long long)old->train.seed);
}

/// A resume whose train.steps or schedule differs from the checkpoint's run (`old`, its
/// run.json) recomputes the schedules for the new total: a note on stderr gives the
/// learning rate at the resume step under both (a finished WSD decay goes back up) and,
/// for a growing model, that the depth never drops below the checkpoint's.
void note_resume_schedule(const RunConfig& cfg, const RunConfig& old, const TrainerState& st, int64_t growable) {
  const int64_t steps = cfg.train.steps;
  const double lr_new = cfg.optim.lr * lr_factor(cfg.schedule, st.step, steps);
  // The rate the checkpoint's own run would use next (its last one, when it had finished).
  const double lr_old =
      old.optim.lr * lr_factor(old.schedule, std::min(st.step, old.train.steps - 1), old.train.steps);
  if (old.train.steps == steps && std::abs(lr_new - lr_old) <= 1e-9 * std::max(std::abs(lr_old), 1e-30)) return;
  std::fprintf(stderr,
               "note: resuming at step %lld with train.steps %lld (the checkpoint's run had %lld): the learning "
               "rate is %.3g at step %lld ",
               (long long)st.step, (long long)steps, (long long)old.train.steps, lr_new, (long long)st.step + 1);
  if (st.step >= old.train.steps)
    std::fprintf(stderr, "(the checkpoint's run had finished, at %.3g in its last step)", lr_old);
  else
    std::fprintf(stderr, "(the checkpoint's run: %.3g)", lr_old);
  if (growable > 0 && cfg.grow.fraction > 0 && old.train.steps != steps)
    std::fprintf(stderr, "; growing follows the new train.steps, never below the checkpoint's depth %lld",
                 (long long)st.active_depth);
  std::fprintf(stderr, "\n");
}

/// A resume whose growing schedule (grow.shape, start, fraction) differs from the
/// checkpoint's run: a note on stderr, since the depth from here follows the new one
/// (never below the checkpoint's depth) and run.json is rewritten with it.
void note_resume_growing(const RunConfig& cfg, const RunConfig& old, const TrainerState& st, int64_t growable) {
  const GrowConfig &g = cfg.grow, &o = old.grow;
  if (growable <= 0 || (g.shape == o.shape && g.start == o.start && g.fraction == o.fraction)) return;
  std::fprintf(stderr,
               "note: resuming with grow.shape %s, grow.start %lld, grow.fraction %.10g (the checkpoint's run: %s, "
               "%lld, %.10g): the depth from step %lld follows the new schedule, never below the checkpoint's depth "
               "%lld; run.json now records the new one\n",
               g.shape.c_str(), (long long)g.start, g.fraction, o.shape.c_str(), (long long)o.start, o.fraction,
               (long long)st.step + 1, (long long)st.active_depth);
}

}  // namespace

namespace {
/// 64-bit FNV-1a over a split's sequences (tokens, lengths, prompt lengths, masks,
/// labels), as hex: ranks that loaded different data under the same data.dir (another
/// node's copy) disagree here.
std::string split_fingerprint(const data::SplitData& split) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (int64_t i = 0; i < split.size(); ++i) {
    const auto v = split.get(i);
    mix(&v.length, sizeof v.length);
    mix(&v.prompt_len, sizeof v.prompt_len);
    mix(&v.label, sizeof v.label);
    mix(v.tokens, size_t(v.length) * sizeof(int32_t));
    if (v.loss_mask) mix(v.loss_mask, size_t(v.length));
    if (v.router_only) mix(v.router_only, size_t(v.length));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}
}  // namespace

TrainResult run_training(const RunConfig& cfg, const std::string& resume, const TrainHooks& hooks) {
  const auto& tc = cfg.train;
  if (tc.threads > 0) {
    // As LOL_NUM_THREADS does (core/runtime.h): OpenBLAS's own pool too, or train.threads=1
    // still multiplied on more threads, with other sums than a LOL_NUM_THREADS=1 run.
    at::set_num_threads(int(tc.threads));
    set_blas_threads(int(tc.threads));
  }
  const torch::Device requested_device = parse_device(tc.device, "train.device");
  // Data-parallel job (issue 14, docs/distributed.md); nullptr for a single process.
  auto dp = dist::DataParallel::from_environment(requested_device);
  const torch::Device device = dp ? dist::DataParallel::rank_device(requested_device, dp->env()) : requested_device;
  const bool is_root = !dp || dp->is_root();
  const bool show_progress = tc.progress && is_root;
  const Shard shard = dp ? Shard{dp->rank(), dp->world_size()} : Shard{};
  torch::manual_seed(uint64_t(tc.seed));

  // ---- data
  if (!fs::exists(fs::path(cfg.data.dir) / "dataset.json"))
    throw InputError(cfg.attribute(cfg.source + ":data: field 'dir' = \"" + cfg.data.dir + "\": " +
                                   (fs::is_directory(cfg.data.dir) ? "no dataset.json there" : "no such directory") +
                                   " (expected a dataset written by `lol data` or `lol corpus`; --set data.dir=DIR)"));
  auto ds = data::Dataset::open(cfg.data.dir);
  auto train_split = ds.load(cfg.data.train_split);
  // A split whose every target is masked (or whose documents are single tokens) would
  // "train" on a loss of 0 for every step.
  bool any_target = false;
  for (int64_t i = 0; i < train_split.size() && !any_target; ++i) {
    const auto s = train_split.get(i);
    for (int64_t j = 1; j < s.length && !any_target; ++j) any_target = !s.loss_mask || s.loss_mask[j];
  }
  if (train_split.size() == 0)
    throw InputError(cfg.data.dir + " split '" + cfg.data.train_split +
                     "': holds no sequences (expected a dataset with training data, e.g. `lol data maze` with a larger "
                     "--n, or data.train_split naming another split)");
  if (!any_target)
    throw InputError(cfg.data.dir + " split '" + cfg.data.train_split +
                     "': no token is a training target (every loss_mask is 0 after the first token of its "
                     "sequence, or every sequence has one token)");
  BatchLayout layout{cfg.data.batch_size, cfg.data.seq_len, cfg.data.packing == "pack"};
  if (layout.pack && is_root) {
    // Packed rows carry one prompt window, the first document's (docs/training.md).
    int64_t with_prompt = 0;
    for (int64_t i = 0; i < train_split.size(); ++i) with_prompt += train_split.get(i).prompt_len > 0;
    if (with_prompt > 0)
      std::fprintf(stderr,
                   "note: data.packing = \"pack\": %lld sequences of %s have a prompt window (prompt_len > 0), which "
                   "only a row's first document keeps; data.packing = \"pad\" (the task presets) keeps them all\n",
                   (long long)with_prompt, cfg.data.dir.c_str());
  }
  Batcher batcher(train_split, layout, uint64_t(tc.seed), /*shuffle=*/true, /*wrap=*/true,
                  cfg.data.dir + " split '" + cfg.data.train_split + "'", shard);
  layout.seq_len = batcher.max_row_length();  // evaluation rows use the same bound
  data::SplitData valid_split;
  const bool valid_listed = ds.has_split(cfg.data.valid_split);
  if (valid_listed) valid_split = ds.load(cfg.data.valid_split);
  // An absent or empty validation split skips evaluation (`lol data` writes an empty one
  // when the held-out share rounds to 0 puzzles).
  const bool has_valid = valid_split.size() > 0;
  if (!has_valid && is_root)
    std::fprintf(stderr, "note: %s split '%s' %s; evaluation is skipped\n", cfg.data.dir.c_str(),
                 cfg.data.valid_split.c_str(), valid_listed ? "has no sequences" : "does not exist");
  if (has_valid && !layout.pack) {
    int64_t longest = 0;
    for (int64_t i = 0; i < valid_split.size(); ++i) longest = std::max(longest, valid_split.get(i).length);
    layout.seq_len = std::max(layout.seq_len, longest);
  }

  // ---- model and optimizer
  std::unique_ptr<TrainableModel> model;
  if (!cfg.init_from.empty()) {
    model = load_model(cfg.init_from);
  } else {
    try {
      model = make_model(cfg.model, cfg.source + ":model", ds.vocab_size(), layout.seq_len, uint64_t(tc.seed));
    } catch (const InputError& e) {
      throw InputError(cfg.attribute(e.what()));  // names a --set that gave the value
    }
  }
  model->module().to(device);
  model->module().train();
  if (dp) {
    // What every rank must share beyond the run config: the model built from its dataset
    // (vocab_size), the data itself, and the replica-check interval (an environment
    // variable); a mismatch made the first collective abort inside Gloo.
    dp->require_same_config({{"run", cfg.to_json()},
                             {"model", model->config_json()},
                             {"data_fingerprint", {{"train", split_fingerprint(train_split)},
                                                   {"valid", has_valid ? split_fingerprint(valid_split) : ""}}},
                             {"LOL_DIST_CHECK_EVERY", dp->env().check_every}});
    dp->broadcast_module(model->module());
    model->set_statistics_reducer([&dp](const torch::Tensor& t) { return dp->sum(t, "expert load"); });
    dp->seed_rank_generators(uint64_t(tc.seed), device);
  }
  auto params = model->grouped_parameters();
  Optimizer opt(params, cfg.optim);
  const nlohmann::json extra = dataset_extra(ds);
  const nlohmann::json run_json = cfg.to_json();

  // ---- run directory / resume
  const std::string run_dir = tc.out;
  TrainerState st;
  if (resume.empty()) {
    if (!list_checkpoints(run_dir).empty() || fs::exists(fs::path(run_dir) / "latest"))
      throw InputError("train.out = " + run_dir + ": already holds a run; continue it with --resume " + run_dir +
                       " or choose another directory");
  } else {
    const std::string ck = resolve_checkpoint(resume);
    // Continuing into a train.out that holds another run would splice the two (its
    // metrics, checkpoints and `latest` mixed with this run's).
    std::error_code ec;
    const bool out_holds_run = !list_checkpoints(run_dir).empty() || fs::exists(fs::path(run_dir) / "latest");
    if (out_holds_run && fs::weakly_canonical(fs::path(ck), ec).parent_path() !=
                             fs::weakly_canonical(fs::path(run_dir) / "checkpoints", ec))
      throw InputError("train.out = " + run_dir + ": holds another run than the checkpoint " + ck +
                       " (continuing there would mix the two); choose another train.out, or resume " + run_dir +
                       " itself");
    nlohmann::json ck_cfg = io::read_json_file(ck + "/config.json");
    ck_cfg.erase("extra");
    const nlohmann::json run_model = model->config_json();
    if (ck_cfg != run_model) {
      // Name what differs (a --set, or a dataset with another vocab_size, changes the model).
      const std::string diff = util::json_difference(ck_cfg, run_model);
      throw InputError(ck + "/config.json: the checkpoint's model configuration differs from the run config's (" + diff +
                       (diff.find("vocab_size") != std::string::npos && !cfg.model.contains("vocab_size")
                            ? "; vocab_size follows data.dir's dataset"
                            : "") +
                       "); resume with the run's own run.json");
    }
    st = load_checkpoint(ck, *model, opt);
    if (st.step > tc.steps)
      throw InputError(ck + ": checkpoint is at step " + std::to_string(st.step) + ", beyond train.steps = " +
                       std::to_string(tc.steps));
    const auto rs = dist::select_rank_state(st.data_position, st.rng_cpu, st.rng_device, int(shard.rank),
                                            int(shard.count), ck + "/trainer_state.json");
    batcher.set_position(rs.position, ck + "/trainer_state.json");
    if (!rs.rng_cpu.empty()) set_rng_state_hex(torch::kCPU, rs.rng_cpu, ck + "/trainer_state.json");
    if (!rs.rng_device.empty() && device.is_cuda())
      set_rng_state_hex(device, rs.rng_device, ck + "/trainer_state.json");
  }
  if (dp) dp->barrier("run directory check");  // before rank 0 writes into it
  // Rank 0 alone writes run.json, metrics and checkpoints.
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<io::DirLock> run_lock;  // one writer per run directory, until training returns
  if (is_root) {
    run_lock = std::make_unique<io::DirLock>(run_dir, "train.out");
    io::write_file_atomic(run_dir + "/run.json", run_json.dump(2) + "\n");
    // One line per start (core/environment.h): where a resumed run changed machine,
    // kernels or threads, its numbers may change there too.
    nlohmann::json env = runtime_environment(device);
    env["start_step"] = st.step;
    env["world_size"] = shard.count;
    const std::string env_path = run_dir + "/environment.jsonl";
    io::write_file_atomic(env_path, (fs::exists(env_path) ? io::read_file(env_path) : "") + env.dump() + "\n");
    metrics = std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl", resume.empty() ? -1 : st.step);
  }
  auto log = [&](const nlohmann::json& r) {
    if (metrics) metrics->write(r);
  };

  TrainResult result;
  result.steps_done = st.step;
  result.already_done = !resume.empty() && st.step == tc.steps;
  std::string last_ck = resume.empty() ? "" : resolve_checkpoint(resume);
  result.last_checkpoint = last_ck;
  const auto tok_files = is_root ? tokenizer_files(ds, last_ck) : std::vector<std::pair<std::string, std::string>>{};
  auto save = [&]() {
    // A finite loss can still end in an update that overflows a weight: such weights
    // are never saved, so the last good checkpoint stays the last one written.
    for (const auto& p : params)
      if (!torch::isfinite(p.tensor).all().item<bool>()) {
        throw NonFiniteLossError("training stopped: parameter '" + p.name + "' is not finite after the update of step " +
                                 std::to_string(st.step) + ". " +
                                 (last_ck.empty() ? "No checkpoint was written before."
                                                  : "Last good checkpoint: " + last_ck + " (continue with --resume " +
                                                        run_dir + ")."));
      }
    st.data_position = batcher.position();
    st.rng_cpu = rng_state_hex(torch::kCPU);
    st.rng_device = device.is_cuda() ? rng_state_hex(device) : "";
    if (dp) st.data_position = dp->gather_rank_states(st.data_position, st.rng_cpu, st.rng_device);
    st.active_depth = model->active_depth();
    if (is_root) last_ck = save_checkpoint(run_dir, *model, opt, st, run_json, extra, tc.keep_last, tok_files);
    else last_ck = (fs::path(run_dir) / "checkpoints" / checkpoint_name(st.step)).string();
    result.last_checkpoint = last_ck;
  };
  auto run_eval = [&](int64_t step) {
    if (!has_valid) return;
    auto ev = evaluate(*model, valid_split, layout, tc.eval_batches, device, shard);
    if (dp) {
      std::vector<double> sums{ev.loss * double(ev.targets), ev.accuracy * double(ev.targets), double(ev.targets)};
      dp->sum(sums, "evaluation");
      ev.targets = int64_t(sums[2]);
      ev.loss = ev.targets > 0 ? sums[0] / sums[2] : 0.0;
      ev.accuracy = ev.targets > 0 ? sums[1] / sums[2] : 0.0;
    }
    result.valid_loss = ev.loss;
    result.valid_acc = ev.accuracy;
    log({{"step", step}, {"valid_loss", ev.loss}, {"valid_acc", ev.accuracy}, {"valid_targets", ev.targets},
         {"tokens", st.tokens}, {"flops", st.flops}, {"elapsed", st.elapsed}});
  };

  // A process killed between a checkpoint and the evaluation that follows it (the
  // checkpoint is saved first) resumes without that evaluation in metrics.jsonl: it is
  // run now, on the checkpoint's weights, as the uninterrupted run ran it.
  if (!resume.empty() && st.step > 0 && has_valid &&
      ((tc.eval_every > 0 && st.step % tc.eval_every == 0) || st.step == tc.steps)) {
    std::vector<double> missing{metrics && !metrics->has_evaluation(st.step) ? 1.0 : 0.0};
    if (dp) dp->sum(missing, "resume evaluation check");  // rank 0 decides for every rank
    if (missing[0] > 0) run_eval(st.step);
  }

  const int64_t growable = model->growable_depth();
  if (growable > 0 && cfg.grow.fraction > 0 && cfg.grow.start > growable)
    throw InputError(cfg.attribute(cfg.source + ":grow: field 'start' = " + std::to_string(cfg.grow.start) +
                                   ": expected <= the model's routed depth " + std::to_string(growable)));
  StopSignalScope signals;
  ProgressBar bar("train", tc.steps - st.step, show_progress);
  const double elapsed_before = st.elapsed;
  const int64_t tokens_before = st.tokens;
  const int64_t start_step = st.step;
  int64_t consecutive_skips = 0;
  int64_t logged_depth = st.active_depth;
  // Growing never shrinks the core: a run resumed with more train.steps would otherwise
  // go back to a shallower depth (the schedule is a function of step / train.steps).
  const int64_t resumed_depth = resume.empty() ? -1 : st.active_depth;
  if (!resume.empty() && st.step > 0 && is_root) {
    const std::string ck = resolve_checkpoint(resume);
    const auto old = checkpoint_run_config(ck);
    if (old && st.step < tc.steps) {
      note_resume_schedule(cfg, *old, st, growable);
      note_resume_growing(cfg, *old, st, growable);
    }
    note_resume_data(cfg, ck, old);
  }
  if (show_progress)
    std::fprintf(stderr, "lol train: %lld parameters, %s, %s -> %s%s\n", (long long)model->num_parameters(),
                 tc.device.c_str(), cfg.data.dir.c_str(), run_dir.c_str(),
                 dp ? (", " + std::to_string(dp->world_size()) + " data-parallel processes (" + dp->comm().backend() + ")").c_str() : "");

  for (int64_t step = st.step; step < tc.steps; ++step) {
    if (hooks.before_step) hooks.before_step(step, *model);
    if (growable > 0)
      model->set_active_depth(std::max(resumed_depth, grown_depth(cfg.grow, growable, step, tc.steps)));
    const double lr_scale = lr_factor(cfg.schedule, step, tc.steps);

    std::vector<TrainBatch> micro;
    for (int64_t i = 0; i < tc.grad_accum; ++i) micro.push_back(batcher.next());
    StepTotals totals = forward_backward(*model, micro, device);
    // Data parallel: global totals, averaged gradients, a stop request agreed by all ranks.
    const int dist_stop = dp ? dp->synchronize_step(params, totals, stop_requested()) : 0;
    const double loss = totals.loss();
    const int64_t tokens = totals.tokens;
    const double flops = totals.flops;
    const double grad_norm = clip_gradients(params, tc.clip);
    st.tokens += tokens;
    st.flops += flops;
    st.step = step + 1;
    st.elapsed = elapsed_before + bar.elapsed();
    const double lr = cfg.optim.lr * lr_scale;
    nlohmann::json rec = {{"step", st.step},
                          {"loss", loss},
                          {"lr", lr},
                          {"tokens", st.tokens},
                          {"flops", st.flops},
                          {"grad_norm", grad_norm},
                          {"elapsed", st.elapsed}};
    if (growable > 0) rec["active_depth"] = model->active_depth();

    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      opt.zero_grad();
      model->discard_step();
      rec["nonfinite"] = true;
      log(rec);
      const std::string what = std::string(std::isfinite(loss) ? "gradient norm" : "loss") + " is " +
                               fmt("%g", std::isfinite(loss) ? grad_norm : loss) + " at step " +
                               std::to_string(st.step);
      if (tc.on_nonfinite == "skip" && ++consecutive_skips < 10) {
        st.nonfinite_skipped++;
        if (is_root) std::fprintf(stderr, "\nwarning: %s; step skipped (train.on_nonfinite = \"skip\")\n", what.c_str());
        continue;
      }
      bar.finish();
      throw NonFiniteLossError(
          "training stopped: " + what + (tc.on_nonfinite == "skip" ? " (10 consecutive non-finite steps)" : "") +
          ". " + (last_ck.empty() ? "No checkpoint was written before." : "Last good checkpoint: " + last_ck + " (continue with --resume " + run_dir + ")."));
    }
    consecutive_skips = 0;
    opt.step(lr_scale);
    opt.zero_grad();
    nlohmann::json model_metrics = model->after_optimizer_step();
    // Every checkpoint is checked, one saved because of a stop signal too (the ranks agree on dist_stop).
    if (dp && dp->check_due(st.step, st.step == tc.steps, (tc.save_every > 0 && st.step % tc.save_every == 0) || dist_stop))
      rec["replica_check"] = dp->check_module(model->module()).to_json();
    result.last_loss = loss;
    result.steps_done = st.step;

    const double session = bar.elapsed();
    const double tps = session > 0 ? double(st.tokens - tokens_before) / session : 0.0;
    // Every log_every steps, at the end, and whenever the grown depth changes.
    const int64_t depth_now = model->active_depth();
    if (st.step % tc.log_every == 0 || st.step == tc.steps || depth_now != logged_depth) {
      logged_depth = depth_now;
      rec["tokens_per_s"] = tps;
      for (auto it = model_metrics.begin(); it != model_metrics.end(); ++it) rec[it.key()] = it.value();
      log(rec);
    }
    std::string fields = "step " + std::to_string(st.step) + "/" + std::to_string(tc.steps) + " loss " +
                         fmt("%.4f", loss) + " lr " + fmt("%.3g", lr) + " tok/s " + fmt("%.0f", tps);
    if (growable > 0) fields += " depth " + std::to_string(model->active_depth());
    bar.update(st.step - start_step, fields);

    const bool last = st.step == tc.steps;
    const int stop_sig = dp ? dist_stop : stop_requested();
    // Saved before evaluating: an evaluation that fails loses no training.
    if ((tc.save_every > 0 && st.step % tc.save_every == 0) || last || stop_sig) save();
    if ((tc.eval_every > 0 && st.step % tc.eval_every == 0) || last) run_eval(st.step);
    if (hooks.after_step) hooks.after_step(st.step, *model);
    if (stop_sig && !last) {
      bar.finish(fields);
      if (is_root) std::fprintf(stderr, "lol train: %s received; saved %s (continue with --resume %s)\n",
                   stop_sig == SIGINT ? "SIGINT" : "SIGTERM", last_ck.c_str(), run_dir.c_str());
      result.interrupted = true;
      return result;
    }
  }
  bar.finish();
  return result;
}

}  // namespace lol::training
