#!/usr/bin/env python3
"""Independent reference checker for `lol tokenizer train|encode|decode` (byte-level BPE).

Provenance
----------
Written from docs/tokenizers.md ("Byte-level BPE and pre-tokenizer regexes", "Pipeline
of `encode`", "Training", "Hugging Face files"), docs/text.md ("Input files and
documents", "`lol tokenizer`"), the `--help` of `lol tokenizer train|encode|decode`,
and Hugging Face `tokenizers`' documented semantics (GPT-2 byte<->unicode table,
BpeTrainer tie rule, BPE merge-by-rank), *without* reading src/ or tests/ (other than
tests/reference/).  Python 3 standard library only.

Nothing here shares code with the implementation under test:
  * the GPT-2 and Qwen2 pre-tokenizer regexes are implemented by hand (Python's `re`
    has no \\p{L}/\\p{N}) as the leftmost-first, greedy-with-backtracking scanners the
    patterns denote, with \\s = Unicode White_Space, \\p{L}/\\p{N} from `unicodedata`
    general categories (Python 3.11's tables are Unicode 14.0, the version of Debian's
    PCRE2 10.42 that lol uses), and Qwen2's (?i:...) with Unicode case folding
    (`'S`, `'ſ`);
  * a *naive* BPE trainer: all pairs are recounted from scratch before every merge;
    best = highest count, ties -> smaller (left id, right id); stop when the vocabulary
    holds --vocab-size tokens or the best count < --min-frequency (or no pair is left);
    a merge whose string already exists would reuse that id (never reached: plain merges
    cannot produce a string twice, and lol refuses a special token spelled like a learned
    byte-level token, docs/robustness.md -- checked under "errors");
  * vocabulary layout: specials (ids 0..k-1), the 256 byte tokens in the order of their
    GPT-2-mapped code points, then the merges;
  * special tokens are cut out of the training text (leftmost-longest) before
    pre-tokenization; documents: a .txt file is one document (--doc-split file, even when
    lol reads it in ~1 MiB parts), or its non-blank lines (line), or its runs of non-blank
    lines joined with \n (blank-line), "blank" read as empty or spaces/tabs only; a .jsonl
    line is one document (--text-field); --label-field with --max-bytes-per-label skips
    a document whose label already has >= N text bytes;
  * an encoder built from the trained tokenizer.json: added tokens cut out leftmost-
    longest, the regex, then per piece BPE applying the lowest-rank adjacent pair
    (leftmost on ties) until none applies; a decoder mapping tokens back to bytes (an
    added token decodes as its text, or as bytes when spelled only in mapped characters).

Checks (one line per group, then a summary; exit 1 on any disagreement):
  train   tokenizer.json's model.vocab (ids and order) and model.merges equal the
          reference exactly, for: a synthetic mixed-script corpus (ASCII, accented
          Latin, Greek, Cyrillic, CJK, kana, emoji/ZWJ/flags, non-ASCII digits, combining
          marks, runs of spaces/tabs/newlines/CRLF/NBSP/U+3000, contractions incl. upper
          case and long s, embedded and overlapping special tokens "<s>"/"<s>x") over two
          .txt files (the first without a final newline) and a .jsonl, with --pattern gpt2
          and qwen2; min-frequency stops (5, 1); a slice of shared/data/corpora
          (en_devil.txt + 2 documents per language of multilingual_valid.jsonl) with gpt2
          and qwen2; a custom --regex whose gaps become pieces; --doc-split line,
          blank-line and file; --text-field/--label-field/--max-bytes-per-label; two
          ~1.6 MB .txt files that lol reads in parts (U+00A0/U+0085/U+3000 before every
          newline; a special token "<a>\n<b>" around every newline), whose parts must not
          change what is learned.  Also added_tokens (ids, special, normalized false), the
          pre-tokenizer/decoder layout of docs/tokenizers.md, tokenizer_config roles.
  encode  `lol tokenizer encode --jsonl` ids of ~4,000 texts on 6 tokenizers (training-
          like text, random soup with characters never seen in training -- Hangul, Arabic,
          Devanagari, Thai, astral letters, NUL, U+0085, U+180E, ZW* -- whitespace and
          contraction edge cases, special tokens glued to text) equal the reference
          encoder's; --text/--json, --add-special-tokens (adds nothing here), --file and
          stdin on a sample.
  decode  one `lol tokenizer decode` (stdin) per tokenizer of all those ids followed by 40
          random id sequences: the output must be the texts (decode(encode(s)) == s) then
          the reference's raw bytes (invalid UTF-8 kept); --ids with a JSON array.
  errors  invalid UTF-8 in encode/train input and an out-of-range id are exit-2 errors
          naming the offset / id; a special spelled like a learned token is refused.

Takes 1-2.5 minutes on the 2-core machine (reference training ~40 s when idle; lol
costs ~2.5 s per process, mostly loading LibTorch, so runs are batched and run 2 at a
time).

Usage
-----
    python3 tests/reference/tokenizer_reference.py check --lol build/lol --work /tmp/tokref

The binary is copied into --work first (the build tree may be rebuilt during the run).
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from collections import Counter

# ---------------------------------------------------------------------------
# GPT-2 byte <-> unicode mapping
# ---------------------------------------------------------------------------


def _bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE2CHAR = _bytes_to_unicode()
CHAR2BYTE = {c: b for b, c in BYTE2CHAR.items()}
assert len(CHAR2BYTE) == 256 and BYTE2CHAR[32] == "\u0120" and BYTE2CHAR[10] == "\u010a"


def bl(s):
    """Text -> byte-level spelling."""
    return "".join(BYTE2CHAR[b] for b in s.encode("utf-8"))


# ---------------------------------------------------------------------------
# Character classes (Unicode 14 via unicodedata)
# ---------------------------------------------------------------------------

WHITE_SPACE = set([chr(c) for c in range(0x09, 0x0E)] + [" ", "\x85", "\xa0", "\u1680"]
                  + [chr(c) for c in range(0x2000, 0x200B)]
                  + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"])

_CLS = {}


def cls(c):
    """'W' White_Space, 'L' letter, 'N' number, 'O' anything else."""
    k = _CLS.get(c)
    if k is None:
        if c in WHITE_SPACE:
            k = "W"
        else:
            cat = unicodedata.category(c)
            k = "L" if cat[0] == "L" else ("N" if cat[0] == "N" else "O")
        _CLS[c] = k
    return k


GPT2_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _ws_tail(t, i, n, out):
    """`\\s+(?!\\S)|\\s+` at a whitespace position i; returns the new position."""
    j = i
    while j < n and cls(t[j]) == "W":
        j += 1
    if j == n:
        out.append(t[i:j])
        return j
    if j - i >= 2:
        out.append(t[i:j - 1])
        return j - 1
    out.append(t[i:j])
    return j


def gpt2_split(t):
    """'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    out = []
    i, n = 0, len(t)
    while i < n:
        c = t[i]
        if c == "'":
            hit = None
            for suf in GPT2_CONTRACTIONS:
                if t.startswith(suf, i + 1):
                    hit = suf
                    break
            if hit is not None:
                out.append(t[i:i + 1 + len(hit)])
                i += 1 + len(hit)
                continue
        k = cls(c)
        start = None
        if c == " " and i + 1 < n and cls(t[i + 1]) != "W":
            start, k = i + 1, cls(t[i + 1])
        elif k != "W":
            start = i
        if start is not None:
            j = start + 1
            while j < n and cls(t[j]) == k:
                j += 1
            out.append(t[i:j])
            i = j
            continue
        i = _ws_tail(t, i, n, out)
    return out


