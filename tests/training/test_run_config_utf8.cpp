// Regression tests of a fuzz_configs finding (issue 13, docs/robustness.md): a "--set"
// override whose bytes are not UTF-8 became a JSON string that nlohmann::json cannot
// write, so the next error message or run.json ended the program with
// json type_error 316 (exit 1) instead of a named InputError (exit 2).
// LibTorch-free: also built into the sanitizer build (fuzz/CMakeLists.txt, test_torchfree).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "training/run_config.h"
#include "util/error.h"

namespace lol::training {
namespace {

std::string override_error(const std::string& assignment) {
  nlohmann::json j = nlohmann::json::object();
  try {
    apply_override(j, assignment);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfigOverrideUtf8, InvalidUtf8ValueIsANamedInputError) {
  // The fuzzer's input: a number followed by stray 0xCD bytes.
  const std::string msg = override_error("optim.lr=5.0\xcd\xcd\xcd" "01");
  EXPECT_NE(msg.find("--set \"optim.lr=5.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid UTF-8"), std::string::npos) << msg;
  // The message itself is writable JSON / text (the bad bytes are shown as U+FFFD).
  EXPECT_NO_THROW((void)nlohmann::json(msg).dump());
  EXPECT_NE(msg.find("\xef\xbf\xbd"), std::string::npos) << msg;
}

TEST(RunConfigOverrideUtf8, InvalidUtf8InAKeyOrAPathIsRefused) {
  EXPECT_NE(override_error("model.\xff\xfe=1").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(override_error("train.out=runs/\xc3(").find("not valid UTF-8"), std::string::npos);
  // A truncated multi-byte sequence at the very end.
  EXPECT_NE(override_error("data.dir=data/\xe2\x82").find("not valid UTF-8"), std::string::npos);
}

TEST(RunConfigOverrideUtf8, ValidNonAsciiValuesStillWork) {
  nlohmann::json j = nlohmann::json::object();
  apply_override(j, "train.out=runs/caf\xc3\xa9-\xe4\xb8\xad");
  ASSERT_TRUE(j["train"]["out"].is_string());
  EXPECT_EQ(j["train"]["out"].get<std::string>(), "runs/caf\xc3\xa9-\xe4\xb8\xad");
  EXPECT_NO_THROW((void)j.dump());
}

}  // namespace
}  // namespace lol::training
