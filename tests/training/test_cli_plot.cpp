// `lol train` / `lol plot` through the command-line binary.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/atomic_file.h"
#include "train_test_util.h"
#include "training/metrics_log.h"
#include "training/plot.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace lol::training;

namespace {
/// Runs a shell command; returns its exit status and stores stderr in `err`.
int run(const std::string& cmd, std::string* err = nullptr, const std::string& tmp = "/tmp") {
  const std::string errfile = tmp + "/stderr.txt";
  int rc = std::system((cmd + " 2>" + errfile + " >/dev/null").c_str());
  if (err) *err = lol::io::read_file(errfile);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
}  // namespace

TEST(CliTrain, TrainsResumesAndRejectsBadKeys) {
  test::TempDir dir("cli");
  const std::string data = dir.path() + "/data", out = dir.path() + "/run", cfg = dir.path() + "/run.json";
  test::write_reverse_dataset(data, 32, 8);
  std::ofstream(cfg) << test::tiny_run_json(data, out).dump(2);
  const std::string lol = LOL_BINARY;
  std::string err;
  EXPECT_EQ(run(lol + " train --config " + cfg + " --set train.steps=4 --set train.save_every=2", &err, dir.path()), 0) << err;
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step-000004/model.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/run.json"));
  // Resume to 6 steps from the run directory with the saved run.json.
  EXPECT_EQ(run(lol + " train --resume " + out + " --set train.steps=6", &err, dir.path()), 0) << err;
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step-000006"));
  // Resuming a copy continues in the copy (its run.json names the original as train.out):
  // the original is left as it was. From a checkpoint directory: the run above it.
  const std::string copy = dir.path() + "/copy";
  fs::copy(out, copy, fs::copy_options::recursive);
  EXPECT_EQ(run(lol + " train --resume " + copy + " --set train.steps=8 --set train.save_every=2", &err, dir.path()), 0)
      << err;
  EXPECT_TRUE(fs::exists(copy + "/checkpoints/step-000008"));
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step-000008"));
  EXPECT_NE(lol::io::read_file(out + "/latest").find("step-000006"), std::string::npos);
  EXPECT_EQ(run(lol + " train --resume " + copy + "/checkpoints/step-000008/ --set train.steps=10 --set train.save_every=2",
                &err, dir.path()),
            0)
      << err;
  EXPECT_TRUE(fs::exists(copy + "/checkpoints/step-000010"));
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step-000010"));
  // Unknown key / bad value: exit 2 and the key is named.
  EXPECT_EQ(run(lol + " train --config " + cfg + " --set train.stepz=3", &err, dir.path()), 2);
  EXPECT_NE(err.find("train.stepz"), std::string::npos) << err;
  EXPECT_EQ(run(lol + " train --config " + cfg + " --set optim.lr=-1 --set train.out=" + dir.path() + "/r2", &err, dir.path()), 2);
  EXPECT_NE(err.find("'lr'"), std::string::npos) << err;
  // Starting over an existing run is refused.
  EXPECT_EQ(run(lol + " train --config " + cfg, &err, dir.path()), 2);
  EXPECT_NE(err.find("--resume"), std::string::npos) << err;

  // lol plot renders the metrics.
  EXPECT_EQ(run(lol + " plot " + out + "/metrics.jsonl --out " + dir.path() + "/loss.png", &err, dir.path()), 0) << err;
  ASSERT_TRUE(fs::exists(dir.path() + "/loss.png"));
  std::ifstream png(dir.path() + "/loss.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

TEST(Plot, ScriptHasTrainAndValidSeriesPerInput) {
  test::TempDir dir("plot");
  const std::string m1 = dir.path() + "/a/metrics.jsonl", m2 = dir.path() + "/b/metrics.jsonl";
  fs::create_directories(dir.path() + "/a");
  fs::create_directories(dir.path() + "/b");
  std::ofstream(m1) << R"({"step":1,"loss":3.0,"tokens":10}
{"step":2,"loss":2.5,"tokens":20}
{"step":2,"valid_loss":2.7,"valid_acc":0.1,"tokens":20}
)";
  std::ofstream(m2) << R"({"step":1,"loss":3.1,"tokens":10}
)";
  PlotOptions o;
  o.inputs = {m1, m2};
  o.out = dir.path() + "/x.svg";
  o.x = "tokens";
  auto s = gnuplot_script(o, dir.path());
  EXPECT_NE(s.find("set terminal svg"), std::string::npos);
  EXPECT_NE(s.find("a train"), std::string::npos);
  EXPECT_NE(s.find("a valid"), std::string::npos);
  EXPECT_NE(s.find("b train"), std::string::npos);
  EXPECT_EQ(s.find("b valid"), std::string::npos);  // no evaluation records in b
  EXPECT_EQ(lol::io::read_file(dir.path() + "/train-0.dat"), "10 3.0\n20 2.5\n");
  EXPECT_EQ(lol::io::read_file(dir.path() + "/valid-0.dat"), "20 2.7\n");
  // --x elapsed: an evaluation record without "elapsed" (runs before it was logged there)
  // takes the value of the training record of its step, else the value linear in the step
  // between the nearest records that have it; none beyond the last.
  const std::string m3 = dir.path() + "/c/metrics.jsonl";
  fs::create_directories(dir.path() + "/c");
  std::ofstream(m3) << R"({"step":1,"loss":3.0,"elapsed":0.5}
{"step":2,"loss":2.5,"elapsed":1.25}
{"step":2,"valid_loss":2.7}
{"step":3,"valid_loss":2.65}
{"step":5,"loss":2.25,"elapsed":2.75}
{"step":6,"valid_loss":2.6}
)";
  PlotOptions e = o;
  e.inputs = {m3};
  e.x = "elapsed";
  gnuplot_script(e, dir.path());
  EXPECT_EQ(lol::io::read_file(dir.path() + "/valid-0.dat"), "1.25 2.7\n1.75 2.65\n");  // step 6: after the last elapsed
  e.inputs = {dir.path() + "/c"};  // a run directory stands for its metrics.jsonl
  EXPECT_NE(gnuplot_script(e, dir.path()).find("c valid"), std::string::npos);
  EXPECT_EQ(lol::io::read_file(dir.path() + "/valid-0.dat"), "1.25 2.7\n1.75 2.65\n");
  EXPECT_NE(gnuplot_script(e, dir.path()).find("set xlabel 'elapsed (s)'"), std::string::npos);
  // Files not named metrics.jsonl are labelled by their own name (two in one directory differ).
  fs::copy_file(m3, dir.path() + "/c/old_run.jsonl");
  e.inputs = {m3, dir.path() + "/c/old_run.jsonl"};
  const auto two = gnuplot_script(e, dir.path());
  EXPECT_NE(two.find("'c valid'"), std::string::npos) << two;
  EXPECT_NE(two.find("'old_run valid' noenhanced"), std::string::npos) << two;  // literal: no subscript
  o.x = "bogus";
  EXPECT_THROW(gnuplot_script(o, dir.path()), lol::InputError);
  o.x = "flops";  // no record has flops
  EXPECT_THROW(gnuplot_script(o, dir.path()), lol::InputError);
  // The image format follows the output name: other names are refused, naming --out.
  o.x = "tokens";
  for (const std::string bad : {"/x", "/x.pdf", "/png"}) {
    o.out = dir.path() + bad;
    try {
      gnuplot_script(o, dir.path());
      ADD_FAILURE() << "accepted " << o.out;
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--out"), std::string::npos) << e.what();
    }
  }
  o.out = dir.path() + "/x.png";
  EXPECT_NE(gnuplot_script(o, dir.path()).find("set terminal pngcairo"), std::string::npos);
  // A line break in the title cannot start a gnuplot command of its own.
  o.title = "x\nsystem(\"touch pwned\")";
  const std::string injected = gnuplot_script(o, dir.path());
  EXPECT_NE(injected.find("set title 'x system(\"touch pwned\")' noenhanced\n"), std::string::npos) << injected;
  // Problems gnuplot would hit are input errors named before it runs (and no empty image).
  o.title = "t";
  auto expect_refused = [&](const std::string& needle) {
    try {
      plot_metrics(o);
      ADD_FAILURE() << "accepted, expected " << needle;
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(o.out)) << o.out;
  };
  o.out = dir.path() + "/nodir/x.png";
  expect_refused("directory " + dir.path() + "/nodir does not exist");
  o.out = dir.path() + "/neg.png";
  std::ofstream(dir.path() + "/neg.jsonl") << R"({"step":1,"loss":-1,"tokens":10})" << "\n";
  o.inputs = {dir.path() + "/neg.jsonl"};
  o.log_y = true;
  expect_refused("--log-y: " + dir.path() + "/neg.jsonl has loss = -1");
  o.log_y = false;
  // A loss that is not a number is refused by record and field (it was skipped silently).
  std::ofstream(dir.path() + "/str.jsonl") << R"({"step":1,"loss":"1.0","tokens":10})" << "\n";
  o.inputs = {dir.path() + "/str.jsonl"};
  expect_refused(dir.path() + "/str.jsonl: record 1: field 'loss' = \"1.0\": expected a number");
  // An image over its own input is refused (the metrics were overwritten).
  std::ofstream(dir.path() + "/same.png") << R"({"step":1,"loss":1.0,"tokens":10})" << "\n";
  o.inputs = {dir.path() + "/same.png"};
  o.out = dir.path() + "/same.png";
  try {
    plot_metrics(o);
    ADD_FAILURE() << "wrote the image over its input";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is the input"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lol::io::read_file(o.out), "{\"step\":1,\"loss\":1.0,\"tokens\":10}\n");
  // A last line cut by a kill mid-write is left out; a bad line before it is refused.
  std::ofstream(dir.path() + "/cut.jsonl") << "{\"step\":1,\"loss\":2.0,\"tokens\":10}\n{\"step\":2,\"lo";
  EXPECT_EQ(read_metrics(dir.path() + "/cut.jsonl").size(), 1u);
  std::ofstream(dir.path() + "/bad.jsonl") << "{\"step\":1,\"lo\n{\"step\":2,\"loss\":2.0}\n";
  EXPECT_THROW(read_metrics(dir.path() + "/bad.jsonl"), lol::InputError);
  // The message says what is wrong with the line: invalid JSON (NaN), or not an object.
  std::ofstream(dir.path() + "/nan.jsonl") << "{\"step\":1,\"loss\":NaN}\n[1]\n";
  std::ofstream(dir.path() + "/list.jsonl") << "[1]\n{\"step\":1,\"loss\":2.0}\n";
  for (const auto& [file, says] : std::vector<std::pair<std::string, std::string>>{
           {"/nan.jsonl", "nan.jsonl:1: not valid JSON (NaN and Infinity are not JSON numbers; null is)"},
           {"/list.jsonl", "list.jsonl:1: a JSON array, expected an object"}}) {
    try {
      read_metrics(dir.path() + file);
      ADD_FAILURE() << "accepted " << file;
    } catch (const lol::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}
