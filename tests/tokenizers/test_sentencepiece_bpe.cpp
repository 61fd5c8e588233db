// SentencePiece-style BPE (tokenizers/sentencepiece_bpe.h: Llama 2, Mistral, Gemma,
// Yi tokenizer.json) against Hugging Face `tokenizers` ids: data/spm_bpe_tokenizer.json
// under four pipelines (data/spm_golden_*.jsonl, made by data/make_spm_golden.py with
// the Rust library), plus saving, byte counts and refused configurations.
#include <fstream>

#include "tok_test_util.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/sentencepiece_bpe.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers::test {
namespace {

const std::string kData = std::string(LOL_SOURCE_DIR) + "/tests/tokenizers/data/";

nlohmann::json base_json() {
  std::ifstream f(kData + "spm_bpe_tokenizer.json");
  return nlohmann::json::parse(f);
}

/// spm_bpe_tokenizer.json with `fields` (normalizer, pre_tokenizer, decoder) replaced.
nlohmann::json variant(const nlohmann::json& fields) {
  auto j = base_json();
  for (const char* k : {"normalizer", "pre_tokenizer", "decoder"}) j[k] = fields.at(k);
  return j;
}

std::string message_of(const nlohmann::json& j) {
  try {
    tokenizer_from_hf_json(j, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

class SentencePieceGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceGolden, IdsAndDecodingEqualHuggingFace) {
  std::ifstream f(kData + "spm_golden_" + GetParam() + ".jsonl");
  ASSERT_TRUE(f) << GetParam();
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto header = nlohmann::json::parse(line);
  ASSERT_EQ(header.at("variant"), GetParam());
  const auto tok = tokenizer_from_hf_json(variant(header), "spm_" + GetParam());
  ASSERT_NE(dynamic_cast<const SentencePieceBpeTokenizer*>(tok.get()), nullptr);
  EXPECT_EQ(tok->vocab_size(), 1287);
  int cases = 0, fallback = 0;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const auto ids = j.at("ids").get<std::vector<int32_t>>();
    const auto ids_special = j.at("ids_special").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), ids) << j.at("text").dump();
    EXPECT_EQ(tok->encode(text, /*add_special_tokens=*/true), ids_special) << j.at("text").dump();
    EXPECT_EQ(to_valid_utf8(tok->decode(ids)), j.at("decoded").get<std::string>()) << j.at("text").dump();
    EXPECT_EQ(to_valid_utf8(tok->decode(ids_special, /*skip_special_tokens=*/true)),
              j.at("decoded_skip").get<std::string>())
        << j.at("text").dump();
    for (int32_t id : ids) fallback += id >= 3 && id < 259;  // <0xXX> tokens
    ++cases;
  }
  EXPECT_EQ(cases, 51);
  EXPECT_GT(fallback, 100) << "the texts must exercise byte fallback";
}

INSTANTIATE_TEST_SUITE_P(Pipelines, SentencePieceGolden,
                         ::testing::Values("legacy", "metaspace_first", "metaspace_always_split", "replace_only"));

TEST(SentencePieceBpe, SavedTokenizerReloadsWithTheSameIds) {
  const auto tok = tokenizer_from_hf_json(base_json(), "spm");
  const auto again = tokenizer_from_hf_json(nlohmann::json::parse(tok->to_hf_json().dump()), "saved");
  const std::string text = "Hi <s> there,  \xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80 and the LORD";
  EXPECT_EQ(again->encode(text, true), tok->encode(text, true));
  // The Prepend normalizer runs on each piece between added tokens: "<s> there" decodes
  // with two spaces, as in Hugging Face (spm_golden_legacy.jsonl "Hi <s> there </s>").
  const std::string plain = text.substr(text.find("there"));
  EXPECT_EQ(again->decode(tok->encode(plain)), plain);
  EXPECT_EQ(tok->to_hf_json()["model"]["byte_fallback"], true);
  EXPECT_EQ(tok->to_hf_json()["decoder"].dump(), base_json()["decoder"].dump());
}

