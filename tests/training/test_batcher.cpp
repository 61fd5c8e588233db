// Batching (pad / pack), data order, targets and the masked loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <torch/torch.h>

#include "train_test_util.h"
#include "training/batcher.h"
#include "training/loss.h"
#include "util/error.h"

using namespace lol::training;
using lol::training::test::TempDir;

TEST(Permutation, DeterministicAndComplete) {
  auto a = epoch_permutation(100, 5, 0), b = epoch_permutation(100, 5, 0), c = epoch_permutation(100, 5, 1),
       d = epoch_permutation(100, 6, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  auto s = a;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(s[i], i);
}

TEST(AssembleBatch, TargetsAreNextTokensInsideTheDocumentAndMasked) {
  // Row 0: doc 0 = [5 6 7], doc 1 = [8 9]; loss on tokens 6, 7 (doc 0) and 9 (doc 1).
  // Row 1: one doc [4 5], padded to 5.
  auto b = assemble_batch({{5, 6, 7, 8, 9}, {4, 5}}, {{0, 0, 0, 1, 1}, {0, 0}}, {{1, 1, 1, 1, 1}, {0, 1}},
                          {{0, 0, 0, 0, 0}, {0, 0}}, {2, 0});
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{2, 5}));
  auto tgt = b.targets, msk = b.target_mask;
  EXPECT_EQ(tgt[0][0].item<int64_t>(), 6);
  EXPECT_EQ(tgt[0][1].item<int64_t>(), 7);
  EXPECT_FALSE(msk[0][2].item<bool>());  // 7 -> 8 crosses the document boundary
  EXPECT_EQ(tgt[0][3].item<int64_t>(), 9);
  EXPECT_FALSE(msk[0][4].item<bool>());  // last token has no target
  EXPECT_TRUE(msk[1][0].item<bool>());
  EXPECT_FALSE(msk[1][1].item<bool>());
  EXPECT_EQ(b.doc_ids[1][2].item<int64_t>(), -1);  // padding
  EXPECT_EQ(b.doc_ids[1][4].item<int64_t>(), -1);
  EXPECT_EQ(b.n_targets, 4);
  EXPECT_EQ(b.n_tokens, 7);
  EXPECT_EQ(b.prompt_len[0].item<int64_t>(), 2);
  // Loss mask 0 on the *target* token removes the target: row 1 token 0 (-> 5, mask 1) counts,
  // but a mask of 0 on token 5 would drop it.
  auto b2 = assemble_batch({{4, 5}}, {{0, 0}}, {{1, 0}}, {{0, 0}}, {0});
  EXPECT_EQ(b2.n_targets, 0);
}

