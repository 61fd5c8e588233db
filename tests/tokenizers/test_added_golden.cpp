// Added tokens of every kind against Hugging Face `tokenizers` (the Rust library):
// data/added_golden_*.jsonl, made by data/make_added_golden.py, list the ids HF gives
// for texts around added tokens with normalized true/false, single_word, lstrip,
// rstrip, ids with gaps or clashes, under byte-level (NFC, NFKC, DeepSeek-style empty
// normalizer + Split steps, GPT-4-style Split(Removed, invert), every other Split
// behaviour) and SentencePiece-style (Llama 2 legacy, Metaspace "first", Gemma 2's
// Split(MergedWithPrevious)) pipelines. Plus the word-character class, the normalizer steps and saving.
#include <fstream>

#include "tok_test_util.h"
#include "tokenizers/added_vocab.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers::test {
namespace {

const std::string kAddedDir = std::string(LOL_SOURCE_DIR) + "/tests/tokenizers/data/";

nlohmann::json read_data_json(const std::string& name) {
  std::ifstream f(kAddedDir + name);
  EXPECT_TRUE(f) << name;
  return nlohmann::json::parse(f);
}

/// The base file of a golden header with the header's fields replaced.
nlohmann::json added_variant(const nlohmann::json& header) {
  auto j = read_data_json(header.at("base").get<std::string>() + "_bpe_tokenizer.json");
  for (const char* k : {"normalizer", "pre_tokenizer", "decoder", "added_tokens"})
    if (header.contains(k)) j[k] = header.at(k);
  return j;
}

class AddedTokenGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(AddedTokenGolden, IdsAndDecodingEqualHuggingFace) {
  // The NFC/NFKC variants' Hugging Face ids assume the normalizer ran; a build without
  // ICU records it but cannot apply it (normalizer.h; CMake warns when configuring).
  if (GetParam().find("nf") != std::string::npos && !unicode_forms_available())
    GTEST_SKIP() << "built without ICU: Unicode normalization forms are not applied";
  std::ifstream f(kAddedDir + "added_golden_" + GetParam() + ".jsonl");
  ASSERT_TRUE(f) << GetParam();
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto header = nlohmann::json::parse(line);
  ASSERT_EQ(header.at("variant"), GetParam());
  const auto tok = tokenizer_from_hf_json(added_variant(header), GetParam());
  ASSERT_TRUE(std::getline(f, line));
  const auto vocab = nlohmann::json::parse(line);
  // Ids as Hugging Face assigns them on load (the file's ids have gaps and clashes).
  EXPECT_EQ(tok->vocab_size(), vocab.at("vocab_size").get<int32_t>());
  const auto& listed = header.at("added_tokens");
  const auto& ids = vocab.at("added_ids");
  ASSERT_EQ(listed.size(), ids.size());
  for (std::size_t i = 0; i < listed.size(); ++i)
    EXPECT_EQ(tok->token_to_id(listed[i].at("content").get<std::string>()), ids[i].get<int32_t>())
        << listed[i].dump();
  int cases = 0, added_hits = 0;
  const int32_t first_new = ids[3].get<int32_t>();
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const auto want = j.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), want) << GetParam() << " " << j.at("text").dump();
    EXPECT_EQ(tok->encode(text, /*add_special_tokens=*/true), j.at("ids_special").get<std::vector<int32_t>>())
        << j.at("text").dump();
    EXPECT_EQ(to_valid_utf8(tok->decode(want)), j.at("decoded").get<std::string>()) << j.at("text").dump();
    EXPECT_EQ(to_valid_utf8(tok->decode(j.at("ids_special").get<std::vector<int32_t>>(), true)),
              j.at("decoded_skip").get<std::string>())
        << j.at("text").dump();
    for (int32_t id : want) added_hits += id >= first_new;
    ++cases;
  }
  EXPECT_EQ(cases, 110);
  EXPECT_GT(added_hits, 20) << "the texts must exercise the added tokens";

  // Saving writes the ids in use; the saved file encodes the same way.
  const auto again = tokenizer_from_hf_json(nlohmann::json::parse(tok->to_hf_json().dump()), "saved");
  for (const char* text : {"a  b\xE2\x84\xAB A\xCC\x8A dog <|sep|>x \xEF\xAC\x81x fix", "q z <y> a<sep> b \xCE\xBE\xCF\x88"})
    EXPECT_EQ(again->encode(text, true), tok->encode(text, true)) << text;
}

INSTANTIATE_TEST_SUITE_P(Pipelines, AddedTokenGolden,
                         ::testing::Values("bl_nfc", "bl_deepseek", "bl_nfkc", "bl_gpt4", "bl_split_behaviors",
                                           "spm_gemma2_split", "spm_legacy", "spm_metaspace_first"));

