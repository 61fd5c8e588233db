// A trie over bytes for leftmost-longest matching of many fixed strings (the added
// tokens of added_vocab.h). Inserting a string costs O(its length); finding the
// longest stored string that starts at a position of a text costs O(that length)
// lookups in one open-addressing table (about one cache miss per byte), independent
// of how many strings are stored. (Hugging Face's
// AddedVocabulary uses an Aho-Corasick automaton for the same leftmost-longest
// semantics; the per-position walk here gives the same matches.)
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lol::tokenizers {

class ByteTrie {
 public:
  /// A stored string found in a text: its length in bytes and its value.
  struct Match {
    std::size_t length = 0;
    std::uint32_t value = 0;
  };

  ByteTrie();

  /// Stores non-empty `key` with `value`. Returns false, and keeps the first value,
  /// when `key` is already stored. Throws std::invalid_argument for an empty key,
  /// std::length_error past 2^32 - 2 trie nodes.
  bool insert(std::string_view key, std::uint32_t value);

  /// Number of stored strings.
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// True when some stored string starts with byte `b` (a constant-time filter).
  bool has_first_byte(unsigned char b) const { return root_[b] != kNone; }

  /// The longest stored string that `text` has at byte `pos` (pos < text.size()),
  /// or a Match with length 0 when there is none.
  Match longest_at(std::string_view text, std::size_t pos) const;

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  struct Node {
    std::uint32_t value = 0;
    bool terminal = false;
  };
  static std::uint64_t edge_key(std::uint32_t node, unsigned char b) {
    return (static_cast<std::uint64_t>(node) << 8) | b;
  }
  std::uint32_t child(std::uint32_t node, unsigned char b) const;
  void add_edge(std::uint64_t key, std::uint32_t child);
  std::size_t slot_of(std::uint64_t key) const {  // Fibonacci hashing into edges_
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  std::vector<Node> nodes_;                           // nodes_[0] is the root
  std::array<std::uint32_t, 256> root_;               // the root's children (kNone: none)
  // Edges below the root: (edge_key(node, byte), child), linear probing, key 0 = empty
  // (node >= 1 here, so no real key is 0); at most half full.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> edges_;
  std::size_t n_edges_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace lol::tokenizers
