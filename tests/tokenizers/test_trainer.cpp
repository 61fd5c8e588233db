// BPE training: agreement with a naive reference trainer, determinism,
// save/reload equality, speed on en_kjv.txt, and input errors.
#include <algorithm>
#include <chrono>
#include <map>

#include "tok_test_util.h"
#include "tokenizers/bpe_trainer.h"
#include "tokenizers/byte_unicode.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"
#include "common/test_files.h"

namespace lol::tokenizers::test {
namespace {

namespace fs = std::filesystem;

std::function<bool(std::string&)> from_vector(const std::vector<std::string>& texts) {
  auto i = std::make_shared<std::size_t>(0);
  return [&texts, i](std::string& out) {
    if (*i >= texts.size()) return false;
    out = texts[(*i)++];
    return true;
  };
}

// Naive BPE training: recount every pair from scratch before each merge; highest
// count wins, ties to the smallest (left id, right id). Same id layout as train_bpe.
std::vector<std::pair<std::string, std::string>> naive_merges(const std::vector<std::string>& texts,
                                                              int32_t n_specials, int n_merges, int64_t min_freq) {
  RegexSplitter re(kGpt2Pattern);
  std::map<std::string, int64_t> counts;
  for (const auto& t : texts) {
    std::vector<std::string_view> v;
    re.split(t, v);
    for (auto p : v) ++counts[std::string(p)];
  }
  std::vector<int> order(256);
  for (int b = 0; b < 256; ++b) order[b] = b;
  std::sort(order.begin(), order.end(), [](int x, int y) { return byte_to_unicode(x) < byte_to_unicode(y); });
  std::vector<std::string> tok(n_specials);
  int32_t byte_id[256];
  for (int r = 0; r < 256; ++r) {
    byte_id[order[r]] = n_specials + r;
    tok.push_back(std::string(1, char(order[r])));
  }
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> wc;
  for (const auto& [w, c] : counts) {
    words.emplace_back();
    for (unsigned char ch : w) words.back().push_back(byte_id[ch]);
    wc.push_back(c);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pc;
    for (std::size_t w = 0; w < words.size(); ++w)
      for (std::size_t i = 0; i + 1 < words[w].size(); ++i) pc[{words[w][i], words[w][i + 1]}] += wc[w];
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_c = 0;
    for (const auto& [p, c] : pc)
      if (c > best_c) best_c = c, best = p;  // std::map order: first max = smallest pair
    if (best_c < min_freq) break;
    const std::string joined = tok[best.first] + tok[best.second];
    int32_t id = int32_t(std::find(tok.begin(), tok.end(), joined) - tok.begin());
    if (id == int32_t(tok.size())) tok.push_back(joined);
    merges.emplace_back(bytes_to_token(tok[best.first]), bytes_to_token(tok[best.second]));
    for (auto& s : words) {
      std::vector<int32_t> o;
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) o.push_back(id), i += 2;
        else o.push_back(s[i++]);
      }
      s.swap(o);
    }
  }
  return merges;
}

std::vector<std::pair<std::string, std::string>> merges_of(const BpeTokenizer& tok) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [a, b] : tok.model().merges()) out.emplace_back(*tok.id_to_token(a), *tok.id_to_token(b));
  return out;
}

TEST(Trainer, MatchesNaiveReference) {
  const std::string devil = shared_data("corpora/en_devil.txt");
  LOL_REQUIRE_SHARED(devil);
  const std::vector<std::string> texts = {read_prefix(devil, 30000), "aaaa aaaa abab abab ababab"};
  TrainBpeOptions o;
  o.special_tokens = {"<|endoftext|>"};
  o.vocab_size = 1 + 256 + 300;
  auto tok = train_bpe(from_vector(texts), o);
  const auto got = merges_of(*tok);
  ASSERT_EQ(got.size(), 300u);
  EXPECT_EQ(got, naive_merges(texts, 1, 300, o.min_frequency));
}