TEST(Batcher, PadModeCoversEveryExampleOncePerEpochAndResumes) {
  TempDir dir("batch");
  test::write_reverse_dataset(dir.path(), 20, 4);
  auto ds = lol::data::Dataset::open(dir.path());
  auto split = ds.load("train");
  BatchLayout lay{4, 0, false};
  Batcher b(split, lay, 11, true, true, "train");
  EXPECT_EQ(b.max_row_length(), 2 * 6 + 3);
  std::multiset<std::vector<int64_t>> seen;
  for (int i = 0; i < 5; ++i) {  // 5 batches x 4 = one epoch of 20
    auto batch = b.next();
    for (int64_t r = 0; r < batch.tokens.size(0); ++r) {
      auto row = batch.tokens[r];
      std::vector<int64_t> v(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
      while (!v.empty() && v.back() == 0) v.pop_back();
      seen.insert(v);
      // The prompt (question) is BOS + digits + SEP; targets only after SEP.
      const int64_t pl = batch.prompt_len[r].item<int64_t>();
      for (int64_t t = 0; t + 1 < pl; ++t) EXPECT_FALSE(batch.target_mask[r][t].item<bool>());
      EXPECT_TRUE(batch.target_mask[r][pl - 1].item<bool>());
    }
  }
  std::multiset<std::vector<int64_t>> all;
  for (int64_t i = 0; i < split.size(); ++i) {
    auto s = split.get(i);
    all.insert(std::vector<int64_t>(s.tokens, s.tokens + s.length));
  }
  EXPECT_EQ(seen, all);
  EXPECT_EQ(b.epoch(), 1);
  // Resume: a second batcher set to the saved position produces the same batches.
  b.next();
  auto pos = b.position();
  Batcher c(split, lay, 11, true, true, "train");
  c.set_position(pos, "test");
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(torch::equal(b.next().tokens, c.next().tokens));
}

TEST(Batcher, PackModeFillsRowsAndKeepsDocumentsApart) {
  TempDir dir("pack");
  test::write_reverse_dataset(dir.path(), 30, 4);
  auto split = lol::data::Dataset::open(dir.path()).load("train");
  BatchLayout lay{3, 16, true};
  Batcher b(split, lay, 1, false, true, "train");

  for (int i = 0; i < 10; ++i) {
    auto batch = b.next();
    ASSERT_EQ(batch.tokens.size(1), 16);
    EXPECT_EQ(batch.n_tokens, 3 * 16);  // no padding while wrapping
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t t = 0; t + 1 < 16; ++t)
        if (batch.target_mask[r][t].item<bool>()) {
          EXPECT_EQ(batch.doc_ids[r][t].item<int64_t>(), batch.doc_ids[r][t + 1].item<int64_t>());
          EXPECT_EQ(batch.targets[r][t].item<int64_t>(), batch.tokens[r][t + 1].item<int64_t>());
        }
  }
  // Without shuffling, the token stream is the split's tokens in order.
  Batcher c(split, lay, 1, false, true, "train");
  auto first = c.next();
  std::vector<int64_t> stream;
  for (int64_t i = 0; i < split.size() && int64_t(stream.size()) < 48; ++i) {
    auto s = split.get(i);
    stream.insert(stream.end(), s.tokens, s.tokens + s.length);
  }
  auto flat = first.tokens.reshape({-1});
  for (int64_t i = 0; i < 48; ++i) EXPECT_EQ(flat[i].item<int64_t>(), stream[i]);
  // Resume mid-document (offset > 0) with shuffling.
  Batcher d(split, lay, 9, true, true, "train");
  for (int i = 0; i < 5; ++i) d.next();
  Batcher e(split, lay, 9, true, true, "train");
  e.set_position(d.position(), "test");
  for (int i = 0; i < 12; ++i) {
    auto x = d.next(), y = e.next();
    EXPECT_TRUE(torch::equal(x.tokens, y.tokens));
    EXPECT_TRUE(torch::equal(x.doc_ids, y.doc_ids));
    EXPECT_TRUE(torch::equal(x.target_mask, y.target_mask));
  }
  EXPECT_THROW(e.set_position({{"epoch", 0}, {"index", 1000}, {"offset", 0}}, "test"), lol::InputError);
}

TEST(Batcher, TooLongSequenceNamesTheSetting) {
  TempDir dir("long");
  test::write_reverse_dataset(dir.path(), 5, 1);
  auto split = lol::data::Dataset::open(dir.path()).load("train");
  try {
    Batcher b(split, BatchLayout{2, 5, false}, 0, true, true, "data");
    FAIL() << "expected InputError";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len"), std::string::npos) << e.what();
  }
}

TEST(MaskedLoss, TargetsAtMaskedPositionsDoNotChangeTheLoss) {
  torch::manual_seed(4);
  auto logits = torch::randn({2, 6, 11}, torch::requires_grad());
  auto targets = torch::randint(0, 11, {2, 6}, torch::kInt64);
  auto mask = torch::rand({2, 6}) > 0.5;
  mask[0][0] = true;
  mask[1][5] = false;
  auto loss = masked_ce_sum(logits, targets, mask);
  loss.backward();
  auto grad = logits.grad().clone();
  logits.mutable_grad() = torch::Tensor();
  // Change every masked-out target (even to out-of-vocabulary values).
  auto other = torch::where(mask, targets, torch::full_like(targets, 9999));
  auto loss2 = masked_ce_sum(logits, other, mask);
  loss2.backward();
  EXPECT_TRUE(torch::equal(loss, loss2));
  EXPECT_TRUE(torch::equal(grad, logits.grad()));
  // Gradient is zero at masked-out positions.
  EXPECT_EQ(grad.index({mask.logical_not()}).abs().sum().item<double>(), 0.0);
  // And equals the sum of -log p over counted positions.
  auto lp = torch::log_softmax(logits.detach(), -1);
  double ref = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 6; ++t)
      if (mask[b][t].item<bool>()) ref -= lp[b][t][targets[b][t].item<int64_t>()].item<double>();
  EXPECT_NEAR(loss.item<double>(), ref, 1e-4);
  EXPECT_EQ(masked_ce_sum(logits, targets, torch::zeros_like(mask)).item<double>(), 0.0);
}
