#include "tokenizers/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <mutex>

#include "tokenizers/byte_unicode.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {

// Open-addressing hash map (left id, right id) -> (rank, merged id).
struct BpeModel::PairMap {
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t id = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::vector<Slot> slots;
  uint64_t mask = 0;
  int shift = 64;

  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  std::size_t home(uint64_t k) const { return std::size_t((k * 0x9E3779B97F4A7C15ULL) >> shift); }

  explicit PairMap(std::size_t n) {
    std::size_t cap = 16;
    int bits = 4;
    while (cap < 2 * n) {
      cap <<= 1;
      ++bits;
    }
    slots.resize(cap);
    mask = cap - 1;
    shift = 64 - bits;
  }
  // Inserts or overwrites (a later duplicate merge wins, as in Hugging Face).
  void put(int32_t a, int32_t b, int32_t rank, int32_t id) {
    const uint64_t k = key(a, b);
    for (std::size_t i = home(k);; i = (i + 1) & mask) {
      Slot& s = slots[i];
      if (s.key == kEmpty || s.key == k) {
        s.key = k;
        s.rank = rank;
        s.id = id;
        return;
      }
    }
  }
  const Slot* find(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (std::size_t i = home(k);; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.key == k) return &s;
      if (s.key == kEmpty) return nullptr;
    }
  }
};

struct BpeModel::Cache {
  static constexpr std::size_t kShards = 32;
  static constexpr std::size_t kMaxPerShard = 8192;
  static constexpr std::size_t kMaxWordBytes = 256;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  std::array<Shard, kShards> shards;

  Shard& shard(std::string_view w) { return shards[std::hash<std::string_view>{}(w) % kShards]; }
};

BpeModel::~BpeModel() = default;

BpeModel::BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& where)
    : options_(std::move(options)), cache_(std::make_unique<Cache>()) {
  int32_t max_id = -1;
  const int64_t id_limit = int64_t(vocab.size()) + kMaxVocabIdGap;
  for (const auto& [tok, id] : vocab) {
    require(id >= 0 && id < id_limit, where + ".vocab[\"" + tok + "\"]",
            "id " + std::to_string(id) + ": expected 0 <= id < " + std::to_string(id_limit) + " (" +
                std::to_string(vocab.size()) + " entries + " + std::to_string(kMaxVocabIdGap) +
                "; ids far beyond the vocabulary size are refused)");
    max_id = std::max(max_id, id);
  }
  tokens_.assign(std::size_t(max_id + 1), std::string());
  used_.assign(std::size_t(max_id + 1), 0);
  bytes_.assign(std::size_t(max_id + 1), std::string());
  vocab_ = vocab;
  for (const auto& [tok, id] : vocab) {
    require(!used_[id], where + ".vocab", "id " + std::to_string(id) + " is used by both '" + tokens_[id] +
                                              "' and '" + tok + "'");
    used_[id] = 1;
    tokens_[id] = tok;
    if (!options_.byte_level || !token_to_bytes(tok, bytes_[id])) bytes_[id] = tok;  // HF ByteLevel decoder fallback
  }
  for (int b = 0; b < 256; ++b) {
    byte_id_[b] = fallback_id_[b] = -1;
    if (!options_.byte_level && b >= 0x80) continue;  // not a character on its own
    auto it = vocab_.find(options_.byte_level ? bytes_to_token(std::string(1, char(b))) : std::string(1, char(b)));
    if (it != vocab_.end()) byte_id_[b] = it->second;
  }
  if (options_.byte_fallback) {
    require(!options_.byte_level, where + ".byte_fallback", "expected false for a byte-level vocabulary");
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);  // Hugging Face's format!("<{:#04X}>", b)
      auto it = vocab_.find(name);
      if (it != vocab_.end()) fallback_id_[b] = it->second;
    }
  }
  merges_ = std::make_unique<PairMap>(merges.size());
  merge_list_.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const std::string w = where + ".merges[" + std::to_string(r) + "] (\"" + a + " " + b + "\")";
    auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
    require(ia != vocab_.end(), w, "left part '" + a + "' is not in the vocabulary");
    require(ib != vocab_.end(), w, "right part '" + b + "' is not in the vocabulary");
    require(ic != vocab_.end(), w, "merged token '" + a + b + "' is not in the vocabulary");
    merges_->put(ia->second, ib->second, int32_t(r), ic->second);
    merge_list_.emplace_back(ia->second, ib->second);
  }
  if (!options_.unk_token.empty()) {
    auto it = vocab_.find(options_.unk_token);
    require(it != vocab_.end(), where + ".unk_token", "'" + options_.unk_token + "' is not in the vocabulary");
    unk_id_ = it->second;
  }
  if (options_.ignore_merges) {
    // Hugging Face looks the piece up by its byte-level spelling: a token that is not a
    // byte-level spelling (a raw space in "a b") never matches a piece.
    for (int32_t id = 0; id <= max_id; ++id)
      if (used_[id] && (!options_.byte_level || bytes_to_token(bytes_[id]) == tokens_[id]))
        bytes_to_id_.emplace(bytes_[id], id);
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= size() || !used_[id]) return nullptr;
  return &tokens_[id];
}

bool BpeModel::append_bytes(int32_t id, std::string& out) const {
  if (id < 0 || id >= size() || !used_[id]) return false;
  out += bytes_[id];
  return true;
}

