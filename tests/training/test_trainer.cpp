// End-to-end training runs on a tiny task: loss falls, exact resume, checkpoints,
// signals, non-finite losses.
#include <gtest/gtest.h>

#include <tuple>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <sstream>

#include <torch/torch.h>

#include "common/test_files.h"
#include "core/module_io.h"
#include "core/runtime.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "train_test_util.h"
#include "training/lol_trainable.h"
#include "training/metrics_log.h"
#include "training/train_checkpoint.h"
#include "training/stop_signal.h"
#include "training/trainer.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace lol::training;
using test::TempDir;

namespace {

struct Fixture {
  TempDir dir{"trainer"};
  std::string data = dir.path() + "/data";
  Fixture() { test::write_reverse_dataset(data, 64, 16); }
  RunConfig run(const std::string& name, int64_t steps) {
    auto c = test::tiny_run(data, dir.path() + "/" + name);
    c.train.steps = steps;
    return c;
  }
};

/// Every tensor of a checkpoint: weights and buffers (balance bias included) and optimizer state.
lol::NamedTensors checkpoint_tensors(const std::string& ck) {
  auto t = lol::load_tensors(ck + "/model.safetensors");
  for (auto& [n, v] : lol::load_tensors(ck + "/optimizer.safetensors")) t.emplace_back("optim:" + n, v);
  return t;
}

/// Hooks that throw after optimizer step `step` completed (its checkpoint, if any, and
/// evaluation done): a process killed there.
TrainHooks crash_after(int64_t step) {
  TrainHooks h;
  h.after_step = [step](int64_t done, TrainableModel&) {
    if (done == step) throw std::runtime_error("simulated crash after step " + std::to_string(step));
  };
  return h;
}

}  // namespace

TEST(Trainer, LossFallsOnATinyTask) {
  Fixture f;
  auto c = f.run("fall", 60);
  c.train.eval_every = 0;
  c.schedule.warmup_steps = 5;
  auto r = run_training(c);
  auto recs = read_metrics(c.train.out + "/metrics.jsonl");
  double first = -1, last = -1;
  int n_depth_logged = 0;
  for (const auto& m : recs) {
    if (!m.contains("loss")) continue;
    if (first < 0) first = m["loss"];
    last = m["loss"];
    n_depth_logged += m.contains("active_depth");
    EXPECT_TRUE(m.contains("lr") && m.contains("tokens_per_s") && m.contains("grad_norm") && m.contains("flops") &&
                m.contains("expert_load"));
  }
  EXPECT_EQ(n_depth_logged, 60);
  EXPECT_LT(last, first - 0.5) << "first " << first << " last " << last;
  EXPECT_GT(r.valid_acc, 0.0);  // final evaluation ran
  EXPECT_LT(r.valid_loss, first);
  // The final checkpoint is a plain model directory.
  auto m = lol::load_lol(r.last_checkpoint);
  EXPECT_EQ(m->config().d_model, 32);
  // The FLOPs counter follows the grown depth: depth 1 at the first step, 3 at the
  // end, and the FLOPs per token of a step grow with it.
  std::vector<const nlohmann::json*> steps;
  for (const auto& m : recs)
    if (m.contains("loss")) steps.push_back(&m);
  ASSERT_EQ(steps.size(), 60u);
  EXPECT_EQ((*steps[0])["active_depth"], 1);
  EXPECT_EQ((*steps.back())["active_depth"], 3);
  auto per_token = [&](size_t i) {
    const auto& cur = *steps[i];
    const auto& prv = *steps[i - 1];
    return (cur["flops"].get<double>() - prv["flops"].get<double>()) /
           double(cur["tokens"].get<int64_t>() - prv["tokens"].get<int64_t>());
  };
  EXPECT_LT(per_token(1), per_token(59));
}

