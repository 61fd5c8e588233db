// GPT-2 byte-level BPE against Hugging Face's ids (shared/data/tokenizers/gpt2/golden.jsonl).
#include <fstream>

#include "tok_test_util.h"
#include "tokenizers/hf_json.h"

namespace lol::tokenizers::test {
namespace {

TEST(Gpt2Golden, AllCasesFromVocabAndMerges) {
  const std::string dir = gpt2_dir();
  LOL_REQUIRE_SHARED(dir + "/golden.jsonl");
  LOL_REQUIRE_SHARED(dir + "/vocab.json");
  LOL_REQUIRE_SHARED(dir + "/merges.txt");
  auto tok = load_vocab_merges(dir + "/vocab.json", dir + "/merges.txt");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->model().merges().size(), 50000u);

  std::ifstream f(dir + "/golden.jsonl");
  std::string line;
  int cases = 0;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const std::vector<int32_t> want = j.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), want) << "text: " << j.at("text").dump();
    EXPECT_EQ(tok->decode(want), text) << "text: " << j.at("text").dump();
    ++cases;
  }
  EXPECT_EQ(cases, 47);
}

TEST(Gpt2Golden, DirectoryLoaderAndEndOfText) {
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_tokenizer(gpt2_dir());
  ASSERT_EQ(tok->type(), "bpe");
  // GPT-2's single special token: id 50256, BOS = EOS, matched as one id.
  ASSERT_TRUE(tok->eos_id().has_value());
  EXPECT_EQ(*tok->eos_id(), 50256);
  EXPECT_EQ(tok->bos_id(), tok->eos_id());
  const auto ids = tok->encode("Hello<|endoftext|>world");
  EXPECT_EQ(ids, (std::vector<int32_t>{15496, 50256, 6894}));
  EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/true), "Helloworld");
  EXPECT_EQ(*tok->token_to_id("Ġthe"), 262);
  EXPECT_EQ(*tok->id_to_token(262), "Ġthe");
  EXPECT_FALSE(tok->id_to_token(50257).has_value());
}

}  // namespace
}  // namespace lol::tokenizers::test
