// `lol train` as a data-parallel job of real processes on loopback (issue 14):
// 2 ranks x batch B == 1 process x batch 2B, exact resume of a 2-rank run, and a
// dead or stalled rank ending the other with an error within the timeout.
#include <gtest/gtest.h>

#include "gloo_required.h"

#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/tensor_io.h"
#include "distributed/env.h"
#include "io/atomic_file.h"
#include "training/metrics_log.h"
#include "training/train_test_util.h"

namespace fs = std::filesystem;
using namespace lol::training;
using Clock = std::chrono::steady_clock;

namespace {

int run(const std::string& cmd, std::string* err, const std::string& tmp) {
  const std::string errfile = tmp + "/stderr.txt";
  const int rc = std::system((cmd + " 2>" + errfile + " >/dev/null").c_str());
  if (err) *err = lol::io::read_file(errfile);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::map<std::string, torch::Tensor> weights(const std::string& ckpt) {
  std::map<std::string, torch::Tensor> m;
  for (auto& [k, v] : lol::load_tensors(ckpt + "/model.safetensors")) m[k] = v;
  return m;
}

/// The run config of these tests: no router noise (it is drawn per rank by design, so
/// it would differ from the single process's), balancing bias updated every step.
std::string write_config(const std::string& dir, const std::string& data) {
  auto j = test::tiny_run_json(data, dir + "/unused");
  j["model"]["router_noise_std"] = 0.0;
  j["model"]["balance_update_rate"] = 0.01;
  j["train"]["steps"] = 6;
  j["train"]["eval_every"] = 0;
  j["train"]["eval_batches"] = 0;
  const std::string path = dir + "/run.json";
  std::ofstream(path) << j.dump(2);
  return path;
}

/// Starts `args` (argv, no shell) as rank `rank` of a 2-rank job, stderr to `errfile`.
pid_t spawn_rank(const std::vector<std::string>& args, int rank, int port, const std::string& errfile) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    ::setenv("LOL_DIST_TIMEOUT", "5", 1);
    const int fd = ::open(errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(fd, 2);
    ::dup2(null, 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  return pid;
}

}  // namespace

TEST(DataParallelTrain, TwoRanksOfBatchBMatchOneProcessOfBatch2BAlsoAfterResume) {
  LOL_REQUIRE_GLOO();
  test::TempDir dir("dp");
  const std::string data = dir.path() + "/data";
  // 32 sequences, 8 per global batch: the 6 steps cross an epoch boundary.
  test::write_reverse_dataset(data, 32, 8);
  const std::string cfg = write_config(dir.path(), data), lol = LOL_BINARY;
  const std::string base = lol + " train --config " + cfg + " --no-progress";
  std::string err;
  ASSERT_EQ(run(base + " --set data.batch_size=8 --set train.out=" + dir.path() + "/one", &err, dir.path()), 0) << err;
  ASSERT_EQ(run(lol + " launch --nproc 2 --threads 1 --timeout 60 -- " + base +
                    " --set data.batch_size=4 --set train.out=" + dir.path() + "/two",
                &err, dir.path()), 0) << err;
  const auto one = weights(dir.path() + "/one/checkpoints/step-000006");
  const auto two = weights(dir.path() + "/two/checkpoints/step-000006");
  ASSERT_EQ(one.size(), two.size());
  for (const auto& [name, w] : one) {
    ASSERT_TRUE(two.count(name)) << name;
    EXPECT_TRUE(torch::allclose(w, two.at(name), /*rtol=*/1e-4, /*atol=*/1e-5))
        << name << ": max diff " << (w - two.at(name)).abs().max().item<double>();
  }
  // The balancing bias moved (global load) and moved identically.
  const auto& bias = one.at("model.balance_bias");
  EXPECT_GT(bias.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(torch::equal(bias, two.at("model.balance_bias"))) << bias << two.at("model.balance_bias");

  // Metrics: global loss and load per step agree; the last step's replica check
  // compared every parameter and buffer (the bias included) on both ranks.
  const auto m1 = read_metrics(dir.path() + "/one/metrics.jsonl");
  const auto m2 = read_metrics(dir.path() + "/two/metrics.jsonl");
  ASSERT_EQ(m1.size(), m2.size());
  for (size_t i = 0; i < m1.size(); ++i) {
    if (!m1[i].contains("loss")) continue;
    EXPECT_NEAR(m1[i]["loss"].get<double>(), m2[i]["loss"].get<double>(), 1e-4) << "step " << m1[i]["step"];
    EXPECT_EQ(m1[i]["tokens"], m2[i]["tokens"]);
    EXPECT_EQ(m1[i]["expert_load"], m2[i]["expert_load"]);
  }
  const auto& last = m2[m2.size() - 2];  // then the final evaluation line
  ASSERT_TRUE(last.contains("replica_check")) << last.dump();
  EXPECT_EQ(last["replica_check"]["mismatched"], 0);
  EXPECT_EQ(last["replica_check"]["tensors"].get<int64_t>(), int64_t(one.size()));
  EXPECT_EQ(m1.back()["valid_loss"].get<double>() > 0, true);
  EXPECT_NEAR(m1.back()["valid_loss"].get<double>(), m2.back()["valid_loss"].get<double>(), 1e-4);

  // Resume: 3 steps (a run of its own, so its schedule ends at 3) then --resume to 6,
  // in one process (batch 8) and as 2 ranks (batch 4) continuing from rank 0's
  // checkpoint with each rank's own data position: the results agree again.
  std::string one_r = base + " --set data.batch_size=8 --set train.out=" + dir.path() + "/one_r";
  std::string two_r = base + " --set data.batch_size=4 --set train.out=" + dir.path() + "/two_r";
  ASSERT_EQ(run(one_r + " --set train.steps=3", &err, dir.path()), 0) << err;
  ASSERT_EQ(run(lol + " train --no-progress --resume " + dir.path() + "/one_r --set train.steps=6", &err, dir.path()), 0) << err;
  ASSERT_EQ(run(lol + " launch --nproc 2 --threads 1 -- " + two_r + " --set train.steps=3", &err, dir.path()), 0) << err;
  ASSERT_EQ(run(lol + " launch --nproc 2 --threads 1 -- " + lol + " train --no-progress --resume " + dir.path() +
                    "/two_r --set train.steps=6", &err, dir.path()), 0) << err;
  const auto one_resumed = weights(dir.path() + "/one_r/checkpoints/step-000006");
  const auto two_resumed = weights(dir.path() + "/two_r/checkpoints/step-000006");
  for (const auto& [name, w] : one_resumed)
    EXPECT_TRUE(torch::allclose(w, two_resumed.at(name), 1e-4, 1e-5)) << name;
  EXPECT_TRUE(torch::equal(one_resumed.at("model.balance_bias"), two_resumed.at("model.balance_bias")));
  // A 2-rank checkpoint is refused by a single process (data shards would not line up).
  EXPECT_EQ(run(lol + " train --resume " + dir.path() + "/two_r --set train.steps=8", &err, dir.path()), 2);
  EXPECT_NE(err.find("resume it with the same number"), std::string::npos) << err;
  // Ranks that would compute differently are refused before the first collective, naming
  // the field; a different LOL_DIST_CHECK_EVERY (or another node's copy of the data, or
  // its vocabulary) aborted inside Gloo (adversarial pass, session 26).
  EXPECT_EQ(run(lol + " launch --nproc 2 --threads 1 -- sh -c 'if [ \"$RANK\" = 1 ]; then export "
                    "LOL_DIST_CHECK_EVERY=3; fi; exec " + two_r + " --set train.out=" + dir.path() + "/mismatch'",
                &err, dir.path()), 2) << err;
  EXPECT_NE(err.find("/LOL_DIST_CHECK_EVERY = 100 on rank 0, 3 on rank 1"), std::string::npos) << err;
}

TEST(DataParallelTrain, DeadOrStalledRankEndsTheOtherWithinTheTimeout) {
  LOL_REQUIRE_GLOO();
  test::TempDir dir("dpfail");
  const std::string data = dir.path() + "/data";
  test::write_reverse_dataset(data, 32, 8);
  const std::string cfg = write_config(dir.path(), data), lol = LOL_BINARY;
  for (int sig : {SIGKILL, SIGSTOP}) {
    const std::string out = dir.path() + "/run" + std::to_string(sig);
    const std::vector<std::string> cmd = {lol, "train", "--config", cfg, "--no-progress", "--set",
                                          "train.steps=100000", "--set", "train.threads=1", "--set",
                                          "data.batch_size=4", "--set", "train.out=" + out};
    const int port = lol::dist::free_tcp_port();
    const pid_t r0 = spawn_rank(cmd, 0, port, dir.path() + "/err0.txt");
    const pid_t r1 = spawn_rank(cmd, 1, port, dir.path() + "/err1.txt");
    // Wait until the job trains (rank 0 logged a step), then take rank 1 away.
    const auto start = Clock::now();
    while (!fs::exists(out + "/metrics.jsonl") || fs::file_size(out + "/metrics.jsonl") == 0) {
      ASSERT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 60.0) << "the job never started";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(r1, sig);
    const auto t0 = Clock::now();
    int st = 0;
    pid_t got = 0;
    while ((got = ::waitpid(r0, &st, WNOHANG)) == 0 && std::chrono::duration<double>(Clock::now() - t0).count() < 30)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (got == 0) ::kill(r0, SIGKILL), ::waitpid(r0, &st, 0);
    ::kill(r1, SIGKILL);
    ::waitpid(r1, nullptr, 0);
    const std::string err0 = lol::io::read_file(dir.path() + "/err0.txt");
    ASSERT_NE(got, 0) << "rank 0 still running " << waited << " s after rank 1 got signal " << sig << "\n" << err0;
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 4) << "status " << st << "\n" << err0;
    EXPECT_NE(err0.find("error: rank 0/2:"), std::string::npos) << err0;
    EXPECT_LT(waited, 5.0 + 4.0) << "signal " << sig << ": longer than the 5 s timeout (+ margin)";
  }
}

// `lol launch` and signals (docs/distributed.md, seventh robustness pass): a signal to the
// launcher's whole process group (Ctrl-C at the terminal, a scheduler's SIGTERM) reaches
// each rank once -- a second one makes training exit without saving; a launcher killed
// with SIGKILL takes its ranks down with SIGTERM (they save and stop); the job's status
// is the status of the rank that failed on its own, not of one whose collective failed
// because of it (4), whichever is reaped first.
TEST(Launcher, SignalsReachEachRankOnceAndTheCauseIsReported) {
  LOL_REQUIRE_GLOO();
  test::TempDir tmp("launch_signals");
  const std::string lol = LOL_BINARY, dir = tmp.path();
  // A rank that exits with the number of SIGINTs it got (it runs about 2 s).
  std::ofstream(dir + "/count.sh") << "c=0\ntrap 'c=$((c+1))' INT\ntouch started.$RANK\ni=0\n"
                                      "while [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done\nexit $c\n";
  // A rank that notes a SIGTERM.
  std::ofstream(dir + "/term.sh") << "trap 'echo term > \"out.$RANK\"; exit 0' TERM\ntouch started.$RANK\ni=0\n"
                                     "while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done\n";
  // Rank 1 fails on its own (2); rank 0 as if its collective failed because of it (4).
  std::ofstream(dir + "/status.sh") << "if [ \"$RANK\" = 1 ]; then exit 2; fi\nexit 4\n";
  // `lol launch --nproc 2 -- sh SCRIPT` leading a process group of its own (as a job
  // started from a terminal), default signal dispositions.
  auto start = [&](const std::string& script) {
    std::filesystem::remove(dir + "/started.0");
    std::filesystem::remove(dir + "/started.1");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      if (::chdir(dir.c_str()) != 0) std::_Exit(126);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(lol.c_str(), lol.c_str(), "launch", "--nproc", "2", "--", "sh", script.c_str(), (char*)nullptr);
      std::_Exit(127);
    }
    return pid;
  };
  auto appear = [&](const std::vector<std::string>& files) {
    for (int i = 0; i < 400; ++i) {
      bool all = true;
      for (const auto& f : files) all = all && std::filesystem::exists(dir + "/" + f);
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  int st = 0;
  pid_t pid = start("count.sh");
  ASSERT_TRUE(appear({"started.0", "started.1"})) << "the ranks did not start";
  ::kill(-pid, SIGINT);  // the whole group, as Ctrl-C at the terminal
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << "each rank must get exactly one SIGINT (status " << st << ")";
  pid = start("term.sh");
  ASSERT_TRUE(appear({"started.0", "started.1"})) << "the ranks did not start";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(appear({"out.0", "out.1"})) << "the ranks of a killed launcher got no SIGTERM";
  std::string err;
  EXPECT_EQ(run("cd " + dir + " && " + lol + " launch --nproc 2 -- sh status.sh", &err, dir), 2) << err;
  EXPECT_NE(err.find("rank 1 (pid"), std::string::npos) << err;
  EXPECT_NE(err.find("exited with status 2"), std::string::npos) << err;
  EXPECT_NE(err.find("exited with status 4"), std::string::npos) << err;
  // A rank the launcher stops after the grace period did not fail on its own: it does not
  // replace the status of the rank that failed first (it made the job exit 143).
  std::ofstream(dir + "/wait.sh") << "if [ \"$RANK\" = 0 ]; then exit 4; fi\nexec sleep 60\n";
  EXPECT_EQ(run("cd " + dir + " && " + lol + " launch --nproc 2 --grace 1 -- sh wait.sh", &err, dir), 4) << err;
  EXPECT_NE(err.find("(stopped by the launcher)"), std::string::npos) << err;
  // compare plans for one process: refused under a launcher instead of spending N budgets.
  EXPECT_EQ(run("WORLD_SIZE=2 " + lol + " compare --configs a.json b.json --flops 1e9 --data d --out o", &err, dir), 2);
  EXPECT_NE(err.find("lol compare runs in one process (WORLD_SIZE = 2"), std::string::npos) << err;
  // So is every command but train (two `layerroute train` ranks wrote one --out).
  EXPECT_EQ(run("WORLD_SIZE=2 " + lol + " layerroute train --base b --data d --out o", &err, dir), 2);
  EXPECT_NE(err.find("lol layerroute runs in one process (WORLD_SIZE = 2"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/o"));
}
