// `lol layerroute` refusals end to end on a tiny Hugging Face Qwen2 folder (the fixtures
// of tests/hf: write_tiny_checkpoint, a byte-level ChatML tokenizer): the protocol's
// non-empty --out, training options refused before --out is created, malformed training
// records in layerroute.json, a resumed training with another --log-every, and run directories / other architectures given as --base.
#include <filesystem>

#include <gtest/gtest.h>

#include "baselines/dense_trainable.h"
#include "baselines/moe_config.h"
#include "hf/hf_test_util.h"
#include "lol/config.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "training/train_checkpoint.h"

namespace lol::layerroute::cli_test {
namespace {

namespace fs = std::filesystem;
using ::lol_test::read_text;
using ::lol_test::TempDir;
using ::lol_test::write_text;
using reftest::quote;
using reftest::run_lol;
using reftest::run_lol_all;


/// A tiny Qwen2 folder (4 layers, 300 ids, float32) with the ChatML tokenizer in `dir`,
/// and `n` question/answer samples in `data`.
void write_base_and_data(const std::string& dir, const std::string& data, int n = 6) {
  hf::test::TinyShape s;
  s.vocab = 300;
  s.layers = 4;
  fs::create_directories(dir);
  hf::test::write_tiny_checkpoint(dir, s, 5, torch::kFloat32);
  hf::test::chatml_byte_tokenizer().save(dir);
  std::string jsonl;
  for (int i = 0; i < n; ++i)
    jsonl += "{\"question\": \"what is " + std::to_string(i) + " plus one?\", \"answer\": \"" + std::to_string(i + 1) +
             "\"}\n";
  write_text(data, jsonl);
}

void expect_refused(const reftest::RunResult& r, const std::vector<std::string>& says, const std::string& label) {
  EXPECT_EQ(r.code, 2) << label << ": " << r.out;
  for (const auto& s : says) EXPECT_NE(r.out.find(s), std::string::npos) << label << ": '" << s << "' in\n" << r.out;
}

// `eval --seeds` into a --out holding an earlier protocol trained every seed again and
// replaced its adapters and protocol.json: refused without --reuse or --overwrite.
TEST(CliLayerRouteChecks, ProtocolRefusesANonEmptyOutWithoutReuseOrOverwrite) {
  TempDir d("lr_cli_protocol_out");
  const std::string base = d / "base", data = d / "train.jsonl", out = d / "proto";
  write_base_and_data(base, data);
  fs::create_directories(out + "/seed-0");
  write_text(out + "/seed-0/layerroute.json", "{}");
  write_text(out + "/protocol.json", "[]");
  const std::string proto = "layerroute eval --base " + quote(base) + " --train-data " + quote(data) + " --data " +
                            quote(data) + " --seeds 1 --steps 1 --batch 2 --accum 1 --samples 2 --timing-samples 0 "
                            "--max-len 128 --out " + quote(out);
  auto r = run_lol_all({proto, proto + " --reuse --overwrite", "layerroute eval --adapter " + quote(out + "/seed-0") +
                                                                   " --data " + quote(data) + " --overwrite"});
  expect_refused(r[0], {"--out " + out + ": not empty", "seed-0/, protocol.json", "pass --reuse", "--overwrite"},
                 "no flag");
  expect_refused(r[1], {"excludes"}, "both");
  expect_refused(r[2], {"--overwrite applies to the protocol (--seeds N) only"}, "--adapter");
  EXPECT_EQ(read_text(out + "/seed-0/layerroute.json"), "{}") << "the earlier seed was kept";
  EXPECT_EQ(read_text(out + "/protocol.json"), "[]");
}

// Training options are checked before --out is created: a refused --steps 0 leaves
// nothing behind, so the corrected command runs without --overwrite.
TEST(CliLayerRouteChecks, RefusedTrainingOptionsLeaveNoOutput) {
  TempDir d("lr_cli_steps0");
  const std::string base = d / "base", data = d / "train.jsonl", out = d / "adapter";
  write_base_and_data(base, data);
  const std::string train = "layerroute train --base " + quote(base) + " --data " + quote(data) +
                            " --batch 2 --accum 1 --max-len 128 --out " + quote(out);
  const auto refused = run_lol(train + " --steps 0");  // one after the other: the same --out
  expect_refused(refused, {"steps", "0"}, "--steps 0");
  EXPECT_FALSE(fs::exists(out));
  const auto ok = run_lol(train + " --steps 1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_TRUE(fs::exists(out + "/layerroute.json"));
  EXPECT_FALSE(fs::exists(out + "/train_log.jsonl.partial"));
}

// A training record in layerroute.json "extra" is read as strictly as the rest: a field
// present with a wrong type or range is refused naming the file and the field, never
// replaced by a default (the seed picks the held-out samples); a message about the cut
// names where max_len came from, not a --max-len the user never gave.
TEST(CliLayerRouteChecks, MalformedTrainingRecordsAreRefusedNamingTheField) {
  TempDir d("lr_cli_record");
  const std::string base = d / "base", data = d / "train.jsonl", ad = d / "ad";
  write_base_and_data(base, data);
  auto t = run_lol("layerroute train --base " + quote(base) + " --data " + quote(data) +
                   " --steps 1 --batch 2 --accum 1 --max-len 128 --no-progress --out " + quote(ad));
  ASSERT_EQ(t.code, 0) << t.out;
  // One copy of the adapter per edit of extra.
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/train/seed", "abc"}, {"/train/seed", -1}, {"/max_len", -1}, {"/max_len", 20},
      {"/system", 5},         {"/loss_tokens", "prompt"}, {"/tokenizer", 7}};
  std::vector<std::string> cmds, dirs;
  for (size_t i = 0; i < edits.size(); ++i) {
    const std::string dir = d / ("ad" + std::to_string(i));
    fs::copy(ad, dir, fs::copy_options::recursive);
    auto j = nlohmann::json::parse(read_text(dir + "/layerroute.json"));
    j["extra"][nlohmann::json::json_pointer(edits[i].first)] = edits[i].second;
    write_text(dir + "/layerroute.json", j.dump(2));
    dirs.push_back(dir);
    cmds.push_back("layerroute eval --adapter " + quote(dir) + " --data " + quote(data) +
                   " --samples 2 --timing-samples 0");
  }
  cmds.push_back("layerroute generate --adapter " + quote(dirs[4]) + " --chat --prompt hi --max-new 0");
  cmds.push_back(cmds[3] + " --max-len 20");  // the flag given: the message names it
  auto r = run_lol_all(cmds);
  const std::string expect_seed =
      ": expected a non-negative integer (the training seed; it selects the held-out samples)";
  expect_refused(r[0], {dirs[0] + "/layerroute.json: field 'extra.train.seed' = \"abc\"" + expect_seed}, "seed abc");
  expect_refused(r[1], {dirs[1] + "/layerroute.json: field 'extra.train.seed' = -1" + expect_seed}, "seed -1");
  expect_refused(r[2], {dirs[2] + "/layerroute.json: field 'extra.max_len' = -1: expected an integer in [8, 1048576]"},
                 "max_len -1");
  // max_len 20 from the file cuts every sample before its answer: the message says so.
  expect_refused(r[3], {"no sample keeps an assistant token within max_len 20 (the training's, from " + dirs[3] +
                        "/layerroute.json extra.max_len; --max-len overrides it)"},
                 "max_len 20");
  EXPECT_EQ(r[3].out.find("--max-len 20"), std::string::npos) << r[3].out;
  expect_refused(r[4], {dirs[4] + "/layerroute.json: field 'extra.system' = 5: expected a string"}, "system 5");
  expect_refused(r[5],
                 {dirs[5] + "/layerroute.json: field 'extra.loss_tokens' = \"prompt\": expected \"assistant\" or \"all\""},
                 "loss_tokens");
  expect_refused(r[6], {dirs[6] + "/layerroute.json: field 'extra.tokenizer' = 7: expected a string or null"},
                 "tokenizer");
  expect_refused(r[7], {dirs[4] + "/layerroute.json: field 'extra.system' = 5"}, "generate");
  expect_refused(r[8], {"no sample keeps an assistant token within --max-len 20"}, "--max-len 20");
}

// --resume refuses another --log-every (the resumed log would not be the uninterrupted
// one); --save-every may change (checkpoints only), and a checkpoint whose run.json
// predates log_every is resumed with any.
TEST(CliLayerRouteChecks, ResumeRefusesAnotherLogEvery) {
  TempDir d("lr_cli_log_every");
  const std::string base = d / "base", data = d / "train.jsonl", ad = d / "ad";
  write_base_and_data(base, data, 5);
  const std::string lol = "LOL_NUM_THREADS=1 " + quote(LOL_BINARY) + " ";
  const std::string train = "layerroute train --base " + quote(base) + " --data " + quote(data) +
                            " --steps 120 --batch 2 --accum 1 --max-len 128 --no-progress --out " + quote(ad) + " ";
  // SIGTERM once the first step is logged: the step ends, a checkpoint is saved, exit 0.
  const std::string partial = ad + "/train_log.jsonl.partial";
  auto k = reftest::run_cmd(lol + train + "--log-every 1 --save-every 1000 2>&1 & pid=$!; i=0; while [ ! -s " +
                            quote(partial) + " ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; kill -TERM $pid; "
                            "wait $pid; echo status $?");
  ASSERT_NE(k.out.find("status 0"), std::string::npos) << k.out;
  ASSERT_TRUE(fs::exists(ad + "/train_state/latest")) << k.out;
  const std::string run_json = training::resolve_checkpoint(ad + "/train_state") + "/run.json";
  EXPECT_EQ(nlohmann::json::parse(read_text(run_json)).at("log_every"), 1);
  expect_refused(run_lol(train + "--log-every 2 --resume"),
                 {"the unfinished training differs from this command (log_every = 1 there, 2 here)"}, "--log-every 2");
  // An older checkpoint (no log_every recorded) is resumed, with another --save-every too.
  auto j = nlohmann::json::parse(read_text(run_json));
  j.erase("log_every");
  write_text(run_json, j.dump(2));
  auto r = run_lol(train + "--log-every 2 --save-every 7 --resume");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(ad + "/layerroute.json")) << r.out;
}

// --base may be a `lol train` run of a dense model (its latest checkpoint, recorded as
// the adapter's base); a LoL or MoE checkpoint is refused for its architecture before
// any tokenizer is looked for.
TEST(CliLayerRouteChecks, BaseRunDirectoryResolvesAndOtherArchitecturesAreRefused) {
  TempDir d("lr_cli_base_run");
  const std::string hf_base = d / "hf", data = d / "train.jsonl";
  write_base_and_data(hf_base, data);
  baselines::DenseConfig c;
  c.vocab_size = 300;
  c.d_model = 32;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 48;
  c.max_seq_len = 128;
  baselines::DenseModel m(c);
  m->reset_parameters(9);
  const std::string run = d / "run", ckpt = run + "/checkpoints/step-5";
  fs::create_directories(ckpt);
  baselines::DenseTrainable(m).save(ckpt, nlohmann::json::object());
  write_text(run + "/latest", "step-5\n");
  hf::test::chatml_byte_tokenizer().save(ckpt);
  const std::string lol_run = d / "lol_run", moe = d / "moe";
  fs::create_directories(lol_run + "/checkpoints/step-1");
  write_text(lol_run + "/checkpoints/step-1/config.json", LoLConfig{}.to_json().dump(2));
  write_text(lol_run + "/latest", "step-1\n");
  fs::create_directories(moe);
  write_text(moe + "/config.json", baselines::MoEConfig{}.to_json().dump(2));
  const std::string train = "layerroute train --data " + quote(data) +
                            " --steps 1 --batch 2 --accum 1 --max-len 128 --no-progress --base ";
  auto r = run_lol_all({train + quote(run) + " --out " + quote(d / "ad"),
                        train + quote(lol_run) + " --out " + quote(d / "ad2"),
                        train + quote(moe) + " --out " + quote(d / "ad3"),
                        train + quote(d / "nothing") + " --out " + quote(d / "ad4")});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  EXPECT_NE(r[0].out.find("note: --base " + run + " is a training run: using its latest checkpoint " + ckpt),
            std::string::npos)
      << r[0].out;
  const auto rec = nlohmann::json::parse(read_text(d / "ad/layerroute.json"));
  EXPECT_TRUE(fs::equivalent(rec.at("base").get<std::string>(), ckpt)) << rec.at("base");
  expect_refused(r[1],
                 {"LayerRoute needs a dense model",
                  lol_run + "/checkpoints/step-1 is a LoL checkpoint"},
                 "LoL run");
  expect_refused(r[2], {"LayerRoute needs a dense model", moe + " is an MoE checkpoint"}, "MoE");
  for (int i = 1; i < 3; ++i) EXPECT_EQ(r[i].out.find("tokenizer"), std::string::npos) << r[i].out;
  expect_refused(r[3], {"--base " + (d / "nothing") + ": not a model directory"}, "missing");
  // The adapter trained on the run evaluates against it (its recorded checkpoint), and
  // against the run given again as --base.
  auto e = run_lol_all({"layerroute eval --adapter " + quote(d / "ad") + " --data " + quote(data) +
                            " --samples 2 --timing-samples 0",
                        "layerroute eval --adapter " + quote(d / "ad") + " --base " + quote(run) + " --data " +
                            quote(data) + " --samples 2 --timing-samples 0"});
  for (const auto& x : e) EXPECT_EQ(x.code, 0) << x.out;
}

// A base whose layers the gated decoder does not run (here a dense checkpoint with
// strided window attention) is refused from its config.json, before the data is read
// (a --data file that does not exist).
TEST(CliLayerRouteChecks, UnsupportedBaseIsRefusedBeforeTheData) {
  TempDir d("lr_cli_strided");
  const std::string base = d / "base";
  fs::create_directories(base);
  baselines::DenseConfig c;
  c.vocab_size = 64;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.ffn_hidden = 32;
  c.n_layers = 2;
  c.max_seq_len = 64;
  c.attention = "strided";
  c.window = 8;
  c.stride = 4;
  write_text(base + "/config.json", c.to_json().dump(2));
  const auto r = run_lol("layerroute train --base " + quote(base) + " --data " + quote(d / "missing.jsonl") +
                         " --steps 1 --out " + quote(d / "ad"));
  expect_refused(r, {base + "/config.json", "layer 0 uses strided window attention"}, "strided base");
  EXPECT_EQ(r.out.find("missing.jsonl"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "ad"));
}

}  // namespace
}  // namespace lol::layerroute::cli_test