// A checkpoint saved before the growing phase ended (paper 3.3) reloads at the depth its
// last step ran, so evaluating it reproduces the validation loss the trainer logged;
// exported copies (no trainer_state.json) run every routed depth.
TEST(Trainer, CheckpointSavedWhileGrowingReloadsAtItsDepth) {
  Fixture f;
  auto c = f.run("growing", 4);
  c.grow.fraction = 1.0;  // steps 0..3 of 4 all grow: depths 1, 1, 1, 2 of 3
  c.train.eval_batches = 0;
  const auto r = run_training(c);
  const auto state = lol::io::read_json_file(r.last_checkpoint + "/trainer_state.json");
  ASSERT_EQ(state["active_depth"], 2);
  auto model = lol::load_lol(r.last_checkpoint);
  EXPECT_EQ(model->config().core_depth, 3);
  EXPECT_EQ(model->active_depth(), 2);

  auto ds = lol::data::Dataset::open(f.data);
  const auto train = ds.load("train"), valid = ds.load("valid");
  int64_t longest = 0;  // the trainer's evaluation rows: the longest sequence of either split
  for (const auto* split : {&train, &valid})
    for (int64_t i = 0; i < split->size(); ++i) longest = std::max(longest, split->get(i).length);
  LoLTrainable reloaded(model);
  const auto ev = evaluate(reloaded, valid, BatchLayout{8, longest, false}, 0, torch::kCPU);
  EXPECT_NEAR(ev.loss, r.valid_loss, 1e-6);

  // Without the training state: the full routed core.
  const std::string copy = f.dir.path() + "/copy";
  fs::create_directories(copy);
  for (const char* file : {"config.json", "model.safetensors"}) fs::copy(r.last_checkpoint + "/" + file, copy + "/" + file);
  EXPECT_EQ(lol::load_lol(copy)->active_depth(), 3);
  // A depth the model does not have is refused, naming the file and field.
  for (const std::string bad : {"4", "-5", "18446744073709551615", "1.5", "\"2\"", "null"}) {
    lol::io::write_file_atomic(copy + "/trainer_state.json", R"({"active_depth": )" + bad + "}");
    try {
      lol::load_lol(copy);
      ADD_FAILURE() << "active_depth " << bad << " of a 3-deep core was accepted";
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("trainer_state.json: field 'active_depth' = " + bad), std::string::npos)
          << e.what();
    }
  }
}

