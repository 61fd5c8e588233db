// Added/special tokens: matched verbatim before pre-tokenization, one id each,
// never split; leftmost-longest matching; lstrip/rstrip; ChatML formatting.
#include <algorithm>

#include "tok_test_util.h"
#include "tokenizers/added_vocab.h"
#include "tokenizers/chat_template.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace lol::tokenizers::test {
namespace {

// GPT-2's vocabulary with Qwen2's pre-tokenizer and ChatML specials.
std::unique_ptr<BpeTokenizer> chatml_tokenizer() {
  auto tok = load_vocab_merges(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt", kQwen2Pattern);
  for (const char* s : {"<|im_start|>", "<|im_end|>"}) {
    AddedToken t;
    t.content = s;
    tok->add_token(t);
  }
  return tok;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SpecialTokens, SingleIdsNeverSplit) {
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = chatml_tokenizer();
  const int32_t start = *tok->token_to_id("<|im_start|>");
  const int32_t end = *tok->token_to_id("<|im_end|>");
  EXPECT_EQ(start, 50257);
  EXPECT_EQ(end, 50258);
  EXPECT_EQ(tok->vocab_size(), 50259);

  EXPECT_EQ(tok->encode("<|im_start|>"), std::vector<int32_t>{start});
  EXPECT_EQ(tok->encode("<|im_start|><|im_end|><|im_start|>"), (std::vector<int32_t>{start, end, start}));
  // Text around a special token is encoded as if it stood alone.
  const std::string a = "user\nHello there!", b = "\n";
  EXPECT_EQ(tok->encode("<|im_start|>" + a + "<|im_end|>" + b),
            concat(concat(concat({start}, tok->encode(a)), {end}), tok->encode(b)));
  // Glued to letters/punctuation on both sides: still one id.
  const auto ids = tok->encode("x<|im_end|>y.<|im_start|>!");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), start), 1);
  EXPECT_EQ(tok->decode(ids), "x<|im_end|>y.<|im_start|>!");
  // An incomplete special string is ordinary text.
  const auto partial = tok->encode("<|im_start");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), start), 0);
  EXPECT_GT(partial.size(), 1u);
  EXPECT_EQ(tok->decode(partial), "<|im_start");
  // Decoding without specials.
  EXPECT_EQ(tok->decode(tok->encode("<|im_start|>hi<|im_end|>"), true), "hi");
}

TEST(SpecialTokens, LeftmostLongest) {
  AddedVocab v;
  v.add({"ab", 1});
  v.add({"bcd", 2});
  v.add({"<s>", 3});
  v.add({"<s>x", 4});
  std::vector<Segment> seg;
  v.split("zabcd<s>xy<s>", seg);
  ASSERT_EQ(seg.size(), 6u);
  EXPECT_EQ(seg[0].text, "z");
  EXPECT_EQ(seg[1].added_id, 1);  // "ab" starts first, so "bcd" cannot match
  EXPECT_EQ(seg[2].text, "cd");
  EXPECT_EQ(seg[2].added_id, -1);
  EXPECT_EQ(seg[3].added_id, 4);  // the longer "<s>x" wins at the same start
  EXPECT_EQ(seg[4].text, "y");
  EXPECT_EQ(seg[5].added_id, 3);
}

TEST(SpecialTokens, LstripRstripAndSingleWord) {
  AddedVocab v;
  AddedToken mask{"<mask>", 7};
  mask.lstrip = true;
  mask.rstrip = true;
  v.add(mask);
  AddedToken w{"cat", 8};
  w.single_word = true;
  v.add(w);
  std::vector<Segment> seg;
  v.split("a  <mask> b", seg);
  ASSERT_EQ(seg.size(), 3u);
  EXPECT_EQ(seg[0].text, "a");
  EXPECT_EQ(seg[1].text, "  <mask> ");
  EXPECT_EQ(seg[1].added_id, 7);
  EXPECT_EQ(seg[2].text, "b");
  seg.clear();
  v.split("concat cat", seg);  // only the free-standing "cat" matches
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].text, "concat ");
  EXPECT_EQ(seg[1].added_id, 8);
}

// The matches are the text's own (Hugging Face's find_matches): an rstrip token's white
// space does not hide an added token that starts inside it (HF tokenizers 0.23.2 gives
// [<R>, " <S>"] and [<R>, "\n\n", x]; lol gave <R> then "<S>" as plain text).
TEST(SpecialTokens, RstripDoesNotHideTheNextAddedToken) {
  AddedVocab v;
  AddedToken r{"<R>", 1};
  r.rstrip = true;
  v.add(r);
  v.add({" <S>", 2});
  v.add({"\n\n", 3});
  auto ids = [&](std::string_view text) {
    std::vector<Segment> seg;
    v.split(text, seg);
    std::vector<std::pair<std::string, int>> out;
    for (const auto& s : seg) out.emplace_back(std::string(s.text), s.added_id);
    return out;
  };
  using P = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(ids("<R> <S>"), (P{{"<R> ", 1}, {" <S>", 2}}));
  EXPECT_EQ(ids("<R>\n\nx"), (P{{"<R>\n\n", 1}, {"\n\n", 3}, {"x", -1}}));
  EXPECT_EQ(ids("<R>  y"), (P{{"<R>  ", 1}, {"y", -1}}));
}

TEST(SpecialTokens, DuplicatesRejected) {
  AddedVocab v;
  v.add({"<a>", 1});
  v.add({"<a>", 1});  // same token again: fine
  EXPECT_THROW(v.add({"<a>", 2}), InputError);
  EXPECT_THROW(v.add({"<b>", 1}), InputError);
  EXPECT_THROW(v.add({"", 3}), InputError);
}

TEST(ChatML, ExactFormat) {
  const std::vector<ChatMessage> msgs = {{"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}};
  EXPECT_EQ(apply_chatml(msgs, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // An explicit system message replaces the default; no generation prompt.
  EXPECT_EQ(apply_chatml({{"system", "Be brief."}, {"user", "x"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n");
  EXPECT_EQ(apply_chatml({{"user", "x"}}, false, ""), "<|im_start|>user\nx<|im_end|>\n");
  EXPECT_THROW(apply_chatml({{"robot", "x"}}, false), InputError);
}

TEST(ChatML, EncodesTurnMarkersAsSpecials) {
  LOL_REQUIRE_SHARED(gpt2_dir() + "/vocab.json");
  auto tok = chatml_tokenizer();
  const std::string prompt = apply_chatml({{"user", "What is 12+30?"}}, true);
  const auto ids = tok->encode(prompt);
  const int32_t start = *tok->token_to_id("<|im_start|>"), end = *tok->token_to_id("<|im_end|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), start), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 2);
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(tok->decode(ids), prompt);
}

}  // namespace
}  // namespace lol::tokenizers::test
