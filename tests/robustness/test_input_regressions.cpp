// Regression tests for malformed inputs found by the audit and the fuzzers (issue 13,
// docs/robustness.md): each one used to crash, allocate without bound or exit with an
// internal error; now it throws lol::InputError naming the file and field.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include "core/tensor_io.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/safetensors.h"
#include "lol/checkpoint.h"
#include "lol/config.h"
#include "lol/model.h"
#include "dataset/shards.h"
#include "training/train_checkpoint.h"
#include "robustness/robust_test_util.h"
#include "tokenizers/bpe_model.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace fs = std::filesystem;
using lol::InputError;
using namespace lol::robust_test;

namespace {

/// Expects `f` to throw InputError whose message contains every string of `parts`.
template <typename F>
void expect_input_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected lol::InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

nlohmann::json byte_level_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  // The 256 byte tokens of GPT-2's byte-level alphabet, via the byte tokenizer's own spelling.
  lol::tokenizers::ByteTokenizer bt(std::vector<std::string>{});
  for (int32_t id = 0; id < 256; ++id) vocab[*bt.id_to_token(id)] = id;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

}  // namespace

// Audit: a vocabulary id near INT32_MAX made BpeModel size its id tables by it
// (std::bad_alloc, "internal error", exit 1).
TEST(InputRegressions, BpeVocabularyIdFarBeyondItsSizeIsRefused) {
  std::unordered_map<std::string, int32_t> vocab{{"a", 0}, {"b", 2147483000}};
  expect_input_error([&] { lol::tokenizers::BpeModel m(vocab, {}, {}, "t.json: model"); },
                     {"t.json: model.vocab[\"b\"]", "id 2147483000", "expected 0 <= id < 1048578"});
  // Gaps within the allowance are fine (ids need not be dense).
  vocab["b"] = 1000;
  EXPECT_NO_THROW(lol::tokenizers::BpeModel(vocab, {}, {}, "t.json: model"));

  auto j = byte_level_tokenizer_json();
  j["model"]["vocab"]["zz"] = 2000000000;
  expect_input_error([&] { lol::tokenizers::tokenizer_from_hf_json(j, "tok.json"); },
                     {"tok.json", "vocab[\"zz\"]", "id 2000000000"});
}

// Audit: an added token with id 10^9 was accepted and made vocab_size() 10^9 + 1 (a
// dataset built with it would declare a billion-token vocabulary). tokenizer.json ids
// are now assigned as Hugging Face assigns them on load: the next id.
TEST(InputRegressions, AddedTokenIdFarBeyondTheVocabularyGetsTheNextId) {
  auto j = byte_level_tokenizer_json();
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", 1000000000}, {"content", "<big>"}, {"special", true}}});
  auto tok = lol::tokenizers::tokenizer_from_hf_json(j, "tok.json");
  EXPECT_EQ(tok->token_to_id("<big>"), 256);
  EXPECT_EQ(tok->vocab_size(), 257);
  // Adding through the library with an explicit id far beyond is still refused.
  lol::tokenizers::AddedToken big;
  big.content = "<bigger>";
  big.id = 1000000000;
  expect_input_error([&] { tok->add_token(big); }, {"'<bigger>'", "id 1000000000", "expected < 1048833"});
}

// Audit: a config.json declaring d_model 2^20 or vocab_size 2^31 next to a tiny
// model.safetensors made the loader allocate terabytes before comparing shapes
// ("internal error: ... can't allocate memory", exit 1).
TEST(InputRegressions, CheckpointConfigFarLargerThanItsWeightsIsRefusedBeforeAllocating) {
  TempDir t("bigcfg");
  lol::LoLConfig c;
  c.vocab_size = 31;
  c.d_model = 32;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.ffn_hidden = 64;
  c.n_prelude = 1;
  c.n_coda = 1;
  c.library_size = 2;
  c.core_depth = 2;
  c.window = 8;
  c.stride = 4;
  c.max_seq_len = 64;
  lol::LoLModel m(c);
  lol::save_lol(m, t.path());
  EXPECT_NO_THROW(lol::load_lol(t.path()));
  for (auto patch : {nlohmann::json{{"d_model", 1048576}, {"n_heads", 1024}, {"n_kv_heads", 1024}},
                     nlohmann::json{{"vocab_size", int64_t(1) << 31}}}) {
    auto j = c.to_json();
    j.update(patch);
    std::ofstream(t.path() + "/config.json") << j.dump();
    expect_input_error([&] { lol::load_lol(t.path()); },
                       {t.path() + "/config.json: declares a model of at least", t.path() + "/model.safetensors has only",
                        "does not match the weights"});
  }
}