// A model vocabulary whose ids have gaps (data/make_vocab_gap_golden.py): a new added
// token gets the number of vocabulary entries, as in Hugging Face, not 1 + the largest
// id; in "clash" that number is the id of the model token "Ġthe", which the added token
// "<x>" then shares (" the" encodes to it and it decodes as "<x>"); in "high" an added
// token that is a model token above the entry count ("and" at 1300) does not count.
class VocabGapGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabGapGolden, AddedIdsEncodingAndDecodingEqualHuggingFace) {
  std::ifstream f(kAddedDir + "vocab_gap_golden_" + GetParam() + ".jsonl");
  ASSERT_TRUE(f) << GetParam();
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto header = nlohmann::json::parse(line);
  auto j = read_data_json("bl_bpe_tokenizer.json");
  const int32_t entries = int32_t(j["model"]["vocab"].size());
  int32_t max_id = entries - 1;
  for (const auto& [token, id] : header.at("move").items()) {
    j["model"]["vocab"][token] = id;
    max_id = std::max(max_id, id.get<int32_t>());
  }
  j["added_tokens"] = header.at("added_tokens");
  const auto tok = tokenizer_from_hf_json(j, GetParam());
  ASSERT_TRUE(std::getline(f, line));
  const auto ids = nlohmann::json::parse(line).at("added_ids");
  const auto& listed = header.at("added_tokens");
  ASSERT_EQ(listed.size(), ids.size());
  for (std::size_t i = 0; i < listed.size(); ++i)
    EXPECT_EQ(tok->token_to_id(listed[i].at("content").get<std::string>()), ids[i].get<int32_t>())
        << listed[i].dump();
  auto id_of = [&](const char* content) {
    for (std::size_t i = 0; i < listed.size(); ++i)
      if (listed[i].at("content") == content) return ids[i].get<int32_t>();
    return -1;
  };
  EXPECT_EQ(id_of("<x>"), entries) << "the first new added token gets the entry count";
  // vocab_size() stays the embedding table's size: 1 + the largest id in use.
  EXPECT_EQ(tok->vocab_size(), std::max(max_id, id_of("<y>")) + 1);
  int cases = 0;
  while (std::getline(f, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::string text = c.at("text").get<std::string>();
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), want) << text;
    EXPECT_EQ(tok->encode(text, true), c.at("ids_special").get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok->decode(want), c.at("decoded").get<std::string>()) << text;
    EXPECT_EQ(tok->decode(c.at("ids_special").get<std::vector<int32_t>>(), true), c.at("decoded_skip").get<std::string>())
        << text;
    ++cases;
  }
  EXPECT_EQ(cases, 13);
  // Saved and loaded again: the same ids.
  const auto again = tokenizer_from_hf_json(nlohmann::json::parse(tok->to_hf_json().dump()), "saved");
  for (const char* text : {"a<x> the<y>the", "<x>and the"}) EXPECT_EQ(again->encode(text), tok->encode(text)) << text;
  EXPECT_EQ(again->decode(tok->encode(" the")), tok->decode(tok->encode(" the")));
}

INSTANTIATE_TEST_SUITE_P(Moves, VocabGapGolden, ::testing::Values("gap", "clash", "high"));

TEST(AddedTokens, OwnAddTokenStillRefusesAnotherStringsModelId) {
  // Only loading a Hugging Face file shares an id; add_token keeps one id, one string.
  auto j = read_data_json("bl_bpe_tokenizer.json");
  const auto tok = tokenizer_from_hf_json(j, "bl");
  const int32_t the = *tok->token_to_id("\xC4\xA0the");
  EXPECT_THROW(tok->add_token({"<z>", the}), InputError);
  const int32_t next = tok->vocab_size();
  EXPECT_EQ(tok->add_token({"<z>", -1}), next);
}