// Resuming with more train.steps recomputes the schedules for the new total; the grown
// depth never goes below the checkpoint's (at step 4 of 8 the schedule alone says 1).
TEST(Trainer, ResumingWithMoreStepsNeverShrinksTheGrownCore) {
  Fixture f;
  auto c = f.run("longer", 4);
  c.grow.fraction = 1.0;  // depths 1, 1, 1, 2 of 3
  c.train.eval_batches = 0;
  const auto r = run_training(c);
  ASSERT_EQ(lol::io::read_json_file(r.last_checkpoint + "/trainer_state.json")["active_depth"], 2);
  c.train.steps = 8;
  testing::internal::CaptureStderr();
  run_training(c, c.train.out);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("note: resuming at step 4 with train.steps 8 (the checkpoint's run had 4)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("never below the checkpoint's depth 2"), std::string::npos) << err;
  std::vector<int64_t> depths;
  for (const auto& m : read_metrics(c.train.out + "/metrics.jsonl"))
    if (m.contains("loss")) depths.push_back(m["active_depth"]);
  EXPECT_EQ(depths, (std::vector<int64_t>{1, 1, 1, 2, 2, 2, 2, 2})) << "grown depth of steps 1..8 (the schedule: 1 at 5)";
  EXPECT_EQ(err.find("note: resuming on data.dir"), std::string::npos) << err;
  EXPECT_EQ(err.find("note: resuming with train.seed"), std::string::npos) << err;
  EXPECT_EQ(err.find("note: resuming with grow.shape"), std::string::npos) << err;
  // Another dataset (a copy elsewhere) or seed: the saved data position continues in
  // another order, and a note says so.
  const std::string other = f.dir.path() + "/other_data";
  fs::copy(f.data, other, fs::copy_options::recursive);
  c.train.steps = 9;
  c.train.seed += 7;
  c.data.dir = other;
  c.grow.shape = "linear";
  testing::internal::CaptureStderr();
  run_training(c, c.train.out);
  const std::string err2 = testing::internal::GetCapturedStderr();
  EXPECT_NE(err2.find("note: resuming on data.dir " + fs::absolute(other).lexically_normal().string() +
                      "; the checkpoint was trained on "),
            std::string::npos)
      << err2;
  EXPECT_NE(err2.find("note: resuming with train.seed " + std::to_string(c.train.seed) + " (the checkpoint's run: " +
                      std::to_string(c.train.seed - 7) + ")"),
            std::string::npos)
      << err2;
  EXPECT_NE(err2.find("note: resuming with grow.shape linear, grow.start 1, grow.fraction 1 (the checkpoint's run: "
                      "1-sqrt, 1, 1): the depth from step 9 follows the new schedule, never below the checkpoint's "
                      "depth 2"),
            std::string::npos)
      << err2;
  // Another model configuration is refused, naming what differs.
  c.train.steps = 10;
  c.model["router_noise_std"] = 0.25;
  lol_test::expect_input_error([&] { run_training(c, c.train.out); },
                               {"the checkpoint's model configuration differs from the run config's (router_noise_std = "
                                "0.5 there, 0.25 here); resume with the run's own run.json"});
  // A data.dir without a dataset names the config field.
  auto nodata = f.run("nodata", 2);
  nodata.data.dir = f.dir.path() + "/nowhere";
  lol_test::expect_input_error([&] { run_training(nodata); },
                               {":data: field 'dir' = \"" + nodata.data.dir + "\": no such directory"});
}

TEST(Trainer, EvaluationIsNoiseFreeAndKeepsTrainingMode) {
  Fixture f;
  auto c = f.run("eval", 1);
  auto ds = lol::data::Dataset::open(f.data);
  auto valid = ds.load("valid");
  auto model = make_model(c.model, "test", ds.vocab_size(), 64, 0);
  model->module().train();
  BatchLayout lay{8, 0, false};
  torch::manual_seed(1);
  auto a = evaluate(*model, valid, lay, 0, torch::kCPU);
  torch::manual_seed(2);
  auto b = evaluate(*model, valid, lay, 0, torch::kCPU);
  EXPECT_EQ(a.loss, b.loss);  // router noise (std 0.5) is off in evaluation
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_GT(a.targets, 0);
  EXPECT_TRUE(model->module().is_training());
  // Evaluation does not count expert load for balancing.
  auto* lol_model = dynamic_cast<LoLTrainable*>(model.get());
  ASSERT_NE(lol_model, nullptr);
  EXPECT_EQ(lol_model->model()->pending_load().sum().item<int64_t>(), 0);
}

TEST(Trainer, ResumeIsBitExact) {
  Fixture f;
  // One run of 8 steps vs. 3 steps (checkpoint) + resume to 8; grad accumulation,
  // router noise, growing and shuffling all active.
  lol::set_blas_threads(2);  // train.threads = 1 must bound it itself (checked below)
  auto full = f.run("full", 8);
  full.train.grad_accum = 2;
  full.train.eval_every = 4;
  auto r_full = run_training(full);

  auto part = f.run("part", 8);
  part.train.grad_accum = 2;
  part.train.eval_every = 4;
  part.train.save_every = 3;
  EXPECT_THROW(run_training(part, "", crash_after(3)), std::runtime_error);
  ASSERT_TRUE(fs::exists(part.train.out + "/checkpoints/step-000003"));
  auto r_part = run_training(part, part.train.out);
  EXPECT_EQ(r_part.steps_done, 8);

  auto a = checkpoint_tensors(r_full.last_checkpoint), b = checkpoint_tensors(r_part.last_checkpoint);
  ASSERT_EQ(a.size(), b.size());
  bool saw_bias = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
    saw_bias |= a[i].first == "model.balance_bias";
  }
  EXPECT_TRUE(saw_bias);
  EXPECT_EQ(r_full.last_loss, r_part.last_loss);
  // Metrics of the resumed run have each step once.
  auto recs = read_metrics(part.train.out + "/metrics.jsonl");
  std::vector<int64_t> steps;
  for (const auto& m : recs)
    if (m.contains("loss")) steps.push_back(m["step"]);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  // environment.jsonl: one record per start (core/environment.h), the resume's at step 3.
  std::vector<nlohmann::json> starts;
  {
    std::istringstream lines(lol::io::read_file(part.train.out + "/environment.jsonl"));
    for (std::string line; std::getline(lines, line);) starts.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0]["start_step"], 0);
  EXPECT_EQ(starts[1]["start_step"], 3);
  for (const auto& e : starts) {
    EXPECT_EQ(e["world_size"], 1);
    EXPECT_EQ(e["device"], "cpu");
    EXPECT_EQ(e["threads"], at::get_num_threads());
    // train.threads bounds OpenBLAS's pool as LOL_NUM_THREADS does (it stayed at the core count).
    if (lol::blas_threads() > 0) EXPECT_EQ(e["blas_threads"], part.train.threads);
    for (const char* key : {"time", "lol", "libtorch", "aten_cpu_capability", "blas", "blas_core", "cpu", "env"})
      EXPECT_TRUE(e.contains(key)) << key;
  }
  // Trainer state has what is needed.
  auto st = nlohmann::json::parse(lol::io::read_file(r_part.last_checkpoint + "/trainer_state.json"));
  EXPECT_EQ(st["step"], 8);
  EXPECT_FALSE(st["rng_cpu"].get<std::string>().empty());
  // An edited trainer_state.json is refused naming the file: a step that is not its
  // directory's, an active depth outside 0..core_depth.
  const std::string state_file = r_part.last_checkpoint + "/trainer_state.json";
  auto more = part;
  more.train.steps = 9;
  for (const auto& [key, value, needle] :
       std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"step", 0, "field 'step' = 0: expected the step of its directory step-000008"},
           {"active_depth", 5, "field 'active_depth' = 5: expected 0 <= active_depth <= core_depth"},
           {"active_depth", -1, "field 'active_depth' = -1"}}) {
    auto edited = st;
    edited[key] = value;
    lol::io::write_file_atomic(state_file, edited.dump());
    try {
      run_training(more, part.train.out);
      ADD_FAILURE() << key << " = " << value << " resumed";
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(state_file + ": " + needle), std::string::npos) << e.what();
    }
  }
}

