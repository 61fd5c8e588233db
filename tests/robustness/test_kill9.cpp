// Crash safety of training runs (issue 13): a `lol train` child process is killed with
// SIGKILL at a random moment 0-1.5 s after it starts training, many times, including while it writes checkpoints (one
// checkpoint per step). After every kill the run's latest checkpoint must load (model,
// optimizer moments, trainer state), its step must never go backwards, and at the end
// the run must resume and finish.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "core/tensor_io.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "robustness/robust_test_util.h"
#include "training/train_checkpoint.h"

namespace fs = std::filesystem;
using namespace lol::robust_test;

namespace {

bool saving_in_progress(const std::string& run) {
  const fs::path ck = fs::path(run) / "checkpoints";
  if (!fs::is_directory(ck)) return false;
  for (const auto& e : fs::directory_iterator(ck))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) return true;
  return false;
}

/// Loads everything a resume loads from the run's latest checkpoint; returns its step.
int64_t load_latest(const std::string& run) {
  const std::string ck = lol::training::resolve_checkpoint(run);
  const std::string sp = ck + "/trainer_state.json";
  auto st = lol::training::TrainerState::from_json(lol::io::read_json_file(sp), sp);
  lol::load_lol(ck);
  auto opt = lol::load_tensors(ck + "/optimizer.safetensors");
  EXPECT_FALSE(opt.empty()) << ck;
  return st.step;
}

}  // namespace

TEST(CrashSafety, Kill9AtRandomMomentsAlwaysLeavesALoadableLatestCheckpoint) {
  TempDir t("kill9");
  ASSERT_EQ(make_maze_data(t.path() + "/data"), 0);
  const std::string run = t.path() + "/run";
  auto cfg = tiny_run_config(t.path() + "/data", run, 100000);
  cfg["train"]["save_every"] = 1;  // a checkpoint every step: many kills land inside a save
  cfg["train"]["keep_last"] = 2;
  std::ofstream(t.path() + "/run.json") << cfg.dump(2);

  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 1500);
  const auto t0 = std::chrono::steady_clock::now();
  int trials = 0, during_save = 0, before_first = 0, exited_early = 0;
  int64_t last_step = 0;
  // 45 s of trials, at least 5 even on a slow (sanitized, loaded) machine, at most 4 min.
  auto more = [&] {
    const auto e = std::chrono::steady_clock::now() - t0;
    return trials < 60 && (e < std::chrono::seconds(45) || trials < 5) && e < std::chrono::seconds(240);
  };
  while (more()) {
    // A kill between installing the first checkpoint and writing `latest` leaves a
    // complete checkpoint without the pointer: that run resumes too (resolve_checkpoint).
    const bool resume = !lol::training::list_checkpoints(run).empty();
    std::vector<std::string> args = resume ? std::vector<std::string>{"train", "--resume", run, "--no-progress"}
                                           : std::vector<std::string>{"train", "--config", t.path() + "/run.json"};
    const auto spawned = fs::file_time_type::clock::now();
    const pid_t pid = spawn_lol(args, t.path() + "/child.log");
    // LibTorch start-up takes seconds on a loaded machine: wait until the child has
    // (re)written metrics.jsonl, i.e. is about to train, then kill at a random moment.
    const auto wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::error_code ec;
    while (std::chrono::steady_clock::now() < wait_until &&
           !(fs::exists(run + "/metrics.jsonl", ec) && fs::last_write_time(run + "/metrics.jsonl", ec) >= spawned))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    const bool mid_save = saving_in_progress(run);
    ::kill(pid, SIGKILL);
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    ++trials;
    if (!(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)) {
      ++exited_early;
      ADD_FAILURE() << "trial " << trials << ": child ended on its own before the kill:\n"
                    << read_text(t.path() + "/child.log");
      continue;
    }
    if (mid_save) ++during_save;
    if (lol::training::list_checkpoints(run).empty()) {
      ++before_first;
      continue;
    }
    int64_t step = -1;
    try {
      step = load_latest(run);
    } catch (const std::exception& e) {
      FAIL() << "trial " << trials << " (seed " << seed << "): latest checkpoint does not load: " << e.what();
    }
    EXPECT_GE(step, last_step) << "trial " << trials << ": the latest checkpoint went backwards";
    last_step = step;
  }
  std::printf("kill -9 trials: %d (seed %llu); %d killed while a checkpoint directory was being written, "
              "%d before the first checkpoint; last checkpoint step %lld\n",
              trials, (unsigned long long)seed, during_save, before_first, (long long)last_step);
  RecordProperty("trials", trials);
  RecordProperty("during_save", during_save);
  EXPECT_GE(trials, 5);
  EXPECT_GT(last_step, 0) << "no kill happened after the first checkpoint";

  // The run resumes from where it was killed and finishes.
  auto r = run_lol({"train", "--resume", run, "--no-progress", "--set", "train.steps=" + std::to_string(last_step + 2)},
                   t.path() + "/final.log");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(load_latest(run), last_step + 2);
  // No leftovers of killed saves once a save completed.
  EXPECT_FALSE(saving_in_progress(run));
}

// Resuming from an earlier checkpoint re-saves steps that already exist; with keep_last = 1
// the checkpoint `latest` names must survive the pruning of older-numbered ones, and the
// re-saved step replaces the old directory in place.
TEST(CrashSafety, ResavingExistingStepsKeepsLatestValid) {
  TempDir t("resave");
  ASSERT_EQ(make_maze_data(t.path() + "/data"), 0);
  const std::string run = t.path() + "/run";
  auto cfg = tiny_run_config(t.path() + "/data", run, 4);
  cfg["train"]["save_every"] = 1;
  cfg["train"]["keep_last"] = 10;
  std::ofstream(t.path() + "/run.json") << cfg.dump(2);
  ASSERT_EQ(run_lol({"train", "--config", t.path() + "/run.json"}, t.path() + "/a.log").status, 0);
  ASSERT_TRUE(fs::exists(run + "/checkpoints/step-000002"));
  auto r = run_lol({"train", "--resume", run + "/checkpoints/step-000002", "--no-progress", "--set", "train.steps=3",
                    "--set", "train.keep_last=1"},
                   t.path() + "/b.log");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(lol::training::resolve_checkpoint(run), (fs::path(run) / "checkpoints" / "step-000003").string());
  EXPECT_EQ(load_latest(run), 3);
}
