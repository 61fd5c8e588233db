// lol compare (issue 9): step planning reproduces the trainer's FLOPs exactly (LoL
// with growing, dense, MoE), the comparison writes its table and refuses configs that
// would see different data; `lol info` reports every architecture.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <sstream>

#include "../common/test_files.h"
#include "baseline_test_util.h"
#include "baselines/compare.h"
#include "baselines/flops.h"
#include "baselines/looped_config.h"
#include "core/tensor_io.h"
#include "io/json_file.h"
#include "training/train_test_util.h"
#include "training/train_checkpoint.h"
#include "training/trainer.h"
#include "util/error.h"

using namespace lol::baselines;
namespace tt = lol::training::test;

namespace {

nlohmann::json dense_model_json() {
  return {{"architecture", "dense"}, {"d_model", 32}, {"n_heads", 2},     {"n_kv_heads", 2},
          {"ffn_hidden", 64},        {"n_layers", 3}, {"max_seq_len", 64}, {"attention", "sliding"},
          {"window", 4}};
}

nlohmann::json moe_model_json() {
  return {{"architecture", "moe"}, {"d_model", 32}, {"n_heads", 2}, {"n_kv_heads", 2}, {"ffn_hidden", 64},
          {"n_prelude", 1},        {"core_depth", 2}, {"n_coda", 1}, {"n_experts", 3},  {"top_k", 2},
          {"window", 4},           {"stride", 2},   {"max_seq_len", 64}};
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

double metrics_flops(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::string line;
  double f = 0;
  while (std::getline(in, line)) f = std::max(f, nlohmann::json::parse(line).value("flops", 0.0));
  return f;
}

std::string run_cmd(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p));
  return out;
}

}  // namespace

TEST(Compare, PlannedFlopsEqualTrainerFlops) {
  btest::TempDir dir("plan");
  tt::write_reverse_dataset(dir.path() + "/data", 60, 10);
  // A looped model with truncated backprop: the plan charges the backward of its last
  // backprop_depth iterations only, as the trainer does.
  const nlohmann::json looped = {{"architecture", "looped"}, {"d_model", 32},     {"n_heads", 2},
                                 {"n_kv_heads", 2},          {"ffn_hidden", 64},  {"n_prelude", 1},
                                 {"n_recur", 1},             {"n_coda", 1},       {"recurrence", 4},
                                 {"backprop_depth", 1},      {"max_seq_len", 64}};
  for (const auto& model : {nlohmann::json(), dense_model_json(), moe_model_json(), looped}) {
    auto j = tt::tiny_run_json(dir.path() + "/data", dir.path() + "/run-" + std::to_string(std::rand()));
    if (!model.is_null()) {
      j["model"] = model;
      j.erase("grow");
    }
    auto cfg = lol::training::RunConfig::from_json(j, "test");
    auto ds = lol::data::Dataset::open(cfg.data.dir);
    auto m = lol::training::make_model(cfg.model, "test", ds.vocab_size(), 16, 0);
    FlopsPlanner plan(cfg, *m);
    const double f7 = plan.run_flops(7);
    EXPECT_GT(f7, plan.run_flops(6));
    EXPECT_EQ(plan.steps_for(f7, 100), 7);
    EXPECT_EQ(plan.steps_for(f7 * 0.999, 100), 7);
    EXPECT_THROW(plan.steps_for(f7 * 100, 5), lol::InputError);
    cfg.train.steps = 7;
    lol::training::run_training(cfg);
    EXPECT_NEAR(metrics_flops(cfg.train.out), f7, 1e-9 * f7) << j["model"].dump();
  }
}

/// A LoL and a dense config (files lol.json, dense.json in `dir`) on a reverse-task
/// dataset, with a budget of 6 dense steps. Each model's train.steps is planned from the
/// budget: the files' own steps (1) are fewer than their warmup, which is fine (the
/// warmup is checked against the planned steps).
CompareOptions two_model_comparison(const btest::TempDir& dir, nlohmann::json& lol_json, nlohmann::json& dense_json) {
  tt::write_reverse_dataset(dir.path() + "/data", 60, 10);
  lol_json = tt::tiny_run_json("unused", "unused");
  lol_json["train"]["eval_every"] = 0;
  dense_json = lol_json;
  dense_json["model"] = dense_model_json();
  dense_json.erase("grow");
  auto one_step = [](nlohmann::json j) {
    j["train"]["steps"] = 1;
    return j;
  };
  write_json(dir.path() + "/lol.json", one_step(lol_json));
  write_json(dir.path() + "/dense.json", one_step(dense_json));
  CompareOptions o;
  o.configs = {dir.path() + "/lol.json", dir.path() + "/dense.json"};
  o.data_dir = dir.path() + "/data";
  o.out_dir = dir.path() + "/out";
  o.progress = false;
  auto cfg = lol::training::RunConfig::from_json(dense_json, "t");
  cfg.data.dir = o.data_dir;
  auto m = lol::training::make_model(cfg.model, "t", 10, 16, 0);
  o.flops_budget = FlopsPlanner(cfg, *m).run_flops(6) * 0.99;
  return o;
}

