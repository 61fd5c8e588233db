#include "tokenizers/regex_splitter.h"

#include <cstring>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <stdexcept>
#include <vector>

#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state shared by all patterns: match data (one ovector pair is
// enough, only the whole match is used) and a JIT stack larger than the 32 KiB default.
struct MatchScratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  MatchScratch() {
    md = pcre2_match_data_create(1, nullptr);
    mc = pcre2_match_context_create(nullptr);
    js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (!md || !mc) throw std::bad_alloc();
    if (js) pcre2_jit_stack_assign(mc, nullptr, js);
  }
  ~MatchScratch() {
    if (js) pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
};

// A match that fails (not "no match"): PCRE2's match or depth limit on a pattern that
// backtracks catastrophically on this text, e.g. (a+)+$ over "aaaa...b".
std::string match_failure(const std::string& pattern, std::size_t pos, int rc) {
  return "regex " + pattern + ": matching failed at byte " + std::to_string(pos) + ": " + pcre2_message(rc) +
         " (the pattern backtracks too much on this text: avoid nested quantifiers such as (a+)+)";
}

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

// Unicode White_Space (Unicode 15), the meaning of \s in onig and Rust regex.
const char* const kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Onig's (Hugging Face tokenizers 0.23, onig 6.9) Unicode word characters, measured
// code point by code point against it: Alphabetic, Mark, Decimal_Number,
// Connector_Punctuation, and (\w and \b only, from onig's Latin-1 table) the
// superscripts and fractions U+00B2 U+00B3 U+00B9 U+00BC-U+00BE. PCRE2 10.42's \w
// leaves out marks (U+0301, U+FE0F, Devanagari vowel signs) and the alphabetic symbols
// (circled letters U+24B6..), and takes in every Number (U+2460 circled digits).
const char* const kWord = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";
// Onig's \h is a hexadecimal digit (PCRE2's: horizontal white space).
const char* const kHexDigit = R"(0-9A-Fa-f)";

namespace {

// One onig character class by POSIX name (lower case): the members of a bracket
// expression, and the members of its complement when PCRE2 can write them inside a
// class (empty when it cannot).
struct OnigClass {
  const char* name;
  std::string members;
  std::string complement;
};

// Onig's Unicode POSIX classes ([[:name:]], \p{Name}), measured code point by code
// point against Hugging Face tokenizers 0.23 (onig's documentation in doc/RE
// describes alpha, cntrl, graph and punct otherwise). `word` here is the bracket
// class, without \w's Latin-1 extras; \p{Word} is \w, \p{Punct} is \p{P}.
const std::vector<OnigClass>& onig_classes() {
  static const std::vector<OnigClass> table = {
      {"alnum", R"(\p{Alphabetic}\p{Nd})", ""},
      {"alpha", R"(\p{Alphabetic})", R"(\P{Alphabetic})"},
      {"ascii", R"(\x00-\x7F)", R"(\x{80}-\x{10FFFF})"},
      {"blank", R"(\p{Zs}\t)", ""},
      {"cntrl", R"(\p{Cc})", R"(\P{Cc})"},
      {"digit", R"(\p{Nd})", R"(\P{Nd})"},
      // Everything but separators, controls, unassigned and surrogates (private use
      // and format characters included, unlike PCRE2's [:graph:]).
      {"graph", R"(\p{L}\p{M}\p{N}\p{P}\p{S}\p{Cf}\p{Co})", R"(\p{Z}\p{Cc}\p{Cn}\p{Cs})"},
      {"lower", R"(\p{Lowercase})", R"(\P{Lowercase})"},
      {"print", R"(\p{L}\p{M}\p{N}\p{P}\p{S}\p{Cf}\p{Co}\p{Zs})", R"(\p{Zl}\p{Zp}\p{Cc}\p{Cn}\p{Cs})"},
      {"punct", R"(\p{P}\p{S})", R"(\p{L}\p{M}\p{N}\p{Z}\p{C})"},
      {"space", kWhiteSpace, R"(\P{White_Space})"},
      {"upper", R"(\p{Uppercase})", R"(\P{Uppercase})"},
      {"xdigit", kHexDigit, R"(\x00-/:-@G-`g-\x{10FFFF})"},
      {"word", R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc})", ""},
  };
  return table;
}

