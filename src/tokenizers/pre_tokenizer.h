// Pre-tokenization for byte-level BPE: a chain of regex Split steps ending in a
// ByteLevel step, mirroring the Hugging Face pre_tokenizer objects
//   {"type": "ByteLevel", "add_prefix_space": b, "use_regex": b, "trim_offsets": b}
//   {"type": "Split", "pattern": {"Regex": r} | {"String": s},
//    "behavior": Isolated | Removed | MergedWithPrevious | MergedWithNext |
//    Contiguous, "invert": b}   (GPT-4-style conversions: Removed + invert)
//   {"type": "Sequence", "pretokenizers": [...]}
// Each step splits every current piece further (Split: matches and gaps, see
// RegexSplitter; ByteLevel: optional ' ' prefix, then GPT-2's regex when
// use_regex). The byte -> character mapping of ByteLevel itself is done by
// BpeModel on ids, not on strings.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/regex_splitter.h"

namespace lol::tokenizers {

class PreTokenizer {
 public:
  struct Step {
    enum class Kind { kSplit, kByteLevel } kind = Kind::kByteLevel;
    std::shared_ptr<const RegexSplitter> regex;  // null: no splitting
    bool add_prefix_space = false;               // ByteLevel only
    bool trim_offsets = false;                   // ByteLevel only (offsets; kept for saving)
    /// Split only, as Hugging Face's SplitDelimiterBehavior: what happens to the
    /// matches ("delimiters"; with invert, the gaps between them instead).
    enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
  };

  /// Parses a tokenizer.json "pre_tokenizer" made of Split steps only (a Split or a
  /// Sequence of them; SentencePiece-style tokenizers such as Gemma 2). Throws
  /// lol::InputError naming `where` and the field.
  static PreTokenizer splits_from_json(const nlohmann::json& j, const std::string& where);

  /// ByteLevel(add_prefix_space=false, use_regex=true): GPT-2.
  static PreTokenizer gpt2();
  /// Sequence[Split(pattern, Isolated), ByteLevel(use_regex=false)]; with
  /// pattern == kGpt2Pattern this is gpt2(). Throws lol::InputError on a bad regex.
  static PreTokenizer from_pattern(const std::string& pattern);
  /// Parses a tokenizer.json "pre_tokenizer" value. Throws lol::InputError naming
  /// `where` and the field for unsupported types/behaviours, a missing ByteLevel
  /// step, or a ByteLevel step that is not the last one.
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& where);
  nlohmann::ordered_json to_json() const;

  /// Appends the pre-tokens of `text` (valid UTF-8) to `out`. Pieces are views of
  /// `text` or of strings kept in `arena` (prefix spaces); keep both alive while
  /// using them. `first_step_prefix` false: a ByteLevel first step adds no prefix space
  /// (`text` continues an earlier text; a ByteLevel step after a Split still adds
  /// one to every piece, as it would in the whole text). Thread-safe.
  void split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena,
             bool first_step_prefix = true) const;

  const std::vector<Step>& steps() const { return steps_; }

 private:
  /// Splits `text` by one Split step: the regex's matches and gaps, handled by the
  /// step's behavior and invert. Appends non-empty views of `text`.
  static void split_step(const Step& s, std::string_view text, std::vector<std::string_view>& out);

  std::vector<Step> steps_;
};

}  // namespace lol::tokenizers