def _ci_eq(c, x):
    """Unicode case-insensitive equality of one char with an ASCII lower-case letter."""
    return c == x or c == x.upper() or (x == "s" and c == "\u017f")


def qwen2_split(t):
    """(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"""
    out = []
    i, n = 0, len(t)
    while i < n:
        c = t[i]
        if c == "'":
            hit = 0
            for suf in GPT2_CONTRACTIONS:
                if i + 1 + len(suf) <= n and all(_ci_eq(t[i + 1 + q], suf[q]) for q in range(len(suf))):
                    hit = 1 + len(suf)
                    break
            if hit:
                out.append(t[i:i + hit])
                i += hit
                continue
        k = cls(c)
        # [^\r\n\p{L}\p{N}]?\p{L}+
        if c not in "\r\n" and k != "L" and k != "N" and i + 1 < n and cls(t[i + 1]) == "L":
            j = i + 2
            while j < n and cls(t[j]) == "L":
                j += 1
            out.append(t[i:j])
            i = j
            continue
        if k == "L":
            j = i + 1
            while j < n and cls(t[j]) == "L":
                j += 1
            out.append(t[i:j])
            i = j
            continue
        if k == "N":  # \p{N}
            out.append(c)
            i += 1
            continue
        # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        start = None
        if c == " " and i + 1 < n and cls(t[i + 1]) == "O":
            start = i + 1
        elif k == "O":
            start = i
        if start is not None:
            j = start + 1
            while j < n and cls(t[j]) == "O":
                j += 1
            while j < n and t[j] in "\r\n":
                j += 1
            out.append(t[i:j])
            i = j
            continue
        # c is White_Space: \s*[\r\n]+ | \s+(?!\S) | \s+
        j = i
        last_crlf = -1
        while j < n and cls(t[j]) == "W":
            if t[j] in "\r\n":
                last_crlf = j
            j += 1
        if last_crlf >= 0:
            out.append(t[i:last_crlf + 1])
            i = last_crlf + 1
            continue
        i = _ws_tail(t, i, n, out)
    return out


def make_re_split(pattern):
    """Split(pattern, Isolated) for a pattern on which Python's `re` and PCRE2 agree:
    every match and every gap between matches is a piece."""
    rx = re.compile(pattern)

    def split(t):
        out, pos = [], 0
        for m in rx.finditer(t):
            if m.start() == m.end():
                continue
            if m.start() > pos:
                out.append(t[pos:m.start()])
            out.append(m.group(0))
            pos = m.end()
        if pos < len(t):
            out.append(t[pos:])
        return out
    return split


def special_splitter(specials):
    """text -> [(is_special, piece)], leftmost-longest exact matches."""
    if not specials:
        return lambda t: [(False, t)] if t else []
    rx = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))

    def split(t):
        out, pos = [], 0
        for m in rx.finditer(t):
            if m.start() > pos:
                out.append((False, t[pos:m.start()]))
            out.append((True, m.group(0)))
            pos = m.end()
        if pos < len(t):
            out.append((False, t[pos:]))
        return out
    return split


# ---------------------------------------------------------------------------
# Naive BPE trainer
# ---------------------------------------------------------------------------


def count_pretokens(docs, specials, splitter):
    cut = special_splitter(specials)
    counts = Counter()
    for d in docs:
        for is_sp, piece in cut(d):
            if not is_sp:
                counts.update(splitter(piece))
    return counts


def train_naive(counts, specials, vocab_size, min_frequency):
    """Returns (id -> token list, merges [(left, right)], reused merge indices)."""
    id2tok, tok2id = [], {}

    def add(s):
        if s not in tok2id:
            tok2id[s] = len(id2tok)
            id2tok.append(s)
        return tok2id[s]
    for s in specials:
        add(s)
    for ch in sorted(CHAR2BYTE):
        add(ch)
    words = []
    for w, f in counts.items():
        words.append(([tok2id[BYTE2CHAR[b]] for b in w.encode("utf-8")], f))
    merges, reused = [], []
    words = [wf for wf in words if len(wf[0]) > 1]  # single-token words have no pairs
    while len(id2tok) < vocab_size:
        pc = {}  # recounted from scratch before every merge
        get = pc.get
        for w, f in words:
            for p in zip(w, w[1:]):
                pc[p] = get(p, 0) + f
        if not pc:
            break
        best_count = max(pc.values())
        if best_count < min_frequency:
            break
        a, b = min(p for p, c in pc.items() if c == best_count)
        new = id2tok[a] + id2tok[b]
        if new in tok2id:
            reused.append(len(merges))
        nid = add(new)
        merges.append((id2tok[a], id2tok[b]))
        for w, f in words:
            if a not in w or b not in w:
                continue
            k = 0
            while k < len(w) - 1:  # left to right, non-overlapping
                if w[k] == a and w[k + 1] == b:
                    w[k:k + 2] = [nid]
                k += 1
        words = [wf for wf in words if len(wf[0]) > 1]
    return id2tok, merges, reused


