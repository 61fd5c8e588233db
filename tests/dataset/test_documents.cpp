// DocumentReader: the three plain-text document splits, JSONL fields and labels,
// file parts that reassemble the file and tokenize like the whole text, errors
// naming file:line.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dataset/documents.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/regex_splitter.h"
#include "util/error.h"
#include "dataset/dataset_test_util.h"

namespace lol::data {
namespace {

using test::shared;
using test::TmpDir;

namespace fs = std::filesystem;

std::vector<Document> read_all(const std::vector<std::string>& files, DocumentSourceOptions o) {
  DocumentReader r(files, o);
  std::vector<Document> out;
  Document d;
  while (r.next(d)) out.push_back(d);
  EXPECT_EQ(r.bytes_read(), r.total_bytes());
  return out;
}

TEST(Documents, BlankLineAndLineSplits) {
  TmpDir t;
  const auto a = t.file("a.txt", "\n\nGenesis 1\nIn the beginning\n  \n\nGenesis 2\nThus the heavens\n\n");
  const auto b = t.file("b.txt", "last line without newline");
  DocumentSourceOptions o;
  auto docs = read_all({a, b}, o);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, "Genesis 1\nIn the beginning");
  EXPECT_EQ(docs[0].where, a + ":3");
  EXPECT_EQ(docs[1].text, "Genesis 2\nThus the heavens");
  EXPECT_EQ(docs[1].where, a + ":7");
  EXPECT_EQ(docs[2].text, "last line without newline");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(docs[i].index, i);

  o.doc_split = DocSplit::kLine;
  docs = read_all({a, b}, o);
  ASSERT_EQ(docs.size(), 5u);
  EXPECT_EQ(docs[1].text, "In the beginning");
  EXPECT_EQ(docs[3].text, "Thus the heavens");
  EXPECT_EQ(docs[4].index, 4);

  // CRLF line ends: kept inside a document, the last one dropped as an LF file's is
  // (every document ended in a stray '\r'; adversarial pass, session 26).
  const auto c = t.file("c.txt", "Genesis 1\r\nIn the beginning\r\n\r\nGenesis 2\r\n");
  docs = read_all({c}, DocumentSourceOptions{});
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text, "Genesis 1\r\nIn the beginning");
  EXPECT_EQ(docs[1].text, "Genesis 2");
  o.doc_split = DocSplit::kLine;
  docs = read_all({c}, o);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[1].text, "In the beginning");
}

TEST(Documents, JsonlTextAndLabels) {
  TmpDir t;
  const auto f = t.file("x.jsonl", "{\"body\": \"Hallo\\nWelt\", \"lang\": \"de\"}\n\n{\"body\": \"hi\", \"lang\": 7}\n");
  DocumentSourceOptions o;
  o.text_field = "body";
  o.label_field = "lang";
  auto docs = read_all({f}, o);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text, "Hallo\nWelt");
  EXPECT_EQ(docs[0].label, "de");
  EXPECT_EQ(docs[1].label, "7");
  EXPECT_EQ(docs[1].where, f + ":3");
}

