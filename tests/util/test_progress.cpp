// ProgressBar on a non-terminal stderr (logs, CI): one line per 10% and exactly one
// final line, also when the last update() already reached the total.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "util/progress.h"

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

int count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const auto& l : lines) n += l.find(needle) != std::string::npos;
  return n;
}

}  // namespace

TEST(ProgressBar, LogsOneLinePerTenthAndOneFinalLine) {
  testing::internal::CaptureStderr();  // stderr is a file from here on: the log format
  {
    lol::ProgressBar bar("steps", 38);
    for (int64_t d = 16; d <= 38; d = d == 32 ? 38 : d + 16) bar.update(d, "loss 1.0");
    bar.finish("loss 0.5");
  }
  auto lines = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 3u);  // 16/38 (40%), 32/38 (80%), the final 38/38
  EXPECT_NE(lines[0].find("steps [########............] 16/38 | loss 1.0"), std::string::npos) << lines[0];
  EXPECT_EQ(count_containing(lines, "38/38"), 1);
  EXPECT_NE(lines[2].find("38/38 | loss 0.5"), std::string::npos) << lines[2];
}

TEST(ProgressBar, DestructorWritesTheFinalLineOnce) {
  testing::internal::CaptureStderr();
  {
    lol::ProgressBar bar("items", 100);
    for (int64_t d = 1; d <= 100; ++d) bar.update(d);
  }
  auto lines = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 11u);  // the first step, 10%, 20%, ..., 90% and the final 100/100
  EXPECT_NE(lines[0].find(" 1/100"), std::string::npos) << lines[0];
  for (size_t i = 1; i + 1 < lines.size(); ++i)
    EXPECT_NE(lines[i].find(" " + std::to_string(10 * i) + "/100"), std::string::npos) << lines[i];
  EXPECT_EQ(count_containing(lines, "100/100"), 1);
}

TEST(ProgressBar, DisabledOrUnstartedWritesNothing) {
  testing::internal::CaptureStderr();
  {
    lol::ProgressBar off("off", 10, /*enabled=*/false);
    for (int64_t d = 1; d <= 10; ++d) off.update(d);
    off.finish();
    lol::ProgressBar idle("idle", 10);  // destroyed without any step
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(ProgressBar, FormatsDurations) {
  EXPECT_EQ(lol::format_duration(12.34), "12.3s");
  EXPECT_EQ(lol::format_duration(185), "3m05s");
  EXPECT_EQ(lol::format_duration(3720), "1h02m");
}