TEST(Compare, RunsModelsToTheBudgetAndWritesTable) {
  btest::TempDir dir("compare");
  nlohmann::json lol_json, dense_json;
  auto o = two_model_comparison(dir, lol_json, dense_json);
  const auto es = run_compare(o).entries;
  ASSERT_EQ(es.size(), 2u);
  for (const auto& e : es) {
    EXPECT_GE(e.flops, o.flops_budget) << e.name;
    EXPECT_NEAR(e.flops, e.planned_flops, 1e-9 * e.flops) << e.name;
    EXPECT_GT(e.valid_loss, 0) << e.name;
    EXPECT_GT(e.tokens, 0) << e.name;
  }
  EXPECT_EQ(es[1].steps, 6);
  EXPECT_EQ(es[0].architecture, "lol");
  EXPECT_EQ(es[1].architecture, "dense");
  auto j = lol::io::read_json_file(o.out_dir + "/compare.json");
  EXPECT_EQ(j["models"].size(), 2u);
  std::ifstream md(o.out_dir + "/compare.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("| dense | dense |"), std::string::npos) << text;
  // Reusing the output directory, or configs with different data, are refused.
  lol_test::expect_input_error([&] { run_compare(o); }, {"holds a comparison (compare_plan.json): continue it with --resume"});
  dense_json["data"]["batch_size"] = 4;
  write_json(dir.path() + "/dense.json", dense_json);
  o.out_dir = dir.path() + "/out2";
  try {
    run_compare(o);
    ADD_FAILURE() << "different data sections accepted";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data"), std::string::npos) << e.what();
  }
  // --set of what compare sets itself is refused, not dropped.
  for (const std::string set : {"data.dir=/elsewhere", "train.out=/tmp/x", "train.steps=3"}) {
    o.overrides = {set};
    lol_test::expect_input_error([&] { run_compare(o); }, {"--set " + set + ": compare sets "});
  }
  o.overrides.clear();
  dense_json["data"] = lol_json["data"];
  dense_json["schedule"]["warmup_steps"] = 7;
  write_json(dir.path() + "/dense.json", dense_json);
  lol_test::expect_input_error([&] { run_compare(o); },
                               {"dense.json:schedule: field 'warmup_steps' = 7: expected <= the 6 steps planned for "
                                "--flops"});
  EXPECT_FALSE(std::filesystem::exists(o.out_dir)) << "refused before anything is written";
  // The valid loss column compares only losses over the same batches; a model continued
  // from a directory has no planned initialisation.
  dense_json["schedule"] = lol_json["schedule"];
  dense_json["train"]["eval_batches"] = lol_json["train"].value("eval_batches", int64_t(0)) + 1;
  write_json(dir.path() + "/dense.json", dense_json);
  lol_test::expect_input_error([&] { run_compare(o); }, {"dense.json: train.eval_batches = ", "same batches"});
  dense_json["train"]["eval_batches"] = lol_json["train"].value("eval_batches", int64_t(0));
  dense_json["init_from"] = dir.path() + "/somewhere";
  const auto model_section = dense_json["model"];
  dense_json.erase("model");
  write_json(dir.path() + "/dense.json", dense_json);
  lol_test::expect_input_error([&] { run_compare(o); }, {"dense.json: field 'init_from'", "expected a 'model' section"});
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
}

// A comparison stopped by SIGTERM (the model in training saves a checkpoint) continues
// with --resume to the table of an uninterrupted one: the same steps, tokens, FLOPs and
// losses to the bit; another budget or a plain rerun in the same --out is refused.
TEST(Compare, StoppedComparisonResumesToTheSameTable) {
  btest::TempDir dir("compare_resume");
  nlohmann::json lol_json, dense_json;
  auto o = two_model_comparison(dir, lol_json, dense_json);
  const auto want = run_compare(o).entries;
  ASSERT_EQ(want.size(), 2u);

  o.out_dir = dir.path() + "/stopped";
  int calls = 0;
  o.hooks.before_step = [&calls](int64_t, lol::training::TrainableModel&) {
    if (++calls == 3) std::raise(SIGTERM);  // the first model, after its third step
  };
  const auto stopped = run_compare(o);
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_TRUE(stopped.entries.empty());
  ASSERT_EQ(lol::training::list_checkpoints(o.out_dir + "/lol").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/dense"));
  o.hooks = {};
  lol_test::expect_input_error([&] { run_compare(o); }, {"continue it with --resume"});
  o.resume = true;
  const double budget = o.flops_budget;
  o.flops_budget = budget * 2;
  lol_test::expect_input_error([&] { run_compare(o); }, {"the comparison there differs from this command", "flops_budget"});
  o.flops_budget = budget;
  const auto got = run_compare(o);
  EXPECT_FALSE(got.interrupted);
  ASSERT_EQ(got.entries.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got.entries[i].steps, want[i].steps);
    EXPECT_EQ(got.entries[i].tokens, want[i].tokens);
    EXPECT_EQ(got.entries[i].flops, want[i].flops);
    EXPECT_EQ(got.entries[i].train_loss, want[i].train_loss);
    EXPECT_EQ(got.entries[i].last_train_loss, want[i].last_train_loss);
    EXPECT_EQ(got.entries[i].valid_loss, want[i].valid_loss);
    EXPECT_GT(got.entries[i].wall_s, 0);
  }
  // Resuming a finished comparison trains nothing and gives the same table again.
  const auto again = run_compare(o);
  ASSERT_EQ(again.entries.size(), 2u);
  EXPECT_EQ(again.entries[1].train_loss, want[1].train_loss);
  o.out_dir = dir.path() + "/none";
  lol_test::expect_input_error([&] { run_compare(o); }, {"--resume: --out", "holds no comparison"});
}

TEST(Compare, InfoReportsEveryArchitecture) {
  btest::TempDir dir("info");
  LoopedConfig lc;
  static_cast<TransformerShape&>(lc) = btest::tiny_dense();
  lc.recurrence = 2;
  int rc = 0;
  for (const auto& cfg : {btest::tiny_dense("strided").to_json(), lc.to_json()}) {
    const std::string d = dir.path() + "/" + cfg["architecture"].get<std::string>();
    auto m = lol::training::make_model(cfg, "t", 29, 16, 0);
    m->save(d, nullptr);
    auto out = run_cmd(std::string(LOL_BINARY) + " info " + d + " --json --context 16", &rc);
    ASSERT_EQ(rc, 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["parameters"].get<int64_t>(), m->num_parameters());
    const auto want = flops_report(cost_model_from_json(cfg, "t"), 16);
    EXPECT_DOUBLE_EQ(j["forward_flops_per_token"].get<double>(), want.forward_flops);
    EXPECT_DOUBLE_EQ(j["training_flops_per_token"].get<double>(), 3 * want.forward_flops);
  }
  // Looped: each extra iteration adds the same FLOPs.
  auto f = [&](int R) {
    auto out = run_cmd(std::string(LOL_BINARY) + " info " + dir.path() + "/looped --json --recurrence " +
                           std::to_string(R),
                       &rc);
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out)["forward_flops_per_token"].get<double>();
  };
  EXPECT_NEAR(f(3) - f(2), f(5) - f(4), 1e-6 * f(5));
  EXPECT_GT(f(3), f(2));
  run_cmd(std::string(LOL_BINARY) + " info " + dir.path() + "/dense --recurrence 2", &rc);
  EXPECT_EQ(rc, 2);
}

