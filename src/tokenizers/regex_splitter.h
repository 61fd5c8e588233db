// Regex-based text splitting with PCRE2 (UTF mode, Unicode properties, JIT when
// available), the engine behind the pre-tokenizers. Implements Hugging Face's
// Split pre-tokenizer with behaviour "Isolated": every match is a piece and so is
// every non-empty gap between matches.
//
// Compatibility with the engines Hugging Face uses (onig / fancy-regex): both
// treat `\s` as the Unicode White_Space property, which includes U+0085 (NEL) and
// excludes U+180E (MONGOLIAN VOWEL SEPARATOR); PCRE2's `\s` (with PCRE2_UCP) does
// the opposite for both. The pattern is therefore rewritten before compilation,
// with W = the White_Space list `\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}
// \x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`: `\s` -> `[W]` outside a character class,
// `\s` -> `W` inside one, `\S` -> `[^W]` outside a class (`\P{White_Space}` inside).
// `\w`, `\b`, `\h`, POSIX classes and onig's POSIX-named properties are rewritten to
// onig's sets too (rewrite_for_onig below). Everything else (\p{L}, \p{N},
// (?i:...), (?!...), leftmost-first alternation, greedy backtracking) has the same
// semantics in PCRE2 as in onig.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lol::tokenizers {

/// GPT-2's pre-tokenizer pattern (Hugging Face ByteLevel with use_regex=true).
extern const char* const kGpt2Pattern;
/// Qwen2's pre-tokenizer pattern (the Split step of Qwen2's tokenizer.json).
extern const char* const kQwen2Pattern;

class RegexSplitter {
 public:
  /// Compiles `pattern` (a regex, or a literal string when literal=true).
  /// Throws lol::InputError naming `where`, the PCRE2 message and the offset in the
  /// pattern when it does not compile.
  RegexSplitter(std::string pattern, bool literal = false, const std::string& where = "regex");
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  /// Appends to `out` the pieces of `text` in order (matches and the gaps between
  /// them; empty matches are dropped), as views into `text`. The concatenation of
  /// the pieces is `text`. `text` must be valid UTF-8 (checked by the caller; it is
  /// not re-checked here). Thread-safe. Throws InputError naming the pattern when
  /// matching fails (PCRE2's match limit, a catastrophically backtracking pattern).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  /// As split, each piece flagged true for a match, false for a gap between matches;
  /// empty matches are kept here (as onig's find_iter gives them, an empty match right
  /// after the previous match excepted), since they separate Contiguous runs.
  void split_flagged(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out) const;

  /// True when a match starts exactly at byte `pos` of valid UTF-8 `text`
  /// (anchored there; the match may be empty). Thread-safe.
  bool matches_at(std::string_view text, std::size_t pos) const;

  /// The pattern as given (before rewrite_for_onig).
  const std::string& pattern() const { return pattern_; }
  bool literal() const { return literal_; }
  /// True when PCRE2's JIT compiler accepted the pattern.
  bool jit() const { return jit_; }

 private:
  template <typename Emit>
  void for_each_piece(std::string_view text, Emit&& emit) const;

  std::string pattern_;
  bool literal_;
  bool jit_ = false;
  void* code_ = nullptr;  // pcre2_code_8*
};

/// The rewrite to Oniguruma's meanings described above (exposed for tests): `\s`, `\S`
/// (Unicode White_Space), `\w`, `\W`, `\b`, `\B` (onig's word characters: Alphabetic,
/// Mark, Decimal_Number, Connector_Punctuation, and U+00B2 U+00B3 U+00B9 U+00BC-U+00BE),
/// `\h`, `\H` (a hexadecimal digit), POSIX bracket classes `[:name:]` / `[:^name:]` and
/// onig's POSIX-named properties (`\p{Alpha}`, `\p{Word}`, `\p{Punct}`, ...). A negated
/// alnum, blank or word class beside other members of a bracket expression has no
/// PCRE2 spelling and keeps PCRE2's meaning (docs/tokenizers.md).
/// Inline options are translated too: onig's (?m) ('.' matches a newline) is PCRE2's
/// (?s); an onig pattern cannot hold (?s): InputError.
std::string rewrite_for_onig(std::string_view pattern);

}  // namespace lol::tokenizers
