#include "distributed/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/runtime.h"
#include "distributed/env.h"
#include "util/error.h"

namespace lol::dist {

namespace {

volatile sig_atomic_t g_forward_signal = 0;
void on_signal(int sig) { g_forward_signal = sig; }

std::string self_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "lol";
  buf[n] = '\0';
  return buf;
}

/// The exit status of a rank whose collective failed because another rank went away
/// (docs/distributed.md "failures").
constexpr int kCollectiveFailedStatus = 4;

int exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

std::string describe(int st) {
  return WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                       : "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
}

}  // namespace

std::vector<std::string> rank_environment(const LaunchOptions& o, int local_rank, int port, int threads) {
  const int world = o.nproc * o.nnodes;
  std::vector<std::string> env = {
      "RANK=" + std::to_string(o.node_rank * o.nproc + local_rank),
      "WORLD_SIZE=" + std::to_string(world),
      "LOCAL_RANK=" + std::to_string(local_rank),
      "LOCAL_WORLD_SIZE=" + std::to_string(o.nproc),
      "GROUP_RANK=" + std::to_string(o.node_rank),
      "MASTER_ADDR=" + o.master_addr,
      "MASTER_PORT=" + std::to_string(port),
      // A rank's stop handler counts this process's repeated SIGTERMs as one (training/stop_signal.h).
      "LOL_LAUNCHER_PID=" + std::to_string(::getpid()),
  };
  if (o.timeout_s > 0) env.push_back("LOL_DIST_TIMEOUT=" + std::to_string(o.timeout_s));
  if (threads > 0) env.push_back("LOL_NUM_THREADS=" + std::to_string(threads));
  return env;
}

int launch(const LaunchOptions& o) {
  require(o.nproc >= 1 && o.nproc <= kMaxLocalProcesses, "lol launch",
          "--nproc " + std::to_string(o.nproc) + ": expected 1 <= nproc <= " + std::to_string(kMaxLocalProcesses));
  require(o.nnodes >= 1, "lol launch", "--nnodes must be >= 1");
  require(int64_t(o.nproc) * o.nnodes <= (int64_t(1) << 20), "lol launch",
          "--nproc x --nnodes: expected a world size <= 1048576 (WORLD_SIZE's bound)");
  require(o.timeout_s >= 0 && o.timeout_s <= 7 * 24 * 3600, "lol launch",
          "--timeout " + std::to_string(o.timeout_s) + ": expected 0 (unset: the ranks' default) or 1..604800 seconds (LOL_DIST_TIMEOUT's range)");
  require(o.grace_s >= 0, "lol launch", "--grace " + std::to_string(o.grace_s) + ": expected >= 0 seconds");
  require(o.node_rank >= 0 && o.node_rank < o.nnodes, "lol launch",
          "--node-rank must be in [0, --nnodes - 1] = [0, " + std::to_string(o.nnodes - 1) + "]");
  require(!o.command.empty(), "lol launch", "no command given (e.g. lol launch --nproc 2 -- lol train --config C)");
  require(o.master_port >= 0 && o.master_port <= 65535, "lol launch", "--master-port must be in [0, 65535]");
  require(o.nnodes == 1 || o.master_port > 0, "lol launch",
          "--master-port is required with --nnodes > 1 (the same free port on node 0 for every node)");
  const int port = o.master_port > 0 ? o.master_port : free_tcp_port();
  int threads = o.threads;
  if (threads == 0 && !std::getenv("LOL_NUM_THREADS")) threads = std::max(1, available_cores() / o.nproc);

  std::vector<std::string> argv_s = o.command;
  if (argv_s[0] == "lol") argv_s[0] = self_executable();

  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_forward_signal = 0;

  const pid_t launcher_pid = ::getpid();
  std::vector<pid_t> pids(size_t(o.nproc), -1);
  std::vector<bool> alive(size_t(o.nproc), false);
  std::fflush(nullptr);
  for (int r = 0; r < o.nproc; ++r) {
    const auto env = rank_environment(o, r, port, threads);
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "lol launch: fork failed: %s (stopping the %d rank(s) started)\n", std::strerror(errno), r);
      for (int k = 0; k < r; ++k) ::kill(pids[size_t(k)], SIGKILL);
      for (int k = 0; k < r; ++k) ::waitpid(pids[size_t(k)], nullptr, 0);
      return 1;
    }
    if (pid == 0) {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      // Its own process group: Ctrl-C at the terminal (or a scheduler's signal to the
      // launcher's group) reaches the rank once, forwarded by the launcher, and not also
      // directly -- a second SIGINT/SIGTERM makes training exit without saving. SIGTERM
      // when the launcher dies (kill -9): the ranks save and stop instead of running on.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher_pid) std::_Exit(128 + SIGTERM);  // it died before prctl
      for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv;
      for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "lol launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
      std::_Exit(127);
    }
    pids[size_t(r)] = pid;
    alive[size_t(r)] = true;
  }
  std::fprintf(stderr, "lol launch: %d process(es) on node %d of %d, ranks %d..%d of %d, master %s:%d\n", o.nproc,
               o.node_rank, o.nnodes, o.node_rank * o.nproc, o.node_rank * o.nproc + o.nproc - 1, o.nproc * o.nnodes,
               o.master_addr.c_str(), port);

  using Clock = std::chrono::steady_clock;
  int result = 0, running = o.nproc;
  bool failed = false, termed = false, killed = false;
  Clock::time_point fail_time;
  while (running > 0) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < o.nproc; ++r) {
        if (pids[size_t(r)] != pid || !alive[size_t(r)]) continue;
        alive[size_t(r)] = false;
        --running;
        const int code = exit_status(st);
        if (code == 0) continue;
        // Every failed rank is reported. Status 4 is a collective that failed because
        // another rank went away: the job's status is that of the first rank that
        // failed for another reason (bad input 2, killed 128 + signal, ...), else 4.
        // A rank the launcher itself stopped (after the grace period) did not fail on its
        // own: it does not replace the status (a rank 0 that could not bind the port was
        // blamed on the rank it left waiting).
        const bool first = !failed;
        if (first || (!termed && result == kCollectiveFailedStatus && code != kCollectiveFailedStatus)) result = code;
        if (first) {
          failed = true;
          fail_time = Clock::now();
        }
        std::fprintf(stderr, "lol launch: rank %d (pid %d) %s%s%s\n", o.node_rank * o.nproc + r, int(pid),
                     describe(st).c_str(), termed ? " (stopped by the launcher)" : "",
                     first && running > 0 ? ("; the other ranks get " + std::to_string(o.grace_s) +
                                             " s to stop on their own").c_str()
                                          : "");
      }
      continue;
    }
    if (const int sig = g_forward_signal) {
      g_forward_signal = 0;
      for (int r = 0; r < o.nproc; ++r)
        if (alive[size_t(r)]) ::kill(pids[size_t(r)], sig);
    }
    if (failed) {
      const double since = std::chrono::duration<double>(Clock::now() - fail_time).count();
      if (!termed && since > o.grace_s) {
        termed = true;
        std::fprintf(stderr, "lol launch: sending SIGTERM to the %d remaining rank(s)\n", running);
        for (int r = 0; r < o.nproc; ++r)
          if (alive[size_t(r)]) ::kill(pids[size_t(r)], SIGTERM);
      } else if (termed && !killed && since > o.grace_s + 10) {
        killed = true;
        for (int r = 0; r < o.nproc; ++r)
          if (alive[size_t(r)]) ::kill(pids[size_t(r)], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace lol::dist
