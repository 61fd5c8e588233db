// Shared helpers of the training tests: a tiny synthetic task dataset and a tiny
// LoL run configuration.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/shards.h"
#include "training/run_config.h"
#include "../common/test_files.h"

namespace lol::training::test {

using ::lol_test::TempDir;

/// Reversal task: "BOS a1..an SEP an..a1 EOS" with digits a_i in [4, 4 + n_sym),
/// loss on the answer (after SEP) only; prompt_len = n + 2 (the question). Tokens:
/// 0 pad, 1 BOS, 2 SEP, 3 EOS. Lengths vary in [min_len, max_len].
inline void write_reverse_dataset(const std::string& dir, int64_t n_train, int64_t n_valid, int n_sym = 6,
                                  int min_len = 3, int max_len = 6, uint64_t seed = 7) {
  const int64_t vocab = 4 + n_sym;
  std::mt19937_64 rng(seed);
  auto fill = [&](const std::string& split, int64_t n) {
    data::ShardWriter w(dir, split, vocab, /*shard_tokens=*/400);
    for (int64_t i = 0; i < n; ++i) {
      const int len = min_len + int(rng() % uint64_t(max_len - min_len + 1));
      std::vector<int32_t> a(len);
      for (auto& x : a) x = 4 + int32_t(rng() % uint64_t(n_sym));
      std::vector<int32_t> t{1};
      t.insert(t.end(), a.begin(), a.end());
      t.push_back(2);
      t.insert(t.end(), a.rbegin(), a.rend());
      t.push_back(3);
      std::vector<uint8_t> mask(t.size(), 0);
      for (size_t k = size_t(len) + 2; k < t.size(); ++k) mask[k] = 1;
      w.add(t, mask, {}, int32_t(len + 2), -1);
    }
    return w.finish();
  };
  auto tr = fill("train", n_train);
  auto va = fill("valid", n_valid);
  data::write_dataset_info(dir, {{"format", "lol-dataset"},
                                 {"version", 1},
                                 {"task", "reverse"},
                                 {"vocab_size", vocab},
                                 {"splits", {{"train", tr}, {"valid", va}}}});
}

/// A tiny LoL run on `data_dir` writing to `out`.
inline nlohmann::json tiny_run_json(const std::string& data_dir, const std::string& out) {
  return {{"model",
           {{"d_model", 32},
            {"n_heads", 2},
            {"n_kv_heads", 2},
            {"ffn_hidden", 64},
            {"n_prelude", 1},
            {"n_coda", 1},
            {"library_size", 3},
            {"core_depth", 3},
            {"window", 4},
            {"stride", 2},
            {"router_noise_std", 0.5},
            {"max_seq_len", 64}}},
          {"data", {{"dir", data_dir}, {"batch_size", 8}}},
          {"optim", {{"type", "muon"}, {"lr", 3e-3}, {"muon_lr", 2e-2}}},
          {"schedule", {{"type", "cosine"}, {"warmup_steps", 2}}},
          {"grow", {{"start", 1}, {"fraction", 0.5}}},
          {"train",
           {{"steps", 10},
            {"eval_every", 5},
            {"eval_batches", 2},
            {"seed", 3},
            {"threads", 1},
            {"out", out},
            {"progress", false}}}};
}

inline RunConfig tiny_run(const std::string& data_dir, const std::string& out) {
  return RunConfig::from_json(tiny_run_json(data_dir, out), "test run");
}

}  // namespace lol::training::test