TEST(Continuation, PartsEncodeAsTheWholeTextWhateverThePipelineAddsAtTheStart) {
  // encode_append(..., continuation) of the later parts of a text cut after a '\n' before a
  // word (corpus --doc-split file) gives the whole text's ids, for the pipelines that add
  // something at the start of a text: ByteLevel(add_prefix_space) alone or as the first
  // step (a space), Metaspace always / first (U+2581); and keeps
  // the space that ByteLevel(add_prefix_space) after a Split adds to every piece.
  const nlohmann::json bl_prefix = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                                    {"use_regex", true}};
  const nlohmann::json split_then_bl = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\n"}}}, {"behavior", "Isolated"}, {"invert", false}},
        bl_prefix}}};
  std::vector<std::pair<std::string, nlohmann::json>> variants;
  for (const auto& pre : {bl_prefix, split_then_bl}) {
    auto j = read_data_json("bl_bpe_tokenizer.json");
    j["pre_tokenizer"] = pre;
    variants.emplace_back(pre.dump(), j);
  }
  for (const char* scheme : {"always", "first"}) {
    auto j = read_data_json("spm_bpe_tokenizer.json");
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme},
                          {"split", true}};
    variants.emplace_back(std::string("metaspace ") + scheme, j);
  }
  const std::string parts[] = {"The LORD said\n", "Wherefore art thou\n", "and the sea"};
  for (const auto& [name, j] : variants) {
    const auto tok = tokenizer_from_hf_json(j, name);
    std::vector<int32_t> ids;
    for (std::size_t i = 0; i < 3; ++i) tok->encode_append(parts[i], ids, false, /*continuation=*/i > 0);
    EXPECT_EQ(ids, tok->encode(parts[0] + parts[1] + parts[2])) << name;
    std::vector<int32_t> fresh;  // without continuation each part gets its own start
    for (const auto& p : parts) tok->encode_append(p, fresh);
    if (name.find("Split") == std::string::npos) EXPECT_NE(fresh, ids) << name;
  }
}

TEST(AddedTokens, WordCharactersAreTheRegexWordClass) {
  // Rust regex \w: Alphabetic, marks, Nd, Pc, ZWNJ/ZWJ (the class Hugging Face's
  // single_word test uses); not other numbers, symbols, punctuation or spaces.
  for (char32_t cp : {U'a', U'Z', U'0', U'_', U'\u00e9', U'\u00aa', U'\u2160', U'\u0301', U'\u0663', U'\u4e2d',
                      U'\u200c', U'\u200d', U'\u203f'})
    EXPECT_TRUE(is_word_character(cp)) << std::hex << uint32_t(cp);
  for (char32_t cp : {U' ', U'-', U'.', U'\u00b2', U'\u2014', U'\u00a0', U'\u3000', U'\U0001F600', U'\u00bd'})
    EXPECT_FALSE(is_word_character(cp)) << std::hex << uint32_t(cp);
}

TEST(AddedTokens, DroppedSingleWordMatchIsSkippedOver) {
  AddedVocab v;
  AddedToken xy{"xy", 1};
  xy.single_word = true;
  v.add(xy);
  v.add({"y", 2});
  std::vector<Segment> seg;
  v.split("axy y", seg);  // "xy" touches "a": dropped, and its "y" is not matched either
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].text, "axy ");
  EXPECT_EQ(seg[1].added_id, 2);
}

TEST(AddedTokens, NormalizedTokensAreMatchedInNormalizedTextOnly) {
  AddedVocab v;
  AddedToken a{"A\xCC\x8A", 5};  // A + COMBINING RING ABOVE
  a.normalized = true;
  v.add(a, "\xC3\x85");  // its NFC
  std::vector<Segment> seg;
  v.split("x\xC3\x85y", seg);  // the raw phase does not see it
  ASSERT_EQ(seg.size(), 1u);
  EXPECT_EQ(seg[0].added_id, -1);
  seg.clear();
  v.split("x\xC3\x85y", seg, /*normalized=*/true);
  ASSERT_EQ(seg.size(), 3u);
  EXPECT_EQ(seg[1].added_id, 5);
  EXPECT_TRUE(v.has_normalized());
}

TEST(Normalizers, StepsApplyInOrder) {
  const auto n = Normalizer::from_json(
      nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "_"},
                                {"type": "Replace", "pattern": {"String": " "}, "content": "_"}]})"),
      "n");
  EXPECT_EQ(n.apply("a b"), "_a_b");
  EXPECT_EQ(n.apply(""), "");  // Prepend leaves empty text alone
  std::string scratch;
  const std::string_view same = Normalizer().apply("untouched", scratch);
  EXPECT_EQ(same, "untouched");
  if (unicode_forms_available()) {
    const auto nfkc = Normalizer::from_json(nlohmann::json::parse(R"({"type": "NFKC"})"), "n");
    EXPECT_EQ(nfkc.apply("\xEF\xAC\x81x \xC2\xB2"), "fix 2");  // LATIN SMALL LIGATURE FI, SUPERSCRIPT TWO
    const auto nfd = Normalizer::from_json(nlohmann::json::parse(R"({"type": "NFD"})"), "n");
    EXPECT_EQ(nfd.apply("\xC3\x85"), "A\xCC\x8A");
  }
  try {
    Normalizer::from_json(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Lowercase"}]})"),
                          "t.json: normalizer");
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: normalizer.normalizers[0].type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Lowercase"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lol::tokenizers::test
