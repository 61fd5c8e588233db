// `lol tokenizer train|encode|decode` run as a separate process: a tokenizer
// trained by the CLI equals the one trained in-process from the same documents,
// reloads and encodes identically, and round-trips every corpus file of
// shared/data/corpora (sampled lines/documents, so the test takes seconds).
#include <filesystem>
#include <fstream>

#include "dataset/documents.h"
#include "model/file_test_util.h"
#include "tokenizers/bpe_trainer.h"
#include "tokenizers/hf_json.h"

namespace {

namespace fs = std::filesystem;
using reftest::quote;
using reftest::run_lol;
using reftest::TempDir;

std::string corpora(const std::string& f) { return std::string(LOL_SOURCE_DIR) + "/../shared/data/corpora/" + f; }

const std::vector<std::string> kCorpusFiles = {"en_kjv.txt", "en_devil.txt", "en_jargon.txt", "multilingual.jsonl",
                                               "multilingual_valid.jsonl"};

/// Every `every`-th line (from line `phase`) of a file, at most `max_bytes` in all.
std::string sample_lines(const std::string& path, int every, int phase, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string line, out;
  for (int i = 0; std::getline(in, line) && out.size() < max_bytes; ++i)
    if (i % every == phase) out += line + "\n";
  return out;
}

/// Texts of the held-out sample of a corpus file (JSONL: its documents' text fields).
std::vector<std::string> held_out_texts(const std::string& name) {
  const std::string path = corpora(name);
  if (!lol::data::is_jsonl_file(path)) return {sample_lines(path, 10, 5, 100000)};
  std::vector<std::string> out;
  std::istringstream in(sample_lines(path, name == "multilingual.jsonl" ? 40 : 1, name == "multilingual.jsonl" ? 20 : 0,
                                     name == "multilingual.jsonl" ? 400000 : std::size_t(-1)));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return out;
}

class CliTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const auto& f : kCorpusFiles) ASSERT_TRUE(fs::exists(corpora(f))) << "shared data missing: " << corpora(f);
    dir_ = new TempDir("cli_tokenizer");
    // Training sample: every 10th line of the English texts, every 40th man page.
    for (const auto& [name, every] : std::vector<std::pair<std::string, int>>{
             {"en_kjv.txt", 10}, {"en_devil.txt", 10}, {"en_jargon.txt", 10}, {"multilingual.jsonl", 40}}) {
      const std::string dst = *dir_ / ("train_" + name);
      reftest::write_text(dst, sample_lines(corpora(name), every, 0, 400000));
      train_files_->push_back(dst);
    }
    std::string in;
    for (const auto& f : *train_files_) in += " " + quote(f);
    train_result_ = new reftest::RunResult(
        run_lol("tokenizer train --in" + in + " --vocab-size 1000 --no-progress --out " + quote(*dir_ / "tok")));
  }
  static void TearDownTestSuite() {
    delete train_result_;
    delete dir_;
    train_files_->clear();
  }
  static TempDir* dir_;
  static std::vector<std::string>* train_files_;
  static reftest::RunResult* train_result_;
};
TempDir* CliTokenizer::dir_ = nullptr;
std::vector<std::string>* CliTokenizer::train_files_ = new std::vector<std::string>();
reftest::RunResult* CliTokenizer::train_result_ = nullptr;