TEST(Trainer, KeepsTheLastKCheckpointsAndRefusesToOverwriteARun) {
  Fixture f;
  auto c = f.run("keep", 6);
  c.train.save_every = 1;
  c.train.keep_last = 2;
  c.train.eval_every = 0;
  run_training(c);
  auto cks = list_checkpoints(c.train.out);
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(fs::path(cks[0]).filename(), "step-000005");
  EXPECT_EQ(fs::path(cks[1]).filename(), "step-000006");
  EXPECT_EQ(resolve_checkpoint(c.train.out), c.train.out + "/checkpoints/step-000006");
  EXPECT_THROW(run_training(c), lol::InputError);
}

// A process killed after installing its first checkpoint but before writing `latest`
// (save_checkpoint: rename, fsync, then the pointer) leaves a complete checkpoint and no
// `latest`: the run is not started over silently, and it resumes from that checkpoint.
TEST(Trainer, CheckpointWithoutLatestStillResumes) {
  Fixture f;
  auto c = f.run("nolatest", 4);
  c.train.save_every = 2;
  c.train.eval_every = 0;
  EXPECT_THROW(run_training(c, "", crash_after(2)), std::runtime_error);
  ASSERT_TRUE(fs::remove(c.train.out + "/latest"));
  EXPECT_EQ(resolve_checkpoint(c.train.out), c.train.out + "/checkpoints/step-000002");
  try {
    run_training(c);
    ADD_FAILURE() << "a new run over a run's checkpoint was started";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("continue it with --resume"), std::string::npos) << e.what();
  }
  auto r = run_training(c, c.train.out);
  EXPECT_EQ(r.steps_done, 4);
  EXPECT_EQ(fs::path(resolve_checkpoint(c.train.out)).filename(), "step-000004");
}