// Found with UBSan on fuzz_safetensors: a shape whose prefix product exceeds INT64_MAX
// but whose total is 0 (a zero dimension last) passed the size checks, and
// TensorEntry::numel() overflowed a signed 64-bit product (undefined behaviour).
// Crashing input: fuzz/corpus/fuzz_safetensors/regression_numel_overflow.
TEST(InputRegressions, SafetensorsShapeWithOverflowingPrefixProductIsRefused) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[1099511627776,8388608,0],"data_offsets":[0,0]}})";
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  expect_input_error([&] { lol::io::SafetensorsFile::parse(bytes, "x.safetensors"); },
                     {"x.safetensors: tensor 'a': shape too large"});
  // The same file through the fuzz corpus copy.
  expect_input_error(
      [&] {
        lol::io::SafetensorsFile::read(std::string(LOL_SOURCE_DIR) +
                                       "/fuzz/corpus/fuzz_safetensors/regression_numel_overflow");
      },
      {"shape too large"});
}

// Fourth adversarial pass (session 17): values inside the documented ranges that gave
// NaN output or a silently inexact resume, and a field read without a type check.
TEST(InputRegressions, FourthPassRangesAndTypes) {
  // rope_theta 1e-44 was in (0, 1e30]: every logit NaN. Now [1, 1e30].
  nlohmann::json m = tiny_run_config("d", "o", 1)["model"];
  m["rope_theta"] = 1e-44;
  expect_input_error([&] { lol::LoLConfig::from_json(m, "ck/config.json"); },
                     {"ck/config.json", "rope_theta", "[1, 1e30]"});
  // An emptied CPU generator state resumed silently with another random stream.
  nlohmann::json st = {{"format", "lol-trainer-state"}, {"version", 1}, {"step", 1}, {"tokens", 8},
                       {"flops", 1.0}, {"elapsed", 1.0}, {"data_position", nlohmann::json::object()},
                       {"rng_cpu", ""}};
  expect_input_error([&] { lol::training::TrainerState::from_json(st, "ck/trainer_state.json"); },
                     {"ck/trainer_state.json", "rng_cpu"});
  // dataset.json "tokenizer": null was read as a string (internal error, exit 1) by
  // eval lm and ignored by train.
  TempDir t("dstok");
  ASSERT_EQ(make_maze_data(t.path() + "/data"), 0);
  const std::string dj = t.path() + "/data/dataset.json";
  auto d = nlohmann::json::parse(std::ifstream(dj));
  for (const nlohmann::json& bad : {nlohmann::json(nullptr), nlohmann::json(5), nlohmann::json("")}) {
    d["tokenizer"] = bad;
    std::ofstream(dj) << d.dump();
    expect_input_error([&] { lol::data::Dataset::open(t.path() + "/data"); }, {dj, "field 'tokenizer'", "expected"});
  }
  // generate --depth had no upper bound (10^9 routed depths: memory without end).
  auto res = run_lol({"generate", "--model", "none", "--tokens", "1 2", "--depth", "1000000000"}, t.path() + "/g.log");
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_NE(res.output.find("--depth: Value 1000000000 not in range -1 to 4096"), std::string::npos) << res.output;
}

// Two processes writing one run or dataset directory interleaved their files (a lost
// metrics log, a dataset with another run's tokenizer). The second writer now stops
// before writing anything, naming the directory and the holder.
TEST(InputRegressions, ASecondWriterOfADirectoryIsRefused) {
  TempDir t("dirlock");
  ASSERT_EQ(make_maze_data(t.path() + "/data"), 0);
  const std::string run = t.path() + "/run";
  std::ofstream(t.path() + "/run.json") << tiny_run_config(t.path() + "/data", run, 2).dump(2);
  const std::string pid = std::to_string(::getpid());
  {
    const lol::io::DirLock held(run, "train.out");  // this process plays the first writer
    auto res = run_lol({"train", "--config", t.path() + "/run.json", "--no-progress"}, t.path() + "/a.log");
    EXPECT_EQ(res.status, 2) << res.output;
    EXPECT_NE(res.output.find("train.out " + run + ": in use by another lol process (pid " + pid + ")"),
              std::string::npos)
        << res.output;
    EXPECT_FALSE(fs::exists(run + "/run.json")) << "nothing written";
    const lol::io::DirLock data(t.path() + "/data2");
    res = run_lol({"data", "maze", "--n", "4", "--size", "4", "--out", t.path() + "/data2"}, t.path() + "/b.log");
    EXPECT_EQ(res.status, 2) << res.output;
    EXPECT_NE(res.output.find("--out " + t.path() + "/data2: in use"), std::string::npos) << res.output;
    EXPECT_FALSE(fs::exists(t.path() + "/data2/dataset.json"));
    EXPECT_THROW(lol::io::DirLock{run}, InputError) << "also within one process";
  }
  // Released: the run starts (a killed holder releases it too, by the kernel).
  auto res = run_lol({"train", "--config", t.path() + "/run.json", "--no-progress"}, t.path() + "/c.log");
  EXPECT_EQ(res.status, 0) << res.output;
}

