// Run configuration: strict parsing, ranges, --set overrides.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "train_test_util.h"
#include "lol/config.h"
#include "training/run_config.h"
#include "util/error.h"

using namespace lol::training;

namespace {
/// The InputError message of `f`, or "" when nothing was thrown.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const lol::InputError& e) {
    return e.what();
  }
  return "";
}
nlohmann::json base() { return test::tiny_run_json("data/x", "runs/x"); }
}  // namespace

TEST(RunConfig, ParsesAndResolvesDefaults) {
  auto c = RunConfig::from_json(base(), "run.json");
  EXPECT_EQ(c.train.steps, 10);
  EXPECT_EQ(c.train.grad_accum, 1);
  EXPECT_EQ(c.data.packing, "pad");
  EXPECT_DOUBLE_EQ(c.optim.effective_muon_lr(), 2e-2);
  auto j = c.to_json();
  auto again = RunConfig::from_json(j, "resolved");
  EXPECT_EQ(again.to_json(), j);
}

TEST(RunConfig, GrowShapeIsOneOfThree) {
  auto j = base();
  EXPECT_EQ(RunConfig::from_json(j, "run.json").grow.shape, "1-sqrt");
  j["grow"]["shape"] = "sqrt";
  EXPECT_EQ(RunConfig::from_json(j, "run.json").grow.shape, "sqrt");
  j["grow"]["shape"] = "cubic";
  const auto e = error_of([&] { RunConfig::from_json(j, "run.json"); });
  EXPECT_NE(e.find("run.json:grow"), std::string::npos) << e;
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
  EXPECT_NE(e.find("1-sqrt"), std::string::npos) << e;
}

TEST(RunConfig, UnknownKeysAreRejectedByName) {
  auto j = base();
  j["train"]["stepz"] = 5;
  auto e = error_of([&] { RunConfig::from_json(j, "run.json"); });
  EXPECT_NE(e.find("run.json:train"), std::string::npos) << e;
  EXPECT_NE(e.find("'stepz'"), std::string::npos) << e;
  j = base();
  EXPECT_NE(e.find("unknown field 'stepz' (known fields: "), std::string::npos) << e;
  EXPECT_NE(e.find(", steps, "), std::string::npos) << "the known fields are listed: " << e;
  j = base();
  j["optimizer"] = nlohmann::json::object();
  e = error_of([&] { RunConfig::from_json(j, "run.json"); });
  EXPECT_NE(e.find("'optimizer'"), std::string::npos) << e;
  j = base();
  j["schedule"]["decay_shape"] = "sqrt";
  e = error_of([&] { RunConfig::from_json(j, "run.json"); });
  EXPECT_NE(e.find("'decay_shape'"), std::string::npos) << e;
}

TEST(RunConfig, OutOfRangeValuesNameTheKey) {
  struct Case {
    const char* section;
    const char* key;
    nlohmann::json value;
  };
  for (const auto& c : std::vector<Case>{{"train", "steps", 0},
                                         {"train", "grad_accum", -1},
                                         {"train", "keep_last", 0},
                                         {"optim", "lr", -0.1},
                                         {"optim", "momentum", 1.0},
                                         {"optim", "ns_steps", 0},
                                         {"grow", "fraction", 1.5},
                                         {"data", "batch_size", 0},
                                         {"schedule", "min_lr_ratio", 2.0},
                                         {"train", "steps", "ten"}}) {
    auto j = base();
    j[c.section][c.key] = c.value;
    auto e = error_of([&] { RunConfig::from_json(j, "run.json"); });
    EXPECT_NE(e.find(std::string("'") + c.key + "'"), std::string::npos) << c.section << "." << c.key << ": " << e;
    EXPECT_NE(e.find(std::string("run.json:") + c.section), std::string::npos) << e;
  }
  auto j = base();
  j["schedule"]["warmup_steps"] = 100;
  EXPECT_NE(error_of([&] { RunConfig::from_json(j, "run.json"); }).find("warmup_steps"), std::string::npos);
  j = base();
  j["init_from"] = "some/model";
  EXPECT_NE(error_of([&] { RunConfig::from_json(j, "run.json"); }).find("init_from"), std::string::npos);
  j = base();
  j["data"]["packing"] = "pack";
  EXPECT_NE(error_of([&] { RunConfig::from_json(j, "run.json"); }).find("seq_len"), std::string::npos);
}

