// ByteTrie (leftmost-longest lookup of many fixed strings) against a brute-force
// search, and AddedVocab splitting with many tokens sharing a prefix.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizers/added_vocab.h"
#include "tokenizers/byte_trie.h"

namespace lol::tokenizers::test {
namespace {

// The longest of `keys` (first listed wins among equal strings) at `pos` of `text`.
ByteTrie::Match brute_longest(const std::vector<std::string>& keys, const std::string& text, std::size_t pos) {
  ByteTrie::Match best;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::string& key = keys[k];
    if (key.size() > best.length && text.compare(pos, key.size(), key) == 0) {
      bool first = true;
      for (std::size_t j = 0; j < k; ++j) first = first && keys[j] != key;
      if (first) best = {key.size(), static_cast<std::uint32_t>(k)};
    }
  }
  return best;
}

TEST(ByteTrie, LongestMatchEqualsBruteForceOnRandomKeys) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab\xc3\xa9<";  // bytes of 'a', 'b', 'é', '<'
  auto random_string = [&](std::size_t max_len) {
    std::string s(1 + rng() % max_len, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> keys;
    ByteTrie trie;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) {
      keys.push_back(random_string(5));
      bool fresh = true;
      for (int j = 0; j < k; ++j) fresh = fresh && keys[j] != keys[k];
      EXPECT_EQ(trie.insert(keys.back(), static_cast<std::uint32_t>(k)), fresh) << keys.back();
    }
    const std::string text = random_string(40);
    for (std::size_t pos = 0; pos < text.size(); ++pos) {
      const ByteTrie::Match want = brute_longest(keys, text, pos);
      const ByteTrie::Match got = trie.longest_at(text, pos);
      ASSERT_EQ(got.length, want.length) << "round " << round << " pos " << pos;
      if (want.length > 0) {
        EXPECT_EQ(got.value, want.value);
        EXPECT_TRUE(trie.has_first_byte(static_cast<unsigned char>(text[pos])));
      }
    }
  }
}

TEST(ByteTrie, KeepsFirstValueCountsAndRefusesEmpty) {
  ByteTrie trie;
  EXPECT_TRUE(trie.empty());
  EXPECT_TRUE(trie.insert("<a>", 3));
  EXPECT_FALSE(trie.insert("<a>", 9));
  EXPECT_TRUE(trie.insert("<", 4));
  EXPECT_EQ(trie.size(), 2u);
  EXPECT_EQ(trie.longest_at("x<a>", 1).value, 3u);
  EXPECT_EQ(trie.longest_at("x<a", 1).length, 1u);  // only "<" is complete
  EXPECT_EQ(trie.longest_at("x<a", 0).length, 0u);
  EXPECT_FALSE(trie.has_first_byte('x'));
  EXPECT_THROW(trie.insert("", 1), std::invalid_argument);
}

TEST(ByteTrie, ManyTokensWithACommonPrefixSplitExactly) {
  // 20,000 tokens <img_0> ... <img_19999>: every one is found whole, and <img_12>
  // is not cut out of <img_123> (longest match).
  AddedVocab v;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    AddedToken t;
    t.content = "<img_" + std::to_string(i) + ">";
    t.id = 1000 + i;
    v.add(t);
  }
  std::string text;
  std::vector<int32_t> want;
  for (int i = 0; i < n; i += 7) {
    text += "x<img_" + std::to_string(i) + ">";
    want.push_back(-1);
    want.push_back(1000 + i);
  }
  text += "<img_" + std::to_string(n) + ">";  // not a token
  want.push_back(-1);
  std::vector<Segment> segs;
  v.split(text, segs);
  ASSERT_EQ(segs.size(), want.size());
  std::string joined;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    EXPECT_EQ(segs[k].added_id, want[k]) << k;
    joined += segs[k].text;
  }
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace lol::tokenizers::test
