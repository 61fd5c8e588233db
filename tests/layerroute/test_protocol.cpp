// The N-seed protocol (protocol.h): per-seed adapters on disk, tables, and re-evaluation
// of already trained seeds (--reuse).
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "hf/hf_export.h"
#include "layerroute/adapter_io.h"
#include "layerroute/protocol.h"
#include "layerroute_test_util.h"
#include "util/error.h"

namespace lol::layerroute {
namespace {

TEST(LayerRouteProtocol, SeedsTablesAndReuse) {
  test::TempDir d("protocol");
  const auto base_dir = d.path() + "/base";
  auto base = test::tiny_base(7, 6);
  hf::export_hf(*base, nullptr, base_dir);
  ProtocolOptions p;
  p.base_dir = base_dir;
  p.out_dir = d.path() + "/run";
  p.seeds = 2;
  p.first_seed = 4;
  p.eval_samples = 6;
  p.train.steps = 2;
  p.train.batch_size = 2;
  p.train.grad_accum = 1;
  p.train.progress = false;
  p.eval.timing_samples = 1;
  p.eval.repeats = 1;
  p.eval.new_tokens = 2;
  p.max_len = 64;
  p.data_record = {{"system", ""}, {"tokenizer", nullptr}};
  const double first_lr = p.train.lr;
  const auto train = test::copy_task(8, 1, 5, 5, 3);
  auto held = test::copy_task(10, 2, 5, 5, 3);
  for (size_t i = 0; i < held.size(); ++i) held[i].source = i < 4 ? "tools" : "reasoning";
  int calls = 0;
  const auto first = run_protocol(p, train, held, [&](const SeedResult&) { ++calls; });
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(first[1].seed, 5u);
  for (uint64_t s : {4, 5})
    EXPECT_TRUE(std::filesystem::exists(p.out_dir + "/seed-" + std::to_string(s) + "/adapter_model.safetensors"));
  // Run again into the same directory without --reuse: it would train every seed again
  // and replace the adapters, so it is refused naming the directory and what it holds,
  // before any work; --reuse and --overwrite together are refused too.
  {
    const std::string record = lol_test::read_text(p.out_dir + "/seed-4/layerroute.json");
    lol_test::expect_input_error([&] { run_protocol(p, train, held); },
                                 {"--out " + p.out_dir + ": not empty (it holds an earlier protocol's seed-4/, seed-5/)",
                                  "pass --reuse", "--overwrite"});
    EXPECT_EQ(lol_test::read_text(p.out_dir + "/seed-4/layerroute.json"), record);
    auto both = p;
    both.reuse_trained = both.overwrite = true;
    lol_test::expect_input_error([&] { run_protocol(both, train, held); },
                                 {"--reuse and --overwrite exclude each other"});
    lol_test::write_text(d.path() + "/a_file", "x");
    auto file = p;
    file.out_dir = d.path() + "/a_file";
    lol_test::expect_input_error([&] { run_protocol(file, train, held); },
                                 {"a file (expected the protocol's output directory)"});
  }
  const auto tables = protocol_tables(first, LossTokens::Assistant);
  EXPECT_NE(tables.find("| 4 | "), std::string::npos);
  EXPECT_NE(tables.find("| 5 | "), std::string::npos);
  EXPECT_NE(tables.find("| 5 | 0."), std::string::npos) << "per-layer row of layer 5";
  EXPECT_NE(tables.find("realized/ideal (FLOPs)"), std::string::npos);
  EXPECT_NE(tables.find("(--loss-tokens assistant)"), std::string::npos);
  EXPECT_NE(tables.find("ppl gated (prompt-decided)"), std::string::npos);
  EXPECT_NE(tables.find("prompt-decided ppl delta vs open"), std::string::npos);
  // A seed whose gated runs executed no layer has no layer-ratio realized/ideal: "n/a",
  // and the mean is over the other seed (session 28: 0%, dragging the mean down).
  {
    auto closed = first;
    closed[0].report.realized_over_ideal = std::numeric_limits<double>::quiet_NaN();
    const auto tc = protocol_tables(closed, LossTokens::Assistant);
    EXPECT_NE(tc.find("x | n/a | "), std::string::npos) << tc;
    EXPECT_NE(tc.find("(1 of 2 seeds)"), std::string::npos) << tc;
  }
  // Per-source perplexity deltas (paper Table 3), 3 + 3 held-out samples.
  for (const auto& r : first) {
    ASSERT_EQ(r.report.sources.size(), 2u);
    EXPECT_EQ(r.report.sources[0].samples, 3);
    EXPECT_EQ(r.report.sources[1].samples, 3);
  }
  EXPECT_NE(tables.find("| tools | 3 | "), std::string::npos) << tables;
  EXPECT_NE(tables.find("| reasoning | 3 | "), std::string::npos);
  EXPECT_NE(tables.find(" / 2 seeds |"), std::string::npos);
  // eval --adapter on a seed directory cuts samples as the protocol did.
  EXPECT_EQ(read_adapter_info(p.out_dir + "/seed-4").extra.at("max_len").get<int64_t>(), 64);
  // Without timing the timing columns say so instead of showing zeros.
  auto untimed = first;
  for (auto& r : untimed) r.report.timing_pairs = 0;
  const auto t0 = protocol_tables(untimed, LossTokens::All);
  EXPECT_NE(t0.find("no wall-clock timing"), std::string::npos);
  EXPECT_NE(t0.find("count every token (--loss-tokens all)"), std::string::npos);
  EXPECT_NE(t0.find("| - | - | - | - |"), std::string::npos);

  // Reuse: the trained seeds are loaded, not retrained, and evaluate to the same values.
  p.reuse_trained = true;
  const auto again = run_protocol(p, train, held);
  ASSERT_EQ(again.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(again[k].train_seconds, first[k].train_seconds);
    EXPECT_EQ(again[k].last.lm_loss, first[k].last.lm_loss);
    EXPECT_DOUBLE_EQ(again[k].report.ppl_gated, first[k].report.ppl_gated);
    EXPECT_EQ(again[k].report.layer_open, first[k].report.layer_open);
  }
  p.train.steps = 3;
  EXPECT_THROW(run_protocol(p, train, held), InputError) << "a different step count is refused";
  // Any other training option, the --max-len or the base differ: refused, naming them.
  p.train.steps = 2;
  p.train.lr = 123.0;
  p.train.lambda = 7.0;
  lol_test::expect_input_error([&] { run_protocol(p, train, held); },
                               {"seed-4/layerroute.json", "trained with other options (", "lr ", " there, 123.0 here",
                                "lambda = 1.0 there, 7.0 here", "drop --reuse"});
  p.train.lr = first_lr;
  p.train.lambda = 1.0;
  p.max_len = 32;
  lol_test::expect_input_error([&] { run_protocol(p, train, held); }, {"--max-len 64, this run's is 32"});
  p.max_len = 64;
  EXPECT_EQ(read_adapter_info(p.out_dir + "/seed-4").extra.at("loss_tokens"), "assistant");
  p.loss_tokens = LossTokens::All;
  lol_test::expect_input_error([&] { run_protocol(p, train, held); },
                               {"--loss-tokens assistant, this run's is all", "drop --reuse"});
  p.loss_tokens = LossTokens::Assistant;
  // The data options are recorded (eval --adapter and generate render alike) and checked.
  EXPECT_EQ(read_adapter_info(p.out_dir + "/seed-4").extra.at("system"), "");
  p.data_record["system"] = "auto";
  lol_test::expect_input_error([&] { run_protocol(p, train, held); },
                               {"samples were rendered with system \"\", this run's is \"auto\"", "drop --reuse"});
  p.data_record["system"] = "";
  hf::export_hf(*base, nullptr, d.path() + "/base_copy");
  p.base_dir = d.path() + "/base_copy";
  lol_test::expect_input_error([&] { run_protocol(p, train, held); }, {"trained on base ", "base_copy"});
}

}  // namespace
}  // namespace lol::layerroute