# ---------------------------------------------------------------------------
# Reference encoder / decoder built from a tokenizer.json
# ---------------------------------------------------------------------------


class RefTokenizer:
    def __init__(self, tj, splitter):
        self.vocab = dict(tj["model"]["vocab"])
        self.id2tok = {i: s for s, i in self.vocab.items()}
        self.ranks = {}
        for r, m in enumerate(tj["model"]["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks.setdefault((a, b), r)
        self.added = {}
        for at in tj.get("added_tokens", []):
            self.added[at["content"]] = at["id"]
            self.id2tok[at["id"]] = at["content"]
        self.added_ids = set(self.added.values())
        self.cut = special_splitter(list(self.added))
        self.split = splitter
        self.cache = {}

    def bpe(self, piece):
        r = self.cache.get(piece)
        if r is not None:
            return r
        syms = [BYTE2CHAR[b] for b in piece.encode("utf-8")]
        ranks = self.ranks
        while len(syms) > 1:
            best, bi = None, -1
            for k in range(len(syms) - 1):
                rk = ranks.get((syms[k], syms[k + 1]))
                if rk is not None and (best is None or rk < best):
                    best, bi = rk, k
            if best is None:
                break
            syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
        ids = [self.vocab[s] for s in syms]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        ids = []
        for is_sp, piece in self.cut(text):
            if is_sp:
                ids.append(self.added[piece])
            else:
                for p in self.split(piece):
                    ids.extend(self.bpe(p))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            s = self.id2tok[i]
            if i in self.added_ids:
                # ByteLevel decoder: an added token made only of mapped characters
                # decodes as those bytes, any other as its text (docs/tokenizers.md)
                if all(c in CHAR2BYTE for c in s):
                    out.extend(CHAR2BYTE[c] for c in s)
                else:
                    out.extend(s.encode("utf-8"))
            else:
                out.extend(CHAR2BYTE[c] for c in s)
        return bytes(out)


# ---------------------------------------------------------------------------
# Random text
# ---------------------------------------------------------------------------

SCRIPTS = [
    ("lat", "abcdefghijklmnopqrstuvwxyz", 30),
    ("LAT", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 6),
    ("acc", "abcdeéèêëàâäôöûüçñßœæøåıſ", 10),
    ("grk", "αβγδεζηθικλμνξοπρσςτυφχψωάέήίόύώΑΒΓΔΘΛΞΠΣΦΨΩ", 8),
    ("cyr", "абвгдежзийклмнопрстуфхцчшщыьэюяАБВГД", 6),
    ("cjk", "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去", 8),
    ("kana", "あいうえおかきくけこさしすせそたちつてとアイウエオカキクケコー", 5),
]
DIGITS = ["0123456789", "0123456789", "٠١٢٣٤٥٦٧٨٩", "²³¹½¼", "①②③④", "ⅠⅡⅢⅫ", "０１２３４"]
PUNCT = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~' + "«»—–…‘’“”¡¿·•€£¥©®°±×÷"
EMOJI = ["😀", "😂", "🎉", "👍", "👍🏽", "❤️", "🚀", "🌍", "👩‍💻", "🇫🇷", "✨", "🙂"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "\u0301", "o\u0302\u0323"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'ſ", "'x", "'"]
SEPS = ([" "] * 60 + ["  ", "   ", "\n", "\n", "\n\n", "\t", " \t", "\r\n", ", ", ". ", "\n  ",
                      " \n", "\u00a0", "\u3000", "", "", "\n\n\n", "    "])
UNSEEN = ("한국어글자" "مرحبا" "नमस्ते" "สวัสดี" "שלום" "∑∫√∞≈" "─│┌" "\ue000\uf8ff"
          "\u200b\u200c\u200d\ufeff\u180e\u0085\u2028\u2029\x0b\x0c\x7f\x1f\u00ad\ufe0f"
          "𝐀𝐁𝐂𠀀𠀁𐌰𐌱" "ǅǈ" "ʰʲ" "〇" "\u2160" "\u0660" "\u00b2" "\x00")


def make_word(rnd):
    names = [s[0] for s in SCRIPTS]
    weights = [s[2] for s in SCRIPTS]
    name = rnd.choices(names, weights)[0]
    alpha = dict((s[0], s[1]) for s in SCRIPTS)[name]
    hi = 4 if name in ("cjk", "kana") else 8
    return "".join(rnd.choice(alpha) for _ in range(rnd.randint(1, hi)))


class TextGen:
    def __init__(self, seed, n_lex=600, specials=(), names=()):
        self.rnd = random.Random(seed)
        rnd = self.rnd
        self.lex = [make_word(rnd) for _ in range(n_lex)]
        for k, w in enumerate(names):  # frequent words
            self.lex.insert(2 + 2 * k, w)
        self.cum = []
        acc = 0.0
        for r in range(len(self.lex)):
            acc += 1.0 / (r + 1) ** 1.1
            self.cum.append(acc)
        self.specials = list(specials)

    def token(self):
        rnd = self.rnd
        r = rnd.random()
        if r < 0.70:
            w = rnd.choices(self.lex, cum_weights=self.cum)[0]
            if rnd.random() < 0.05:
                w = w.capitalize()
            if rnd.random() < 0.06:
                w += rnd.choice(CONTRACTIONS)
            return w
        if r < 0.78:
            d = rnd.choice(DIGITS)
            return "".join(rnd.choice(d) for _ in range(rnd.randint(1, 6)))
        if r < 0.86:
            return "".join(rnd.choice(PUNCT) for _ in range(rnd.randint(1, 3)))
        if r < 0.89:
            return "".join(rnd.choice(EMOJI) for _ in range(rnd.randint(1, 2)))
        if r < 0.91:
            return rnd.choice(COMBINING) + rnd.choice(self.lex)
        if r < 0.925 and self.specials:
            return rnd.choice(self.specials)
        return rnd.choice(CONTRACTIONS)

    def text(self, n_tokens):
        rnd = self.rnd
        parts = []
        for _ in range(n_tokens):
            parts.append(self.token())
            parts.append(rnd.choice(SEPS))
        return "".join(parts)

    def soup(self, n):
        rnd = self.rnd
        pool = ("abcXYZ éß αβ жя 的是 あア 0123 ٣ ² ① Ⅻ !?.,'\"-_ \t\n\r" + UNSEEN
                + "".join(EMOJI) + "\u0301\u0308")
        out = []
        for _ in range(n):
            x = rnd.random()
            if x < 0.15:
                out.append(rnd.choice(CONTRACTIONS))
            elif x < 0.22 and self.specials:
                out.append(rnd.choice(self.specials))
            elif x < 0.30:
                out.append(rnd.choice(self.lex))
            else:
                out.append(rnd.choice(pool))
        return "".join(out)


EDGE_CASES = [
    "", " ", "  ", "   ", "\n", "\n\n", " \n", "\n ", "\t", "\r\n", "\r\n\r\n", "a", " a", "a ", "a  ",
    "  a", "a  b", "a \tb", "a\n\n\nb", "a\n \nb", "Hello!!!\n\nWorld", "$hello", "12345", " 123 45",
    "DON'T", "don't", "I'm", "we'LL", "it'ſ", "it'S", "'s", "''s", " 's", "x's'", "'RE'Ve'M'D",
    "<|endoftext|>", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "a<|endoftext|>b",
    "<s>", "<s>x", "<s>xx", "<s><s>", "<<s>>", "<s> x", "</s>", "<|endoftext", "endoftext|>",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n", "<|文|>", "<|文", "文|>",
    "\u00a0\n", "\u00a0\nx", "x\u00a0\ny", "\u3000a", "a\u0301", "\u0301", "\t\t", "   \n\n  x",
    "👩‍💻", "🇫🇷🇫🇷", "\u0085a", "a\u0085", "\u180ea", "x\u200by", "\x00", "a\x00b", "１２３", "²³",
    "ⅫⅫ", "٣٤٥", "éééé", "ſſ", "ǅungla", "𝐀𝐁𝐂", "𠀀", "\ue000", "x\u2028y", "\x0b\x0c",
    "word's  \n\n   next", "  leading and trailing  ", "\n\n\nx\n\n\n",
    "'Sam", "'ſam", "DON'Tcare", "we'LLbe", "'REx", "'Dd", "'sam", "'tis", "O'Neil", "l'été", "'vex",
    "'ſ'ſ", "x'Ve'LLa", "it'ſam x'ſam 'ſama", "'Ma\u017f", "'\u212a", "'mm'", " 'll", "''", "'\n's",
]


# ---------------------------------------------------------------------------
# Running lol
# ---------------------------------------------------------------------------


def run(cmd, inp=None, timeout=120):
    p = subprocess.run(cmd, input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


class Report:
    def __init__(self):
        self.fails = []
        self.groups = {}

    def check(self, group, ok, msg):
        g = self.groups.setdefault(group, [0, 0])
        g[0 if ok else 1] += 1
        if not ok:
            self.fails.append((group, msg))
            if sum(1 for f in self.fails if f[0] == group) <= 12:
                print("  DISAGREE [%s] %s" % (group, msg))
        return ok


def first_diff(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return min(len(a), len(b)) if len(a) != len(b) else -1


def write_jsonl(path, recs, ensure_ascii=False):
    with open(path, "w", encoding="utf-8", newline="") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=ensure_ascii) + "\n")


def write_text(path, s):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(s)


def docs_of(path, doc_split="file", text_field="text", label_field=None, max_bytes=0, label_bytes=None):
    if path.endswith(".jsonl"):
        out = []
        with open(path, encoding="utf-8", newline="") as f:
            for line in f.read().split("\n"):
                if not line.strip():
                    continue
                rec = json.loads(line)
                t = rec[text_field]
                if label_field and max_bytes:
                    lab = str(rec[label_field])
                    if label_bytes.get(lab, 0) >= max_bytes:
                        continue
                    label_bytes[lab] = label_bytes.get(lab, 0) + len(t.encode("utf-8"))
                out.append(t)
        return out
    with open(path, encoding="utf-8", newline="") as f:
        s = f.read()
    if doc_split == "file":
        return [s]
    lines = s.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # blank: empty or only spaces/tabs (docs/text.md says "non-blank lines"; lol 2026-12 drops
    # whitespace-only lines in both modes, which is the reading taken here)
    if doc_split == "line":
        return [ln for ln in lines if ln.strip(" \t") != ""]
    docs, cur = [], []
    for ln in lines:
        if ln.strip(" \t") == "":
            if cur:
                docs.append("\n".join(cur))
            cur = []
        else:
            cur.append(ln)
    if cur:
        docs.append("\n".join(cur))
    return docs


SPLITTERS = {"gpt2": gpt2_split, "qwen2": qwen2_split}


class Case:
    def __init__(self, name, files, specials=("<|endoftext|>",), vocab_size=600, min_frequency=2,
                 pattern="gpt2", regex=None, doc_split=None, text_field=None, label_field=None,
                 max_bytes=0, encode_tests=None, eos=None, bos=None, pad=None, note=""):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.specials = list(specials)
        self.tj = None

    def splitter(self):
        return make_re_split(self.regex) if self.regex else SPLITTERS[self.pattern]

    def train_cmd(self, lol, work):
        self.out = os.path.join(work, "tok_" + self.name)
        shutil.rmtree(self.out, ignore_errors=True)
        cmd = [lol, "tokenizer", "train", "--in"] + self.files + [
            "--vocab-size", str(self.vocab_size), "--out", self.out, "--no-progress",
            "--min-frequency", str(self.min_frequency), "--special"] + self.specials
        cmd += ["--regex", self.regex] if self.regex else ["--pattern", self.pattern]
        if self.doc_split:
            cmd += ["--doc-split", self.doc_split]
        if self.text_field:
            cmd += ["--text-field", self.text_field]
        if self.label_field:
            cmd += ["--label-field", self.label_field, "--max-bytes-per-label", str(self.max_bytes)]
        for flag, v in (("--eos", self.eos), ("--bos", self.bos), ("--pad", self.pad)):
            if v:
                cmd += [flag, v]
        return cmd

    def reference(self):
        docs, label_bytes = [], {}
        for p in self.files:
            docs += docs_of(p, self.doc_split or "file", self.text_field or "text", self.label_field,
                            self.max_bytes, label_bytes)
        self.counts = count_pretokens(docs, self.specials, self.splitter())
        self.id2tok, self.merges, self.reused = train_naive(
            self.counts, self.specials, self.vocab_size, self.min_frequency)


def compare_training(case, res, rep):
    rc, so, se = res
    if not rep.check("train", rc == 0, "%s: lol tokenizer train rc=%d: %s" % (case.name, rc, se.strip()[-400:])):
        return
    with open(os.path.join(case.out, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj.get("model", {})
    lv = list(model.get("vocab", {}).items())
    mine = [(s, i) for i, s in enumerate(case.id2tok)]
    # a special that is also a merge result appears once in the vocabulary, at its id
    mine_d = {}
    for s, i in mine:
        mine_d.setdefault(s, i)
    mine = list(mine_d.items())
    lm = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    k = first_diff(lv, mine)
    rep.check("train", lv == mine, "%s: vocab differs (lol %d entries, ref %d) first at index %d: lol %r ref %r"
              % (case.name, len(lv), len(mine), k, lv[k] if 0 <= k < len(lv) else None,
                 mine[k] if 0 <= k < len(mine) else None))
    k = first_diff(lm, case.merges)
    rep.check("train", lm == case.merges, "%s: merges differ (lol %d, ref %d) first at merge %d: lol %r ref %r"
              % (case.name, len(lm), len(case.merges), k, lm[k] if 0 <= k < len(lm) else None,
                 case.merges[k] if 0 <= k < len(case.merges) else None))
    exp_at = [(i, s, True, False) for i, s in enumerate(case.specials)]
    got_at = [(a.get("id"), a.get("content"), a.get("special"), a.get("normalized"))
              for a in tj.get("added_tokens", [])]
    rep.check("train", got_at == exp_at, "%s: added_tokens %r, expected %r" % (case.name, got_at, exp_at))
    pt = tj.get("pre_tokenizer") or {}
    if case.regex or case.pattern != "gpt2":
        ok = (pt.get("type") == "Sequence" and len(pt.get("pretokenizers", [])) == 2
              and pt["pretokenizers"][0].get("type") == "Split"
              and pt["pretokenizers"][0].get("behavior") == "Isolated"
              and pt["pretokenizers"][1].get("type") == "ByteLevel"
              and pt["pretokenizers"][1].get("use_regex") is False)
    else:
        ok = pt.get("type") == "ByteLevel" and pt.get("use_regex") is True and pt.get("add_prefix_space") is False
    rep.check("train", ok, "%s: pre_tokenizer %s" % (case.name, json.dumps(pt)[:300]))
    rep.check("train", (tj.get("decoder") or {}).get("type") == "ByteLevel" and model.get("type") == "BPE",
              "%s: decoder/model type %r %r" % (case.name, tj.get("decoder"), model.get("type")))
    try:
        with open(os.path.join(case.out, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        eos = case.eos or ("<|endoftext|>" if "<|endoftext|>" in case.specials else None)
        got = (cfg.get("eos_token"), cfg.get("bos_token"), cfg.get("pad_token"))
        rep.check("train", got == (eos, case.bos, case.pad),
                  "%s: tokenizer_config roles %r expected %r" % (case.name, got, (eos, case.bos, case.pad)))
    except (OSError, ValueError) as e:
        rep.check("train", False, "%s: tokenizer_config.json: %s" % (case.name, e))
    case.tj = tj


def encode_jobs(lol, work, case, rnd):
    """Prepare the encode and decode runs of one tokenizer; returns [(key, cmd, stdin)]."""
    case.ref = RefTokenizer(case.tj, case.splitter())
    path = os.path.join(work, "enc_%s.jsonl" % case.name)
    write_jsonl(path, [{"text": t} for t in case.encode_tests], ensure_ascii=rnd.random() < 0.5)
    return [("enc", [lol, "tokenizer", "encode", "--tokenizer", case.out, "--jsonl", path], None)]


def decode_job(lol, case, lol_ids, rnd):
    """One decode of: every round-trip text's ids, then random id sequences.  The ByteLevel
    decoder is concatenative, so the output must be the texts, then the reference's bytes."""
    ref = case.ref
    # added tokens spelled only in mapped characters decode as bytes (HF): no round trip
    mapped = [s for s in case.specials if all(c in CHAR2BYTE for c in s) and bl(s) != s]
    ids, expect, segs = [], bytearray(), []
    for t, got in zip(case.encode_tests, lol_ids):
        if got is None or any(m in t for m in mapped):
            continue
        ids += got
        expect += t.encode("utf-8")
        segs.append((len(expect), "decode(encode(%r))" % t[:60]))
    n_ids = max(ref.id2tok) + 1
    for _ in range(40):
        r = [rnd.randrange(n_ids) for _ in range(rnd.randint(1, 10))]
        if rnd.random() < 0.4:
            r[rnd.randrange(len(r))] = rnd.randrange(len(case.specials))
        ids += r
        expect += ref.decode(r)
        segs.append((len(expect), "decode(%r)" % r))
    case.dec_expect, case.dec_segs = bytes(expect), segs
    return [case.out, ids]


def run_parallel(jobs, workers=2):
    """jobs: [(key, cmd, stdin)] -> {key: (rc, stdout, stderr)}"""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {k: ex.submit(run, cmd, inp, 600) for k, cmd, inp in jobs}
        return {k: f.result() for k, f in futs.items()}


def check_encodings(case, res, rep):
    rc, so, se = res
    texts = case.encode_tests
    if not rep.check("encode", rc == 0, "%s: encode --jsonl rc=%d %s" % (case.name, rc, se[-300:])):
        return [None] * len(texts)
    lines = so.decode("utf-8").splitlines()
    rep.check("encode", len(lines) == len(texts), "%s: %d output lines for %d records"
              % (case.name, len(lines), len(texts)))
    bad, out = 0, []
    for t, line in zip(texts, lines):
        got = json.loads(line)
        out.append(got)
        exp = case.ref.encode(t)
        if got != exp:
            bad += 1
            if bad <= 4:
                k = first_diff(got, exp)
                rep.check("encode", False, "%s: %r: lol %s ref %s (first diff at id %d; ref pieces %r)"
                          % (case.name, t[:80], got[max(0, k - 3):k + 5], exp[max(0, k - 3):k + 5], k,
                             case.ref.split(t)[:12]))
    rep.check("encode", bad == 0, "%s: %d of %d texts encode differently" % (case.name, bad, len(texts)))
    return out + [None] * (len(texts) - len(out))


def check_decode(case, res, rep):
    rc, so, se = res
    if not rep.check("decode", rc == 0, "%s: decode rc=%d %s" % (case.name, rc, se[-300:])):
        return
    exp = case.dec_expect
    if so == exp:
        rep.check("decode", True, "")
        return
    k = first_diff(so, exp)
    where = next((d for end, d in case.dec_segs if end > k), "past the end")
    rep.check("decode", False, "%s: decode output differs at byte %d (in %s): lol %r ref %r"
              % (case.name, k, where, so[max(0, k - 10):k + 20], exp[max(0, k - 10):k + 20]))


def route_checks(lol, work, case, rep, rnd):
    """--text/--json, --add-special-tokens, --file, stdin; decode from stdin."""
    ref = case.ref
    t1 = "<s>x y 's  it'S\u00a0ok <|im_start|>文字\n\n  end  "
    t2 = rnd.choice([t for t in case.encode_tests if "\x00" not in t and len(t) > 20])
    t3 = rnd.choice(case.encode_tests) + "\x00\r\n" + rnd.choice(case.encode_tests)
    fp = os.path.join(work, "route_%s.txt" % case.name)
    write_text(fp, t3)
    ids = [rnd.randrange(max(ref.id2tok) + 1) for _ in range(30)]
    jobs = [("text", [lol, "tokenizer", "encode", "--tokenizer", case.out, "--text", t1, "--json"], None),
            ("text_add", [lol, "tokenizer", "encode", "--tokenizer", case.out, "--text", t2, "--json",
                          "--add-special-tokens"], None),
            ("file", [lol, "tokenizer", "encode", "--tokenizer", case.out, "--file", fp, "--json"], None),
            ("stdin", [lol, "tokenizer", "encode", "--tokenizer", os.path.join(case.out, "tokenizer.json"),
                       "--json"], t3.encode("utf-8")),
            ("dec_ids", [lol, "tokenizer", "decode", "--tokenizer", case.out, "--ids", json.dumps(ids)], None)]
    res = run_parallel(jobs)
    for key, t in (("text", t1), ("text_add", t2), ("file", t3), ("stdin", t3)):
        rc, so, se = res[key]
        try:
            got = json.loads(so.decode("utf-8"))
        except ValueError:
            got = so[:200]
        exp = ref.encode(t)
        rep.check("encode", rc == 0 and got == exp, "%s: encode via %s of %r: rc=%d lol %r ref %r"
                  % (case.name, key, t[:60], rc, got if not isinstance(got, list) else got[:20], exp[:20]))
    rc, so, se = res["dec_ids"]
    rep.check("decode", rc == 0 and so == ref.decode(ids), "%s: decode --ids %r: lol %r ref %r"
              % (case.name, ids, so[:100], ref.decode(ids)[:100]))


def encode_texts(seed, specials, gen, n_like=200, n_soup=150, extra=()):
    rnd = random.Random(seed)
    texts = list(EDGE_CASES)
    for _ in range(n_like):
        texts.append(gen.text(rnd.randint(0, 40)))
    for _ in range(n_soup):
        texts.append(gen.soup(rnd.randint(0, 30)))
    texts += list(extra)
    for x in ("s", "S", "\u017f", "t", "T", "re", "RE", "rE", "ve", "VE", "m", "M", "ll", "LL", "lL", "d", "D"):
        # a contraction glued to a frequent word: the contraction alternative must win
        texts.append("'" + x + gen.lex[rnd.randrange(8)] + " it'" + x + gen.lex[rnd.randrange(30)])
    for w in gen.lex[:150]:
        # frequent words that start like a contraction, behind an apostrophe, in other cases:
        # (?i:'s|...) must cut "'S|am", "'ſ|am", "'LL|ama" (Qwen2) where "'Sam" would merge
        for x in GPT2_CONTRACTIONS:
            if w.lower().startswith(x) and len(w) > len(x):
                rest = w[len(x):]
                texts.append("'%s%s '%s%s '%s%s x'%s" % (x, rest, x.upper(), rest, x.title(), rest, w))
                if x == "s":
                    texts.append("'\u017f%s it'\u017f%s" % (rest, rest))
    for _ in range(40):  # special tokens glued onto / inside other text
        a, b = rnd.choice(texts), rnd.choice(texts)
        texts.append(a[-rnd.randint(0, 10):] + rnd.choice(list(specials) + [" "]) + b[:rnd.randint(0, 10)])
    return texts


def error_checks(lol, work, tok_dir, rep):
    p = os.path.join(work, "bad_utf8.txt")
    with open(p, "wb") as f:
        f.write("héllo wörld\n".encode() + b"ab\xc3(cd")
    off = len("héllo wörld\n".encode()) + 2
    res = run_parallel([
        ("enc", [lol, "tokenizer", "encode", "--tokenizer", tok_dir, "--file", p], None),
        ("train", [lol, "tokenizer", "train", "--in", p, "--out", os.path.join(work, "tok_bad"), "--no-progress"],
         None),
        ("dec", [lol, "tokenizer", "decode", "--tokenizer", tok_dir, "--ids", "1 2 999999"], None),
        ("spelled", [lol, "tokenizer", "train", "--in", os.path.join(work, "devil_slice.txt"), "--out",
                     os.path.join(work, "tok_spelled"), "--no-progress", "--special", "<|endoftext|>",
                     "\u0120the"], None)])
    rc, so, se = res["enc"]
    rep.check("errors", rc == 2 and ("byte offset %d" % off) in se and "0xc3" in se.lower(),
              "encode of invalid UTF-8 (offset %d): rc=%d %s" % (off, rc, se.strip()[-300:]))
    rc, so, se = res["train"]
    rep.check("errors", rc == 2 and ("offset %d" % off) in se and "bad_utf8.txt" in se,
              "train on invalid UTF-8 (offset %d): rc=%d %s" % (off, rc, se.strip()[-300:]))
    rc, so, se = res["dec"]
    rep.check("errors", rc == 2 and "999999" in se and "position 2" in se,
              "decode of id 999999 at position 2: rc=%d %s" % (rc, se.strip()[-300:]))
    # a special spelled like a learned byte-level token (here " the", frequent in the text) is refused
    # (docs/robustness.md); pure merges never produce a string twice, so the "a merge whose string
    # already exists reuses that id" rule of docs/tokenizers.md is never reached
    rc, so, se = res["spelled"]
    rep.check("errors", rc == 2 and "\u0120the" in se, "special token '\u0120the' accepted: rc=%d %s"
              % (rc, se.strip()[-300:]))


NAMES = ["\u017fam", "Sam", "Tom", "Rex", "Vera", "Max", "Dan", "Lee", "same", "time", "real", "very",
         "most", "dark", "lily", "Ma\u017f"]


def build_inputs(work, corpora, rnd):
    SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "<s>x", "<|文|>"]
    f = {}
    g = TextGen(1, n_lex=700, specials=SPECIALS, names=NAMES)
    f["a"] = os.path.join(work, "mixed_a.txt")
    f["b"] = os.path.join(work, "mixed_b.txt")
    f["c"] = os.path.join(work, "mixed_c.jsonl")
    write_text(f["a"], g.text(5000).rstrip() + "abc")      # no final newline ...
    write_text(f["b"], "def" + g.text(4000))               # ... so a|b must not join
    write_jsonl(f["c"], [{"text": g.text(rnd.randint(0, 120)), "id": i} for i in range(60)], ensure_ascii=True)
    f["tiny"] = os.path.join(work, "tiny.txt")
    write_text(f["tiny"], TextGen(7, n_lex=60).text(400))

    # a slice of shared/data/corpora: en_devil.txt and 2 documents per language of multilingual_valid
    f["devil"] = os.path.join(work, "devil_slice.txt")
    f["mlv"] = os.path.join(work, "mlv_slice.jsonl")
    corpus_lines = []
    with open(os.path.join(corpora, "en_devil.txt"), encoding="utf-8", newline="") as fh:
        s = fh.read(200000)
    write_text(f["devil"], s[:40000])
    corpus_lines += [ln for ln in s[40000:].split("\n") if ln][:60]
    per_lang, recs = {}, []
    with open(os.path.join(corpora, "multilingual_valid.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            k = per_lang.get(d["lang"], 0)
            per_lang[d["lang"]] = k + 1
            if k < 2:
                recs.append({"text": d["text"][:2500], "lang": d["lang"]})
            elif k == 2:
                corpus_lines += [p[:300] for p in d["text"].split("\n")[:6]]
    write_jsonl(f["mlv"], recs)

    # paragraphs of non-blank lines (blank = empty line) for --doc-split
    gd = TextGen(3, n_lex=300)
    paras = []
    for _ in range(120):
        lines = []
        for _ in range(rnd.randint(1, 4)):
            ln = gd.text(rnd.randint(1, 12)).replace("\r", "").replace("\n", " ").strip(" \t\u00a0\u3000")
            lines.append((ln or "x") + rnd.choice(["", "", " ", "  "]))
        paras.append("\n".join(lines))
    f["paras"] = os.path.join(work, "paras.txt")
    write_text(f["paras"], "".join(p + rnd.choice(["\n\n", "\n\n", "\n \t\n", "\n\n\n", "\n  \n\n"])
                                   for p in paras))

    f["lab"] = os.path.join(work, "labelled.jsonl")
    gl = TextGen(5, n_lex=300)
    write_jsonl(f["lab"], [{"body": gl.text(rnd.randint(5, 60)), "lang": rnd.choice(["x", "y", "z", "y", "y"])}
                           for _ in range(150)])

    # > 1 MiB files: read in parts
    rb = random.Random(9)
    words = ["alpha", "beta", "gamma", "delta", "x", "yy"]
    lines, size = [], 0
    while size < 1_600_000:
        ln = " ".join(rb.choice(words) for _ in range(rb.randint(1, 4))) + rb.choice(["\u00a0", "\u0085", "\u3000"])
        lines.append(ln)
        size += len(ln.encode()) + 1
    f["big1"] = os.path.join(work, "big_ws_before_newline.txt")
    write_text(f["big1"], "\n".join(lines) + "\nend")
    parts, size = [], 0
    while size < 1_600_000:
        w = " ".join(rb.choice(words) for _ in range(rb.randint(1, 4)))
        parts.append(w)
        size += len(w) + 7
    f["big2"] = os.path.join(work, "big_special_newline.txt")
    write_text(f["big2"], "<a>\n<b>".join(parts))
    return f, SPECIALS, g, corpus_lines


def cmd_check(args):
    t_start = time.time()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    lol = os.path.join(work, "lol-under-test")
    shutil.copy2(args.lol, lol)
    rep = Report()
    rnd = random.Random(12345)
    f, SPECIALS, g, corpus_lines = build_inputs(work, args.corpora, rnd)

    ge = TextGen(1, n_lex=700, specials=SPECIALS, names=NAMES)  # the training text's lexicon, fresh draws
    ge.rnd = random.Random(77)
    mixed_tests = encode_texts(11, SPECIALS, ge, n_like=500, n_soup=400)
    corpus_tests = encode_texts(13, ["<|endoftext|>", "<|im_end|>"], ge, 100, 100, corpus_lines)
    cases = [
        Case("mixed_gpt2", [f["a"], f["b"], f["c"]], specials=SPECIALS, vocab_size=900, pattern="gpt2",
             encode_tests=mixed_tests, bos="<s>", pad="<|im_end|>"),
        Case("mixed_qwen2", [f["a"], f["b"], f["c"]], specials=SPECIALS, vocab_size=900, pattern="qwen2",
             encode_tests=mixed_tests, eos="<|im_end|>"),
        Case("minfreq5", [f["a"]], vocab_size=100000, min_frequency=5),
        Case("minfreq1_gpt2", [f["tiny"]], specials=["<s>"], vocab_size=100000, min_frequency=1,
             encode_tests=encode_texts(12, ["<s>"], TextGen(7, n_lex=60), 100, 100)),
        Case("minfreq1_qwen2", [f["tiny"]], vocab_size=100000, min_frequency=1, pattern="qwen2"),
        Case("corpora_gpt2", [f["devil"], f["mlv"]], specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
             vocab_size=1200, encode_tests=corpus_tests),
        Case("corpora_qwen2", [f["mlv"]], vocab_size=1000, pattern="qwen2", encode_tests=corpus_tests),
        Case("custom_regex", [f["a"], f["c"]], specials=["<|endoftext|>", "<s>"], vocab_size=700,
             regex="[A-Za-z]+|[0-9]{1,3}", encode_tests=encode_texts(15, ["<s>"], ge, 150, 150)),
        Case("docsplit_line", [f["paras"]], vocab_size=500, doc_split="line"),
        Case("docsplit_blank", [f["paras"]], vocab_size=500, doc_split="blank-line"),
        Case("docsplit_file", [f["paras"]], vocab_size=500, doc_split="file"),
        Case("labels", [f["lab"]], vocab_size=500, text_field="body", label_field="lang", max_bytes=1500),
        Case("big_ws_newline", [f["big1"]], vocab_size=100000, min_frequency=1,
             note="U+00A0/U+0085/U+3000 before every newline, 1.6 MB"),
        Case("big_special_newline", [f["big2"]], specials=["<|endoftext|>", "<a>\n<b>"], vocab_size=100000,
             min_frequency=1, note="special token <a>\\n<b> around every newline, 1.6 MB"),
    ]
    print("tokenizer reference check: lol = %s, work = %s" % (args.lol, work))
    # lol trains (2 at a time, in threads) while the reference trains here
    from concurrent.futures import ThreadPoolExecutor
    ex = ThreadPoolExecutor(max_workers=2)
    futs = [ex.submit(run, c.train_cmd(lol, work), None, 600) for c in cases]
    t_ref = time.time()
    for c in cases:
        c.reference()
    t_ref = time.time() - t_ref
    for c, fu in zip(cases, futs):
        compare_training(c, fu.result(), rep)
        print("  train %-20s %4d pre-token types, %4d merges (%d reusing an id), vocab %d %s"
              % (c.name, len(c.counts), len(c.merges), len(c.reused), len(c.id2tok), c.note))
    ex.shutdown()

    enc_cases = [c for c in cases if c.tj is not None and c.encode_tests]
    jobs = []
    for c in enc_cases:
        for key, cmd, inp in encode_jobs(lol, work, c, rnd):
            jobs.append(((c.name, key), cmd, inp))
    res = run_parallel(jobs)
    dec_jobs = []
    for c in enc_cases:
        ids = check_encodings(c, res[(c.name, "enc")], rep)
        tok, all_ids = decode_job(lol, c, ids, rnd)
        dec_jobs.append((c.name, [lol, "tokenizer", "decode", "--tokenizer", tok],
                         " ".join(map(str, all_ids)).encode()))
    res = run_parallel(dec_jobs)
    for c in enc_cases:
        check_decode(c, res[c.name], rep)
        print("  encode/decode %-20s %d texts" % (c.name, len(c.encode_tests)))
    if cases[0].tj is not None:
        route_checks(lol, work, cases[0], rep, rnd)
        error_checks(lol, work, cases[0].out, rep)

    print()
    for grp in ("train", "encode", "decode", "errors"):
        okc, badc = rep.groups.get(grp, [0, 0])
        print("%-7s %s (%d checks passed, %d failed)" % (grp, "OK" if badc == 0 else "DISAGREE", okc, badc))
    print("reference training %.1fs; total %.1fs" % (t_ref, time.time() - t_start))
    n_ok = sum(v[0] for v in rep.groups.values())
    n_bad = sum(v[1] for v in rep.groups.values())
    print("%d passed, %d failed" % (n_ok, n_bad))
    return 1 if rep.fails else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("check")
    a.add_argument("--lol", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--corpora", default=None, help="shared/data/corpora (default: found next to the repo)")
    args = ap.parse_args(argv)
    if args.corpora is None:
        here = os.path.dirname(os.path.abspath(__file__))
        for cand in (os.path.join(here, "..", "..", "..", "shared", "data", "corpora"),):  # ../shared next to the repo
            if os.path.isdir(cand):
                args.corpora = cand
                break
    if args.corpora is None or not os.path.isdir(args.corpora):
        print("shared/data/corpora not found (use --corpora)")
        return 2
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