// The checkpoint of an evaluation step is saved before the evaluation runs: a process
// killed in between resumed without that step's valid_loss for good (adversarial pass,
// session 26). The resume now runs the missing evaluation: the same records as an
// uninterrupted run, the final one included.
TEST(Trainer, ResumeRunsTheEvaluationAKillSkipped) {
  Fixture f;
  auto valid_records = [](const std::string& run) {
    std::vector<std::pair<int64_t, double>> v;
    for (const auto& m : read_metrics(run + "/metrics.jsonl"))
      if (m.contains("valid_loss")) v.emplace_back(m["step"].get<int64_t>(), m["valid_loss"].get<double>());
    return v;
  };
  // Drops step `step`'s evaluation record, as a kill right after its checkpoint would.
  auto drop_evaluation = [](const std::string& run, int64_t step) {
    std::istringstream in(lol::io::read_file(run + "/metrics.jsonl"));
    std::string kept;
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (!(j.contains("valid_loss") && j["step"] == step)) kept += line + "\n";
    }
    lol::io::write_file_atomic(run + "/metrics.jsonl", kept);
  };
  auto full = f.run("full", 6);
  full.train.eval_every = 2;
  run_training(full);
  const auto want = valid_records(full.train.out);
  ASSERT_EQ(want.size(), 3u);

  auto part = f.run("part", 6);
  part.train.eval_every = 2;
  part.train.save_every = 2;
  EXPECT_THROW(run_training(part, "", crash_after(4)), std::runtime_error);
  drop_evaluation(part.train.out, 4);
  run_training(part, part.train.out);
  EXPECT_EQ(valid_records(part.train.out), want);
  // The final evaluation too: a finished run resumed trains nothing and evaluates once.
  drop_evaluation(part.train.out, 6);
  auto r = run_training(part, part.train.out);
  EXPECT_TRUE(r.already_done);
  EXPECT_EQ(valid_records(part.train.out), want);
  run_training(part, part.train.out);
  EXPECT_EQ(valid_records(part.train.out), want) << "an evaluation that was there is not run again";
}

// A metrics line that cannot be written (disk full, quota, file size limit) stops the
// run with an error naming the file, and leaves no partial line behind; it was dropped
// silently and the run exited 0 with a truncated log (adversarial pass, session 26).
TEST(MetricsLogFile, FailedWriteThrowsAndLeavesWholeLines) {
  TempDir dir("metrics_fail");
  const std::string path = dir.path() + "/metrics.jsonl";
  MetricsLog log(path, -1);
  log.write({{"step", 1}, {"loss", 2.5}});
  const auto before = fs::file_size(path);
  // RLIMIT_FSIZE makes a write beyond the limit fail with EFBIG (SIGXFSZ ignored).
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* prev = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = before + 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    log.write({{"step", 2}, {"loss", 2.25}, {"note", std::string(100, 'x')}});
  } catch (const lol::InputError& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, prev);
  EXPECT_NE(error.find(path + ": write failed: "), std::string::npos) << error;
  EXPECT_EQ(fs::file_size(path), before) << "a partial line was left";
  log.write({{"step", 2}, {"loss", 2.25}});
  EXPECT_EQ(read_metrics(path).size(), 2u);
}

// --resume A with train.out = B, where B holds another run, spliced the two runs'
// metrics and checkpoints (adversarial pass, session 26): refused, B untouched.
TEST(Trainer, ResumeIntoAnotherRunsDirectoryIsRefused) {
  Fixture f;
  auto a = f.run("a", 2), b = f.run("b", 2);
  a.train.eval_every = b.train.eval_every = 0;
  run_training(a);
  run_training(b);
  const std::string b_metrics = lol::io::read_file(b.train.out + "/metrics.jsonl");
  auto into_b = a;
  into_b.train.out = b.train.out;
  into_b.train.steps = 4;
  try {
    run_training(into_b, a.train.out);
    ADD_FAILURE() << "resumed into another run's directory";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds another run than the checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lol::io::read_file(b.train.out + "/metrics.jsonl"), b_metrics);
  // Into a new directory it continues (a copy of the run from that checkpoint).
  into_b.train.out = f.dir.path() + "/a_copy";
  EXPECT_EQ(run_training(into_b, a.train.out).steps_done, 4);
}

// Resuming from an earlier checkpoint of the run abandons its later ones (their metrics
// lines are dropped): they are removed at the first save, so that keep_last counts the
// new timeline and no stale checkpoint looks newer than `latest` (adversarial pass,
// session 26).
TEST(Trainer, ResumingFromAnEarlierStepRemovesTheAbandonedLaterCheckpoints) {
  Fixture f;
  auto c = f.run("branch", 6);
  c.train.save_every = 1;
  c.train.keep_last = 10;
  c.train.eval_every = 0;
  run_training(c);
  ASSERT_EQ(list_checkpoints(c.train.out).size(), 6u);
  c.train.steps = 4;
  run_training(c, c.train.out + "/checkpoints/step-000003");
  std::vector<std::string> names;
  for (const auto& ck : list_checkpoints(c.train.out)) names.push_back(fs::path(ck).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"step-000001", "step-000002", "step-000003", "step-000004"}));
  EXPECT_EQ(fs::path(resolve_checkpoint(c.train.out)).filename(), "step-000004");
}

