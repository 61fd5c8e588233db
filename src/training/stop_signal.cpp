#include "training/stop_signal.h"

#include <signal.h>
#include <unistd.h>

namespace lol::training {

namespace {
volatile sig_atomic_t g_signal = 0;
struct sigaction g_old_int, g_old_term;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) _exit(128 + sig);
  g_signal = sig;
}
}  // namespace

StopSignalScope::StopSignalScope() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
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
