// The appendix fixtures (tests/tasks/data/*_appendix_*.txt) are the paper's own lines:
// every line of the LoL paper text that starts with "Q : " is one record, the maze
// records (C.4.1) name a start cell, the sudoku records (C.3.1) do not. The paper is
// read from the shared seeds folder next to the repository (../shared/seeds); if it
// is absent the test fails and says where it looked.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace {

const std::string kPaper = std::string(LOL_SOURCE_DIR) + "/../shared/seeds/000_8d63fd016cd52d41.txt";

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

struct PaperRecords {
  std::vector<std::string> maze, sudoku;
};

PaperRecords paper_records() {
  PaperRecords r;
  for (const auto& l : read_lines(kPaper)) {
    if (l.rfind("Q : ", 0) != 0) continue;
    (l.find(" start ") != std::string::npos ? r.maze : r.sudoku).push_back(l);
  }
  return r;
}

std::vector<std::string> fixture(const std::string& name) {
  return read_lines(std::string(LOL_SOURCE_DIR) + "/tests/tasks/data/" + name);
}

}  // namespace

TEST(AppendixSource, MazeFixtureIsThePapersAppendixC41) {
  ASSERT_TRUE(std::ifstream(kPaper).good()) << "paper text missing: " << kPaper;
  const PaperRecords p = paper_records();
  ASSERT_EQ(p.maze.size(), 5u);
  EXPECT_EQ(fixture("maze_appendix_c41.txt"), p.maze);
}

TEST(AppendixSource, SudokuFixtureIsThePapersAppendixC31) {
  ASSERT_TRUE(std::ifstream(kPaper).good()) << "paper text missing: " << kPaper;
  const PaperRecords p = paper_records();
  ASSERT_EQ(p.sudoku.size(), 5u);
  EXPECT_EQ(fixture("sudoku_appendix_c31.txt"), p.sudoku);
}