TEST(RunConfig, SetOverridesAreTypedAndChecked) {
  test::TempDir dir("cfg");
  const std::string path = dir.path() + "/run.json";
  std::ofstream(path) << base().dump();
  auto c = RunConfig::load(path, {"train.steps=7", "optim.type=adamw", "optim.betas=[0.8,0.9]",
                                  "model.d_model=64", "train.out=elsewhere"});
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.optim.type, "adamw");
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.8);
  EXPECT_EQ(c.model["d_model"], 64);
  EXPECT_EQ(c.train.out, "elsewhere");
  auto e = error_of([&] { RunConfig::load(path, {"train.stepz=7"}); });
  EXPECT_NE(e.find("train.stepz"), std::string::npos) << e;
  // 2^64 - 1 is shown as given, not as the -1 it wraps to in int64.
  e = error_of([&] { RunConfig::load(path, {"train.seed=18446744073709551615"}); });
  EXPECT_NE(e.find("'seed' = 18446744073709551615: expected an integer <= 2^63 - 1"), std::string::npos) << e;
  e = error_of([&] { RunConfig::load(path, {"trian.steps=7"}); });
  EXPECT_NE(e.find("'trian'"), std::string::npos) << e;
  e = error_of([&] { RunConfig::load(path, {"train.steps=many"}); });
  EXPECT_NE(e.find("'steps'"), std::string::npos) << e;
  EXPECT_NE(e.find("integer"), std::string::npos) << e;
  e = error_of([&] { RunConfig::load(path, {"train.steps"}); });
  EXPECT_NE(e.find("KEY=VALUE"), std::string::npos) << e;
  // A bad value given by --set is not blamed on the file alone.
  e = error_of([&] { RunConfig::load(path, {"optim.lr=\"abc\""}); });
  EXPECT_NE(e.find(path + ":optim: field 'lr'"), std::string::npos) << e;
  EXPECT_NE(e.find("(the value comes from --set optim.lr=\"abc\")"), std::string::npos) << e;
  // The model section is checked when the model is built: attribute() names the --set there.
  const auto m = RunConfig::load(path, {"model.d_model=abc", "model.d_modell=3"});
  EXPECT_NE(m.attribute(path + ":model: field 'd_model' = \"abc\": expected an integer")
                .find("(the value comes from --set model.d_model=abc)"),
            std::string::npos);
  EXPECT_NE(m.attribute(path + ":model: unknown field 'd_modell' (known fields: d_model)")
                .find("(the value comes from --set model.d_modell=3)"),
            std::string::npos);
  EXPECT_EQ(m.attribute(path + ":model: field 'window' = 3"), path + ":model: field 'window' = 3");
  // A short run of a preset: the warmup that no longer fits says how to shorten it.
  e = error_of([&] { RunConfig::load(path, {"train.steps=1", "schedule.warmup_steps=5"}); });
  EXPECT_NE(e.find("expected <= train.steps = 1 (for a short run, e.g. --set schedule.warmup_steps=0)"),
            std::string::npos)
      << e;
}

TEST(RunConfig, PresetsParse) {
  // Every preset shipped in configs/ (and configs/compare/) parses; the LoL ones hold a
  // valid LoL model section (every architecture's: BaselinePresets.HaveACostModel).
  std::vector<std::string> presets;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(LOL_SOURCE_DIR) + "/configs"))
    if (e.path().extension() == ".json") presets.push_back(e.path().string());
  ASSERT_GE(presets.size(), 10u);
  for (const std::string& path : presets) {
    RunConfig c;
    ASSERT_NO_THROW(c = RunConfig::load(path)) << path;
    auto m = c.model;
    if (!m.contains("vocab_size")) m["vocab_size"] = 64;
    if (m.value("architecture", std::string("lol")) == "lol") EXPECT_NO_THROW(lol::LoLConfig::from_json(m, path)) << path;
  }
}
