// Helpers of the analysis tests: a tiny randomised LoL and a small labelled dataset
// written to a temporary directory.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dataset/shards.h"
#include "lol/config.h"
#include "lol/model.h"
#include "../common/test_files.h"
#include "../common/tiny_lol.h"

namespace atest {

using ::lol_test::TempDir;

/// V=19, d=16, 1 prelude + 1 coda, L=3 experts, D=3 routed depths, W=4, S=2.
inline lol::LoLConfig tiny_config() { return lol_test::tiny_lol_config(19, 2, 2, 2); }

/// A tiny model whose router weights are large enough that routing varies between windows.
inline lol::LoLModel tiny_model(uint64_t seed) {
  lol::LoLModel m(tiny_config());
  m->reset_parameters(seed);
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed + 1);
  m->model->router->weight.copy_(at::normal(0.0, 2.0, m->model->router->weight.sizes(), gen));
  m->eval();
  return m;
}

/// Writes a dataset with a "valid" split of n sequences of lengths 1..max_len (one of
/// length 0 at index 2 when with_empty), labels i % 3, and prompt_len 3 on every 4th;
/// cap > 0 cuts every sequence to its first cap tokens (same sequences otherwise).
inline lol::data::SplitData write_split(const std::string& dir, int n, int max_len, uint64_t seed,
                                        bool with_empty = false, int cap = 0) {
  std::mt19937_64 rng(seed);
  lol::data::ShardWriter w(dir, "valid", 19);
  for (int i = 0; i < n; ++i) {
    int len = with_empty && i == 2 ? 0 : 1 + int(rng() % uint64_t(max_len));
    std::vector<int32_t> t(len);
    for (auto& x : t) x = int32_t(rng() % 19);
    if (cap > 0 && len > cap) t.resize(cap);
    w.add(t, {}, {}, (i % 4 == 3 && len > 3) ? 3 : 0, i % 3);
  }
  auto files = w.finish();
  lol::data::write_dataset_info(dir, {{"format", "lol-dataset"},
                                      {"version", 1},
                                      {"task", "text"},
                                      {"vocab_size", 19},
                                      {"splits", {{"valid", files}}}});
  return lol::data::Dataset::open(dir).load("valid");
}

}  // namespace atest
