// Pre-tokenizer regexes: GPT-2 vs Qwen2 on the inputs where they differ. The
// expected splits are derived by hand from leftmost-first alternation and greedy
// backtracking (the semantics of onig/fancy-regex used by Hugging Face):
//   Qwen2: A1 (?i:'s|'t|'re|'ve|'m|'ll|'d)  A2 [^\r\n\p{L}\p{N}]?\p{L}+  A3 \p{N}
//          A4  ?[^\s\p{L}\p{N}]+[\r\n]*  A5 \s*[\r\n]+  A6 \s+(?!\S)  A7 \s+
//   GPT-2: G1 's|'t|'re|'ve|'m|'ll|'d  G2  ?\p{L}+  G3  ?\p{N}+  G4  ?[^\s\p{L}\p{N}]+
//          G5 \s+(?!\S)  G6 \s+
#include <deque>
#include <numeric>

#include "common/test_files.h"
#include "tok_test_util.h"
#include "tokenizers/pre_tokenizer.h"
#include "tokenizers/regex_splitter.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers::test {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const RegexSplitter& r, const std::string& text) {
  std::vector<std::string_view> v;
  r.split(text, v);
  return Pieces(v.begin(), v.end());
}

struct Case {
  const char* what;
  std::string text;
  Pieces qwen2, gpt2;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      // A3 takes one digit at a time; G3 takes the run with its leading space.
      {"digits", "12345", {"1", "2", "3", "4", "5"}, {"12345"}},
      {"digits between words", "abc 12345 def", {"abc", " ", "1", "2", "3", "4", "5", " def"}, {"abc", " 12345", " def"}},
      {"digits inside a word", "abc123def", {"abc", "1", "2", "3", "def"}, {"abc", "123", "def"}},
      // A1 is case-insensitive; G1 only matches lower case, so "'" and "T" split.
      {"upper-case contraction", "DON'T", {"DON", "'T"}, {"DON", "'", "T"}},
      {"upper-case 'LL", "WE'LL GO", {"WE", "'LL", " GO"}, {"WE", "'", "LL", " GO"}},
      {"mixed-case 'Re", "they'Re", {"they", "'Re"}, {"they", "'", "Re"}},
      {"lower-case contraction", "don't", {"don", "'t"}, {"don", "'t"}},
      // A4 swallows the newlines after a symbol run; G4 stops before them and G5
      // keeps the last white space char before a non-space for the next piece.
      {"symbols then newlines", "Hello!!!\n\nWorld", {"Hello", "!!!\n\n", "World"}, {"Hello", "!!!", "\n", "\n", "World"}},
      {"period then newline", "end.\n", {"end", ".\n"}, {"end", ".", "\n"}},
      // A5 takes a whole run of white space ending in newlines.
      {"newline run", "a\n\n\nb", {"a", "\n\n\n", "b"}, {"a", "\n\n", "\n", "b"}},
      {"spaces then newlines", "a  \n\nb", {"a", "  \n\n", "b"}, {"a", "  \n", "\n", "b"}},
      {"CRLF", "line1\r\nline2", {"line", "1", "\r\n", "line", "2"}, {"line", "1", "\r", "\n", "line", "2"}},
      // Same in both: A6/G5 leave one space for the following word.
      {"space run", "a   b", {"a", "  ", " b"}, {"a", "  ", " b"}},
      {"trailing spaces", "hi  ", {"hi", "  "}, {"hi", "  "}},
      {"spaces, newline, space", "x  \n y", {"x", "  \n", " y"}, {"x", "  \n", " y"}},
      // A2 lets any one non-letter, non-digit char other than CR/LF lead letters.
      {"symbol before letters", "$hello", {"$hello"}, {"$", "hello"}},
      {"parentheses", "(word)", {"(word", ")"}, {"(", "word", ")"}},
      {"quotes", "\"Hi\"", {"\"Hi", "\""}, {"\"", "Hi", "\""}},
      {"dotted name", "foo.bar", {"foo", ".bar"}, {"foo", ".", "bar"}},
      {"tab before letters", "a \tb", {"a", " ", "\tb"}, {"a", " ", "\t", "b"}},
      {"space + symbol", " $x", {" $", "x"}, {" $", "x"}},
      // Non-ASCII letters are \p{L}; CJK has no spaces.
      {"accents", "Führer über", {"Führer", " über"}, {"Führer", " über"}},
      {"CJK then digits", "中文123", {"中文", "1", "2", "3"}, {"中文", "123"}},
      // U+0085 (NEL) is \s in onig/fancy-regex (Unicode White_Space), not in
      // plain PCRE2: checks the \s rewrite.
      {"NEL is white space", "a\u0085\u0085b", {"a", "\u0085", "\u0085b"}, {"a", "\u0085", "\u0085", "b"}},
      // U+180E (Cf since Unicode 6.3) is not White_Space, but is PCRE2 \s.
      {"U+180E is not white space", "a\u180e\u180eb", {"a", "\u180e\u180e", "b"}, {"a", "\u180e\u180e", "b"}},
  };
  return c;
}