// The class of onig's POSIX-named property \p{name} (name compared as onig does:
// letter case, spaces, '_' and '-' ignored), or nullptr for another property.
const OnigClass* onig_property(std::string_view name, bool bracket) {
  std::string key;
  for (char ch : name)
    if (ch != ' ' && ch != '_' && ch != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const OnigClass word_property{"word", kWord, ""};
  static const OnigClass punct_property{"punct", R"(\p{P})", R"(\P{P})"};
  if (!bracket && key == "word") return &word_property;
  if (!bracket && key == "punct") return &punct_property;
  for (const auto& c : onig_classes())
    if (key == c.name) return &c;
  return nullptr;
}

// Appends the class `c` (negated when `negate`) at a point of the pattern inside a
// bracket expression (`in_class`) or outside one. Returns false when PCRE2 cannot say
// it there (a negated multi-property class inside a bracket expression).
bool append_class(std::string& out, const OnigClass& c, bool negate, bool in_class) {
  if (!in_class) {
    out += (negate ? "[^" : "[") + c.members + "]";
    return true;
  }
  if (!negate) {
    out += c.members;
    return true;
  }
  if (c.complement.empty()) return false;
  out += c.complement;
  return true;
}

}  // namespace

std::string rewrite_for_onig(std::string_view p) {
  const std::string ws = kWhiteSpace, word = kWord, hex = kHexDigit;
  const std::string w = "[" + word + "]", nw = "[^" + word + "]";
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? ws : "[" + ws + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + ws + "]";
      } else if (e == 'S') {
        out += R"(\P{White_Space})";
      } else if (e == 'w') {
        out += in_class ? word : w;
      } else if (e == 'W' && !in_class) {
        out += nw;
      } else if (e == 'h') {
        out += in_class ? hex : "[" + hex + "]";
      } else if (e == 'H' && !in_class) {
        out += "[^" + hex + "]";
      } else if (e == 'b' && !in_class) {  // word boundary by onig's \w
        out += "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))";
      } else if (e == 'B' && !in_class) {
        out += "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
      } else if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        // \p{Name} / \P{Name} / \p{^Name}: onig's POSIX-named properties.
        const std::size_t close = p.find('}', i + 3);
        if (close == std::string_view::npos) {
          out += c;
          out += e;
        } else {
          std::string_view name = p.substr(i + 3, close - i - 3);
          bool negate = e == 'P';
          if (!name.empty() && name[0] == '^') {
            negate = !negate;
            name.remove_prefix(1);
          }
          const OnigClass* oc = onig_property(name, false);
          if (oc && append_class(out, *oc, negate, in_class)) {
            i = close;
            continue;
          }
          out.append(p.substr(i, close + 1 - i));  // PCRE2's own property (\p{L}, \p{Han}, ...)
          i = close;
          continue;
        }
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '(' && p.substr(i, 2) == "(?") {
      // Inline options, (?imx-imx) or (?imx-imx:...): in onig's Ruby syntax (the one
      // Hugging Face tokenizers compiles with) 'm' lets '.' match a newline, PCRE2's 's';
      // onig has no 's' option (a pattern with it does not compile there).
      std::size_t j = i + 2;
      while (j < p.size() && std::strchr("imxs-", p[j]) && p[j] != '\0') ++j;
      if (j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')')) {
        std::string opts(p.substr(i + 2, j - i - 2));
        if (opts.find('s') != std::string::npos)
          throw InputError("inline option (?" + opts + "...): 's' is not an option of Oniguruma's Ruby syntax, which "
                           "Hugging Face tokenizers uses (its 'm' lets '.' match a newline)");
        for (char& o : opts)
          if (o == 'm') o = 's';
        out += "(?" + opts;
        i = j - 1;
        continue;
      }
    }
    if (!in_class && c == '[' && p.substr(i, 4) == "[[:^") {
      // A bracket expression holding only a negated POSIX class, [[:^name:]]: the
      // complement of any class can be written as [^...].
      const std::size_t end = p.find(":]]", i + 4);
      const OnigClass* oc = end == std::string_view::npos ? nullptr : onig_property(p.substr(i + 4, end - i - 4), true);
      if (oc) {
        append_class(out, *oc, true, false);
        i = end + 2;
        continue;
      }
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const std::size_t end = p.find(":]", i + 2);
      if (end != std::string_view::npos) {  // POSIX class [:name:] or [:^name:]
        std::string_view name = p.substr(i + 2, end - i - 2);
        const bool negate = !name.empty() && name[0] == '^';
        if (negate) name.remove_prefix(1);
        const OnigClass* oc = onig_property(name, true);
        if (!(oc && append_class(out, *oc, negate, true))) out.append(p.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

RegexSplitter::RegexSplitter(std::string pattern, bool literal, const std::string& where)
    : pattern_(std::move(pattern)), literal_(literal) {
  std::string compiled;
  try {
    compiled = literal_ ? pattern_ : rewrite_for_onig(pattern_);
  } catch (const InputError& e) {
    throw InputError(where + ": pattern " + pattern_ + ": " + e.what());
  }
  // Onig's (Ruby syntax) ^ and $ are line anchors: PCRE2's multiline mode.
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  if (literal_) options = PCRE2_UTF | PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                                   options, &err, &err_off, nullptr);
  if (!code) {
    throw InputError(where + ": pattern " + pattern_ + " does not compile: " + pcre2_message(err) +
                     " (at offset " + std::to_string(err_off) + " of the rewritten pattern " +
                     compiled + ")");
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool RegexSplitter::matches_at(std::string_view text, std::size_t pos) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchScratch& s = scratch();
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                             PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, s.md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    throw InputError(match_failure(pattern_, pos, rc));
  return true;
}

template <typename Emit>
void RegexSplitter::for_each_piece(std::string_view text, Emit&& emit) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const std::size_t n = text.size();
  std::size_t pos = 0, last_end = 0, last_match_end = 0;
  bool matched = false;
  while (pos <= n) {
    int rc = PCRE2_ERROR_NOMATCH;
    if (jit_) {
      rc = pcre2_jit_match(code, subject, n, pos, 0, s.md, s.mc);
      // JIT stack exhausted on a pathological input: retry with the interpreter.
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
        rc = pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.md, nullptr);
    } else {
      rc = pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, s.md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw InputError(match_failure(pattern_, pos, rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    const std::size_t b = ov[0], e = ov[1];
    auto step_over = [&] {  // past the character at b
      const int len = utf8_sequence_length(text, b);
      pos = b + std::size_t(len > 0 ? len : 1);
    };
    // As onig's find_iter (Hugging Face's Split): an empty match right where the
    // previous match ended is skipped; other empty matches are matches (they separate
    // the runs of the Contiguous behaviour).
    if (e == b && matched && b == last_match_end) {
      if (b >= n) break;
      step_over();
      continue;
    }
    if (b > last_end) emit(text.substr(last_end, b - last_end), false);
    emit(text.substr(b, e - b), true);
    matched = true;
    last_match_end = last_end = e;
    if (e > b) {
      pos = e;
    } else {
      if (b >= n) break;
      step_over();
    }
  }
  if (last_end < n) emit(text.substr(last_end), false);
}

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  for_each_piece(text, [&](std::string_view piece, bool) {
    if (!piece.empty()) out.push_back(piece);
  });
}

void RegexSplitter::split_flagged(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out) const {
  for_each_piece(text, [&](std::string_view piece, bool match) { out.emplace_back(piece, match); });
}

}  // namespace lol::tokenizers