// Output that cannot be written: a full disk behind stdout exited 0 with a truncated
// result.
TEST(InputRegressions, FailedOutputWritesAreErrors) {
  TempDir t("fullout");
  const std::string lol = LOL_BINARY;
  const int rc = std::system((lol + " tokenizer encode --tokenizer byte --text hello > /dev/full 2> " + t.path() +
                              "/err.txt").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  const std::string err = lol::io::read_file(t.path() + "/err.txt");
  EXPECT_NE(err.find("error: writing to standard output failed"), std::string::npos) << err;
  // --out on a device: tests/io/test_atomic_file.cpp (AtomicFile writes it in place).
}

// A training split whose every target is masked ran all its steps at loss 0 and
// exited 0; it is refused before training.
TEST(InputRegressions, TrainingSplitWithoutTargetsIsRefused) {
  TempDir t("notargets");
  const std::string data = t.path() + "/data";
  lol::data::ShardWriter w(data, "train", 256);
  for (int i = 0; i < 8; ++i) w.add({1, 2, 3, 4, 5, 6}, std::vector<uint8_t>(6, 0));
  const auto shards = w.finish();
  lol::data::write_dataset_info(data, {{"format", "lol-dataset"}, {"version", 1}, {"vocab_size", 256},
                                       {"splits", {{"train", shards}}}});
  auto cfg = tiny_run_config(data, t.path() + "/run", 2);
  std::ofstream(t.path() + "/run.json") << cfg.dump(2);
  auto res = run_lol({"train", "--config", t.path() + "/run.json", "--no-progress"}, t.path() + "/a.log");
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_NE(res.output.find("split 'train': no token is a training target"), std::string::npos) << res.output;
  // An empty train split (`lol data maze --n 1` can write one) says so.
  const std::string empty = t.path() + "/empty";
  lol::data::ShardWriter e(empty, "train", 256);
  lol::data::write_dataset_info(empty, {{"format", "lol-dataset"}, {"version", 1}, {"vocab_size", 256},
                                        {"splits", {{"train", e.finish()}}}});
  std::ofstream(t.path() + "/empty.json") << tiny_run_config(empty, t.path() + "/run2", 2).dump(2);
  auto none = run_lol({"train", "--config", t.path() + "/empty.json", "--no-progress"}, t.path() + "/b.log");
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("split 'train': holds no sequences"), std::string::npos) << none.output;
}

// `--text=` (an empty value written with '=') took the next argument as its value:
// `layerroute train --system= --no-progress` trained with the system prompt
// "--no-progress". It is now the empty value, as `--text ''` is.
TEST(InputRegressions, AnEmptyValueWrittenWithEqualsIsEmpty) {
  TempDir t("emptyeq");
  auto res = run_lol({"tokenizer", "encode", "--text=", "--tokenizer", "byte"}, t.path() + "/a.log");
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_EQ(res.output.find("required"), std::string::npos) << res.output;
  // A value that ends with '=' is kept whole; a number option given '' is refused by name.
  res = run_lol({"tokenizer", "encode", "--text=a=", "--tokenizer", "byte"}, t.path() + "/b.log");
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_NE(res.output.find("97 61"), std::string::npos) << res.output;
  res = run_lol({"generate", "--model", "none", "--tokens", "1 2", "--depth=", "--max-new", "1"}, t.path() + "/c.log");
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_NE(res.output.find("--depth"), std::string::npos) << res.output;
  // Only options that take a value are rewritten: the value of the option before
  // ("--text --a=") and a flag ("--json=", CLI11's true) are as they were.
  res = run_lol({"tokenizer", "encode", "--tokenizer", "byte", "--text", "--a="}, t.path() + "/d.log");
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_NE(res.output.find("45 45 97 61"), std::string::npos) << res.output;
  res = run_lol({"tokenizer", "encode", "--tokenizer", "byte", "--text", "a", "--json="}, t.path() + "/e.log");
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_NE(res.output.find("[97]"), std::string::npos) << res.output;
  // A number option given an empty value is refused (CLI11 read it as 0: --lr=$UNSET
  // trained with learning rate 0).
  res = run_lol({"layerroute", "train", "--lr="}, t.path() + "/f.log");
  EXPECT_EQ(res.status, 2) << res.output;
  EXPECT_NE(res.output.find("--lr: empty value: expected a number"), std::string::npos) << res.output;
  res = run_lol({"layerroute", "train", "--lambda", ""}, t.path() + "/g.log");
  EXPECT_NE(res.output.find("--lambda: empty value: expected a number"), std::string::npos) << res.output;
}

