#include "tokenizers/bpe_trainer.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tokenizers/added_vocab.h"
#include "tokenizers/byte_unicode.h"
#include "tokenizers/utf8.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/progress.h"

namespace lol::tokenizers {
namespace {

using Clock = std::chrono::steady_clock;

PreTokenizer make_pre_tokenizer(const std::string& pattern) { return PreTokenizer::from_pattern(pattern); }

// Counts unique pre-tokens over all texts.
class WordCounter {
 public:
  WordCounter(const TrainBpeOptions& o, const PreTokenizer& pre) : pre_(pre) {
    for (std::size_t i = 0; i < o.special_tokens.size(); ++i) {
      AddedToken t;
      t.content = o.special_tokens[i];
      t.id = int32_t(i);
      specials_.add(t);
    }
  }

  /// `where` names the source; `offset` is the position of `text` in it.
  void add(std::string_view text, const std::string& where, std::size_t offset, TrainBpeStats& st) {
    const std::size_t bad = find_invalid_utf8(text);
    require(bad == std::string_view::npos, where,
            "invalid UTF-8 at byte offset " + std::to_string(offset + bad) + "; training text must be UTF-8");
    segments_.clear();
    specials_.split(text, segments_);
    for (const Segment& s : segments_) {
      if (s.added_id >= 0) continue;
      pieces_.clear();
      arena_.clear();
      pre_.split(s.text, pieces_, arena_);
      for (std::string_view p : pieces_) ++counts_[std::string(p)];
      st.words += int64_t(pieces_.size());
    }
    st.bytes += int64_t(text.size());
    ++st.texts;
  }

  std::unordered_map<std::string, int64_t>& counts() { return counts_; }