TEST(Documents, ErrorsNameFileAndLine) {
  TmpDir t;
  const auto f = t.file("bad.jsonl", "{\"text\": \"ok\", \"lang\": \"en\"}\n{\"text\": 3}\n");
  const auto g = t.file("nolabel.jsonl", "{\"text\": \"ok\"}\n");
  const auto h = t.file("notjson.jsonl", "{\"text\": \"ok\"\n");
  const auto txt = t.file("plain.txt", "x\n");
  auto message = [](const std::vector<std::string>& files, DocumentSourceOptions o) -> std::string {
    try {
      read_all(files, o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  DocumentSourceOptions o;
  EXPECT_NE(message({f}, o).find("bad.jsonl:2: field 'text' must be a string"), std::string::npos) << message({f}, o);
  o.label_field = "lang";
  EXPECT_NE(message({g}, o).find("nolabel.jsonl:1: field 'lang'"), std::string::npos) << message({g}, o);
  EXPECT_NE(message({txt}, o).find("plain.txt: --label-field"), std::string::npos) << message({txt}, o);
  o.label_field.clear();
  EXPECT_NE(message({h}, o).find("notjson.jsonl:1: not valid JSON"), std::string::npos) << message({h}, o);
  EXPECT_NE(message({t.file("ok.txt", "") + "-missing"}, o).find("no such file"), std::string::npos);
  const std::string dir = fs::path(t.file("ok.txt", "")).parent_path().string();
  EXPECT_NE(message({dir}, o).find(dir + ": is a directory (expected a .txt or .jsonl file; pass its files"),
            std::string::npos)
      << message({dir}, o);
  // Flags that no input file would use.
  EXPECT_THROW(check_source_flags_apply({txt}, /*text_field_given=*/true, false), InputError);
  EXPECT_THROW(check_source_flags_apply({f, g}, false, /*doc_split_given=*/true), InputError);
  EXPECT_NO_THROW(check_source_flags_apply({txt, f}, true, true));  // a mix uses both
  EXPECT_NO_THROW(check_source_flags_apply({txt}, false, true));
  EXPECT_NO_THROW(check_source_flags_apply({f}, true, false));
  EXPECT_TRUE(is_jsonl_file("dir/Data.JSONL"));
  EXPECT_FALSE(is_jsonl_file("dir/data.json"));
  // JSON records in a *.json file are read as plain text, with a note saying so.
  const auto records = t.file("records.json", "  {\"text\": \"a\"}\n{\"text\": \"b\"}\n");
  const auto prose = t.file("prose.json", "plain words\n");
  for (const auto& [file, noted] : std::vector<std::pair<std::string, bool>>{{records, true}, {prose, false}}) {
    testing::internal::CaptureStderr();
    read_all({file}, o);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find(file + " is read as plain text, JSON syntax and all") != std::string::npos, noted) << err;
  }
  EXPECT_THROW(parse_doc_split("para"), InputError);
  EXPECT_EQ(parse_doc_split("line"), DocSplit::kLine);
}

TEST(Documents, FilePartsReassembleAndTokenizeLikeTheWhole) {
  const std::string kjv = shared("corpora/en_kjv.txt");
  const std::string gpt2 = shared("tokenizers/gpt2");
  ASSERT_TRUE(fs::exists(kjv)) << "shared data missing: " << kjv;
  ASSERT_TRUE(fs::exists(gpt2 + "/vocab.json")) << "shared data missing: " << gpt2;
  // A 300 kB excerpt with runs of blank lines and indentation around the cut points.
  std::string text;
  {
    std::ifstream in(kjv, std::ios::binary);
    text.resize(300000);
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(std::size_t(in.gcount()));
    text = text.substr(0, text.rfind('\n') + 1);
  }
  text += "\n\n   indented after blank lines\n\t\ttabbed\nend";
  TmpDir t;
  const auto f = t.file("kjv.txt", text);
  DocumentSourceOptions o;
  o.doc_split = DocSplit::kFile;
  o.block_bytes = 4096;
  auto parts = read_all({f}, o);
  ASSERT_GT(parts.size(), 50u);
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].index, 0);
    EXPECT_EQ(parts[i].part, int64_t(i));
    EXPECT_EQ(parts[i].last, i + 1 == parts.size());
    if (i + 1 < parts.size()) {
      EXPECT_GE(parts[i].text.size(), 4096u);
      EXPECT_EQ(parts[i].text.back(), '\n');
      EXPECT_FALSE(std::isspace(static_cast<unsigned char>(parts[i].text[parts[i].text.size() - 2])));
      EXPECT_FALSE(std::isspace(static_cast<unsigned char>(parts[i + 1].text[0])));
    }
    joined += parts[i].text;
  }
  EXPECT_EQ(joined, text);
  // The parts encode, one by one, to the whole text's tokens (GPT-2 and Qwen2 regexes).
  const auto expect_parts_encode_like_the_whole = [&](const std::vector<Document>& ps, const std::string& whole) {
    for (const char* pattern : {"gpt2", "qwen2"}) {
      auto tok = tokenizers::load_vocab_merges(gpt2 + "/vocab.json", gpt2 + "/merges.txt",
                                               std::string(pattern) == "qwen2" ? tokenizers::kQwen2Pattern : "");
      std::vector<int32_t> by_parts;
      for (const auto& p : ps) tok->encode_append(p.text, by_parts);
      EXPECT_EQ(by_parts, tok->encode(whole)) << pattern;
    }
  };
  expect_parts_encode_like_the_whole(parts, text);
  // CRLF text has no clean cut: parts are still bounded and reassemble the file.
  std::string crlf;
  for (int i = 0; i < 2000; ++i) crlf += "line " + std::to_string(i) + " \xC3\xA9t\xC3\xA9\r\n";
  o.block_bytes = 1000;
  auto crlf_parts = read_all({t.file("crlf.txt", crlf)}, o);
  std::string crlf_joined;
  for (const auto& p : crlf_parts) {
    EXPECT_LE(p.text.size(), 16u * 1000u + 4096u);
    crlf_joined += p.text;
  }
  EXPECT_GT(crlf_parts.size(), 1u);
  EXPECT_EQ(crlf_joined, crlf);
  // Lines that end in, or start with, a multi-byte White_Space character (U+0085,
  // U+00A0, U+2028, U+3000) give no cut point: the pre-tokenizers' \s matches them, so
  // "x\u0085" + "\n" at a part's end would be one piece "\u0085\n" that the whole text
  // never has. Only the plain lines between them are cut points.
  {
    const char* spaces[] = {"\xC2\x85", "\xC2\xA0", "\xE2\x80\xA8", "\xE3\x80\x80"};
    std::string uni;
    for (int i = 0; i < 3000; ++i) {
      const std::string sp = spaces[i % 4];
      uni += i % 3 == 2 ? "plain line " + std::to_string(i) + "\n" : i % 3 == 0 ? "alpha beta" + sp + "\n" : sp + sp + "gamma\n";
    }
    o.block_bytes = 1000;
    auto uni_parts = read_all({t.file("uni.txt", uni)}, o);
    ASSERT_GT(uni_parts.size(), 10u);
    std::string uni_joined;
    for (std::size_t i = 0; i < uni_parts.size(); ++i) {
      const auto& p = uni_parts[i].text;
      if (i + 1 < uni_parts.size()) {
        ASSERT_GE(p.size(), 2u);
        EXPECT_EQ(p.back(), '\n');
        const auto line_start = p.rfind('\n', p.size() - 2) + 1;
        const std::string last_line = p.substr(line_start), next = uni_parts[i + 1].text;
        EXPECT_TRUE(last_line.rfind("plain line ", 0) == 0 || last_line.find("gamma\n") != std::string::npos)
            << "part " << i << " ends in: " << last_line;
        EXPECT_TRUE(next.rfind("plain line ", 0) == 0 || next.rfind("alpha beta", 0) == 0)
            << "part " << i + 1 << " starts with: " << next.substr(0, 16);
      }
      uni_joined += p;
    }
    EXPECT_EQ(uni_joined, uni);
    expect_parts_encode_like_the_whole(uni_parts, uni);
  }
  o.block_bytes = 4096;

  // Two files: two documents, numbered on.
  const auto g = t.file("small.txt", "tiny\n");
  parts = read_all({g, f}, o);
  EXPECT_EQ(parts.front().text, "tiny\n");
  EXPECT_TRUE(parts.front().last);
  EXPECT_EQ(parts.back().index, 1);
}

}  // namespace
}  // namespace lol::data