TEST(PreTokenizer, Qwen2Splits) {
  RegexSplitter r(kQwen2Pattern);
  for (const Case& c : cases()) EXPECT_EQ(split(r, c.text), c.qwen2) << c.what;
}

TEST(PreTokenizer, Gpt2Splits) {
  RegexSplitter r(kGpt2Pattern);
  for (const Case& c : cases()) EXPECT_EQ(split(r, c.text), c.gpt2) << c.what;
}

TEST(PreTokenizer, PiecesCoverCorpora) {
  // Every byte of the input ends up in exactly one piece, in order.
  const std::string kjv = shared_data("corpora/en_kjv.txt");
  const std::string ml = shared_data("corpora/multilingual_valid.jsonl");
  LOL_REQUIRE_SHARED(kjv);
  LOL_REQUIRE_SHARED(ml);
  std::vector<std::string> texts = read_jsonl_texts(ml);
  texts.push_back(read_prefix(kjv, 100000));
  for (const char* pat : {kGpt2Pattern, kQwen2Pattern}) {
    RegexSplitter r(pat);
    for (const std::string& t : texts) {
      std::vector<std::string_view> v;
      r.split(t, v);
      std::string joined;
      for (auto p : v) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, t) << pat;
    }
  }
}

// Oniguruma's (Hugging Face's) meanings of \w, \b, \h, ^ and $, which PCRE2 reads
// otherwise (adversarial pass, session 26: a tokenizer lol trained with
// --regex '\w+|[^\w\s]+|\s+' split Hindi text differently in transformers).
TEST(PreTokenizer, OnigurumaClassesAndAnchors) {
  auto pieces = [](const std::string& pattern, const std::string& text) {
    RegexSplitter r(pattern);
    std::vector<std::pair<std::string_view, bool>> v;
    r.split_flagged(text, v);
    std::vector<std::string> out;
    for (const auto& [p, m] : v)
      if (m) out.emplace_back(p);
    return out;
  };
  using V = std::vector<std::string>;
  // A combining acute accent (U+0301), a Devanagari vowel sign (U+0947), a variation
  // selector (U+FE0F) are marks: word characters in onig; superscript two is a Number.
  EXPECT_EQ(pieces(R"(\w+)", "e\u0301t\u00e9 \u0939\u0948 \u2764\ufe0f x\u00b2"),
            (V{"e\u0301t\u00e9", "\u0939\u0948", "\ufe0f", "x\u00b2"}));
  EXPECT_EQ(pieces(R"(\W+)", "a\u0301, b"), (V{", "}));
  EXPECT_EQ(pieces(R"([\w]+)", "a\u0301b"), (V{"a\u0301b"}));
  EXPECT_EQ(pieces(R"(\b\w)", "ab c\u0301d"), (V{"a", "c"}));
  EXPECT_EQ(pieces(R"(\B\w)", "ab c\u0301"), (V{"b", "\u0301"}));
  // \h: a hexadecimal digit, not horizontal white space.
  EXPECT_EQ(pieces(R"(\h+)", "0xBEEF g\t"), (V{"0", "BEEF"}));
  EXPECT_EQ(pieces(R"(\H+)", "0x1 "), (V{"x", " "}));
  // ^ and $ anchor at every line.
  EXPECT_EQ(pieces(R"(^[a-z]+)", "ab cd\nef"), (V{"ab", "ef"}));
  EXPECT_EQ(pieces(R"([a-z]+$)", "ab cd\nef"), (V{"cd", "ef"}));
  // Onig's word characters, measured against Hugging Face tokenizers 0.23 code point
  // by code point (session 27): alphabetic symbols (circled letters) are in, Numbers
  // other than decimal digits are out, except Latin-1's superscripts and fractions.
  EXPECT_EQ(pieces(R"(\w+)", "\u24b6b \u2460 \u00bd \u2153"), (V{"\u24b6b", "\u00bd"}));
  EXPECT_EQ(pieces(R"(\p{Word}+)", "\u24b6b \u2460"), (V{"\u24b6b"}));
  // POSIX bracket classes (and onig's \p{Alpha}, \p{Punct}, ...) get onig's meanings:
  // alpha is Alphabetic (letter numbers, circled letters; not U+0301), punct takes in
  // symbols (\p{Punct} does not), graph takes in private use and format characters.
  EXPECT_EQ(pieces(R"([[:alpha:]]+)", "\u216bx \u24d0 e\u0301"), (V{"\u216bx", "\u24d0", "e"}));
  EXPECT_EQ(pieces(R"(\p{Alpha}+)", "\u216bx e\u0301"), (V{"\u216bx", "e"}));
  EXPECT_EQ(pieces(R"([[:punct:]]+)", "a+b\u20acc!"), (V{"+", "\u20ac", "!"}));
  EXPECT_EQ(pieces(R"(\p{Punct}+)", "a+b!"), (V{"!"}));
  EXPECT_EQ(pieces(R"([[:graph:]]+)", "a\u00a0b\ue000\u200b c"), (V{"a", "b\ue000\u200b", "c"}));
  EXPECT_EQ(pieces(R"([[:^alpha:]]+)", "ab12 c"), (V{"12 "}));
  EXPECT_EQ(pieces(R"([[:^word:]]+)", "a\u0301, b"), (V{", "}));
  EXPECT_EQ(pieces(R"([x[:^digit:]]+)", "12ab3"), (V{"ab"}));
  EXPECT_EQ(pieces(R"([[:xdigit:][:space:]]+)", "0xBEEF g"), (V{"0", "BEEF "}));
  // A pattern that backtracks catastrophically: an input error naming it, not a crash.
  lol_test::expect_input_error([&] { pieces(R"((a+)+$)", std::string(40, 'a') + "b"); },
                               {"regex (a+)+$: matching failed", "avoid nested quantifiers"});
}

