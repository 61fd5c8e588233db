// decode(encode(x)) == x on the shared corpora (first ~200 KB of each file and
// every multilingual_valid document), for GPT-2, GPT-2's vocabulary with Qwen2's
// pre-tokenizer, and the byte tokenizer.
#include <thread>

#include "tok_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"

namespace lol::tokenizers::test {
namespace {

constexpr std::size_t kPrefix = 200 * 1024;

std::vector<std::pair<std::string, std::string>> corpus_texts() {  // (name, text)
  std::vector<std::pair<std::string, std::string>> out;
  const std::string dir = shared_data("corpora");
  for (const char* f : {"en_kjv.txt", "en_devil.txt", "en_jargon.txt"}) {
    out.emplace_back(f, read_prefix(dir + "/" + f, kPrefix));
  }
  int i = 0;
  for (auto& t : read_jsonl_texts(dir + "/multilingual.jsonl", kPrefix))
    out.emplace_back("multilingual.jsonl doc " + std::to_string(i++), std::move(t));
  i = 0;
  for (auto& t : read_jsonl_texts(dir + "/multilingual_valid.jsonl"))
    out.emplace_back("multilingual_valid.jsonl doc " + std::to_string(i++), std::move(t));
  return out;
}

void expect_round_trip(const Tokenizer& tok, const char* label) {
  std::size_t docs = 0, bytes = 0, tokens = 0;
  for (const auto& [name, text] : corpus_texts()) {
    const auto ids = tok.encode(text);
    ASSERT_EQ(tok.decode(ids), text) << label << ": " << name;
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size()) << label << ": " << name;
    ++docs;
    bytes += text.size();
    tokens += ids.size();
  }
  EXPECT_GE(docs, 3u + 198u);
  EXPECT_GT(bytes, 1500000u);
  // Compression sanity: a byte-level BPE needs fewer tokens than bytes.
  if (tok.type() == "bpe") EXPECT_LT(tokens, bytes / 2) << label;
  else EXPECT_EQ(tokens, bytes) << label;
}

TEST(RoundTrip, Gpt2OnCorpora) {
  LOL_REQUIRE_SHARED(shared_data("corpora/multilingual_valid.jsonl"));
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");
  expect_round_trip(*tok, "gpt2");
}

TEST(RoundTrip, Qwen2PatternOnCorpora) {
  LOL_REQUIRE_SHARED(shared_data("corpora/multilingual_valid.jsonl"));
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt", kQwen2Pattern);
  expect_round_trip(*tok, "gpt2 vocab + qwen2 pattern");
}

TEST(RoundTrip, BytesOnCorpora) {
  LOL_REQUIRE_SHARED(shared_data("corpora/multilingual_valid.jsonl"));
  ByteTokenizer tok;
  expect_round_trip(tok, "bytes");
}

TEST(RoundTrip, ConcurrentEncodeMatchesSerial) {
  LOL_REQUIRE_SHARED(shared_data("corpora/multilingual_valid.jsonl"));
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt", kQwen2Pattern);
  const auto texts = read_jsonl_texts(shared_data("corpora/multilingual_valid.jsonl"));
  std::vector<std::vector<int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tok->encode(t));
  // A fresh tokenizer (empty cache) shared by 4 threads, each over all texts in a
  // different order.
  auto shared = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt", kQwen2Pattern);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (std::size_t n = 0; n < texts.size(); ++n) {
        const std::size_t i = (n * 7 + std::size_t(k) * 50) % texts.size();
        if (shared->encode(texts[i]) != serial[i]) ++mismatches[k];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

}  // namespace
}  // namespace lol::tokenizers::test