 private:
  const PreTokenizer& pre_;
  AddedVocab specials_;
  std::vector<Segment> segments_;
  std::vector<std::string_view> pieces_;
  std::deque<std::string> arena_;
  std::unordered_map<std::string, int64_t> counts_;
};

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
int32_t left_of(uint64_t k) { return int32_t(k >> 32); }
int32_t right_of(uint64_t k) { return int32_t(k & 0xFFFFFFFFu); }

struct HeapEntry {
  int64_t count;
  uint64_t pair;
};
// priority_queue puts the "largest" on top: the highest count, then the smallest pair.
struct HeapLess {
  bool operator()(const HeapEntry& x, const HeapEntry& y) const {
    if (x.count != y.count) return x.count < y.count;
    return x.pair > y.pair;
  }
};

void check_options(const TrainBpeOptions& o) {
  std::unordered_set<std::string> seen;
  for (const std::string& s : o.special_tokens) {
    // Named as `lol tokenizer train` spells them (TrainBpeOptions' fields in brackets).
    require(!s.empty(), "--special (special_tokens)", "empty special token");
    require(seen.insert(s).second, "--special (special_tokens)", "'" + s + "' is listed twice");
  }
  const int64_t min_size = int64_t(o.special_tokens.size()) + 256;
  require(o.vocab_size >= min_size, "--vocab-size (vocab_size)",
          "expected >= " + std::to_string(min_size) + " (specials + 256 bytes), got " + std::to_string(o.vocab_size));
  require(o.min_frequency >= 1, "--min-frequency (min_frequency)", "expected >= 1");
  for (const std::string* r : {&o.bos_token, &o.eos_token, &o.pad_token}) {
    require(r->empty() || seen.count(*r), "train_bpe: role token '" + *r + "'", "must be one of special_tokens");
  }
}

std::unique_ptr<BpeTokenizer> learn(std::unordered_map<std::string, int64_t>& counts, const TrainBpeOptions& o,
                                    PreTokenizer pre, TrainBpeStats& st) {
  const auto t0 = Clock::now();
  const int32_t k = int32_t(o.special_tokens.size());
  // id -> bytes
  std::vector<std::string> tokens(o.special_tokens.begin(), o.special_tokens.end());
  std::array<int32_t, 256> byte_id{};
  {
    std::vector<int> order(256);
    for (int b = 0; b < 256; ++b) order[b] = b;
    std::sort(order.begin(), order.end(),
              [](int x, int y) { return byte_to_unicode(uint8_t(x)) < byte_to_unicode(uint8_t(y)); });
    for (int r = 0; r < 256; ++r) {
      byte_id[order[r]] = k + r;
      tokens.push_back(std::string(1, char(order[r])));
    }
  }
  std::unordered_map<std::string, int32_t> id_of_bytes;
  for (int32_t i = k; i < int32_t(tokens.size()); ++i) id_of_bytes.emplace(tokens[i], i);

  // Words (sorted for a reproducible memory layout; results do not depend on it).
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  counts.clear();
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> wcount(sorted.size());
  for (std::size_t w = 0; w < sorted.size(); ++w) {
    wcount[w] = sorted[w].second;
    words[w].reserve(sorted[w].first.size());
    for (unsigned char c : sorted[w].first) words[w].push_back(byte_id[c]);
  }
  st.unique_words = int64_t(sorted.size());
  sorted.clear();
  sorted.shrink_to_fit();

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  pair_count.reserve(1 << 16);
  where.reserve(1 << 16);
  for (std::size_t w = 0; w < words.size(); ++w) {
    const auto& s = words[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t p = pair_key(s[i], s[i + 1]);
      pair_count[p] += wcount[w];
      auto& lst = where[p];
      if (lst.empty() || lst.back() != int32_t(w)) lst.push_back(int32_t(w));
    }
  }
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapLess> heap;
  for (const auto& [p, c] : pair_count)
    if (c > 0) heap.push({c, p});

  std::vector<std::pair<std::string, std::string>> merges;  // as byte strings, converted below
  std::unordered_set<uint64_t> merged;
  std::vector<uint64_t> new_pairs;
  const int64_t target = o.vocab_size;
  ProgressBar bar("train_bpe", target - int64_t(tokens.size()), o.progress);
  const int64_t start_size = int64_t(tokens.size());
  while (int64_t(tokens.size()) < target && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.pair);
    const int64_t cur = pc == pair_count.end() ? 0 : pc->second;
    if (cur != top.count) {  // stale entry
      if (cur > 0) heap.push({cur, top.pair});
      continue;
    }
    if (cur < o.min_frequency) break;
    if (!merged.insert(top.pair).second) {  // re-formed pair of a reused id: merged already
      pair_count.erase(pc);
      continue;
    }
    const int32_t a = left_of(top.pair), b = right_of(top.pair);
    const std::string joined = tokens[a] + tokens[b];
    int32_t id;
    auto existing = id_of_bytes.find(joined);
    if (existing != id_of_bytes.end()) {
      id = existing->second;
    } else {
      id = int32_t(tokens.size());
      tokens.push_back(joined);
      id_of_bytes.emplace(joined, id);
    }
    merges.emplace_back(tokens[a], tokens[b]);

    std::vector<int32_t> affected = std::move(where[top.pair]);
    where.erase(top.pair);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    new_pairs.clear();
    for (int32_t w : affected) {
      auto& s = words[w];
      const int64_t c = wcount[w];
      bool changed = false;
      std::size_t out = 0;
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          pair_count[top.pair] -= c;
          if (out > 0) {  // left neighbour (already final in s[out-1])
            pair_count[pair_key(s[out - 1], a)] -= c;
            const uint64_t np = pair_key(s[out - 1], id);
            pair_count[np] += c;
            new_pairs.push_back(np);
            where[np].push_back(w);
          }
          if (i + 2 < s.size()) {  // right neighbour (still unmerged)
            pair_count[pair_key(b, s[i + 2])] -= c;
            const uint64_t np = pair_key(id, s[i + 2]);
            pair_count[np] += c;
            new_pairs.push_back(np);
            where[np].push_back(w);
          }
          s[out++] = id;
          i += 2;
          changed = true;
        } else {
          s[out++] = s[i++];
        }
      }
      if (changed) s.resize(out);
    }
    pair_count.erase(top.pair);
    std::sort(new_pairs.begin(), new_pairs.end());
    new_pairs.erase(std::unique(new_pairs.begin(), new_pairs.end()), new_pairs.end());
    for (uint64_t np : new_pairs) {
      auto it = pair_count.find(np);
      if (it != pair_count.end() && it->second > 0) heap.push({it->second, np});
    }
    bar.update(int64_t(tokens.size()) - start_size, "merges " + std::to_string(merges.size()));
  }
  bar.finish("merges " + std::to_string(merges.size()));
  st.merges = int32_t(merges.size());
  st.merge_seconds = util::seconds_since(t0);

  // Vocabulary in byte-mapped spelling; specials verbatim.
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(tokens.size());
  for (int32_t i = 0; i < int32_t(tokens.size()); ++i) {
    const std::string spelling = i < k ? tokens[i] : bytes_to_token(tokens[i]);
    const auto [it, fresh] = vocab.emplace(spelling, i);
    require(fresh, "train_bpe: special_tokens",
            "special token \"" + spelling + "\" (id " + std::to_string(it->second) +
                ") is also the byte-level spelling of vocabulary id " + std::to_string(i) +
                " (byte-level BPE spells bytes as printable characters): expected a special token that is no "
                "byte-level spelling, e.g. <|name|>");
  }
  for (auto& [l, r] : merges) {
    l = bytes_to_token(l);
    r = bytes_to_token(r);
  }
  auto model = std::make_shared<const BpeModel>(vocab, merges, BpeOptions{}, "train_bpe");
  auto tok = std::make_unique<BpeTokenizer>(std::move(model), std::move(pre));
  for (int32_t i = 0; i < k; ++i) {
    AddedToken t;
    t.content = o.special_tokens[i];
    t.id = i;
    t.special = true;
    tok->add_token(t);
  }
  tok->set_bos_token(o.bos_token);
  tok->set_eos_token(o.eos_token);
  tok->set_pad_token(o.pad_token);
  return tok;
}

}  // namespace

