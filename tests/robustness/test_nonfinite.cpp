// Non-finite values (issue 13) through the real command line: a loss that becomes
// NaN/Inf stops `lol train` with exit status 3, a message naming the step and the last
// good checkpoint, and that checkpoint still loads; "skip" drops bad steps and stops
// after 10 in a row; a checkpoint holding NaN/Inf weights is refused (exit 2) with the
// tensor's name.
#include <gtest/gtest.h>

#include <limits>

#include "core/tensor_io.h"
#include "lol/checkpoint.h"
#include "robustness/robust_test_util.h"
#include "training/train_checkpoint.h"

namespace fs = std::filesystem;
using namespace lol::robust_test;

namespace {

/// Fills tensor `tensor` of the safetensors file `file` with `value` (rewrites the file).
void fill_tensor(const std::string& file, const std::string& tensor, double value) {
  std::map<std::string, std::string> meta;
  auto ts = lol::load_tensors(file, &meta);
  bool found = false;
  for (auto& [name, t] : ts)
    if (name == tensor) {
      t.fill_(value);
      found = true;
    }
  ASSERT_TRUE(found) << tensor;
  lol::save_tensors(file, ts, meta);
}

/// Fills one weight tensor of checkpoint `ck` with `value`.
void poison(const std::string& ck, const std::string& tensor, float value) {
  fill_tensor(ck + "/model.safetensors", tensor, value);
}

/// Sets every value of optimizer-state tensor `tensor` of checkpoint `ck` to `value`.
void poison_optimizer(const std::string& ck, const std::string& tensor, double value) {
  fill_tensor(ck + "/optimizer.safetensors", tensor, value);
}

struct TinyRun {
  TempDir t{"nonfinite"};
  std::string run = t.path() + "/run";
  TinyRun() {
    EXPECT_EQ(make_maze_data(t.path() + "/data"), 0);
    auto cfg = tiny_run_config(t.path() + "/data", run, 2);
    cfg["train"]["save_every"] = 1;
    std::ofstream(t.path() + "/run.json") << cfg.dump(2);
    EXPECT_EQ(run_lol({"train", "--config", t.path() + "/run.json"}, t.path() + "/a.log").status, 0);
  }
  std::string latest() const { return lol::training::resolve_checkpoint(run); }
};

}  // namespace

TEST(NonFinite, OverflowingWeightsStopTrainingWithExit3AndTheLastGoodCheckpoint) {
  TinyRun r;
  const std::string ck = r.latest();
  // Finite but huge: the forward pass overflows to Inf/NaN (loads fine, fails in training).
  poison(ck, "model.embed_tokens.weight", 3e38f);
  auto res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=5"}, r.t.path() + "/b.log");
  EXPECT_EQ(res.status, 3) << res.output;
  EXPECT_NE(res.output.find("training stopped: loss is"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("at step 3"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("Last good checkpoint: " + ck), std::string::npos) << res.output;
  // Nothing was saved over the good checkpoint; it still loads.
  EXPECT_EQ(r.latest(), ck);
  EXPECT_NO_THROW(lol::load_lol(ck));
  EXPECT_FALSE(fs::exists(r.run + "/checkpoints/step-000003"));

  // "skip": every step is bad, so the run stops after 10 consecutive skipped steps.
  res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=20", "--set",
                 "train.on_nonfinite=skip"},
                r.t.path() + "/c.log");
  EXPECT_EQ(res.status, 3) << res.output;
  EXPECT_NE(res.output.find("10 consecutive non-finite steps"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("step skipped"), std::string::npos) << res.output;
}

TEST(NonFinite, NaNOrInfWeightsInACheckpointAreRefusedByName) {
  TinyRun r;
  const std::string ck = r.latest();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    poison(ck, "model.norm.weight", bad);
    auto res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=4"}, r.t.path() + "/b.log");
    EXPECT_EQ(res.status, 2) << res.output;
    EXPECT_NE(res.output.find("error: " + ck + "/model.safetensors: tensor 'model.norm.weight' contains NaN or Inf"),
              std::string::npos)
        << res.output;
    res = run_lol({"info", ck}, r.t.path() + "/c.log");
    EXPECT_EQ(res.status, 2) << res.output;
    EXPECT_NE(res.output.find("'model.norm.weight' contains NaN or Inf"), std::string::npos) << res.output;
  }
}

// A finite float64 value that overflows float32 is caught after the conversion.
TEST(NonFinite, Float64WeightsThatOverflowFloat32AreRefused) {
  TinyRun r;
  const std::string ck = r.latest();
  std::map<std::string, std::string> meta;
  auto ts = lol::load_tensors(ck + "/model.safetensors", &meta);
  for (auto& [name, t] : ts)
    if (name == "model.norm.weight") t = t.to(torch::kFloat64).fill_(1e39);
  lol::save_tensors(ck + "/model.safetensors", ts, meta);
  auto res = run_lol({"info", ck}, r.t.path() + "/c.log");
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_NE(res.output.find("'model.norm.weight' contains NaN or Inf values (after conversion to Float)"),
            std::string::npos)
      << res.output;
}

