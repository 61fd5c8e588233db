// build_corpus (`lol corpus`): every document lands in exactly one split as its
// tokens (decoding back to its text) with its label id, the split follows
// is_valid_document and is deterministic, file parts give the tokens of the whole
// file, uint16/uint32 token storage, and errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dataset/corpus.h"
#include "dataset/shards.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"
#include "dataset/dataset_test_util.h"

namespace lol::data {
namespace {

using test::shared;
using test::TmpDir;

namespace fs = std::filesystem;

struct Doc {
  std::string text, lang;
};

std::vector<Doc> jsonl_docs(const std::string& path) {
  std::ifstream in(path);
  std::vector<Doc> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    out.push_back({j["text"].get<std::string>(), j["lang"].get<std::string>()});
  }
  return out;
}

TEST(Corpus, ValidSplitHashHasTheRequestedShare) {
  for (double f : {0.0, 0.05, 0.3}) {
    int64_t n = 0;
    for (int64_t i = 0; i < 100000; ++i) n += is_valid_document(i, 7, f);
    EXPECT_NEAR(double(n) / 100000.0, f, 0.005) << f;
  }
  int64_t differ = 0;
  for (int64_t i = 0; i < 1000; ++i) differ += is_valid_document(i, 1, 0.5) != is_valid_document(i, 2, 0.5);
  EXPECT_GT(differ, 400);  // seeds give different splits
}

TEST(Corpus, JsonlWithLabelsEveryDocumentOnceDecodable) {
  const std::string src = shared("corpora/multilingual_valid.jsonl");
  ASSERT_TRUE(fs::exists(src)) << "shared data missing: " << src;
  const auto docs = jsonl_docs(src);
  ASSERT_EQ(docs.size(), 198u);
  TmpDir t;
  CorpusOptions o;
  o.files = {src};
  o.source.label_field = "lang";
  o.valid_fraction = 0.2;
  o.seed = 3;
  o.add_eos = true;
  o.progress = false;
  o.shard_tokens = 200000;  // several shards
  const auto stats = build_corpus(o, t / "ds");

  auto ds = Dataset::open(t / "ds");
  EXPECT_EQ(ds.task(), "text");
  EXPECT_EQ(ds.vocab_size(), 259);
  auto tok = tokenizers::load_tokenizer(t / "ds");
  ASSERT_TRUE(tok->eos_id());
  const auto& labels = ds.info()["meta"]["labels"];
  // Ids in order of first appearance.
  std::vector<std::string> expect_labels;
  for (const auto& d : docs)
    if (std::find(expect_labels.begin(), expect_labels.end(), d.lang) == expect_labels.end())
      expect_labels.push_back(d.lang);
  EXPECT_EQ(labels.get<std::vector<std::string>>(), expect_labels);
  EXPECT_EQ(expect_labels.size(), 10u);

  auto train = ds.load("train"), valid = ds.load("valid");
  ASSERT_TRUE(train.has_labels());
  ASSERT_EQ(train.size() + valid.size(), 198);
  EXPECT_GT(valid.size(), 20);
  EXPECT_LT(valid.size(), 65);
  EXPECT_GT(ds.info()["splits"]["train"].size(), 1u);
  int64_t ti = 0, vi = 0, bytes = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const bool is_valid = is_valid_document(int64_t(i), 3, 0.2);
    const auto v = is_valid ? valid.get(vi++) : train.get(ti++);
    std::vector<int32_t> ids(v.tokens, v.tokens + v.length);
    ASSERT_EQ(ids.back(), *tok->eos_id()) << i;
    EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/true), docs[i].text) << i;
    EXPECT_EQ(labels[std::size_t(v.label)], docs[i].lang) << i;
    bytes += int64_t(docs[i].text.size());
  }
  EXPECT_EQ(ti, train.size());
  EXPECT_EQ(vi, valid.size());
  EXPECT_EQ(stats["train"]["bytes"].get<int64_t>() + stats["valid"]["bytes"].get<int64_t>(), bytes);
  EXPECT_EQ(stats["valid"]["documents"].get<int64_t>(), valid.size());
  EXPECT_EQ(stats["labels"]["de"]["train"]["documents"].get<int64_t>() +
                stats["labels"]["de"]["valid"]["documents"].get<int64_t>(),
            24);  // README: 24 German validation pages
  auto shard = io::SafetensorsFile::read(t / "ds/train-00000.safetensors");
  EXPECT_EQ(shard.entry("tokens").dtype, io::DType::U16);

  // Deterministic: the same options write identical shards.
  build_corpus(o, t / "again");
  for (const auto& f : ds.info()["splits"]["valid"])
    EXPECT_EQ(io::read_file(t / ("ds/" + f.get<std::string>())), io::read_file(t / ("again/" + f.get<std::string>())));
  // A second run into the same directory is refused.
  EXPECT_THROW(build_corpus(o, t / "ds"), InputError);
}