// Fifteenth pass (docs/robustness.md): a newcomer's mistakes get a message that says
// what to pass instead, not a parse error of the wrong file.
TEST(InputRegressions, NewcomerMistakesSayWhatToPass) {
  TempDir t("newcomer");
  // Runs lol with `args`: exit 2 and every needle in the output.
  int n = 0;
  const auto refused = [&](const std::vector<std::string>& args, const std::vector<std::string>& needles) {
    const auto r = run_lol(args, t.path() + "/" + std::to_string(n++) + ".log");
    EXPECT_EQ(r.status, 2) << r.output;
    for (const auto& needle : needles) EXPECT_NE(r.output.find(needle), std::string::npos) << needle << " not in: " << r.output;
    return r.output;
  };
  const std::string data = t.path() + "/maze";
  ASSERT_EQ(make_maze_data(data), 0);
  // The dataset's description file given to `data verify`: one line, not one per record.
  const auto verify = refused({"data", "verify", data + "/dataset.json"},
                              {"pass the directory holding it (`lol data verify " + data + "`)"});
  EXPECT_EQ(verify.find("not valid JSON"), std::string::npos) << verify;
  // A maze side out of range names the flag.
  refused({"data", "maze", "--n", "4", "--size", "17", "--out", t.path() + "/m17"}, {"--size"});
  // `lol info` on a weights file: the folder holding it.
  fs::create_directories(t.path() + "/ck");
  std::ofstream(t.path() + "/ck/model.safetensors") << "not json";
  refused({"info", t.path() + "/ck/model.safetensors"}, {"pass the checkpoint directory holding it, " + t.path() + "/ck"});
  // `lol hf` on lol's own folders: a run directory and a dense checkpoint.
  fs::create_directories(t.path() + "/run");
  std::ofstream(t.path() + "/run/run.json") << "{}";
  refused({"hf", "info", t.path() + "/run"}, {"a `lol train` run directory, not a Hugging Face model folder",
                                               "lol export --hf " + t.path() + "/run --out HF_DIR"});
  std::ofstream(t.path() + "/ck/config.json") << R"({"architecture": "dense", "vocab_size": 8})";
  refused({"hf", "info", t.path() + "/ck"}, {"a lol checkpoint (field 'architecture' = \"dense\")"});
  // A run whose `latest` names a checkpoint that is not there: said, with the newest one.
  fs::create_directories(t.path() + "/run/checkpoints/step-000004");
  std::ofstream(t.path() + "/run/latest") << "step-000009\n";
  refused({"info", t.path() + "/run"}, {"run/latest: names checkpoint 'step-000009', which is not in " + t.path() +
                                        "/run/checkpoints (the newest there is " + t.path() +
                                        "/run/checkpoints/step-000004"});
  // eval-strategies --paths naming a folder without the mode paths.
  std::ofstream(t.path() + "/model.json") << R"({"vocab_size": 64, "d_model": 32, "n_heads": 2, "n_kv_heads": 2,
      "ffn_hidden": 64, "n_prelude": 1, "n_coda": 1, "library_size": 2, "core_depth": 2, "window": 8, "stride": 4,
      "max_seq_len": 256})";
  const auto init = run_lol({"init", "--config", t.path() + "/model.json", "--out", t.path() + "/lol"}, t.path() + "/init.log");
  ASSERT_EQ(init.status, 0) << init.output;
  refused({"eval-strategies", "--model", t.path() + "/lol", "--paths", data, "--data", data, "--n", "1", "--split", "valid"},
          {"--paths " + data + ": no S1.json, S2.json, S3.json, S4.json, S5.json"});
}
