// SIGINT/SIGTERM handling for training: the first signal asks the loop to save a
// checkpoint at the end of the current step and exit cleanly; a second one exits at
// once (status 128 + signal), except a second SIGTERM sent by the `lol launch` process
// that started this rank (environment LOL_LAUNCHER_PID): the kernel can deliver the
// launcher's parent-death signal twice when the launcher is killed (docs/distributed.md).
#pragma once

namespace lol::training {

/// Installs the handlers for its lifetime (restoring the previous ones afterwards).
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

/// The signal received since the scope was entered (SIGINT, SIGTERM), or 0.
int stop_requested();
/// Clears the flag (tests).
void clear_stop_request();

}  // namespace lol::training