TEST(Trainer, LayoutDeterminismAndReload) {
  const std::string kjv = shared_data("corpora/en_kjv.txt");
  const std::string ml = shared_data("corpora/multilingual_valid.jsonl");
  LOL_REQUIRE_SHARED(kjv);
  LOL_REQUIRE_SHARED(ml);
  const std::string all = read_prefix(kjv, 600000);
  const std::vector<std::string> train = {all.substr(0, 400000) + "<|endoftext|>"};
  TrainBpeOptions o;
  o.vocab_size = 1200;
  o.special_tokens = {"<|endoftext|>", "<pad>"};
  o.eos_token = "<|endoftext|>";
  o.pad_token = "<pad>";
  TrainBpeStats st;
  auto tok = train_bpe(from_vector(train), o, &st);
  EXPECT_EQ(tok->vocab_size(), 1200);
  EXPECT_EQ(st.merges, 1200 - 2 - 256);
  EXPECT_EQ(*tok->token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(*tok->token_to_id("<pad>"), 1);
  EXPECT_EQ(*tok->token_to_id("!"), 2);         // bytes ordered by mapped code point
  EXPECT_EQ(*tok->token_to_id("Ā"), 2 + 188);  // byte 0 is the first unprintable
  EXPECT_EQ(tok->eos_id(), std::optional<int32_t>(0));
  // Specials are cut out of the training text: no merge learns "<|" fragments of them.
  for (const auto& [a, b] : merges_of(*tok)) EXPECT_EQ((a + b).find("endoftext"), std::string::npos);
  // Frequent English words are single tokens.
  EXPECT_EQ(tok->encode(" the").size(), 1u);
  EXPECT_EQ(tok->encode(" LORD").size(), 1u);

  // Deterministic.
  auto again = train_bpe(from_vector(train), o);
  EXPECT_EQ(merges_of(*again), merges_of(*tok));

  // Save, reload, identical encodings on held-out text (and round trip).
  const lol_test::TempDir dir_tmp("tok_reload");
  const std::string dir = dir_tmp.path();
  tok->save(dir);
  auto back = load_tokenizer(dir);
  ASSERT_EQ(back->type(), "bpe");
  EXPECT_EQ(back->vocab_size(), tok->vocab_size());
  EXPECT_EQ(back->eos_id(), tok->eos_id());
  EXPECT_EQ(back->pad_id(), tok->pad_id());
  std::vector<std::string> held = read_jsonl_texts(ml, 200000);
  held.push_back(all.substr(400000));
  held.push_back("<|endoftext|>in the beginning<pad><pad>");
  for (const auto& t : held) {
    const auto ids = tok->encode(t);
    EXPECT_EQ(back->encode(t), ids);
    EXPECT_EQ(back->decode(ids), t);
  }
  fs::remove_all(dir);
}

TEST(Trainer, Qwen2PatternReloads) {
  const std::string ml = shared_data("corpora/multilingual_valid.jsonl");
  LOL_REQUIRE_SHARED(ml);
  const auto texts = read_jsonl_texts(ml, 300000);
  TrainBpeOptions o;
  o.vocab_size = 800;
  o.pattern = kQwen2Pattern;
  o.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  auto tok = train_bpe(from_vector(texts), o);
  const auto j = tok->to_hf_json();
  EXPECT_EQ(j["pre_tokenizer"]["type"], "Sequence");
  const lol_test::TempDir dir_tmp("tok_qwen2");
  const std::string dir = dir_tmp.path();
  tok->save(dir);
  auto back = load_tokenizer(dir);
  for (const auto& t : texts) EXPECT_EQ(back->encode("<|im_start|>" + t), tok->encode("<|im_start|>" + t));
  // No token crosses a digit boundary under Qwen2's pattern.
  EXPECT_EQ(tok->encode("2024").size(), 4u);
  fs::remove_all(dir);
}

TEST(Trainer, Kjv4096IsFast) {
  const std::string kjv = shared_data("corpora/en_kjv.txt");
  LOL_REQUIRE_SHARED(kjv);
  TrainBpeOptions o;
  o.vocab_size = 4096;
  o.special_tokens = {"<|endoftext|>"};
  TrainBpeStats st;
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = train_bpe_files({kjv}, o, &st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok->vocab_size(), 4096);
  EXPECT_EQ(st.bytes, int64_t(fs::file_size(kjv)));
  std::cout << "[ info ] train 4096 on en_kjv.txt: " << secs << " s (count " << st.count_seconds << " s, merge "
            << st.merge_seconds << " s), " << st.unique_words << " unique pre-tokens\n";
  EXPECT_LT(secs, 60.0);  // seconds in Release; generous for sanitizer/debug builds
  const std::string text = read_prefix(kjv, 100000);
  const auto ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_LT(double(ids.size()) / double(text.size()), 0.3);  // ~4+ bytes per token on its own corpus
}

TEST(Trainer, JsonlFilesAreDocuments) {
  const std::string ml = shared_data("corpora/multilingual_valid.jsonl");
  LOL_REQUIRE_SHARED(ml);
  TrainBpeOptions o;
  o.vocab_size = 600;
  TrainBpeStats st;
  auto from_file = train_bpe_files({ml}, o, &st);
  EXPECT_EQ(st.texts, 198);
  const auto texts = read_jsonl_texts(ml);
  auto from_texts = train_bpe(from_vector(texts), o);
  EXPECT_EQ(merges_of(*from_file), merges_of(*from_texts));

  const lol_test::TempDir dir_tmp("tok_jsonl");
  const std::string dir = dir_tmp.path();
  fs::create_directories(dir);
  std::ofstream(dir + "/bad.jsonl") << "{\"text\": \"ok\"}\n{\"txt\": 1}\n";
  try {
    train_bpe_files({dir + "/bad.jsonl"}, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
  // A number too large for a double: nlohmann's out_of_range, still a named input error.
  std::ofstream(dir + "/overflow.jsonl") << "{\"text\": \"ok\"}\n{\"text\": \"x\", \"n\": 1e999}\n";
  try {
    train_bpe_files({dir + "/overflow.jsonl"}, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overflow.jsonl:2: not valid JSON"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Trainer, InputErrors) {
  TrainBpeOptions o;
  o.vocab_size = 200;
  const std::vector<std::string> texts = {"hello"};
  EXPECT_THROW(train_bpe(from_vector(texts), o), InputError);  // < 256
  o.vocab_size = 300;
  o.special_tokens = {"<a>", "<a>"};
  EXPECT_THROW(train_bpe(from_vector(texts), o), InputError);
  o.special_tokens = {"<a>"};
  o.bos_token = "<b>";
  EXPECT_THROW(train_bpe(from_vector(texts), o), InputError);
  o.bos_token = "";
  const std::vector<std::string> bad = {"fine", "ok then \xC3("};
  try {
    train_bpe(from_vector(bad), o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("text 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offset 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(train_bpe_files({"/nonexistent/file.txt"}, o), InputError);
  // A special token spelled as a byte-level token (byte 0xFC is written "ü") is named.
  o.special_tokens = {"<a>", "\xC3\xBC"};
  try {
    train_bpe(from_vector(texts), o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("special token \"\xC3\xBC\" (id 1) is also the byte-level spelling of "
                                         "vocabulary id"),
              std::string::npos)
        << e.what();
  }
  o.special_tokens = {"<a>"};
  o.pattern = "(";
  EXPECT_THROW(train_bpe(from_vector(texts), o), InputError);
}

}  // namespace
}  // namespace lol::tokenizers::test
