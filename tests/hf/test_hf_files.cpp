// Weight files of Hugging Face folders: single file, sharded with index.json, and
// the errors for missing or inconsistent files.
#include <filesystem>
#include <set>

#include "hf/hf_files.h"
#include "hf_test_util.h"

namespace lol::hf::test {
namespace {

std::set<std::string> visit_names(const WeightFiles& w) {
  std::set<std::string> names;
  for_each_weight(w, [&](const io::SafetensorsFile&, const io::TensorEntry& e) { EXPECT_TRUE(names.insert(e.name).second); });
  return names;
}

TEST(HfFiles, SingleAndSharded) {
  TinyShape s;
  const auto weights = tiny_weights(s, 1);
  std::set<std::string> expected;
  for (const auto& [n, t] : weights) expected.insert(n);
  for (int shards : {1, 3}) {
    TempDir d("files");
    write_hf_weights(d.path(), weights, torch::kBFloat16, shards);
    const WeightFiles w = find_weight_files(d.path());
    EXPECT_EQ(w.sharded(), shards > 1);
    EXPECT_EQ(int(w.shards.size()), shards);
    if (shards > 1) EXPECT_EQ(w.shards[0], "model-00001-of-00003.safetensors");
    EXPECT_EQ(visit_names(w), expected);
  }
  EXPECT_EQ(shard_file_name(2, 5), "model-00002-of-00005.safetensors");
  // Both a single file and an index: the single file is read, as transformers does.
  TempDir both("files_both");
  write_hf_weights(both.path(), weights, torch::kBFloat16, 3);
  std::filesystem::create_directories(both.path() + "/single");
  write_hf_weights(both.path() + "/single", weights, torch::kBFloat16, 1);
  std::filesystem::rename(both.path() + "/single/model.safetensors", both.path() + "/model.safetensors");
  const WeightFiles w = find_weight_files(both.path());
  EXPECT_FALSE(w.sharded());
  EXPECT_EQ(w.shards, std::vector<std::string>{"model.safetensors"});
}

TEST(HfFiles, MissingWeightsNameTheFolder) {
  TempDir d("nofiles");
  expect_input_error([&] { find_weight_files(d.path()); }, {d.path(), "model.safetensors", "index.json"});
  write_text(d / "pytorch_model.bin", "x");
  expect_input_error([&] { find_weight_files(d.path()); }, {"pytorch_model.bin", "only safetensors"});
  expect_input_error([&] { find_weight_files(d / "absent"); }, {"absent", "not a directory"});
}

TEST(HfFiles, IndexValidation) {
  auto parse = [](const char* text) { return parse_weight_index(nlohmann::json::parse(text), "d", "d/index.json"); };
  expect_input_error([&] { parse(R"({"metadata": {}})"); }, {"d/index.json", "weight_map"});
  expect_input_error([&] { parse(R"({"weight_map": {}})"); }, {"weight_map is empty"});
  expect_input_error([&] { parse(R"({"weight_map": {"a": 3}})"); }, {"weight_map[\"a\"]", "file name"});
  expect_input_error([&] { parse(R"({"weight_map": {"a": "../x.safetensors"}})"); }, {"../x.safetensors", "directory"});
  expect_input_error([&] { parse(R"({"weight_map": {"a": "x.bin"}})"); }, {"x.bin", ".safetensors"});
  const WeightFiles w = parse(R"({"weight_map": {"a": "2.safetensors", "b": "1.safetensors", "c": "2.safetensors"}})");
  EXPECT_EQ(w.shards, (std::vector<std::string>{"1.safetensors", "2.safetensors"}));
  EXPECT_EQ(w.tensor_shard.at("c"), "2.safetensors");
}

TEST(HfFiles, IndexMustMatchShards) {
  TinyShape s;
  const auto weights = tiny_weights(s, 2);
  TempDir d("badindex");
  write_hf_weights(d.path(), weights, torch::kFloat32, 2);
  const std::string index = d / "model.safetensors.index.json";
  const auto good = nlohmann::json::parse(read_text(index));
  // A shard listed in the index that does not exist.
  auto j = good;
  j["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  write_text(index, j.dump());
  expect_input_error([&] { find_weight_files(d.path()); }, {"model-00009-of-00009.safetensors", "does not exist"});
  // A tensor the index puts in the other shard.
  j = good;
  const std::string first = weights[0].first;  // in shard 1
  j["weight_map"][first] = "model-00002-of-00002.safetensors";
  write_text(index, j.dump());
  expect_input_error([&] { visit_names(find_weight_files(d.path())); }, {first, "not this shard"});
  // A tensor in a shard but not in the index.
  j = good;
  j["weight_map"].erase(first);
  write_text(index, j.dump());
  expect_input_error([&] { visit_names(find_weight_files(d.path())); }, {first, "not listed"});
  // A tensor in the index that no shard holds.
  j = good;
  j["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors";
  write_text(index, j.dump());
  expect_input_error([&] { visit_names(find_weight_files(d.path())); }, {"model.extra.weight", "lacks it"});
}

}  // namespace
}  // namespace lol::hf::test