TEST_F(CliTokenizer, TrainedFileEqualsInProcessTrainingAndReloadsIdentically) {
  ASSERT_EQ(train_result_->code, 0) << train_result_->out;
  EXPECT_NE(train_result_->out.find("vocabulary 1000"), std::string::npos) << train_result_->out;
  auto loaded = lol::tokenizers::load_tokenizer(*dir_ / "tok");
  ASSERT_EQ(loaded->type(), "bpe");
  EXPECT_EQ(loaded->vocab_size(), 1000);
  EXPECT_EQ(loaded->token_to_id("<|endoftext|>"), std::optional<int32_t>(0));
  EXPECT_EQ(loaded->eos_id(), std::optional<int32_t>(0));

  // The tokenizer.json Hugging Face reads: a ByteLevel BPE with 1000 - 1 - 256 merges.
  const auto j = nlohmann::json::parse(reftest::read_text(*dir_ / "tok/tokenizer.json"));
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["model"]["merges"].size(), 1000u - 1 - 256);
  EXPECT_EQ(j["model"]["vocab"].size(), 1000u);  // the special is in the vocabulary too (as HF trains)
  EXPECT_EQ(j["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ(j["added_tokens"][0]["special"], true);
  EXPECT_EQ(j["decoder"]["type"], "ByteLevel");

  // The same training in-process, from the same documents.
  lol::data::DocumentSourceOptions so;
  so.doc_split = lol::data::DocSplit::kFile;
  lol::data::DocumentReader reader(*train_files_, so);
  lol::data::Document doc;
  lol::tokenizers::TrainBpeOptions o;
  o.vocab_size = 1000;
  o.special_tokens = {"<|endoftext|>"};
  o.eos_token = "<|endoftext|>";
  auto trained = lol::tokenizers::train_bpe(
      [&](std::string& t) {
        if (!reader.next(doc)) return false;
        t = doc.text;
        return true;
      },
      o);
  EXPECT_EQ(trained->to_hf_json(), loaded->to_hf_json());

  // Encodes identically and round-trips held-out text of every corpus file.
  for (const auto& name : kCorpusFiles) {
    std::size_t bytes = 0, tokens = 0, texts = 0;
    for (const auto& text : held_out_texts(name)) {
      const auto ids = trained->encode(text);
      ASSERT_EQ(loaded->encode(text), ids) << name << " text " << texts;
      ASSERT_EQ(loaded->decode(ids), text) << name << " text " << texts;
      bytes += text.size();
      tokens += ids.size();
      ++texts;
    }
    EXPECT_GT(bytes, 10000u) << name;
    EXPECT_LT(tokens, bytes) << name;  // merges learned: fewer tokens than bytes
  }
}

TEST_F(CliTokenizer, EncodeDecodeCommandsRoundTrip) {
  ASSERT_EQ(train_result_->code, 0) << train_result_->out;
  auto loaded = lol::tokenizers::load_tokenizer(*dir_ / "tok");
  // A few lines of every script: English, German, Russian, Japanese, Chinese.
  std::string text = sample_lines(corpora("en_kjv.txt"), 1000, 3, 2000);
  for (const auto& t : held_out_texts("multilingual_valid.jsonl")) {
    if (text.size() > 6000) break;
    text += t.substr(0, 300);
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
    if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
    text += "<|endoftext|>";
  }
  const std::string file = *dir_ / "snippet.txt";
  reftest::write_text(file, text);
  auto enc = run_lol("tokenizer encode --tokenizer " + quote(*dir_ / "tok") + " --file " + quote(file) + " --json");
  ASSERT_EQ(enc.code, 0) << enc.out;
  const auto ids = nlohmann::json::parse(enc.out).get<std::vector<int32_t>>();
  EXPECT_EQ(ids, loaded->encode(text));
  std::string id_list;
  for (auto i : ids) id_list += std::to_string(i) + ",";
  auto dec = run_lol("tokenizer decode --tokenizer " + quote(*dir_ / "tok/tokenizer.json") + " --ids " + quote(id_list));
  ASSERT_EQ(dec.code, 0) << dec.out;
  EXPECT_EQ(dec.out, text);

  auto bytes = run_lol("tokenizer encode --tokenizer byte --text " + quote("h\xC3\xA9"));
  EXPECT_EQ(bytes.out, "104 195 169\n");
}

TEST_F(CliTokenizer, BadInputExitsTwoNamingTheProblem) {
  const auto r = reftest::run_lol_all(
      {"tokenizer train --in /nonexistent/x.txt --out " + quote(*dir_ / "bad"),
       "tokenizer train --in " + quote((*train_files_)[1]) + " --vocab-size 100 --out " + quote(*dir_ / "bad"),
       "tokenizer decode --tokenizer byte --ids 1,x", "tokenizer encode --tokenizer /nonexistent/tok --text hi",
       "tokenizer decode --tokenizer byte --ids '[104,105'",
       "tokenizer train --in " + quote((*train_files_)[1]) + " --regex '' --out " + quote(*dir_ / "bad"),
       // Invalid UTF-8 (byte 0xFF) for a BPE tokenizer: the message names where the text came from.
       "tokenizer encode --tokenizer " + quote(std::string(LOL_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2") +
           " --text \"$(printf 'a\\377b')\"",
       // An --eos that is not a special token (it silently left the tokenizer without EOS),
       // and an --out that holds a tokenizer (it was replaced).
       "tokenizer train --in " + quote((*train_files_)[1]) + " --vocab-size 300 --eos '<eos>' --out " + quote(*dir_ / "bad"),
       "tokenizer train --in " + quote((*train_files_)[1]) + " --vocab-size 300 --out " + quote(*dir_ / "tok"),
       "tokenizer train --in " + quote((*train_files_)[1]) + " --vocab-size 300 --bos '<s>' --out " + quote(*dir_ / "bad"),
       "tokenizer decode --tokenizer byte --ids 1,,2"});
  for (const auto& x : r) EXPECT_EQ(x.code, 2) << x.out;
  EXPECT_NE(r[0].out.find("/nonexistent/x.txt: no such file"), std::string::npos) << r[0].out;
  EXPECT_NE(r[1].out.find("vocab_size"), std::string::npos) << r[1].out;
  EXPECT_NE(r[2].out.find("'x' is not a token id"), std::string::npos) << r[2].out;
  EXPECT_NE(r[3].out.find("expected 'byte'"), std::string::npos) << r[3].out;
  EXPECT_NE(r[4].out.find("--ids: starts with '[' but is not a JSON array"), std::string::npos) << r[4].out;
  EXPECT_NE(r[5].out.find("--regex"), std::string::npos) << r[5].out;
  EXPECT_NE(r[5].out.find("non-empty PCRE2 pattern"), std::string::npos) << r[5].out;
  EXPECT_NE(r[6].out.find("--text: tokenizer input: invalid UTF-8 at byte offset 1 (byte 0xff); expected valid UTF-8 text"),
            std::string::npos)
      << r[6].out;
  EXPECT_NE(r[7].out.find("--eos '<eos>': not one of the --special tokens (<|endoftext|>); list it there too"),
            std::string::npos)
      << r[7].out;
  EXPECT_NE(r[8].out.find("/tok: already holds a tokenizer.json"), std::string::npos) << r[8].out;
  EXPECT_NE(r[9].out.find("--bos '<s>': not one of the --special tokens (<|endoftext|>)"), std::string::npos)
      << r[9].out;
  EXPECT_NE(r[10].out.find("--ids: an empty field (a leading comma or two commas in a row) in '1,,2'"),
            std::string::npos)
      << r[10].out;
  // A JSON array (as `encode --json` prints) decodes like the plain list, and so does a
  // list with a trailing comma.
  for (const std::string ids : {"'[104, 105]'", "'104, 105, '", "104,105,"}) {
    const auto ok = run_lol("tokenizer decode --tokenizer byte --ids " + ids);
    EXPECT_EQ(ok.code, 0) << ids << ": " << ok.out;
    EXPECT_EQ(ok.out, "hi") << ids;
  }
}

}  // namespace