// Empty matches are matches (onig's find_iter, as Hugging Face's Split sees them): with
// Contiguous they separate runs. HF tokenizers 0.23.2 splits "Hello World" on
// (?=[A-Z]) into "Hello ", "World" (lol joined it into one piece, session 27); an empty
// match right after a match does not count ("aa" then the end of "baab").
TEST(PreTokenizer, EmptyMatchesSeparateContiguousRuns) {
  auto pieces = [](const std::string& pattern, const std::string& behavior, bool invert, const std::string& text) {
    const nlohmann::json j = {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", behavior},
                              {"invert", invert}};
    const PreTokenizer pre = PreTokenizer::splits_from_json(j, "t");
    std::vector<std::string_view> out;
    std::deque<std::string> arena;
    pre.split(text, out, arena);
    return std::vector<std::string>(out.begin(), out.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("(?=[A-Z])", "Contiguous", false, "Hello World"), (V{"Hello ", "World"}));
  EXPECT_EQ(pieces("(?=[A-Z])", "Contiguous", true, "Hello World"), (V{"Hello ", "World"}));
  EXPECT_EQ(pieces("(?=[A-Z])", "Isolated", false, "Hello World"), (V{"Hello ", "World"}));
  EXPECT_EQ(pieces("(?=[A-Z])", "Removed", true, "Hello World"), V{}) << "inverted: the text is the match";
  EXPECT_EQ(pieces("a*", "Contiguous", false, "baab"), (V{"b", "aa", "b"}));
  EXPECT_EQ(pieces("a*", "Isolated", false, "baab"), (V{"b", "aa", "b"}));
}

TEST(PreTokenizer, WhitespaceRewrite) {
  const std::string w = R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  EXPECT_EQ(rewrite_for_onig(R"(\s+(?!\S))"), "[" + w + "]+(?![^" + w + "])");
  EXPECT_EQ(rewrite_for_onig(R"([^\s\p{L}])"), "[^" + w + R"(\p{L}])");
  EXPECT_EQ(rewrite_for_onig(R"([]\s])"), "[]" + w + "]");
  EXPECT_EQ(rewrite_for_onig(R"([[:alpha:]]\s)"), R"([\p{Alphabetic}][)" + w + "]");
  EXPECT_EQ(rewrite_for_onig(R"(\\s)"), R"(\\s)");  // an escaped backslash, then 's'
  // The rewritten \s is exactly Unicode White_Space.
  RegexSplitter ws(R"(\s)");
  for (char32_t cp : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                      0x205F, 0x3000, 0x180E, 0x200B, 0xFEFF, 0x1C, 0x41}) {
    std::string s;
    append_utf8(cp, s);
    std::vector<std::string_view> v;
    ws.split("x" + s + "x", v);
    EXPECT_EQ(v.size() == 3, is_unicode_whitespace(cp)) << std::hex << uint32_t(cp);
  }
}