// A run stopped before its dataset.json leaves complete shards; the rerun into the same
// directory lists only its own, so the leftovers are removed: only files named exactly
// as ShardWriter names shards, only where the lock file shows an earlier lol writer.
TEST(Corpus, RerunAfterAnInterruptedRunRemovesItsUnlistedShards) {
  TmpDir t;
  io::write_file_atomic(t / "in.txt", std::string(3000, 'x') + "\n\n" + std::string(3000, 'y'));
  CorpusOptions o;
  o.files = {t / "in.txt"};
  o.valid_fraction = 0;
  o.progress = false;
  o.shard_tokens = 1000;  // one shard per document
  build_corpus(o, t / "ds");
  ASSERT_EQ(Dataset::open(t / "ds").info()["splits"]["train"].size(), 2u);
  fs::remove(t / "ds/dataset.json");  // as if killed before its last step
  io::write_file_atomic(t / "ds/valid-00004.safetensors", "left by an older run");
  for (const char* keep : {"train-0001.safetensors", "train-00001.safetensors.bak", "notes-x1234.safetensors"})
    io::write_file_atomic(t / ("ds/" + std::string(keep)), "a user's file");
  o.shard_tokens = 1 << 20;  // the rerun writes one shard
  build_corpus(o, t / "ds");
  const auto ds = Dataset::open(t / "ds");
  EXPECT_EQ(ds.info()["splits"]["train"], nlohmann::json::array({"train-00000.safetensors"}));
  EXPECT_EQ(ds.load("train").size(), 2);
  EXPECT_FALSE(fs::exists(t / "ds/train-00001.safetensors"));
  EXPECT_FALSE(fs::exists(t / "ds/valid-00004.safetensors"));
  for (const char* keep : {"train-0001.safetensors", "train-00001.safetensors.bak", "notes-x1234.safetensors"})
    EXPECT_TRUE(fs::exists(t / ("ds/" + std::string(keep)))) << keep;
  EXPECT_TRUE(is_shard_name("train-00000.safetensors"));
  EXPECT_TRUE(is_shard_name("my_split-12345.safetensors"));
  EXPECT_FALSE(is_shard_name("-00000.safetensors"));
  EXPECT_FALSE(is_shard_name("Train-00000.safetensors"));
  EXPECT_FALSE(is_shard_name("train-0000a.safetensors"));
  // A directory no lol process wrote to (no lock file) keeps even files named like shards.
  fs::create_directories(t / "mine");
  io::write_file_atomic(t / "mine/train-00099.safetensors", "a user's file");
  o.shard_tokens = 1 << 20;
  build_corpus(o, t / "mine");
  EXPECT_TRUE(fs::exists(t / "mine/train-00099.safetensors"));
  EXPECT_EQ(Dataset::open(t / "mine").load("train").size(), 2);
}

