// Weight files of a Hugging Face checkpoint folder (issue 10), LibTorch-free:
//   DIR/model.safetensors                                  one file, or
//   DIR/model.safetensors.index.json + DIR/model-0000i-of-0000n.safetensors  sharded:
//     {"metadata": {"total_size": bytes}, "weight_map": {"tensor name": "shard file", ...}}
// Shards are read one at a time (peak memory: one shard plus what the caller keeps).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace lol::hf {

struct WeightFiles {
  std::string dir;
  std::vector<std::string> shards;                 ///< file names inside dir, sorted
  std::map<std::string, std::string> tensor_shard; ///< tensor -> shard file (sharded folders only)
  bool sharded() const { return !tensor_shard.empty(); }
};

/// Locates the weights of `dir`: model.safetensors when present (as transformers,
/// also when an index exists), else model.safetensors.index.json (then every shard it
/// names must exist). Throws InputError
/// naming the folder when neither exists (mentioning pytorch_model.bin when that is
/// what the folder holds: only safetensors are read) or the index is malformed.
WeightFiles find_weight_files(const std::string& dir);

/// Validates an index document: "weight_map" an object of non-empty tensor names to
/// plain file names ending in ".safetensors" (no directory part). `where` names the
/// file in errors. Does not touch the file system.
WeightFiles parse_weight_index(const nlohmann::json& index, const std::string& dir, const std::string& where);

/// True when tensor or file name `s` ends with `suffix` ("...rotary_emb.inv_freq").
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Calls fn(file, entry) for every tensor of every shard, shard by shard (each shard
/// is read, validated and released in turn). For a sharded folder the shards must
/// hold exactly the tensors the index maps to them: a tensor the index puts in
/// another shard or leaves out, or one the index maps here but the shard lacks, is an
/// InputError naming the shard, the index and the tensor.
void for_each_weight(const WeightFiles& files,
                     const std::function<void(const io::SafetensorsFile&, const io::TensorEntry&)>& fn);

/// "model-00002-of-00005.safetensors" for i = 2, n = 5 (1-based, transformers' naming).
std::string shard_file_name(int64_t i, int64_t n);

}  // namespace lol::hf