TEST(PreTokenizer, BadPatternNamesWhere) {
  try {
    RegexSplitter r("(unclosed", false, "tokenizer.json: pre_tokenizer.pattern.Regex");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pattern.Regex"), std::string::npos) << e.what();
  }
}

// Inline options take onig's (Ruby syntax) meaning, as Hugging Face compiles them: (?m)
// lets '.' match a newline (PCRE2's (?s); it was PCRE2's line anchors), (?i) is as in
// PCRE2, and (?s), which onig lacks, is refused.
TEST(PreTokenizer, InlineOptionsHaveOnigsMeaning) {
  EXPECT_EQ(rewrite_for_onig("(?m)a.b"), "(?s)a.b");
  EXPECT_EQ(rewrite_for_onig("(?i-m:x.y)(?:z)"), "(?i-s:x.y)(?:z)");
  EXPECT_EQ(rewrite_for_onig(R"(\(?m))"), R"(\(?m))");  // an escaped parenthesis
  RegexSplitter dotall("(?m)a.b");
  EXPECT_EQ(split(dotall, "xa\nby"), (Pieces{"x", "a\nb", "y"}));
  RegexSplitter plain("a.b");
  EXPECT_EQ(split(plain, "xa\nby"), (Pieces{"xa\nby"}));
  try {
    RegexSplitter r("(?s)a.b", false, "tokenizer.json: pre_tokenizer.pattern.Regex");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pattern.Regex: pattern (?s)a.b: inline option (?s"),
              std::string::npos)
        << e.what();
  }
}

TEST(PreTokenizer, LiteralSplit) {
  RegexSplitter r("a.b", /*literal=*/true);
  EXPECT_EQ(split(r, "xa.bya+b"), (Pieces{"x", "a.b", "ya+b"}));
}

// A pattern that can match the empty string (`\b`, `a*`) splits the text without
// losing or repeating any of it: the pieces concatenate to the input. (Found by hand:
// an empty match at the end of the text used to emit the last piece twice, so
// "abc" encoded as "abcc".)
TEST(RegexSplitter, EmptyMatchesNeitherLoseNorRepeatText) {
  {
    RegexSplitter r("a*");
    EXPECT_EQ(split(r, "abc"), (Pieces{"a", "b", "c"}));
    EXPECT_EQ(split(r, "banana split"), (Pieces{"b", "a", "n", "a", "n", "a", " ", "s", "p", "l", "i", "t"}));
  }
  for (const char* pattern : {"\\b", "a*", "(?=o)", "x?"}) {
    RegexSplitter r(pattern);
    for (const std::string text : {"hello world", "abc", "", "o", "ééa"}) {
      std::string joined;
      for (const auto& p : split(r, text)) joined += p;
      EXPECT_EQ(joined, text) << pattern << " on '" << text << "'";
    }
  }
}

}  // namespace
}  // namespace lol::tokenizers::test