TEST(SentencePieceBpe, TokenBytesKeepTheSpaceTheDecoderStrips) {
  const auto tok = tokenizer_from_hf_json(base_json(), "spm");
  const auto the = tok->token_to_id("\xE2\x96\x81the");  // "▁the"
  ASSERT_TRUE(the);
  EXPECT_EQ(tok->decode(&*the, 1), "the");          // Strip removes the leading space of a text
  EXPECT_EQ(tok->decode_inner(&*the, 1), " the");   // inside a text it stands for 4 bytes
  const auto fb = tok->token_to_id("<0xC3>");
  ASSERT_TRUE(fb);
  EXPECT_EQ(tok->decode_inner(&*fb, 1), "\xC3");
  // Invalid UTF-8 under the byte-fallback policy: the byte's own <0xXX> token.
  auto t2 = tokenizer_from_hf_json(base_json(), "spm");
  t2->set_invalid_utf8_policy(InvalidUtf8Policy::kByteFallback);
  const auto ids = t2->encode("a\xFF");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), *t2->token_to_id("<0xFF>"));
  EXPECT_EQ(t2->decode(ids), "a\xFF");
}

// CodeLlama's infilling tokens ("▁<PRE>") go through the decoder as Hugging Face does:
// the expected values are the Rust library's (hf_golden.js on this tokenizer).
TEST(SentencePieceBpe, AddedTokensAreDecodedThroughTheReplaceSteps) {
  auto j = base_json();
  j["added_tokens"].push_back({{"id", 1287}, {"content", "\xE2\x96\x81<PRE>"}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  const auto tok = tokenizer_from_hf_json(j, "spm_pre");
  EXPECT_EQ(tok->encode("x \xE2\x96\x81<PRE>"), (std::vector<int32_t>{385, 346, 385, 1287}));
  EXPECT_EQ(tok->decode({385, 346, 385, 1287}), "x  <PRE>");
  EXPECT_EQ(tok->decode({1, 385, 346, 385, 1287}, /*skip_special_tokens=*/true), "x ");
  EXPECT_EQ(tok->encode("\xE2\x96\x81<PRE> y"), (std::vector<int32_t>{1287, 385, 441}));
  EXPECT_EQ(tok->decode({1287, 385, 441}), "<PRE>  y");
  EXPECT_EQ(tok->decode({1, 1287, 385, 441}, /*skip_special_tokens=*/true), " y");
}

// A Metaspace decoder (prepend_scheme first) drops every U+2581 of the first token
// emitted, not one leading space (Hugging Face tokenizers 0.23.2 on this file gave
// each expected string; lol gave " hello" for the first).
TEST(SentencePieceBpe, MetaspaceDecoderDropsTheFirstTokensReplacements) {
  std::ifstream f(kData + "spm_golden_metaspace_first.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  auto j = variant(nlohmann::json::parse(line));
  j["model"]["vocab"]["\xE2\x96\x81\xE2\x96\x81"] = 1287;  // "▁▁"
  j["added_tokens"].push_back({{"id", 1288}, {"content", "\xE2\x96\x81<PRE>"}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  const auto tok = tokenizer_from_hf_json(j, "spm_meta");
  const std::vector<std::pair<std::vector<int32_t>, std::pair<std::string, std::string>>> cases = {
      {{1287, 330, 707, 337}, {"hello", "hello"}},
      {{1, 1287, 330}, {"<s>  h", "h"}},
      {{1288, 330}, {"<PRE>h", "h"}},
      {{1, 1288, 330}, {"<s> <PRE>h", "h"}},
      {{330, 1287, 330}, {"h  h", "h  h"}}};
  for (const auto& [ids, want] : cases) {
    EXPECT_EQ(tok->decode(ids), want.first) << ::testing::PrintToString(ids);
    EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/true), want.second) << ::testing::PrintToString(ids);
    for (bool skip : {false, true}) {
      DecodeStream stream(*tok, skip);
      std::string printed;
      for (int32_t id : ids) printed += stream.push(id);
      EXPECT_EQ(printed + stream.finish(), skip ? want.second : want.first) << ::testing::PrintToString(ids);
    }
  }
}

// A Sequence holding one Metaspace is that Metaspace (Hugging Face runs it the same; it
// was refused, with a message listing ByteLevel): the same ids as the bare step.
TEST(SentencePieceBpe, SequenceOfOneMetaspaceIsThatMetaspace) {
  std::ifstream f(kData + "spm_golden_metaspace_first.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto bare = variant(nlohmann::json::parse(line));
  auto seq = bare;
  seq["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {bare["pre_tokenizer"]}}};
  const auto a = tokenizer_from_hf_json(bare, "bare"), b = tokenizer_from_hf_json(seq, "seq");
  for (const std::string text : {"hello world", " two  spaces", "a\nb"})
    EXPECT_EQ(b->encode(text, true), a->encode(text, true)) << text;
  EXPECT_EQ(b->to_hf_json()["pre_tokenizer"]["type"], "Sequence");  // saved as read
  // With another step before it: refused, saying where Metaspace is supported.
  seq["pre_tokenizer"]["pretokenizers"] = {{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}},
                                           bare["pre_tokenizer"]};
  EXPECT_NE(message_of(seq).find("Metaspace only as the whole pre_tokenizer, or a Sequence of it alone"),
            std::string::npos)
      << message_of(seq);
}

// Streamed decoding (one id at a time, as the generate commands print) gives exactly
// decode() of all ids: the stripped leading space, <0xXX> bytes of one character.
TEST(SentencePieceBpe, DecodeStreamEqualsDecodingAllIds) {
  for (const char* name : {"legacy", "metaspace_first", "replace_only"}) {
    std::ifstream f(kData + std::string("spm_golden_") + name + ".jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(f, line)) << name;
    const auto tok = tokenizer_from_hf_json(variant(nlohmann::json::parse(line)), name);
    int checked = 0;
    while (std::getline(f, line)) {
      const auto ids = nlohmann::json::parse(line).at("ids_special").get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        DecodeStream stream(*tok, skip);
        std::string printed;
        for (int32_t id : ids) printed += stream.push(id);
        printed += stream.finish();
        EXPECT_EQ(printed, to_valid_utf8(tok->decode(ids, skip))) << name << " " << line.substr(0, 80);
      }
      ++checked;
    }
    EXPECT_EQ(checked, 51);
  }
}

TEST(SentencePieceBpe, UnsupportedPipelinesAreRefusedNamingTheField) {
  auto j = base_json();
  j["decoder"]["decoders"][3]["stop"] = 1;
  EXPECT_NE(message_of(j).find("t.json: decoder.decoders[3].stop: only 0 is supported"), std::string::npos)
      << message_of(j);
  j = base_json();
  std::swap(j["decoder"]["decoders"][2], j["decoder"]["decoders"][3]);  // Strip before Fuse
  EXPECT_NE(message_of(j).find("decoder.decoders[2]: Strip before Fuse is not supported"), std::string::npos)
      << message_of(j);
  j = base_json();
  j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", "\\s"}};
  EXPECT_NE(message_of(j).find("t.json: normalizer.normalizers[1].pattern: expected {\"String\": text}"),
            std::string::npos)
      << message_of(j);
  j = base_json();
  j["normalizer"]["normalizers"][0]["type"] = "Lowercase";
  EXPECT_NE(message_of(j).find("unsupported normalizer \"Lowercase\""), std::string::npos) << message_of(j);
  j = base_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(message_of(j).find("t.json: pre_tokenizer.type: \"Whitespace\": expected null, Split or Metaspace"),
            std::string::npos)
      << message_of(j);
  j = base_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "sometimes"}};
  EXPECT_NE(message_of(j).find("prepend_scheme: \"sometimes\": expected always, first or never"), std::string::npos)
      << message_of(j);
  j = base_json();
  j["decoder"] = {{"type", "ByteLevel"}};  // a byte-level decoder with byte_fallback
  EXPECT_NE(message_of(j).find("t.json: model.byte_fallback: expected false with a ByteLevel decoder"),
            std::string::npos)
      << message_of(j);
  j = base_json();  // a template id no token has: encode would emit it, decode could not read it
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {77777};
  EXPECT_NE(message_of(j).find("t.json: post_processor.special_tokens.<s>.ids: id 77777 is not a token of this tokenizer"),
            std::string::npos)
      << message_of(j);
  j = base_json();
  j["decoder"] = nullptr;
  EXPECT_NE(message_of(j).find("t.json: decoder: missing"), std::string::npos) << message_of(j);
}

}  // namespace
}  // namespace lol::tokenizers::test