TEST(Corpus, LabelCapKeepsDocumentsUntilTheCapAndHeldOutFilesAreValidation) {
  const std::string src = shared("corpora/multilingual_valid.jsonl");
  ASSERT_TRUE(fs::exists(src)) << "shared data missing: " << src;
  const auto docs = jsonl_docs(src);
  TmpDir t;
  // Train input: the file itself; held out: a small file of our own.
  const std::string held = t / "held.jsonl";
  io::write_file_atomic(held, "{\"text\": \"held out one\", \"lang\": \"xx\"}\n"
                              "{\"text\": \"held out two\", \"lang\": \"de\"}\n");
  CorpusOptions o;
  o.files = {src};
  o.valid_files = {held};
  o.source.label_field = "lang";
  o.source.max_bytes_per_label = 20000;
  o.valid_fraction = 0.0;
  o.progress = false;
  const auto stats = build_corpus(o, t / "ds");
  // Expected: per label, documents are kept in file order while the bytes kept so far are below the cap.
  std::map<std::string, int64_t> kept_bytes, kept_docs;
  int64_t skipped = 0;
  for (const auto& d : docs) {
    if (kept_bytes[d.lang] >= 20000) {
      ++skipped;
      continue;
    }
    kept_bytes[d.lang] += int64_t(d.text.size());
    kept_docs[d.lang] += 1;
  }
  ASSERT_GT(skipped, 0);
  EXPECT_EQ(stats["skipped_over_label_cap"].get<int64_t>(), skipped);
  for (const auto& [lang, n] : kept_docs) {
    EXPECT_EQ(stats["labels"][lang]["train"]["documents"].get<int64_t>(), n) << lang;
    EXPECT_EQ(stats["labels"][lang]["train"]["bytes"].get<int64_t>(), kept_bytes[lang]) << lang;
  }
  EXPECT_EQ(stats["valid"]["documents"].get<int64_t>(), 2);
  auto ds = Dataset::open(t / "ds");
  auto valid = ds.load("valid");
  ASSERT_EQ(valid.size(), 2);
  const auto& labels = ds.info()["meta"]["labels"];
  EXPECT_EQ(labels[std::size_t(valid.get(0).label)], "xx");
  EXPECT_EQ(labels[std::size_t(valid.get(1).label)], "de");
  // A cap without a label field is refused.
  CorpusOptions bad = o;
  bad.source.label_field.clear();
  EXPECT_THROW(build_corpus(bad, t / "bad"), InputError);
  // A held-out file that is also a training input (here by another spelling of its path)
  // would leak validation documents into training.
  CorpusOptions leak = o;
  leak.valid_files = {held, fs::path(src).parent_path().string() + "/./" + fs::path(src).filename().string()};
  try {
    build_corpus(leak, t / "leak");
    ADD_FAILURE() << "accepted a file in both --in and --valid-in";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is also an --in file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(t / "leak/dataset.json"));
  CorpusOptions twice = o;
  twice.valid_files = {held, held};
  try {
    build_corpus(twice, t / "twice");
    ADD_FAILURE() << "accepted a --valid-in file twice";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is also an --valid-in file (" + held + "): its documents would be read twice"),
              std::string::npos)
        << e.what();
  }
}

