// UTF-8 validation, invalid-input policies, lossy repair.
#include <random>

#include "tok_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers::test {
namespace {

TEST(Utf8, FindInvalid) {
  EXPECT_EQ(find_invalid_utf8(""), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the 8-byte path"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("é中🦙"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("abc\x80"), 3u);                       // lone continuation
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), 2u);                    // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xE0\x80\xAF"), 1u);                 // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);                 // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("x\xF4\x90\x80\x80"), 1u);             // > U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xE4\xB8"), 8u);              // truncated at end
  EXPECT_EQ(find_invalid_utf8("\xF5"), 0u);
}

TEST(Utf8, LossyRepair) {
  EXPECT_EQ(to_valid_utf8("ok"), "ok");
  EXPECT_EQ(to_valid_utf8("a\xFF" "b"), "a\uFFFD" "b");
  // A truncated 3-byte sequence is one maximal subpart -> one U+FFFD.
  EXPECT_EQ(to_valid_utf8("a\xE4\xB8" "b"), "a\uFFFD" "b");
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate: 3 subparts
}

// The White_Space character that starts at / ends just before a byte offset (file part
// cuts, docs/text.md): multi-byte spaces count, ill-formed or cut bytes do not.
TEST(Utf8, WhitespaceAtOffsets) {
  const std::string t = "a\xC2\x85" "b\xE3\x80\x80" "c\xE4\xB8\xAD \xE2\x80\xA8";  // a NEL b U+3000 c 中 ' ' U+2028
  EXPECT_FALSE(whitespace_starts_at(t, 0));
  EXPECT_TRUE(whitespace_starts_at(t, 1));   // U+0085
  EXPECT_FALSE(whitespace_starts_at(t, 2));  // a continuation byte starts nothing
  EXPECT_TRUE(whitespace_starts_at(t, 4));   // U+3000
  EXPECT_FALSE(whitespace_starts_at(t, 8));  // 中
  EXPECT_TRUE(whitespace_starts_at(t, 11));  // ' '
  EXPECT_TRUE(whitespace_starts_at(t, 12));  // U+2028
  EXPECT_FALSE(whitespace_starts_at(t, t.size()));
  EXPECT_FALSE(whitespace_ends_at(t, 0));
  EXPECT_FALSE(whitespace_ends_at(t, 1));  // after 'a'
  EXPECT_TRUE(whitespace_ends_at(t, 3));   // after U+0085
  EXPECT_FALSE(whitespace_ends_at(t, 2));  // inside U+0085
  EXPECT_TRUE(whitespace_ends_at(t, 7));   // after U+3000
  EXPECT_FALSE(whitespace_ends_at(t, 11)); // after 中
  EXPECT_TRUE(whitespace_ends_at(t, 12));  // after ' '
  EXPECT_TRUE(whitespace_ends_at(t, t.size()));
  EXPECT_FALSE(whitespace_ends_at("\x80\x85", 2));   // continuation bytes alone
  EXPECT_FALSE(whitespace_starts_at("\xE3\x80", 0));  // U+3000 cut short
}

TEST(Utf8, EncodeThrowsWithOffset) {
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");
  try {
    tok->encode("Hello<|endoftext|>wor\xFFld");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 21 (byte 0xff)"), std::string::npos) << e.what();
  }
}

TEST(Utf8, ByteFallbackRoundTripsArbitraryBytes) {
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");
  tok->set_invalid_utf8_policy(InvalidUtf8Policy::kByteFallback);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s;
    const int n = int(rng() % 64);
    for (int i = 0; i < n; ++i) {
      // Mix ASCII, valid multi-byte and random bytes.
      switch (rng() % 4) {
        case 0: s += char('a' + rng() % 26); break;
        case 1: s += " "; break;
        case 2: s += "é"; break;
        default: s += char(rng() % 256); break;
      }
    }
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  }
  // An invalid byte is one token, the byte's own.
  const auto ids = tok->encode("a\xFF" "b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok->decode({ids[1]}), "\xFF");
}

TEST(Utf8, ByteTokenizerTakesAnyBytes) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  const auto ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.decode(ids), all);
}

// Streamed generation prints each character once, whole: bytes of one character that
// arrive in separate tokens wait for the last one (hf generate used to print U+FFFD and
// then lose the character).
TEST(Utf8, StreamPrintsCharactersSplitAcrossTokensWhenComplete) {
  // "a", then "é" (C3 A9) and "😀" (F0 9F 98 80) one byte per token, then a stray FF.
  const std::vector<std::string> tokens = {"a", "\xC3", "\xA9", "\xF0", "\x9F", "\x98", "\x80", " b", "\xFF", "c"};
  Utf8Stream stream;
  std::string all, printed;
  std::vector<std::string> parts;
  for (const auto& t : tokens) {
    all += t;
    parts.push_back(stream.push(t));
    printed += parts.back();
  }
  printed += stream.finish();
  EXPECT_EQ(printed, to_valid_utf8(all));
  EXPECT_EQ(printed, "a\xC3\xA9\xF0\x9F\x98\x80 b\xEF\xBF\xBD" "c");
  EXPECT_EQ(parts[1], "");                   // half of "é": held back
  EXPECT_EQ(parts[2], "\xC3\xA9");           // complete
  EXPECT_EQ(parts[5], "");                   // three bytes of four
  EXPECT_EQ(parts[6], "\xF0\x9F\x98\x80");
  // A character still incomplete at the end is printed as U+FFFD by finish().
  Utf8Stream cut;
  EXPECT_EQ(cut.push("x\xE6\x97"), "x");
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(cut.finish(), "");
}

}  // namespace
}  // namespace lol::tokenizers::test