// `lol generate` on dense (sliding: KV-cached; strided: full recomputation), looped and
// MoE checkpoints: greedy tokens are the argmax of the in-process forward of the sequence
// so far (teacher forcing), past the window, a
// stop token ends the output, the same seed samples the same tokens, and the routing
// options of LoL models are refused (exit 2).
TEST(Compare, GenerateRunsEveryArchitecture) {
  btest::TempDir dir("generate");
  LoopedConfig lc;
  static_cast<TransformerShape&>(lc) = btest::tiny_dense();
  lc.recurrence = 2;
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  const int64_t max_new = 7;
  int rc = 0;
  auto ids_of = [](const std::string& out) {
    std::vector<int64_t> v;
    std::istringstream in(out.substr(0, out.find('\n')));
    for (int64_t t; in >> t;) v.push_back(t);
    return v;
  };
  // (Dense sliding: KV-cached decoding; dense strided: full recomputation.)
  for (const auto& cfg : {btest::tiny_dense("sliding").to_json(), btest::tiny_dense("strided").to_json(), lc.to_json(),
                          btest::tiny_moe(3, 2).to_json()}) {
    const std::string arch = cfg["architecture"].get<std::string>() +
                             (cfg["architecture"] == "dense" ? "-" + cfg["attention"].get<std::string>() : "");
    const std::string d = dir.path() + "/" + arch;
    auto m = lol::training::make_model(cfg, "t", 29, 16, 0);
    btest::perturb(m->module(), 13);
    m->save(d, nullptr);
    m->module().eval();
    const std::string cmd = std::string(LOL_BINARY) + " generate --model " + d + " --tokens 3,1,4,1,5 --ids --threads 1";
    // The generated ids are the output's first line (the summary follows on stderr).
    const auto greedy = ids_of(run_cmd(cmd + " --max-new " + std::to_string(max_new), &rc));
    ASSERT_EQ(rc, 0) << arch;
    ASSERT_EQ(int64_t(greedy.size()), max_new) << arch;
    std::vector<int64_t> seq = prompt;
    torch::NoGradGuard ng;
    for (int64_t t : greedy) {
      lol::training::TrainBatch b;
      b.tokens = torch::tensor(seq, torch::kInt64).unsqueeze(0);
      b.doc_ids = torch::zeros_like(b.tokens);
      EXPECT_EQ(m->forward(b)[0][int64_t(seq.size()) - 1].argmax().item<int64_t>(), t) << arch << " after " << seq.size();
      seq.push_back(t);
    }
    // A stop token: the output ends with its first occurrence.
    const auto stopped = ids_of(run_cmd(cmd + " --max-new 7 --stop " + std::to_string(greedy[2]), &rc));
    ASSERT_EQ(rc, 0) << arch;
    const auto first = std::find(greedy.begin(), greedy.end(), greedy[2]);
    EXPECT_EQ(stopped, std::vector<int64_t>(greedy.begin(), first + 1)) << arch;
    const std::string sample = cmd + " --max-new 6 --temperature 1.5 --seed 5";
    const auto a = ids_of(run_cmd(sample, &rc));
    EXPECT_EQ(ids_of(run_cmd(sample, &rc)), a) << arch;
    EXPECT_EQ(int64_t(a.size()), 6) << arch;
    std::vector<std::string> lol_only_flags{"--depth 1"};  // every routing option once, on the looped model
    if (arch == "looped")
      lol_only_flags = {"--prompt-len 2",     "--router-only-last 1", "--depth 1",     "--prompt-window",
                        "--depth-rule cycle", "--force-path p.json",  "--trace t.json"};
    for (const auto& lol_only : lol_only_flags) {
      const auto said = run_cmd(cmd + " " + lol_only, &rc);
      EXPECT_EQ(rc, 2) << arch << " " << lol_only << ": " << said;
      EXPECT_NE(said.find("routing options apply to LoL models only"), std::string::npos) << said;
    }
  }
}