// Optimizer state is checked on resume (finite, second moments >= 0, steps >= 0), and
// an update that overflows a weight is never saved: the last good checkpoint stays
// the one before it, and it still resumes.
TEST(NonFinite, BadOptimizerStateIsRefusedAndOverflowingUpdatesAreNotSaved) {
  TinyRun r;
  const std::string ck = r.latest();
  const std::string opt = ck + "/optimizer.safetensors";
  std::map<std::string, std::string> meta;
  const auto good = lol::load_tensors(opt, &meta);
  std::string adam;  // an AdamW-updated parameter
  for (const auto& [name, t] : good)
    if (name.size() > 11 && name.substr(name.size() - 11) == ".exp_avg_sq") adam = name.substr(0, name.size() - 11);
  ASSERT_FALSE(adam.empty());
  struct Case {
    std::string tensor;
    double value;
    std::string needle;
  };
  for (const Case& c : {Case{adam + ".exp_avg_sq", std::numeric_limits<double>::quiet_NaN(), "contains NaN or Inf"},
                        Case{adam + ".exp_avg_sq", -1.0, "negative values"},
                        Case{adam + ".step", -3.0, "expected >= 0"}}) {
    SCOPED_TRACE(c.tensor);
    lol::save_tensors(opt, good, meta);
    poison_optimizer(ck, c.tensor, c.value);
    auto res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=4"}, r.t.path() + "/b.log");
    EXPECT_EQ(res.status, 2) << res.output;
    EXPECT_NE(res.output.find(opt + ": tensor '" + c.tensor + "'"), std::string::npos) << res.output;
    EXPECT_NE(res.output.find(c.needle), std::string::npos) << res.output;
  }
  // Finite state whose update overflows the weight (huge first moment, zero second).
  lol::save_tensors(opt, good, meta);
  poison_optimizer(ck, adam + ".exp_avg", 3e38);
  poison_optimizer(ck, adam + ".exp_avg_sq", 0.0);
  auto res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=4"}, r.t.path() + "/d.log");
  EXPECT_EQ(res.status, 3) << res.output;
  EXPECT_NE(res.output.find("parameter '" + adam + "' is not finite after the update of step 3"), std::string::npos)
      << res.output;
  EXPECT_NE(res.output.find("Last good checkpoint: " + ck), std::string::npos) << res.output;
  EXPECT_EQ(r.latest(), ck);
  EXPECT_FALSE(fs::exists(r.run + "/checkpoints/step-000003"));
  lol::save_tensors(opt, good, meta);
  res = run_lol({"train", "--resume", r.run, "--no-progress", "--set", "train.steps=3"}, r.t.path() + "/e.log");
  EXPECT_EQ(res.status, 0) << res.output;
}

// Inference checks what it computes: weights that load (finite) but overflow float32 in
// the forward pass make every inference command stop with exit status 3 and a message
// naming what held NaN/Inf, instead of writing, sampling from or reporting NaN (cached
// decoding included, with and without the routed core; `eval lm`: LmEval tests).
TEST(NonFinite, OverflowingWeightsStopInferenceCommandsWithExit3) {
  TinyRun r;
  const std::string ck = r.latest(), data = r.t.path() + "/data", out = r.t.path() + "/out";
  poison(ck, "model.embed_tokens.weight", 3e38f);  // the logits overflow
  poison(ck, "model.router.weight", 3e38f);        // the router's logits overflow
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"forward", "--model", ck, "--tokens", "1 2 3 4 5 6 7 8 9 10", "--out", out + ".safetensors"}, "forward: the "},
      {{"generate", "--model", ck, "--tokens", "1 2 3", "--max-new", "4", "--ids"},
       "generation: the router probabilities at routed depth 1"},
      {{"generate", "--model", ck, "--tokens", "1 2 3", "--max-new", "4", "--ids", "--depth", "0"},
       "generation: the logits of prompt 0 for new token "},
      {{"paths", "extract", "--model", ck, "--data", data, "--out", out}, "routing statistics: the router probabilities"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args[0]);
    auto res = run_lol(c.args, r.t.path() + "/inf.log");
    EXPECT_EQ(res.status, 3) << res.output;
    EXPECT_NE(res.output.find("error: " + c.needle), std::string::npos) << res.output;
    EXPECT_NE(res.output.find(": NaN or Inf values (the model's activations overflowed"), std::string::npos)
        << res.output;
  }
  EXPECT_FALSE(fs::exists(out + ".safetensors"));  // nothing half-true was written
}
