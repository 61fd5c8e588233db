#include "tokenizers/byte_trie.h"

#include <limits>
#include <stdexcept>

namespace lol::tokenizers {

ByteTrie::ByteTrie() : nodes_(1) { root_.fill(kNone); }

std::uint32_t ByteTrie::child(std::uint32_t node, unsigned char b) const {
  if (node == 0) return root_[b];
  if (edges_.empty()) return kNone;
  const std::uint64_t key = edge_key(node, b);
  const std::size_t mask = edges_.size() - 1;
  for (std::size_t s = slot_of(key);; s = (s + 1) & mask) {
    if (edges_[s].first == key) return edges_[s].second;
    if (edges_[s].first == 0) return kNone;
  }
}

void ByteTrie::add_edge(std::uint64_t key, std::uint32_t to) {
  if (2 * (n_edges_ + 1) > edges_.size()) {  // grow (power of two) and rehash
    std::vector<std::pair<std::uint64_t, std::uint32_t>> old;
    old.swap(edges_);
    edges_.assign(old.empty() ? 64 : 2 * old.size(), {0, 0});
    shift_ = 64;
    for (std::size_t c = edges_.size(); c > 1; c >>= 1) --shift_;
    n_edges_ = 0;
    for (const auto& e : old)
      if (e.first != 0) add_edge(e.first, e.second);
  }
  const std::size_t mask = edges_.size() - 1;
  std::size_t s = slot_of(key);
  while (edges_[s].first != 0) s = (s + 1) & mask;
  edges_[s] = {key, to};
  ++n_edges_;
}

bool ByteTrie::insert(std::string_view key, std::uint32_t value) {
  if (key.empty()) throw std::invalid_argument("ByteTrie::insert: empty key");
  std::uint32_t node = 0;
  for (char ch : key) {
    const auto b = static_cast<unsigned char>(ch);
    std::uint32_t next = child(node, b);
    if (next == kNone) {
      if (nodes_.size() >= std::numeric_limits<std::uint32_t>::max() - 1)
        throw std::length_error("ByteTrie: more than 2^32 - 2 nodes");
      next = static_cast<std::uint32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0)
        root_[b] = next;
      else
        add_edge(edge_key(node, b), next);
    }
    node = next;
  }
  Node& n = nodes_[node];
  if (n.terminal) return false;
  n.terminal = true;
  n.value = value;
  ++size_;
  return true;
}

ByteTrie::Match ByteTrie::longest_at(std::string_view text, std::size_t pos) const {
  Match best;
  std::uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node == kNone) break;
    if (nodes_[node].terminal) best = {i + 1 - pos, nodes_[node].value};
  }
  return best;
}

}  // namespace lol::tokenizers