// `lol forward` on dense, looped and MoE checkpoints: the logits of the in-process
// forward (one document); the routing options of LoL models are refused (exit 2).
TEST(Compare, ForwardWritesTheLogitsOfEveryArchitecture) {
  btest::TempDir dir("forward");
  LoopedConfig lc;
  static_cast<TransformerShape&>(lc) = btest::tiny_dense();
  lc.recurrence = 2;  // random initial state: the evaluation draw
  const std::vector<int64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  std::string tokens;
  for (int64_t t : ids) tokens += std::to_string(t) + " ";
  int rc = 0;
  for (const auto& cfg : {btest::tiny_dense("sliding").to_json(), lc.to_json(), btest::tiny_moe(3, 2).to_json()}) {
    const std::string arch = cfg["architecture"].get<std::string>();
    const std::string d = dir.path() + "/" + arch;
    auto m = lol::training::make_model(cfg, "t", 29, 16, 0);
    btest::perturb(m->module(), 11);
    m->save(d, nullptr);
    m->module().eval();
    lol::training::TrainBatch b;
    b.tokens = torch::tensor(ids, torch::kInt64).unsqueeze(0);
    b.doc_ids = torch::zeros_like(b.tokens);
    torch::NoGradGuard ng;
    const auto want = m->forward(b)[0];
    const std::string out = dir.path() + "/" + arch + ".safetensors";
    auto said = run_cmd(std::string(LOL_BINARY) + " forward --model " + d + " --tokens '" + tokens + "' --out " + out, &rc);
    ASSERT_EQ(rc, 0) << said;
    std::map<std::string, std::string> meta;
    const auto got = lol::load_tensors(out, &meta);
    ASSERT_EQ(got.size(), 1u) << arch;
    EXPECT_EQ(got[0].first, "logits");
    EXPECT_EQ(meta["architecture"], arch);
    EXPECT_LT((got[0].second - want).abs().max().item<double>(), 1e-6) << arch;
    for (const char* lol_only : {"--prompt-len 2", "--router-only 1", "--depth 1"}) {
      said = run_cmd(std::string(LOL_BINARY) + " forward --model " + d + " --tokens '1 2 3' " + lol_only + " --out " +
                         dir.path() + "/x.safetensors",
                     &rc);
      EXPECT_EQ(rc, 2) << said;
      EXPECT_NE(said.find("routing options apply to LoL models only"), std::string::npos) << said;
    }
  }
}