TEST(Corpus, TextFilePartsAndBlankLineDocumentsWithBpe) {
  const std::string kjv = shared("corpora/en_kjv.txt");
  const std::string gpt2 = shared("tokenizers/gpt2");
  ASSERT_TRUE(fs::exists(kjv)) << "shared data missing: " << kjv;
  ASSERT_TRUE(fs::exists(gpt2 + "/vocab.json")) << "shared data missing: " << gpt2;
  TmpDir t;
  std::string text = io::read_file(kjv).substr(0, 200000);
  text = text.substr(0, text.rfind("\n\n") + 2) + "\n\nlast chapter\nwithout final newline";
  const std::string f = t / "kjv.txt";
  io::write_file_atomic(f, text);
  auto tok = tokenizers::load_tokenizer(gpt2);

  CorpusOptions o;
  o.files = {f};
  o.tokenizer = gpt2;
  o.valid_fraction = 0;
  o.progress = false;
  o.source.doc_split = DocSplit::kFile;
  o.source.block_bytes = 2048;  // ~100 parts, encoded one by one
  build_corpus(o, t / "file");
  auto split = Dataset::open(t / "file").load("train");
  ASSERT_EQ(split.size(), 1);
  const auto v = split.get(0);
  EXPECT_EQ(std::vector<int32_t>(v.tokens, v.tokens + v.length), tok->encode(text));
  EXPECT_FALSE(split.has_labels());
  // SentencePiece-style tokenizers add a U+2581 at the start of a text only (a Prepend
  // normalizer, Llama 2; Metaspace prepend_scheme "first"): the later parts continue the
  // text (session 27: every part began with one).
  {
    std::ifstream jf(std::string(LOL_SOURCE_DIR) + "/tests/tokenizers/data/spm_bpe_tokenizer.json");
    auto legacy = nlohmann::json::parse(jf);
    auto first = legacy;
    first["normalizer"] = nullptr;
    first["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"},
                              {"split", false}};
    first["decoder"] = first["pre_tokenizer"];
    for (const auto& [name, j] : {std::pair{"legacy", legacy}, std::pair{"metaspace_first", first}}) {
      const std::string dir = t / name;
      fs::create_directories(dir);
      io::write_file_atomic(dir + "/tokenizer.json", j.dump());
      CorpusOptions so = o;
      so.tokenizer = dir;
      build_corpus(so, t / (std::string(name) + "_corpus"));
      const auto parts = Dataset::open(t / (std::string(name) + "_corpus")).load("train");
      const auto part_ids = parts.get(0);
      EXPECT_EQ(std::vector<int32_t>(part_ids.tokens, part_ids.tokens + part_ids.length),
                tokenizers::load_tokenizer(dir)->encode(text))
          << name;
    }
  }

  // Pipelines where a cut after the '\n' would change the ids (session 28 adversarial
  // pass): a special token with lstrip at every line start takes the '\n' before it; a
  // Split step that does not cut at the '\n' leaves the next word inside a piece, where
  // the ByteLevel(add_prefix_space) step after it adds no space. The tokenizer's check
  // of the lines around each cut passes those points over.
  {
    std::ifstream jf(std::string(LOL_SOURCE_DIR) + "/tests/tokenizers/data/bl_bpe_tokenizer.json");
    const auto bl = nlohmann::json::parse(jf);
    const nlohmann::json prefix = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                                   {"use_regex", true}};
    auto split_then = [&](const nlohmann::json& split) {
      auto j = bl;
      j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, prefix}}};
      return j;
    };
    auto lstrip = bl;
    lstrip["pre_tokenizer"] = prefix;
    lstrip["added_tokens"].push_back({{"id", 9000}, {"content", "<x>"}, {"single_word", false}, {"lstrip", true},
                                      {"rstrip", false}, {"normalized", false}, {"special", true}});
    std::string marked;  // every line of the text starts with <x>
    for (std::size_t a = 0; a < text.size();) {
      const std::size_t b = std::min(text.find('\n', a), text.size());
      if (b > a) marked += "<x>";
      marked.append(text, a, b - a);
      if (b < text.size()) marked += '\n';
      a = b + 1;
    }
    auto multiline = bl;  // an added token spanning three lines
    multiline["added_tokens"].push_back({{"id", 9001}, {"content", "<a>\n<b>\n<c>"}, {"single_word", false},
                                         {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                         {"special", true}});
    std::string spanning;  // "line<a>", "<b>", "<c>line", ...
    for (std::size_t a = 0, k = 0; a < text.size(); ++k) {
      const std::size_t b = std::min(text.find('\n', a), text.size());
      spanning.append(text, a, b - a);
      spanning += k % 2 == 0 ? "<a>\n<b>\n<c>" : "\n";
      a = b + 1;
    }
    const std::pair<std::string, nlohmann::json> pipelines[] = {
        {"lstrip", lstrip},
        {"multiline", multiline},
        {"split_digits", split_then({{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Isolated"},
                                     {"invert", false}})},
        {"split_nl_merged", split_then({{"type", "Split"}, {"pattern", {{"String", "\n"}}},
                                        {"behavior", "MergedWithNext"}, {"invert", false}})}};
    for (const auto& [name, j] : pipelines) {
      const std::string dir = t / name;
      fs::create_directories(dir);
      io::write_file_atomic(dir + "/tokenizer.json", j.dump());
      const std::string& input = name == "lstrip" ? marked : name == "multiline" ? spanning : text;
      const std::string in_file = t / (name + ".txt");
      io::write_file_atomic(in_file, input);
      CorpusOptions so = o;
      so.files = {in_file};
      so.tokenizer = dir;
      const auto stats = build_corpus(so, t / (name + "_corpus"));
      EXPECT_EQ(stats.at("unchecked_part_cuts"), 0) << name;
      const auto parts = Dataset::open(t / (name + "_corpus")).load("train");
      ASSERT_EQ(parts.size(), 1) << name;
      const auto part_ids = parts.get(0);
      const auto whole = tokenizers::load_tokenizer(dir)->encode(input);
      EXPECT_EQ(std::vector<int32_t>(part_ids.tokens, part_ids.tokens + part_ids.length), whole) << name;
    }
    // Without digits the Split(\d+) step never cuts: the whole text is one piece and no
    // point passes the check. After 1024 refused points the reader cuts anyway, and says so.
    std::string no_digits;
    for (char ch : text)
      if (ch < '0' || ch > '9') no_digits += ch;
    const std::string in_file = t / "no_digits.txt";
    io::write_file_atomic(in_file, no_digits);
    CorpusOptions so = o;
    so.files = {in_file};
    so.tokenizer = t / "split_digits";
    testing::internal::CaptureStderr();
    const auto stats = build_corpus(so, t / "no_digits_corpus");
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_GT(stats.at("unchecked_part_cuts").get<int64_t>(), 0);
    EXPECT_NE(err.find("part boundaries were cut where the tokenizer's check refused every point"), std::string::npos)
        << err;
  }

  o.source.doc_split = DocSplit::kBlankLine;
  o.valid_fraction = 0.5;
  const auto st = build_corpus(o, t / "chapters");
  auto ds = Dataset::open(t / "chapters");
  auto train = ds.load("train"), valid = ds.load("valid");
  // Chapters are blank-line separated: count them independently.
  std::vector<std::string> chapters;
  std::istringstream in(text);
  std::string line, cur;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!cur.empty()) chapters.push_back(cur);
      cur.clear();
    } else {
      cur += (cur.empty() ? "" : "\n") + line;
    }
  }
  if (!cur.empty()) chapters.push_back(cur);
  ASSERT_EQ(train.size() + valid.size(), int64_t(chapters.size()));
  int64_t ti = 0, vi = 0;
  for (std::size_t i = 0; i < chapters.size(); ++i) {
    const auto s = is_valid_document(int64_t(i), 0, 0.5) ? valid.get(vi++) : train.get(ti++);
    EXPECT_EQ(std::vector<int32_t>(s.tokens, s.tokens + s.length), tok->encode(chapters[i])) << i;
  }
  EXPECT_GT(st["bytes_per_token"].get<double>(), 3.0);
}

