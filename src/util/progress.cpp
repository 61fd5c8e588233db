#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lol {

std::string format_duration(double s) {
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  }
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO)) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (!finished_ && enabled_ && done_ > 0) finish(fields_);
}

double ProgressBar::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t done, const std::string& fields) {
  done_ = done;
  fields_ = fields;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done_ != total_) return;
    last_draw_ = now;
    draw(false);
  } else if (total_ > 0) {
    // Non-terminal: one line per 10%; the 100% line is finish()'s (or the destructor's).
    int64_t pct = done_ * 10 / total_;
    if (pct != last_logged_pct_ && done_ < total_) {
      last_logged_pct_ = pct;
      draw(true);
    }
  }
}

void ProgressBar::finish(const std::string& fields) {
  if (finished_) return;
  finished_ = true;
  fields_ = fields;
  if (!enabled_) return;
  draw(true);
}

void ProgressBar::draw(bool final_line) {
  double el = elapsed();
  double rate = el > 0 ? done_ / el : 0.0;
  std::string line = label_;
  char buf[256];
  if (total_ > 0) {
    int width = 20;
    int filled = int(width * double(done_) / double(total_));
    if (filled > width) filled = width;
    line += " [" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
    std::snprintf(buf, sizeof buf, " %lld/%lld", (long long)done_, (long long)total_);
    line += buf;
  } else {
    std::snprintf(buf, sizeof buf, " %lld", (long long)done_);
    line += buf;
  }
  if (!fields_.empty()) line += " | " + fields_;
  std::snprintf(buf, sizeof buf, " | %.1f it/s", rate);
  line += buf;
  line += " | " + format_duration(el);
  if (total_ > 0 && rate > 0 && done_ < total_) line += " ETA " + format_duration((total_ - done_) / rate);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace lol
