#include "training/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace lol::training {

namespace {
volatile sig_atomic_t g_signal = 0;
pid_t g_launcher = 0;  // LOL_LAUNCHER_PID: the `lol launch` process that started this rank, or 0
struct sigaction g_old_int, g_old_term;

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  if (g_signal != 0) {
    // The launcher's parent-death SIGTERM (`lol launch` killed with SIGKILL) can arrive
    // twice, once per reparenting of this process: one request to save and stop.
    const bool launcher_again = sig == SIGTERM && g_signal == SIGTERM && g_launcher > 0 && info && info->si_pid == g_launcher;
    if (!launcher_again) _exit(128 + sig);
    return;
  }
  g_signal = sig;
}
}  // namespace

StopSignalScope::StopSignalScope() {
  g_signal = 0;
  const char* launcher = std::getenv("LOL_LAUNCHER_PID");
  g_launcher = launcher ? pid_t(std::strtol(launcher, nullptr, 10)) : 0;
  struct sigaction sa {};
  sa.sa_sigaction = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignalScope::~StopSignalScope() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int stop_requested() { return int(g_signal); }
void clear_stop_request() { g_signal = 0; }

}  // namespace lol::training
