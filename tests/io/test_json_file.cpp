// io::read_json_file: parses files; unreadable or malformed files raise InputError
// naming the file.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "io/json_file.h"
#include "util/error.h"

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("lol_json_file_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    lol::io::read_json_file(path);
  } catch (const lol::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(JsonFile, ParsesAValidDocument) {
  auto j = lol::io::read_json_file(write_temp("ok.json", R"({"a": [1, 2], "b": "x"})"));
  EXPECT_EQ(j["a"][1].get<int>(), 2);
  EXPECT_EQ(j["b"].get<std::string>(), "x");
}

TEST(JsonFile, MalformedAndMissingFilesNameThePath) {
  const std::string bad = write_temp("bad.json", "{\"a\": [1, 2}");
  std::string e = error_of(bad);
  EXPECT_NE(e.find(bad), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  const std::string empty = write_temp("empty.json", "");
  e = error_of(empty);
  EXPECT_NE(e.find(empty), std::string::npos) << e;
  const std::string missing = bad + ".missing";
  e = error_of(missing);
  EXPECT_NE(e.find(missing), std::string::npos) << e;
}