TEST(Corpus, LargeVocabulariesStoreUint32) {
  TmpDir t;
  // A byte-level BPE with one merge whose token has id 70000 (ids may be sparse).
  auto j = tokenizers::ByteTokenizer(std::vector<std::string>{}).to_hf_json();
  j["model"]["vocab"]["ab"] = 70000;
  j["model"]["merges"] = {"a b"};
  fs::create_directories(t / "tok");
  io::write_file_atomic(t / "tok/tokenizer.json", j.dump());
  ASSERT_EQ(tokenizers::load_tokenizer(t / "tok")->vocab_size(), 70001);
  io::write_file_atomic(t / "in.txt", "a ab b\n\nsecond");
  CorpusOptions o;
  o.files = {t / "in.txt"};
  o.tokenizer = t / "tok";
  o.valid_fraction = 0;
  o.progress = false;
  build_corpus(o, t / "ds");
  auto shard = io::SafetensorsFile::read(t / "ds/train-00000.safetensors");
  EXPECT_EQ(shard.entry("tokens").dtype, io::DType::U32);
  auto split = Dataset::open(t / "ds").load("train");
  ASSERT_EQ(split.size(), 2);
  EXPECT_EQ(split.get(0).tokens[2], 70000);
}

TEST(Corpus, ErrorsNameTheDocument) {
  TmpDir t;
  io::write_file_atomic(t / "bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"broken \\udc80 surrogate\"}\n");
  io::write_file_atomic(t / "bad.txt", "fine\n\nbroken \xC3( here\n");
  CorpusOptions o;
  o.progress = false;
  o.tokenizer = shared("tokenizers/gpt2");
  o.files = {t / "bad.txt"};
  try {
    build_corpus(o, t / "out1");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
  // The byte tokenizer could encode any bytes: the corpus still expects UTF-8 text.
  o.tokenizer = "byte";
  try {
    build_corpus(o, t / "out1b");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:3: invalid UTF-8 at byte offset 7 of the document (byte 0xc3)"),
              std::string::npos)
        << e.what();
  }
  o.tokenizer = shared("tokenizers/gpt2");
  o.valid_fraction = 1.0;
  EXPECT_THROW(build_corpus(o, t / "out2"), InputError);
  o.valid_fraction = 0.1;
  o.tokenizer = "nonsense";
  EXPECT_THROW(build_corpus(o, t / "out3"), InputError);
  o.tokenizer = "byte";
  o.files = {t / "empty.txt"};
  io::write_file_atomic(t / "empty.txt", "\n\n  \n");
  EXPECT_THROW(build_corpus(o, t / "out4"), InputError);
}

