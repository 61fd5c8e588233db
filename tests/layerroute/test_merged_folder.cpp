// `lol layerroute merge` output (adapter_io.h save_merged): a Hugging Face folder with the
// adapters folded in + the gates, which loads on its own as a gated model.
#include <filesystem>

#include <gtest/gtest.h>

#include "layerroute/adapter_io.h"
#include "layerroute_test_util.h"
#include "util/error.h"

namespace lol::layerroute {
namespace {

using test::random_batch;
using test::randomize_adapters;
using test::TempDir;
using test::tiny_base;

TEST(LayerRouteMergedFolder, ReloadsWithItsGatesAndComputesTheUnmergedModel) {
  GatedModel m(tiny_base(4), LoraConfig{}, GateConfig{}, 12);
  randomize_adapters(*m, 41, /*gate_scale=*/3.0);
  torch::NoGradGuard ng;
  torch::Tensor tok, docs;
  random_batch({14, 9, 11, 5}, 61, 43, tok, docs);
  const auto unmerged = m->forward(tok, docs, GatedOptions{});
  const auto plain_base = m->forward(tok, docs, GatedOptions{GateMode::Learned, false, false});
  ASSERT_GT((unmerged.logits - plain_base.logits).abs().max().item<float>(), 1e-3) << "adapters must matter";

  TempDir d("merged");
  const auto dir = d.path() + "/out";
  save_merged(*m, nullptr, dir, hf::ExportOptions{}, "some/adapter",
              {{"system", ""}, {"loss_tokens", "all"}, {"max_len", 64}});
  for (const char* f : {"config.json", "model.safetensors", "gates.safetensors", "layerroute_gates.json"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / f)) << f;
  const auto info = read_adapter_info(dir);
  EXPECT_TRUE(info.merged);
  EXPECT_EQ(info.base_dir, dir);
  EXPECT_EQ(info.extra["merged_from"], "some/adapter");
  // The adapter's training record travels with the folder (eval --adapter reads it).
  EXPECT_EQ(info.extra["loss_tokens"], "all");
  EXPECT_EQ(info.extra["system"], "");
  EXPECT_EQ(info.extra["max_len"], 64);

  auto r = load_gated_model(dir);
  EXPECT_TRUE(torch::equal(r->gates->weight, m->gates->weight));
  EXPECT_TRUE(torch::equal(r->gates->bias, m->gates->bias));
  const auto merged = r->forward(tok, docs, GatedOptions{});
  const auto valid = (docs >= 0).unsqueeze(-1).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(merged.open, unmerged.open));
  EXPECT_GT(merged.open.sum().item<int64_t>(), 0);
  EXPECT_LT(merged.open.sum().item<int64_t>(), merged.open.numel()) << "some gate must be closed";
  EXPECT_TRUE(torch::allclose(merged.logits * valid, unmerged.logits * valid, 1e-4, 1e-4));
  // The folder's fresh adapters add exactly zero.
  const auto nolora = r->forward(tok, docs, GatedOptions{GateMode::Learned, false, false});
  EXPECT_TRUE(torch::equal(nolora.logits, merged.logits));
}

TEST(LayerRouteMergedFolder, RefusesAnotherBase) {
  GatedModel m(tiny_base(4), LoraConfig{}, GateConfig{}, 2);
  TempDir d("merged_base");
  save_merged(*m, nullptr, d.path() + "/out", hf::ExportOptions{}, "a");
  hf::ExportOptions eo;
  GatedModel m2(tiny_base(5), LoraConfig{}, GateConfig{}, 2);
  hf::export_hf(*m2->base, nullptr, d.path() + "/other", eo);
  EXPECT_THROW(load_gated_model(d.path() + "/out", d.path() + "/other"), InputError);
  EXPECT_NO_THROW(load_gated_model(d.path() + "/out", d.path() + "/out"));
}

// An adapter records its base's weights fingerprint; loading it on a base of the same
// shapes but other weights gives a warning note (session 27: accepted silently).
TEST(LayerRouteAdapter, AnotherBaseOfTheSameShapesIsNoted) {
  TempDir d("adapter_base");
  GatedModel m1(tiny_base(4), LoraConfig{}, GateConfig{}, 2), m2(tiny_base(5), LoraConfig{}, GateConfig{}, 2);
  hf::export_hf(*m1->base, nullptr, d.path() + "/base", hf::ExportOptions{});
  hf::export_hf(*m2->base, nullptr, d.path() + "/other", hf::ExportOptions{});
  auto trained_on = load_base_model(d.path() + "/base");
  GatedModel g(trained_on, LoraConfig{}, GateConfig{}, 3);
  save_adapter(*g, d.path() + "/ad", d.path() + "/base");
  const auto info = read_adapter_info(d.path() + "/ad");
  EXPECT_EQ(info.base_fingerprint, base_weights_fingerprint(*m1->base)) << "the exported base reloads bit for bit";
  EXPECT_EQ(info.base_fingerprint.rfind("fnv1a64:", 0), 0u);
  EXPECT_NE(base_weights_fingerprint(*m1->base), base_weights_fingerprint(*m2->base));
  std::string note = "stale";
  load_gated_model(d.path() + "/ad", "", &note);
  EXPECT_EQ(note, "") << "its own base";
  load_gated_model(d.path() + "/ad", d.path() + "/other", &note);
  EXPECT_NE(note.find("has other weights than the one " + d.path() + "/ad was trained on"), std::string::npos) << note;
  EXPECT_NE(note.find(info.base_fingerprint), std::string::npos) << note;
}

}  // namespace
}  // namespace lol::layerroute
