#include "hf/hf_files.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "io/json_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::hf {

namespace {

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

}  // namespace

std::string shard_file_name(int64_t i, int64_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05lld-of-%05lld.safetensors", static_cast<long long>(i),
                static_cast<long long>(n));
  return buf;
}

WeightFiles parse_weight_index(const nlohmann::json& index, const std::string& dir, const std::string& where) {
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw InputError(where + ": expected an object with a \"weight_map\" object {tensor name: shard file}");
  WeightFiles w;
  w.dir = dir;
  std::set<std::string> shards;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    const std::string& name = it.key();
    if (name.empty()) throw InputError(where + ": weight_map has an empty tensor name");
    if (!it.value().is_string())
      throw InputError(where + ": weight_map[\"" + name + "\"] = " + it.value().dump() + ": expected a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos ||
        file == "." || file == ".." || !ends_with(file, ".safetensors"))
      throw InputError(where + ": weight_map[\"" + name + "\"] = \"" + file +
                       "\": expected a file name ending in .safetensors, without a directory part");
    w.tensor_shard[name] = file;
    shards.insert(file);
  }
  if (w.tensor_shard.empty()) throw InputError(where + ": weight_map is empty (expected at least one tensor)");
  w.shards.assign(shards.begin(), shards.end());
  return w;
}

WeightFiles find_weight_files(const std::string& dir) {
  if (!fs::is_directory(dir)) throw InputError(dir + ": not a directory (expected a Hugging Face model folder)");
  const fs::path index = fs::path(dir) / kIndex;
  // A single model.safetensors is read first, as transformers does when both exist.
  if (fs::exists(index) && !fs::exists(fs::path(dir) / kSingle)) {
    WeightFiles w = parse_weight_index(io::read_json_file(index.string()), dir, index.string());
    for (const auto& s : w.shards)
      if (!fs::exists(fs::path(dir) / s))
        throw InputError(index.string() + ": shard \"" + s + "\" listed in weight_map does not exist in " + dir);
    return w;
  }
  if (fs::exists(fs::path(dir) / kSingle)) {
    WeightFiles w;
    w.dir = dir;
    w.shards = {kSingle};
    return w;
  }
  std::string hint;
  if (fs::exists(fs::path(dir) / "pytorch_model.bin") || fs::exists(fs::path(dir) / "pytorch_model.bin.index.json"))
    hint = " (found pytorch_model.bin: only safetensors weights are read; convert them with transformers' "
           "save_pretrained(safe_serialization=True))";
  throw InputError(dir + ": no " + kSingle + " or " + kIndex + hint);
}

void for_each_weight(const WeightFiles& files,
                     const std::function<void(const io::SafetensorsFile&, const io::TensorEntry&)>& fn) {
  const std::string index = (fs::path(files.dir) / kIndex).string();
  for (const auto& shard : files.shards) {
    const io::SafetensorsFile f = io::SafetensorsFile::read((fs::path(files.dir) / shard).string());
    if (files.sharded()) {
      for (const auto& e : f.entries()) {
        auto it = files.tensor_shard.find(e.name);
        if (it == files.tensor_shard.end())
          throw InputError(f.path() + ": tensor '" + e.name + "' is not listed in " + index);
        if (it->second != shard)
          throw InputError(f.path() + ": tensor '" + e.name + "' is listed in " + index + " under \"" + it->second +
                           "\", not this shard");
      }
      for (const auto& [name, s] : files.tensor_shard)
        if (s == shard && !f.contains(name))
          throw InputError(index + ": tensor '" + name + "' is mapped to \"" + shard + "\", which lacks it");
    }
    for (const auto& e : f.entries()) fn(f, e);
  }
}

}  // namespace lol::hf
