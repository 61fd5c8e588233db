// A one-line progress bar on stderr (like tqdm): steps done / total, rate, ETA and
// free-form fields. Redraws at most every 100 ms; prints plain lines when stderr
// is not a terminal so that logs stay readable.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace lol {

class ProgressBar {
 public:
  /// total: number of steps (0 = unknown); label printed first.
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ~ProgressBar();
  /// Advances to `done` steps and shows `fields` (e.g. "loss 2.31 lr 1e-3").
  void update(int64_t done, const std::string& fields = "");
  /// Final redraw and newline.
  void finish(const std::string& fields = "");
  /// Seconds since construction.
  double elapsed() const;

 private:
  void draw(bool final_line);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  std::string fields_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t last_logged_pct_ = -1;
};

/// "1h02m", "3m05s", "12.3s".
std::string format_duration(double seconds);

}  // namespace lol