std::unique_ptr<BpeTokenizer> train_bpe(const std::function<bool(std::string&)>& next_text,
                                        const TrainBpeOptions& options, TrainBpeStats* stats) {
  check_options(options);
  TrainBpeStats st;
  const auto t0 = Clock::now();
  PreTokenizer pre = make_pre_tokenizer(options.pattern);
  WordCounter counter(options, pre);
  std::string text;
  for (int64_t i = 0; next_text(text); ++i) counter.add(text, "train_bpe: text " + std::to_string(i), 0, st);
  st.count_seconds = util::seconds_since(t0);
  auto tok = learn(counter.counts(), options, std::move(pre), st);
  if (stats) *stats = st;
  return tok;
}

std::unique_ptr<BpeTokenizer> train_bpe_files(const std::vector<std::string>& files,
                                              const TrainBpeOptions& options, TrainBpeStats* stats) {
  check_options(options);
  require(!files.empty(), "train_bpe", "no input files");
  TrainBpeStats st;
  const auto t0 = Clock::now();
  PreTokenizer pre = make_pre_tokenizer(options.pattern);
  WordCounter counter(options, pre);
  constexpr std::size_t kBlock = 1 << 20;
  for (const std::string& file : files) {
    std::ifstream f(file, std::ios::binary);
    require(bool(f), file, "cannot open for reading");
    if (file.size() > 6 && file.compare(file.size() - 6, 6, ".jsonl") == 0) {
      std::string line;
      for (int64_t ln = 1; std::getline(f, line); ++ln) {
        if (line.empty()) continue;
        const std::string where = file + ":" + std::to_string(ln);
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (number overflow)
          throw InputError(where + ": not valid JSON: " + e.what());
        }
        require(j.is_object() && j.contains("text") && j["text"].is_string(), where + ": text",
                "expected an object with a string field \"text\"");
        counter.add(j["text"].get<std::string>(), where + ": text", 0, st);
      }
      require(!f.bad(), file, "read error");
      continue;
    }
    std::string carry, block(kBlock, '\0');
    std::size_t offset = 0;  // file offset of carry[0]
    while (true) {
      f.read(&block[0], std::streamsize(kBlock));
      const std::size_t got = std::size_t(f.gcount());
      if (got == 0) break;
      carry.append(block.data(), got);
      const std::size_t nl = carry.rfind('\n');
      if (nl == std::string::npos) continue;  // keep reading until a newline
      counter.add(std::string_view(carry).substr(0, nl + 1), file, offset, st);
      offset += nl + 1;
      carry.erase(0, nl + 1);
    }
    require(!f.bad(), file, "read error");
    if (!carry.empty()) counter.add(carry, file, offset, st);
  }
  st.count_seconds = util::seconds_since(t0);
  auto tok = learn(counter.counts(), options, std::move(pre), st);
  if (stats) *stats = st;
  return tok;
}

}  // namespace lol::tokenizers