TEST(Trainer, SigtermSavesAndStopsCleanly) {
  Fixture f;
  auto c = f.run("sig", 10);
  c.train.eval_every = 0;
  TrainHooks h;
  h.before_step = [](int64_t step, TrainableModel&) {
    if (step == 4) std::raise(SIGTERM);
  };
  auto r = run_training(c, "", h);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.steps_done, 5);  // the step in flight completes
  EXPECT_EQ(fs::path(resolve_checkpoint(c.train.out)).filename(), "step-000005");
  auto r2 = run_training(c, c.train.out);
  EXPECT_FALSE(r2.interrupted);
  EXPECT_EQ(r2.steps_done, 10);
}

TEST(Trainer, NonFiniteLossStopsAndKeepsTheLastGoodCheckpoint) {
  Fixture f;
  auto c = f.run("nan", 10);
  c.train.save_every = 2;
  c.train.eval_every = 0;
  TrainHooks h;
  h.before_step = [](int64_t step, TrainableModel& m) {
    if (step == 5) {
      torch::NoGradGuard ng;
      for (auto& p : m.module().named_parameters())
        if (p.key() == "model.norm.weight") p.value().fill_(std::numeric_limits<float>::quiet_NaN());
    }
  };
  try {
    run_training(c, "", h);
    FAIL() << "expected NonFiniteLossError";
  } catch (const NonFiniteLossError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("step-000004"), std::string::npos) << msg;
  }
  auto cks = list_checkpoints(c.train.out);
  ASSERT_FALSE(cks.empty());
  EXPECT_EQ(fs::path(cks.back()).filename(), "step-000004");
  EXPECT_EQ(fs::path(resolve_checkpoint(c.train.out)).filename(), "step-000004");
  // The kept checkpoint is finite and loads.
  EXPECT_NO_THROW(lol::load_lol(cks.back()));

  // "skip" goes on past isolated bad steps.
  auto s = f.run("skip", 6);
  s.train.on_nonfinite = "skip";
  s.train.eval_every = 0;
  TrainHooks once;
  torch::Tensor saved;
  once.before_step = [&](int64_t step, TrainableModel& m) {
    torch::NoGradGuard ng;
    for (auto& p : m.module().named_parameters())
      if (p.key() == "model.norm.weight") {
        if (step == 2) {
          saved = p.value().clone();
          p.value().fill_(std::numeric_limits<float>::infinity());
        } else if (step == 3) {
          p.value().copy_(saved);
        }
      }
  };
  auto r = run_training(s, "", once);
  EXPECT_EQ(r.steps_done, 6);
  auto st = nlohmann::json::parse(lol::io::read_file(r.last_checkpoint + "/trainer_state.json"));
  EXPECT_EQ(st["nonfinite_skipped"], 1);
}

// A second SIGTERM exits at once (status 128 + 15), except when both come from the
// `lol launch` process named by LOL_LAUNCHER_PID: its parent-death signal can arrive
// twice when it is killed, and the rank must still save and stop.
TEST(StopSignal, RepeatedSigtermFromTheLauncherIsOneRequest) {
  ::setenv("LOL_LAUNCHER_PID", std::to_string(::getpid()).c_str(), 1);  // kill() from here: si_pid = getpid()
  {
    lol::training::StopSignalScope scope;
    ::kill(::getpid(), SIGTERM);
    ::kill(::getpid(), SIGTERM);
    EXPECT_EQ(lol::training::stop_requested(), SIGTERM);
  }
  ::unsetenv("LOL_LAUNCHER_PID");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        lol::training::StopSignalScope scope;
        ::kill(::getpid(), SIGTERM);
        ::kill(::getpid(), SIGTERM);
        std::exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "");
  EXPECT_EXIT(
      {
        ::setenv("LOL_LAUNCHER_PID", "1", 1);  // another process: not the sender
        lol::training::StopSignalScope scope;
        ::kill(::getpid(), SIGTERM);
        ::kill(::getpid(), SIGTERM);
        std::exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "");
}
