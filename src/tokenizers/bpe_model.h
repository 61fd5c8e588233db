// BPE model (Sennrich et al. 2016): a vocabulary of token strings and an ordered
// list of merges. Byte-level (GPT-2's alphabet, Radford et al. 2019): a pre-token
// (a byte string) starts as one symbol per byte; character-level (SentencePiece-
// converted models: Llama 2, Mistral, Gemma): one symbol per UTF-8 character, with
// byte fallback to "<0xXX>" tokens. Then the adjacent pair with the lowest merge
// rank is merged until none is left; on equal ranks the leftmost pair goes first. This is exactly Hugging Face's BPE
// (and OpenAI's encoder.py) result. Results for pre-tokens up to 256 bytes are
// cached (sharded, thread-safe, bounded: a full shard is cleared).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lol::tokenizers {

/// Largest allowed distance between a token id and the number of tokens defined so far:
/// ids need not be dense, but a vocabulary of n entries may use ids only below
/// n + kMaxVocabIdGap. Id tables are sized by the largest id, so this bounds the
/// memory a small (possibly hostile) tokenizer file can make the loader allocate.
constexpr int64_t kMaxVocabIdGap = int64_t(1) << 20;

struct BpeOptions {
  std::string unk_token;       ///< empty: bytes missing from the vocabulary are dropped (as HF)
  bool fuse_unk = false;       ///< consecutive unknowns become one unk id
  bool ignore_merges = false;  ///< a pre-token that is itself in the vocabulary is emitted as is
  /// true: tokens are spelled in GPT-2's byte-level alphabet and a pre-token starts as
  /// one symbol per byte. false (SentencePiece-style BPE): tokens are spelled in
  /// UTF-8 and a pre-token starts as one symbol per character (Hugging Face
  /// BPE::merge_word).
  bool byte_level = true;
  /// Character-level only: a character missing from the vocabulary becomes the tokens
  /// "<0xXX>" of its UTF-8 bytes when all of them exist, else unk_token.
  bool byte_fallback = false;
};

class BpeModel {
 public:
  /// vocab: token string (byte-mapped spelling) -> id; ids need not be dense but must
  /// be >= 0 and < vocab.size() + kMaxVocabIdGap.
  /// merges: pairs of token strings in rank order. Throws lol::InputError naming
  /// `where` and the token or merge index when an id is out of that range, when a
  /// merge's parts or their concatenation are not in the vocabulary, or when
  /// unk_token is set but not in it.
  BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& where);
  ~BpeModel();

  /// Appends the ids of pre-token `word` (raw bytes, any content). Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// 1 + largest id.
  int32_t size() const { return int32_t(tokens_.size()); }
  /// Number of vocabulary entries (size() when the ids have no gaps).
  int32_t entry_count() const { return int32_t(vocab_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  /// The vocabulary spelling of id, or nullptr when unused.
  const std::string* id_to_token(int32_t id) const;
  /// Decoded bytes of id (byte-level: Hugging Face ByteLevel decoder rule, the
  /// token's characters mapped back to bytes, or the token's own UTF-8 when some
  /// character is outside the byte mapping; character-level: the spelling itself,
  /// the tokenizer's decoder maps it further); false when unused.
  bool append_bytes(int32_t id, std::string& out) const;
  /// Id of the single-byte token for byte b, or -1 (character-level: ASCII only).
  int32_t byte_id(uint8_t b) const { return byte_id_[b]; }
  /// Character-level with byte_fallback: id of "<0xXX>" for byte b, or -1.
  int32_t fallback_id(uint8_t b) const { return fallback_id_[b]; }
  /// Id of the unknown token, or -1.
  int32_t unk_id() const { return unk_id_; }

  /// Merges in rank order, as (left id, right id).
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merge_list_; }
  const BpeOptions& options() const { return options_; }

  /// The tokenizer.json "model" object ({"type": "BPE", "vocab", "merges", ...};
  /// merges as "a b" strings, or [a, b] pairs when a token contains a space).
  nlohmann::ordered_json to_json() const;

  /// Number of cached pre-tokens (for tests/diagnostics).
  std::size_t cache_size() const;

 private:
  struct PairMap;
  struct Cache;
  void bpe(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;  // id -> spelling ("" = unused id)
  std::vector<char> used_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> bytes_;  // id -> decoded bytes
  std::array<int32_t, 256> byte_id_{};
  std::array<int32_t, 256> fallback_id_{};
  std::vector<std::pair<int32_t, int32_t>> merge_list_;
  std::unique_ptr<PairMap> merges_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // only with ignore_merges
  BpeOptions options_;
  int32_t unk_id_ = -1;
  std::unique_ptr<Cache> cache_;
};

}  // namespace lol::tokenizers