std::size_t BpeModel::cache_size() const {
  std::size_t n = 0;
  for (auto& s : cache_->shards) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.map.size();
  }
  return n;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_id_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (word.size() > Cache::kMaxWordBytes) {
    bpe(word, out);
    return;
  }
  Cache::Shard& shard = cache_->shard(word);
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(std::string(word));
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t start = out.size();
  bpe(word, out);
  std::vector<int32_t> ids(out.begin() + std::ptrdiff_t(start), out.end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= Cache::kMaxPerShard) shard.map.clear();
  shard.map.emplace(std::string(word), std::move(ids));
}

void BpeModel::bpe(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    auto it = bytes_to_id_.find(std::string(word));
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Sym {
    int32_t id, prev, next;
  };
  struct Cand {
    int32_t rank, pos, left, right, id;
  };
  thread_local std::vector<Sym> syms;
  thread_local std::vector<Cand> heap;
  syms.clear();
  heap.clear();
  auto add = [&](int32_t id) {
    const int32_t k = int32_t(syms.size());
    syms.push_back({id, k - 1, -1});
    if (k > 0) syms[k - 1].next = k;
  };
  if (options_.byte_level) {
    bool prev_unk = false;
    for (unsigned char c : word) {
      int32_t id = byte_id_[c];
      if (id < 0) {
        if (unk_id_ < 0) continue;  // dropped, as Hugging Face does without unk_token
        if (options_.fuse_unk && prev_unk) continue;
        id = unk_id_;
        prev_unk = true;
      } else {
        prev_unk = false;
      }
      add(id);
    }
  } else {
    // Hugging Face BPE::merge_word: one symbol per character; a missing character
    // becomes its "<0xXX>" byte tokens (byte_fallback, when all exist) or a pending
    // unknown, emitted before the next character found in the vocabulary or at the end
    // (fuse_unk: consecutive unknowns stay one).
    bool pending_unk = false;
    for (std::size_t i = 0; i < word.size();) {
      // Pre-tokens are valid UTF-8; a stray byte (raw-byte fallback) is one symbol.
      const std::size_t len = std::size_t(std::max(1, utf8_sequence_length(word, i)));
      const std::string_view ch = word.substr(i, len);
      i += len;
      int32_t id = len == 1 ? byte_id_[static_cast<unsigned char>(ch[0])] : -1;
      if (len > 1) {
        auto it = vocab_.find(std::string(ch));
        if (it != vocab_.end()) id = it->second;
      }
      if (id >= 0) {
        if (pending_unk) add(unk_id_);
        pending_unk = false;
        add(id);
        continue;
      }
      if (options_.byte_fallback) {
        bool all = true;
        for (unsigned char b : ch) all = all && fallback_id_[b] >= 0;
        if (all) {
          for (unsigned char b : ch) add(fallback_id_[b]);
          continue;
        }
      }
      if (unk_id_ < 0) continue;  // dropped, as Hugging Face does without unk_token
      if (pending_unk && !options_.fuse_unk) add(unk_id_);
      pending_unk = true;
    }
    if (pending_unk) add(unk_id_);
  }
  if (syms.empty()) return;
  // Min-heap on (rank, position): the lowest rank first, the leftmost on ties.
  auto later = [](const Cand& a, const Cand& b) { return a.rank > b.rank || (a.rank == b.rank && a.pos > b.pos); };
  auto push = [&](int32_t pos) {
    const int32_t nx = syms[pos].next;
    if (nx < 0) return;
    if (const PairMap::Slot* m = merges_->find(syms[pos].id, syms[nx].id)) {
      heap.push_back({m->rank, pos, syms[pos].id, syms[nx].id, m->id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Cand c = heap.back();
    heap.pop_back();
    Sym& s = syms[c.pos];
    if (s.id != c.left || s.next < 0 || syms[s.next].id != c.right) continue;  // stale
    Sym& r = syms[s.next];
    s.id = c.id;
    r.id = -1;
    s.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.pos;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

nlohmann::ordered_json BpeModel::to_json() const {
  nlohmann::ordered_json m;
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  m["unk_token"] = options_.unk_token.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(options_.unk_token);
  m["continuing_subword_prefix"] = nullptr;
  m["end_of_word_suffix"] = nullptr;
  m["fuse_unk"] = options_.fuse_unk;
  m["byte_fallback"] = options_.byte_fallback;
  if (options_.ignore_merges) m["ignore_merges"] = true;
  // ordered_json's operator[] searches linearly; append to the underlying vector
  // instead (keys are unique by construction) to keep this O(n).
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  auto& entries = v.get_ref<nlohmann::ordered_json::object_t&>();
  using Base = std::vector<nlohmann::ordered_json::object_t::value_type>;
  static_cast<Base&>(entries).reserve(vocab_.size());
  for (int32_t id = 0; id < size(); ++id)
    if (used_[id]) static_cast<Base&>(entries).emplace_back(tokens_[id], id);
  m["vocab"] = std::move(v);
  bool spaces = false;
  for (const auto& [a, b] : merge_list_)
    spaces = spaces || tokens_[a].find(' ') != std::string::npos || tokens_[b].find(' ') != std::string::npos;
  nlohmann::ordered_json ms = nlohmann::ordered_json::array();
  for (const auto& [a, b] : merge_list_) {
    if (spaces) ms.push_back({tokens_[a], tokens_[b]});
    else ms.push_back(tokens_[a] + " " + tokens_[b]);
  }
  m["merges"] = std::move(ms);
  return m;
}

}  // namespace lol::tokenizers