// --doc-split file: an empty file is a document of its own (numbered, so the split of
// the files after it does not depend on whether it is empty; skipped and counted as an
// empty JSONL text is), and errors name the file's first line (found by
// tests/reference/corpus_reference.py).
TEST(Corpus, EmptyFileIsAnEmptyDocumentUnderFileSplit) {
  TmpDir t;
  io::write_file_atomic(t / "x0.txt", "a");
  io::write_file_atomic(t / "empty.txt", "");
  io::write_file_atomic(t / "x1.txt", "b");
  io::write_file_atomic(t / "x2.txt", "c");
  CorpusOptions o;
  o.progress = false;
  o.tokenizer = "byte";
  o.source.doc_split = DocSplit::kFile;
  o.valid_fraction = 0.5;
  o.files = {t / "x0.txt", t / "empty.txt", t / "x1.txt", t / "x2.txt"};
  const auto info = build_corpus(o, t / "out");
  EXPECT_EQ(info["skipped_empty_documents"].get<int64_t>(), 1) << info.dump();
  const auto ds = Dataset::open(t / "out");
  std::vector<std::string> texts[2];
  for (int s = 0; s < 2; ++s) {
    if (!ds.has_split(s ? "valid" : "train")) continue;
    const auto split = ds.load(s ? "valid" : "train");
    for (int64_t k = 0; k < split.size(); ++k) {
      const auto v = split.get(k);
      texts[s].emplace_back(v.tokens, v.tokens + v.length);  // byte tokenizer: ids = bytes
    }
  }
  // Document numbers 0, 2, 3 for a, b, c (1 is the empty file).
  const std::vector<std::string> letters = {"a", "", "b", "c"};
  for (int64_t i : {0, 2, 3}) {
    const int s = is_valid_document(i, o.seed, o.valid_fraction) ? 1 : 0;
    EXPECT_NE(std::find(texts[s].begin(), texts[s].end(), letters[std::size_t(i)]), texts[s].end())
        << "document " << i << " '" << letters[std::size_t(i)] << "' expected in split " << s;
  }
  io::write_file_atomic(t / "bad.txt", "fine\nbroken \xC3( here\n");
  o.files = {t / "bad.txt"};
  try {
    build_corpus(o, t / "out_bad");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:1: invalid UTF-8 at byte offset 12 of the document"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lol::data
