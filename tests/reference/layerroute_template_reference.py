#!/usr/bin/env python3
"""Independent reference for `lol layerroute render` on tokenizers with their own chat
template: text, token ids, assistant loss mask and prompt length.

Provenance
----------
Written by a reviewer from docs/layerroute.md ("Data", the "Which format." paragraph and
the `lol layerroute render` command), docs/chat.md ("Environment"), `lol layerroute render
--help`, `lol tokenizer train --help` and the reviewer's knowledge of Hugging Face
transformers and tokenizers, WITHOUT reading src/ or tests/ (other than tests/reference/).
Nothing is copied from transformers or tokenizers; the pieces below are written from how
those libraries are documented to behave.  Imports: the standard library and jinja2 (Debian
python3-jinja2 3.x).

What lol claims
  For a tokenizer whose chat template is not plain ChatML,
    lol layerroute render --data S.jsonl --tokenizer DIR --ids
  prints one JSON line per sample {"tokens", "loss_mask", "prompt_len", ...}: the ids of
  the template's rendering with add_generation_prompt=False (as apply_chat_template(...,
  tokenize=True)), 1 in the mask on the assistant tokens (each assistant answer and its
  end-of-turn token); without --ids it prints the rendered texts joined by one "\\n".

The oracle (independent of lol's prefix-rendering rule)
  transformers' own assistant mask, `apply_chat_template(..., return_assistant_tokens_mask=
  True)`: the template marks what the assistant writes with {% generation %} ...
  {% endgeneration %}; the characters those blocks emit are the assistant characters, and
  for each block [s, e) the tokens char_to_token(s) .. char_to_token(e - 1) get mask 1.
  Reimplemented here:
  * jinja2 ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
    loopcontrols extension and a `generation` block extension written here
    (GenerationSpans: the block's body is rendered and returned unchanged; the span it
    occupies in the output is recorded from the number of characters the template has
    yielded so far, the template being rendered with Template.generate());
    tojson = json.dumps(x, ensure_ascii=False, indent, separators, sort_keys);
    raise_exception(msg) raises TemplateError(msg); strftime_now(fmt) formats 26 Jul 2024
    (lol's documented fixed date);
    variables: messages, tools=None, documents=None, add_generation_prompt=False,
    bos_token / eos_token from tokenizer_config.json.
  * a byte-level BPE encoder with character offsets, written here from tokenizer.json:
    special tokens split out first (leftmost, longest), each piece between them
    pre-tokenized by a hand-written matcher of the tokenizer's regex (the two patterns
    `lol tokenizer train` writes: qwen2 and gpt2, matched alternative by alternative with
    Oniguruma's leftmost-first backtracking semantics; see `split_qwen2`, `split_gpt2`),
    bytes mapped by GPT-2's byte-to-unicode table, merges applied lowest rank first.  A
    token's character offsets are those of the characters its bytes belong to (a token
    holding part of a multi-byte character covers that character), as tokenizers'
    offsets.  Its ids are checked against `lol tokenizer encode` on every rendered text.

Templates (written here, modelled on the published ones, with generation blocks where the
model authors would mark what the assistant writes: the answer and its end-of-turn token):
  llama3   Llama-3-Instruct (<|begin_of_text|>, headers, content|trim, <|eot_id|>)
  llama31  Llama-3.1-style: system header with "Today Date: " + strftime_now("%d %b %Y")
  mistral  Mistral-Instruct v0.2 style: ' [INST] ' ... ' [/INST]', ' ' + answer + eos in
           the block, raise_exception on non-alternating roles; [INST] is plain text;
           gpt2 pre-tokenizer pattern
  gemma    Gemma 3 style: <start_of_turn>user\\n ... <end_of_turn>\\n, role model, system
           folded into the first user turn, block = answer|trim + <end_of_turn>
  zephyr   Zephyr: <|user|>\\n...</s>\\n<|assistant|>\\n...</s>\\n (role tags plain text,
           so the qwen2 pattern merges "|>\\n" with a newline that starts the answer)
  qwen3    Qwen3 style (<think> kept only after the last user turn): single-turn samples
           compared, multi-turn ones must be refused (earlier turns render differently
           once later turns follow)
  alpaca   a base-model format with no end-of-turn token: "### Instruction:\n" Q "\n\n"
           "### Response:\n" {% generation %}A{% endgeneration %} "\n\n"
  alpaca_merge  alpaca with "### Response" + X + "\n", X a punctuation mark whose merge
           "X Ċ" ranks after "Ċ Ċ" in the trained vocabulary (";" today), answers that
           start with "\n": the prompt alone ends with the token "XĊ", the whole text with
           "X" + "ĊĊ" (only "ĊĊ" holds answer bytes)
  deepseek_r1  a generation prompt ("<think>\n") the whole conversation does not repeat:
           counted (lol must accept it and mask what the generation block marks)
  mistral_v03  NOTE only (not counted): a system message moved into the last user turn,
           which lol refuses although the generation mask is well defined
Tokenizers: `lol tokenizer train` on en_devil.txt, 600 ids: one with every template's
special tokens and the qwen2 pattern, one with <unk> <s> </s> and the gpt2 pattern
(mistral and the NOTE probes); each template folder is a copy with its own bos_token,
eos_token and chat_template in tokenizer_config.json.

Disagreements found when this was written (lol of the LayerRoute template commit 26474b8),
both fixed in the next commit (0 disagreements since):
  D1 alpaca: lol dropped an answer's own trailing white space (and a " " answer entirely:
     mask all 0, prompt_len 0) by its rule "white space that ends the rendering dropped";
     the generation block holds it.  lol now keeps white space up to the end of the
     message's own text when the template writes it verbatim.
  D2 alpaca_merge: lol marked the prompt-only token "X" (prompt_len one less): the
     assistant start was found by comparing token ids of the prefix, not by bytes.  lol
     now maps spans to tokens by byte offsets when the tokens decode back to the text.
  deepseek_r1 (a generation prompt that the whole conversation does not repeat) was
  refused then and is now accepted (the NOTE below shows its mask); mistral_v03 with a
  system message is still refused (the template moves the system prompt into the last
  user turn, so the messages before the answer render differently).

Checks (each a count toward the summary line "N checks, M disagreements")
  per template: lol's text == jinja2's (all samples in one call: "\\n".join), lol's
  `tokenizer encode` ids == this encoder's on each rendered text, per sample: tokens,
  loss_mask (vs the generation-block mask), prompt_len, sample index and source; the same
  with --loss-tokens all (mask all ones) and --max-len N (cut); --system S; errors:
  a Mistral raise_exception refused with exit 2, the file:line and the message (text and
  --ids), a Qwen3 multi-turn sample refused with exit 2 naming file:line.
  Self-checks of the oracle (not counted as lol disagreements but reported as ORACLE
  notes): where lol's documented prefix rule (render(before, add_generation_prompt=True)
  .. render(up to and including), trailing white space dropped), computed here in
  characters, differs from the generation-block spans; where transformers' literal
  char_to_token mask differs from the "any byte inside a span" mask (A10).

ASSUMED (spec unclear; see the report)
  A1 question/answer -> [user, assistant]; ShareGPT from human/gpt/system -> user/assistant/
     system; no system message is added for a template tokenizer with --system auto.
  A2 prompt_len = index of the first token of the last assistant span (the prompt for the
     last answer), min(prompt_len, --max-len) after a cut; with --loss-tokens all it is
     unchanged.
  A3 --max-len N keeps tokens[:N] and loss_mask[:N]; render prints samples that keep no
     assistant token (training drops them); with --loss-tokens all the mask is all ones,
     except for such a dropped sample, which render shows with an all-zero mask (observed;
     the docs say only that the sample is dropped).
  A4 "sample" is the 0-based index among non-empty lines; "source" is the sample's
     "source" or "".
  A5 the text output of --count K is the K renderings joined by one "\\n" (no final
     newline added).
  A6 error messages name the data file as given on the command line, with 1-based
     physical line numbers (blank lines counted).
  A7 Oniguruma's \\s = [\\t\\n\\v\\f\\r \\x85] + Unicode Zs/Zl/Zp; \\p{L} / \\p{N} = Unicode
     general categories L* / N* (Python's unicodedata); the (?i:'s|...) group of the
     qwen2 pattern is taken as ASCII case-insensitive.  The samples use only ASCII white
     space.
  A8 lol's documented fixed date (26 Jul 2024) applies to strftime_now in render.
  A9 the refusal of a sample whose earlier turns render differently once later turns
     follow is checked with --ids (the mask needs the prefix renderings); without --ids
     lol prints the text (reported as a NOTE, not counted).
  A10 the expected mask is "every token holding a byte of a generation span" (the brief's
     "offsets fall in such a span", and lol's "a token holding bytes on both sides of a
     boundary counts as assistant").  transformers computes char_to_token(start) ..
     char_to_token(end - 1); they differ only when a span ends with a character split
     over several byte tokens (char_to_token returns the first), where transformers leaves
     the later ones out: printed as an ORACLE note, not counted.
  A11 the raise_exception error names the file:line and contains the exception's text.

Usage
  python3 tests/reference/layerroute_template_reference.py check --lol build/lol --work /tmp/x
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import unicodedata

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:  # pragma: no cover
    print("jinja2 is required (Debian python3-jinja2)", file=sys.stderr)
    sys.exit(2)

# The workplace's shared corpora sit next to the repository (../shared/data/corpora).
CORPUS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared",
                                       "data", "corpora", "en_devil.txt"))
FIXED_DATE = datetime.datetime(2024, 7, 26)

# ----------------------------------------------------------------------------------------
# Character classes (ASSUMED A7)

_ONIG_SPACE_ASCII = set("\t\n\x0b\x0c\r \x85")


def is_space(c):
    return c in _ONIG_SPACE_ASCII or unicodedata.category(c) in ("Zs", "Zl", "Zp")


def is_letter(c):
    return unicodedata.category(c)[0] == "L"


def is_number(c):
    return unicodedata.category(c)[0] == "N"


def is_crlf(c):
    return c in "\r\n"


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _contraction(s, i, fold):
    """'s|'t|'re|'ve|'m|'ll|'d at i (leftmost-first order of the alternation)."""
    if s[i] != "'":
        return 0
    for c in _CONTRACTIONS:
        piece = s[i + 1:i + 1 + len(c)]
        if (piece.lower() if fold else piece) == c and len(piece) == len(c):
            return 1 + len(c)
    return 0


def _space_run(s, i):
    j = i
    while j < len(s) and is_space(s[j]):
        j += 1
    return j


def split_qwen2(s):
    """(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+  -- each alternative tried in order at each position."""
    out, i, n = [], 0, len(s)
    while i < n:
        end = 0
        # 1: contractions, case-insensitive
        k = _contraction(s, i, True)
        if k:
            end = i + k
        # 2: [^\r\n\p{L}\p{N}]?\p{L}+
        if not end:
            j = i
            c = s[j]
            if not is_crlf(c) and not is_letter(c) and not is_number(c) and j + 1 < n and is_letter(s[j + 1]):
                j += 1
            if is_letter(s[j]):
                while j < n and is_letter(s[j]):
                    j += 1
                end = j
        # 3: \p{N}
        if not end and is_number(s[i]):
            end = i + 1
        # 4: ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        if not end:
            def other(c):
                return not is_space(c) and not is_letter(c) and not is_number(c)
            for start in ((i + 1,) if s[i] == " " else ()) + (i,):
                j = start
                if start == i + 1 and not (j < n and other(s[j])):
                    continue
                while j < n and other(s[j]):
                    j += 1
                if j > start:
                    while j < n and is_crlf(s[j]):
                        j += 1
                    end = j
                    break
        # 5: \s*[\r\n]+  (the white-space run up to its last CR/LF)
        if not end and is_space(s[i]):
            r = _space_run(s, i)
            last = -1
            for j in range(i, r):
                if is_crlf(s[j]):
                    last = j
            if last >= 0:
                end = last + 1
        # 6: \s+(?!\S)
        if not end and is_space(s[i]):
            r = _space_run(s, i)
            if r == n:
                end = r
            elif r - i >= 2:
                end = r - 1
        # 7: \s+
        if not end and is_space(s[i]):
            end = _space_run(s, i)
        if not end:  # cannot happen: every character matches some alternative
            end = i + 1
        out.append((i, end))
        i = end
    return out


def split_gpt2(s):
    """'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    out, i, n = [], 0, len(s)

    def other(c):
        return not is_space(c) and not is_letter(c) and not is_number(c)

    while i < n:
        end = _contraction(s, i, False)
        end = i + end if end else 0
        for cls in (is_letter, is_number, other):
            if end:
                break
            start = i + 1 if (s[i] == " " and i + 1 < n and cls(s[i + 1])) else i
            j = start
            while j < n and cls(s[j]):
                j += 1
            if j > start:
                end = j
        if not end and is_space(s[i]):
            r = _space_run(s, i)
            if r == n:
                end = r
            elif r - i >= 2:
                end = r - 1
            else:
                end = r
        if not end:
            end = i + 1
        out.append((i, end))
        i = end
    return out


QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_to_unicode():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


B2U = byte_to_unicode()


class Encoder:
    """Byte-level BPE from a tokenizer.json, with character offsets."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        model = tj["model"]
        assert model["type"] == "BPE", model["type"]
        self.vocab = model["vocab"]
        self.ranks = {}
        for r, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = r
        self.specials = sorted((t["content"], t["id"]) for t in tj.get("added_tokens", []))
        pre = tj["pre_tokenizer"]
        if pre["type"] == "ByteLevel" and pre.get("use_regex", True):
            self.split = split_gpt2
        elif pre["type"] == "Sequence":
            steps = pre["pretokenizers"]
            assert steps[0]["type"] == "Split" and steps[0]["pattern"]["Regex"] == QWEN2_REGEX, steps[0]
            assert steps[0]["behavior"] == "Isolated" and not steps[0].get("invert")
            assert steps[1]["type"] == "ByteLevel" and not steps[1].get("use_regex")
            assert not steps[1].get("add_prefix_space")
            self.split = split_qwen2
        else:
            raise AssertionError("unsupported pre-tokenizer %r" % pre)
        assert tj.get("normalizer") is None
        self.cache = {}

    def bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        syms = list(word)
        while len(syms) > 1:
            best, bi = None, -1
            for k in range(len(syms) - 1):
                r = self.ranks.get((syms[k], syms[k + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, k
            if best is None:
                break
            pair = (syms[bi], syms[bi + 1])
            merged, k = [], 0
            while k < len(syms):
                if k + 1 < len(syms) and (syms[k], syms[k + 1]) == pair:
                    merged.append(syms[k] + syms[k + 1])
                    k += 2
                else:
                    merged.append(syms[k])
                    k += 1
            syms = merged
        self.cache[word] = syms
        return syms

    def split_specials(self, text):
        """[(start, end, special_id or None)], specials matched leftmost, longest first."""
        out, i, seg = [], 0, 0
        while i < len(text):
            hit = None
            for content, tid in self.specials:
                if text.startswith(content, i) and (hit is None or len(content) > len(hit[0])):
                    hit = (content, tid)
            if hit:
                if seg < i:
                    out.append((seg, i, None))
                out.append((i, i + len(hit[0]), hit[1]))
                i += len(hit[0])
                seg = i
            else:
                i += 1
        if seg < len(text):
            out.append((seg, len(text), None))
        return out

    def encode(self, text):
        """-> (ids, [(char_start, char_end)], [(byte_start, byte_end)])"""
        char_of_byte, byte_of_char = [], []
        for ci, c in enumerate(text):
            byte_of_char.append(len(char_of_byte))
            char_of_byte.extend([ci] * len(c.encode("utf-8")))
        byte_of_char.append(len(char_of_byte))
        ids, offs, boffs = [], [], []
        for s, e, sid in self.split_specials(text):
            if sid is not None:
                ids.append(sid)
                offs.append((s, e))
                boffs.append((byte_of_char[s], byte_of_char[e]))
                continue
            for ps, pe in self.split(text[s:e]):
                b0 = byte_of_char[s + ps]
                raw = text[s + ps:s + pe].encode("utf-8")
                word = "".join(B2U[b] for b in raw)
                pos = b0
                for sym in self.bpe(word):
                    if sym not in self.vocab:
                        raise AssertionError("symbol %r not in vocab" % sym)
                    ids.append(self.vocab[sym])
                    nb = len(sym)  # each mapped char is one byte
                    boffs.append((pos, pos + nb))
                    offs.append((char_of_byte[pos], char_of_byte[pos + nb - 1] + 1))
                    pos += nb
        return ids, offs, boffs


def char_to_token(offs, c):
    for t, (s, e) in enumerate(offs):
        if s <= c < e:
            return t
    return None


def generation_mask(offs, spans):
    """transformers' return_assistant_tokens_mask from the generation spans."""
    n = len(offs)
    mask = [0] * n
    for s, e in spans:
        st = char_to_token(offs, s)
        en = char_to_token(offs, e - 1)
        if st is None:
            break
        for t in range(st, (en + 1) if en else n):
            mask[t] = 1
    return mask


def overlap_mask(text, boffs, spans):
    """Tokens with any byte inside a span (the "holding bytes on both sides" reading)."""
    bspans = [(len(text[:s].encode("utf-8")), len(text[:e].encode("utf-8"))) for s, e in spans]
    return [1 if any(b0 < be and b1 > bs for bs, be in bspans) else 0 for b0, b1 in boffs]


# ----------------------------------------------------------------------------------------
# jinja2 environment as transformers builds it, with a span-recording generation block


class GenerationSpans(Extension):
    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        environment.extend(generation_recorder=None)

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("record_block", [])
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def record_block(self, caller):
        text = caller()
        rec = self.environment.generation_recorder
        if rec is not None:
            rec.spans.append((rec.length, rec.length + len(text), text))
        return text


class Recorder:
    def __init__(self):
        self.length = 0
        self.spans = []


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationSpans, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_DATE.strftime(fmt)
    return env


ENV = make_env()


_COMPILED = {}


def render(template_src, messages, specials, add_generation_prompt=False):
    """-> (text, [(start, end)]) of the generation blocks."""
    tmpl = _COMPILED.get(template_src)
    if tmpl is None:
        tmpl = _COMPILED[template_src] = ENV.from_string(template_src)
    rec = Recorder()
    ENV.generation_recorder = rec
    parts = []
    try:
        for piece in tmpl.generate(messages=messages, tools=None, documents=None,
                                   add_generation_prompt=add_generation_prompt, **specials):
            parts.append(piece)
            rec.length += len(piece)
    finally:
        ENV.generation_recorder = None
    text = "".join(parts)
    for s, e, t in rec.spans:
        assert text[s:e] == t, "generation span bookkeeping"
    return text, [(s, e) for s, e, _ in rec.spans]


# ----------------------------------------------------------------------------------------
# Templates

LLAMA3 = r"""{%- for message in messages %}
{%- if loop.first %}{{ bos_token }}{% endif %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}
{%- if message['role'] == 'assistant' %}
{%- generation %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endgeneration %}
{%- else %}
{{- message['content'] | trim + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

LLAMA31 = r"""{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}
    {%- if message['role'] == 'assistant' %}
        {%- generation %}
        {{- message['content'] | trim + '<|eot_id|>' }}
        {%- endgeneration %}
    {%- else %}
        {{- message['content'] | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

MISTRAL = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {%- generation %}
        {{- ' ' + message['content'] + eos_token }}
        {%- endgeneration %}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

GEMMA = r"""{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if role == 'model' -%}
        {% generation %}{{ message['content'] | trim + '<end_of_turn>' }}{% endgeneration %}
    {%- else -%}
        {{ message['content'] | trim + '<end_of_turn>' }}
    {%- endif -%}
    {{ '\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}
"""

ZEPHYR = r"""{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n' }}{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}{{ '\n' -}}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

QWEN3 = r"""{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {{- '<|im_start|>' + message.role + '\n' }}
        {%- generation %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- content }}
            {%- endif %}
        {%- else %}
            {{- content }}
        {%- endif %}
        {{- '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
"""

ALPACA = r"""{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- message['content'] + '\n\n' }}
    {%- elif message['role'] == 'user' %}
        {{- '### Instruction:\n' + message['content'] + '\n\n' }}
    {%- elif message['role'] == 'assistant' %}
        {{- '### Response:\n' }}
        {%- generation %}{{- message['content'] }}{%- endgeneration %}
        {{- '\n\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '### Response:\n' }}
{%- endif %}
"""

# Two trained tokenizers (byte-level BPE, 600 ids): every template's special tokens in one
# (qwen2 pre-tokenizer pattern), Mistral's in the other (gpt2 pattern).  Each template gets
# a copy of one with its own bos_token / eos_token and chat_template in tokenizer_config.json.
TOKENIZERS = {
    "qwen2": dict(special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                           "<|end_header_id|>", "<|eot_id|>",
                           "<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>",
                           "<unk>", "<s>", "</s>",
                           "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
                  pattern="qwen2"),
    "gpt2": dict(special=["<unk>", "<s>", "</s>"], pattern="gpt2"),
}

# (name, template, tokenizer, bos_token, eos_token, the end-of-turn text a span ends with)
TEMPLATES = [
    ("llama3", LLAMA3, "qwen2", "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>"),
    ("llama31", LLAMA31, "qwen2", "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>"),
    ("mistral", MISTRAL, "gpt2", "<s>", "</s>", "</s>"),
    ("gemma", GEMMA, "qwen2", "<bos>", "<eos>", "<end_of_turn>"),
    ("zephyr", ZEPHYR, "qwen2", "<s>", "</s>", "</s>"),
    ("qwen3", QWEN3, "qwen2", None, "<|im_end|>", "<|im_end|>"),
    ("alpaca", ALPACA, "qwen2", "<s>", "</s>", None),
]

# ----------------------------------------------------------------------------------------
# Samples


def long_answer():
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read(20000)
    words = " ".join(text.split()[1000:1080])
    return words


def common_samples():
    sysm = {"role": "system", "content": "You are a helpful assistant."}
    return [
        {"question": "What is a cat?", "answer": "A small, furry animal that purrs."},
        {"question": "Greet me.", "answer": "  Hello there!  \n"},
        {"question": "Unicode please", "answer": "Caf\u00e9 cr\u00e8me, na\u00efve \U0001F600 \u2014 \u4f60\u597d\uff0c\u4e16\u754c\uff01 \u2713"},
        None,  # a blank line in the file
        {"question": "Anything?", "answer": " "},
        {"messages": [sysm,
                      {"role": "user", "content": "Name a colour."},
                      {"role": "assistant", "content": "Blue."},
                      {"role": "user", "content": "Another one?"},
                      {"role": "assistant", "content": "Green, and then red."}]},
        {"messages": [{"role": "user", "content": "Line one\nline two"},
                      {"role": "assistant", "content": "\n\nStarts with blank lines.\nEnds with a newline\n"},
                      {"role": "user", "content": "  spaced question  "},
                      {"role": "assistant", "content": " \n indented answer"}]},
        {"conversations": [{"from": "system", "value": "You are terse."},
                           {"from": "human", "value": "2+2?"},
                           {"from": "gpt", "value": "4"},
                           {"from": "human", "value": "And 3*3?"},
                           {"from": "gpt", "value": "9, of course. It's easy!"}]},
        {"conversations": [{"from": "human", "value": "Say something with emoji"},
                           {"from": "gpt", "value": "\U0001F600\U0001F389 ok \u00e9t\u00e9"}]},
        {"question": "Punctuation?", "answer": "...well, \"quoted\" (yes) -- 100%!", "source": "glaive"},
        {"question": "Numbers", "answer": "12345 and 3.14159; THAT'S IT'S WE'LL I'd", "source": "math"},
        {"question": "Tabs", "answer": "\tcol1\tcol2\r\nrow  \t"},
        {"question": "\u65e5\u672c\u8a9e\u3067\u7b54\u3048\u3066", "answer": "\u306f\u3044\u3001\u308f\u304b\u308a\u307e\u3057\u305f\u3002"},
        {"question": "Tell me a long story.", "answer": long_answer()},
    ]


def extra_samples(name):
    """Template-specific samples (end-of-turn text inside an answer, reasoning)."""
    if name in ("llama3", "llama31"):
        return [{"question": "Quote the token", "answer": "It is written <|eot_id|> like that."}]
    if name in ("mistral", "zephyr"):
        return [{"question": "Quote the token", "answer": "An eos </s> in the middle"}]
    if name == "gemma":
        return [{"question": "Quote the token", "answer": "See <end_of_turn> here"}]
    if name == "qwen3":
        return [{"question": "What is 2+2?", "answer": "<think>\nAdd them.\n</think>\n\nIt is 4."},
                {"messages": [{"role": "user", "content": "Why?"},
                              {"role": "assistant", "content": "Because.",
                               "reasoning_content": "\nThe user asks why.\n"}]}]
    return []


def samples_for(name):
    out = common_samples() + extra_samples(name)
    if name == "qwen3":  # multi-turn samples are refused (checked separately)
        out = [s for s in out if s is None or not is_multi_turn(s)]
    return out


def to_messages(sample, system=None):
    if "messages" in sample:
        msgs = [dict(m) for m in sample["messages"]]
    elif "conversations" in sample:
        role = {"human": "user", "gpt": "assistant", "system": "system"}
        msgs = [{"role": role[c["from"]], "content": c["value"]} for c in sample["conversations"]]
    else:
        msgs = [{"role": "user", "content": sample["question"]},
                {"role": "assistant", "content": sample["answer"]}]
    if system is not None and system != "auto" and system != "" and msgs[0]["role"] != "system":
        msgs = [{"role": "system", "content": system}] + msgs
    return msgs


def is_multi_turn(sample):
    return sum(1 for m in to_messages(sample) if m["role"] == "assistant") > 1


# ----------------------------------------------------------------------------------------
# Runner


class Checker:
    def __init__(self, lol, work, verbose=False):
        self.lol = lol
        self.work = work
        self.checks = 0
        self.bad = []
        self.notes = []
        self.verbose = verbose
        self.calls = 0

    def run(self, args, expect_ok=True):
        cmd = ["taskset", "-c", "0", "env", "OMP_NUM_THREADS=1", self.lol] + args
        self.calls += 1
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode, p.stdout.decode("utf-8", "surrogateescape"), p.stderr.decode("utf-8", "replace")

    def check(self, ok, what, detail=""):
        self.checks += 1
        if not ok:
            self.bad.append((what, detail))
            print("DISAGREEMENT: %s\n%s\n" % (what, detail))
        return ok


def shell(args):
    return " ".join("'%s'" % a.replace("'", "'\\''") if any(c in a for c in " '\"<>|&;$*?") else a for a in args)


def train_tokenizer(ck, key, out):
    spec = TOKENIZERS[key]
    args = ["tokenizer", "train", "--in", CORPUS, "--vocab-size", "600", "--out", out,
            "--special"] + spec["special"] + ["--eos", spec["special"][-1], "--pattern",
                                              spec["pattern"], "--no-progress"]
    rc, so, se = ck.run(args)
    if rc != 0:
        raise SystemExit("tokenizer train failed: %s\n%s" % (shell(args), se))


def tok_folder(ck, work, key, name, template, bos, eos):
    """A copy of the trained tokenizer `key` with `template` as chat_template."""
    base = os.path.join(work, "base_" + key)
    if not os.path.exists(os.path.join(base, "tokenizer.json")):
        train_tokenizer(ck, key, base)
    d = os.path.join(work, "tok_" + name)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(base, "tokenizer.json"), os.path.join(d, "tokenizer.json"))
    with open(os.path.join(base, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["chat_template"] = template
    cfg["bos_token"] = bos
    cfg["eos_token"] = eos
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    specials = {}
    for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            specials[k] = v
    return d, specials


def write_jsonl(path, samples):
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            f.write("" if s is None else json.dumps(s, ensure_ascii=False))
            f.write("\n")


def decode_masked(text, boffs, mask, want):
    """The bytes of the tokens whose mask is `want`, decoded; separate runs joined by '\u2016'."""
    raw = text.encode("utf-8")
    out, prev = bytearray(), False
    for (b0, b1), m in zip(boffs, mask):
        if m == want:
            out += raw[b0:b1]
            prev = True
        else:
            if prev:
                out += "\u2016".encode("utf-8")
            prev = False
    return repr(out.decode("utf-8", "replace"))


def prefix_rule_spans(template, msgs, specials):
    """lol's documented rule, in characters: for each assistant message i,
    [len(render(msgs[:i], gen=True)), len(render(msgs[:i+1], gen=False).rstrip())),
    or None when a rendering is not a prefix of the whole."""
    full, _ = render(template, msgs, specials)
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        before, _ = render(template, msgs[:i], specials, add_generation_prompt=True) if i else ("", [])
        upto, _ = render(template, msgs[:i + 1], specials)
        upto = upto.rstrip()
        if not full.startswith(before) or not full.startswith(upto):
            return None
        spans.append((len(before), len(upto)))
    return spans


class Expected:
    pass


def expect_sample(enc, template, sample, specials, system=None):
    e = Expected()
    e.msgs = to_messages(sample, system)
    e.text, e.spans = render(template, e.msgs, specials)
    e.ids, e.offs, e.boffs = enc.encode(e.text)
    e.tf_mask = generation_mask(e.offs, e.spans)
    e.mask = overlap_mask(e.text, e.boffs, e.spans)  # ASSUMED A10
    last = e.spans[-1] if e.spans else None
    e.prompt_len = char_to_token(e.offs, last[0]) if last else len(e.ids)
    e.prefix_spans = prefix_rule_spans(template, e.msgs, specials)
    e.source = sample.get("source", "")
    return e


def parse_lines(out):
    rows = []
    for line in out.splitlines():
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows


def compare_rows(ck, label, repro, exps, rows, max_len=None, all_tokens=False):
    ck.check(len(rows) == len(exps), "%s: number of --ids lines" % label,
             "repro: %s\nlol printed %d lines, expected %d" % (repro, len(rows), len(exps)))
    for idx, (e, r) in enumerate(zip(exps, rows)):
        ids, mask, pl = e.ids, e.mask, e.prompt_len
        if max_len is not None:
            ids, mask, pl = ids[:max_len], mask[:max_len], min(pl, max_len)
        if all_tokens:  # ASSUMED A3: a sample that keeps no assistant token shows all zeros
            mask = [1 if any(mask) else 0] * len(ids)
        where = "%s sample %d (%s)" % (label, idx, json.dumps(e.msgs, ensure_ascii=False)[:300])
        ok_tok = ck.check(r.get("tokens") == ids, where + ": tokens",
                          "repro: %s\nlol:      %s\nexpected: %s\ntext: %r" % (repro, r.get("tokens"), ids, e.text))
        if ok_tok:
            lm = r.get("loss_mask")
            detail = "repro: %s\nrendered: %r\nlol mask:      %s\nexpected mask: %s\n" \
                     "lol assistant text:      %s\nexpected assistant text: %s\n" \
                     "tokens where the masks differ (index, text, lol, expected): %s" % (
                         repro, e.text, lm, mask,
                         decode_masked(e.text, e.boffs, lm, 1) if lm and len(lm) == len(mask) else "?",
                         decode_masked(e.text, e.boffs, mask, 1),
                         [(t, e.text[e.offs[t][0]:e.offs[t][1]], lm[t], mask[t])
                          for t in range(min(len(mask), len(lm or [])))
                          if lm[t] != mask[t]][:12] if lm else "?")
            ck.check(lm == mask, where + ": loss_mask", detail)
        ck.check(r.get("prompt_len") == pl, where + ": prompt_len",
                 "repro: %s\nlol: %s expected: %s" % (repro, r.get("prompt_len"), pl))
        ck.check(r.get("sample") == idx and r.get("source", "") == e.source,
                 where + ": sample index / source",
                 "repro: %s\nlol: sample=%r source=%r expected %d %r" % (
                     repro, r.get("sample"), r.get("source"), idx, e.source))


STRADDLE = {"start": 0, "end": 0}


def check_template(ck, work, name, template, key, bos, eos, eot, samples=None, full=True):
    tdir, specials = tok_folder(ck, work, key, name, template, bos, eos)
    enc = Encoder(os.path.join(tdir, "tokenizer.json"))
    if samples is None:
        samples = samples_for(name)
    data = os.path.join(work, "%s.jsonl" % name)
    write_jsonl(data, samples)
    real = [s for s in samples if s is not None]
    exps = [expect_sample(enc, template, s, specials) for s in real]

    # oracle self-checks
    for e in exps:
        for s0, e0 in e.spans:
            STRADDLE["start"] += sum(1 for a, b in e.offs if a < s0 < b)
            STRADDLE["end"] += sum(1 for a, b in e.offs if a < e0 < b)
        if e.mask != e.tf_mask:
            ck.notes.append("ORACLE %s: transformers' char_to_token(end - 1) leaves out tokens %s of the span's "
                            "last (multi-byte) character in %r; expected here: every token with a byte in the span"
                            % (name, [t for t in range(len(e.mask)) if e.mask[t] != e.tf_mask[t]], e.text))
        spans = [(s, e2) for s, e2 in e.spans]
        if e.prefix_spans != spans:
            ck.notes.append("ORACLE %s: lol's documented prefix rule gives %r, generation blocks %r for %r"
                            % (name, e.prefix_spans, spans, e.text))
        for s, e2 in e.spans:
            if eot and not e.text[s:e2].endswith(eot):
                ck.notes.append("ORACLE %s: a generation span does not end with %s" % (name, eot))

    n = len(real)
    modes = [([], {}, "ids")]
    if not full:
        return run_id_modes(ck, name, data, tdir, n, exps, modes), specials, enc, data
    modes += [(["--max-len", "40"], {"max_len": 40}, "ids --max-len 40"),
              (["--max-len", "60", "--loss-tokens", "all"], {"max_len": 60, "all_tokens": True},
               "ids --max-len 60 --loss-tokens all")]
    # text
    args = ["layerroute", "render", "--data", data, "--tokenizer", tdir, "--count", str(n)]
    rc, out, err = ck.run(args)
    want = "\n".join(e.text for e in exps)
    if ck.check(rc == 0, "%s: render text exit status" % name, "repro: %s\nrc=%d\n%s" % (shell([ck.lol] + args), rc, err)):
        if not ck.check(out == want or out == want + "\n", "%s: rendered text (all samples)" % name,
                        "repro: %s" % shell([ck.lol] + args)):
            for i, e in enumerate(exps):
                a1 = ["layerroute", "render", "--data", data, "--tokenizer", tdir, "--first", str(i)]
                rc1, o1, _ = ck.run(a1)
                if o1 != e.text and o1 != e.text + "\n":
                    print("  sample %d: lol %r\n  expected  %r" % (i, o1, e.text))
    ENCODE_TEXTS.setdefault(key, []).extend(e.text for e in exps)
    return run_id_modes(ck, name, data, tdir, n, exps, modes), specials, enc, data


def run_id_modes(ck, name, data, tdir, n, exps, modes):
    for extra, kw, label in modes:
        args = ["layerroute", "render", "--data", data, "--tokenizer", tdir, "--count", str(n), "--ids"] + extra
        rc, out, err = ck.run(args)
        repro = shell([ck.lol] + args)
        if ck.check(rc == 0, "%s: %s exit status" % (name, label), "repro: %s\nrc=%d\n%s" % (repro, rc, err)):
            compare_rows(ck, "%s %s" % (name, label), repro, exps, parse_lines(out), **kw)
    return tdir


def check_boundary_merge(ck, work):
    """A prompt whose last pre-token "X\n" is one token "XĊ" alone, but splits as "X" + "ĊĊ"
    once the answer adds a "\n" (the merge "Ċ Ċ" ranks before "X Ċ"): the token "X" holds
    only prompt bytes and must stay 0; "ĊĊ" holds bytes on both sides and is assistant.
    X is chosen from the trained merges; the template is ALPACA with "### Response" + X."""
    enc = Encoder(os.path.join(work, "base_qwen2", "tokenizer.json"))
    nl = B2U[10]
    r_nl = enc.ranks.get((nl, nl))
    cands = sorted((r, a) for (a, b), r in enc.ranks.items()
                   if b == nl and len(a) == 1 and r_nl is not None and r > r_nl
                   and not is_letter(a) and not is_number(a) and not is_space(a) and a.isprintable())
    if not cands:
        ck.notes.append("NOTE boundary-merge probe skipped: no merge 'X Ċ' ranks after 'Ċ Ċ' in this vocabulary")
        return
    x = ":" if any(a == ":" for _, a in cands) else cands[0][1]
    template = ALPACA.replace("'### Response:\\n'", "'### Response%s\\n'" % x)
    assert template != ALPACA
    samples = [{"question": "Q", "answer": "\nB"},
               {"question": "Q", "answer": "\n\nA"},
               {"messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "\nfirst"},
                             {"role": "user", "content": "two"}, {"role": "assistant", "content": "\nsecond"}]}]
    check_template(ck, work, "alpaca_merge", template, "qwen2", "<s>", "</s>", None, samples=samples, full=False)


# Real families whose templates lol's documented prefix rule refuses although their
# generation-block mask is well defined (printed as NOTEs, not counted: lol documents the
# refusal).  DeepSeek-R1 distills: the generation prompt adds "<think>\n", which the
# rendered assistant turn lacks.  Mistral v0.3 / Mixtral: the system message is written
# into the LAST user turn, so it moves when a later turn follows.
DEEPSEEK_R1 = r"""{%- set ns = namespace(system_prompt='') -%}
{%- for message in messages -%}{%- if message['role'] == 'system' -%}{%- set ns.system_prompt = message['content'] -%}{%- endif -%}{%- endfor -%}
{{- bos_token }}{{ ns.system_prompt }}
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{{ '<\uff5cUser\uff5c>' + message['content'] }}{%- endif -%}
{%- if message['role'] == 'assistant' -%}
{%- set content = message['content'] -%}
{%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}
{{- '<\uff5cAssistant\uff5c>' }}{% generation %}{{ content + eos_token }}{% endgeneration %}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<\uff5cAssistant\uff5c><think>\n' }}{%- endif -%}"""

MISTRAL_V03 = r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {%- generation %}{{- " " + message["content"] + eos_token }}{%- endgeneration %}
    {%- endif %}
{%- endfor %}"""


def probe_refused_families(ck, work):
    for name, template, sample in (
            ("deepseek_r1", DEEPSEEK_R1, {"question": "Hi?", "answer": "Hello."}),
            ("mistral_v03", MISTRAL_V03, {"messages": [{"role": "system", "content": "Be nice."},
                                                        {"role": "user", "content": "Hi?"},
                                                        {"role": "assistant", "content": "Hello."}]})):
        tdir, specials = tok_folder(ck, work, "gpt2", name, template, "<s>", "</s>")
        enc = Encoder(os.path.join(tdir, "tokenizer.json"))
        e = expect_sample(enc, template, sample, specials)
        data = os.path.join(work, name + ".jsonl")
        write_jsonl(data, [sample])
        args = ["layerroute", "render", "--data", data, "--tokenizer", tdir, "--ids"]
        rc, out, err = ck.run(args)
        if name == "deepseek_r1":
            # Accepted since the commit after 26474b8: the answer starts where the
            # generation prompt ("<think>\n") and the whole conversation part.
            r = json.loads(out) if rc == 0 and out.strip() else {}
            ck.check(rc == 0 and r.get("tokens") == e.ids and r.get("loss_mask") == e.mask and
                     r.get("prompt_len") == e.prompt_len,
                     "deepseek_r1: a generation prompt the conversation does not repeat",
                     "repro: %s\nlol (exit %d): %s\nexpected mask %s prompt_len %s" % (
                         shell([ck.lol] + args), rc, (err.strip() or out.strip())[:400], e.mask, e.prompt_len))
            continue
        ck.notes.append("NOTE %s single-turn sample (%s): lol exit %d %s; the generation-block mask is "
                        "well defined: assistant text %s, prefix rule here: %s" % (
                            name, shell([ck.lol] + args), rc, (err.strip() or out.strip())[:400],
                            decode_masked(e.text, e.boffs, e.mask, 1),
                            "refuses" if e.prefix_spans is None else e.prefix_spans))


ENCODE_TEXTS = {}


def check_encoder(ck, work):
    """`lol tokenizer encode` on every rendered text == this encoder's ids."""
    for key, texts in ENCODE_TEXTS.items():
        tdir = os.path.join(work, "base_" + key)
        enc = Encoder(os.path.join(tdir, "tokenizer.json"))
        tj = os.path.join(work, "texts_%s.jsonl" % key)
        with open(tj, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        a = ["tokenizer", "encode", "--tokenizer", tdir, "--jsonl", tj]
        rc, out, err = ck.run(a)
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        ck.check(rc == 0 and len(lines) == len(texts), "%s: tokenizer encode ran" % key,
                 "repro: %s\n%s" % (shell([ck.lol] + a), err))
        for t, got in zip(texts, lines):
            ids = enc.encode(t)[0]
            ck.check(got == ids, "%s: `lol tokenizer encode` vs this encoder on %r" % (key, t),
                     "lol:  %s\nhere: %s" % (got, ids))


def check_system(ck, work, name, template, tdir, specials, enc):
    """--system S: a system message first in samples without one."""
    samples = [{"question": "Hi?", "answer": "Hello."},
               {"messages": [{"role": "system", "content": "Own system."},
                             {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]}]
    data = os.path.join(work, "%s_system.jsonl" % name)
    write_jsonl(data, samples)
    sysmsg = "Be brief, always."
    exps = [expect_sample(enc, template, s, specials, system=sysmsg) for s in samples]
    args = ["layerroute", "render", "--data", data, "--tokenizer", tdir, "--count", "2", "--ids",
            "--system", sysmsg]
    rc, out, err = ck.run(args)
    repro = shell([ck.lol] + args)
    if ck.check(rc == 0, "%s --system: exit status" % name, "repro: %s\n%s" % (repro, err)):
        compare_rows(ck, "%s --system" % name, repro, exps, parse_lines(out))


def check_refusals(ck, work, dirs):
    # Mistral: raise_exception on non-alternating roles, at physical line 3 (a blank line 2)
    tdir, specials, enc, _ = dirs["mistral"]
    cases = [
        ("mistral_alternation.jsonl",
         [{"question": "ok?", "answer": "ok"}, None,
          {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                        {"role": "assistant", "content": "c"}]}],
         3, "conversation roles must alternate user/assistant/user/assistant/...", MISTRAL),
        ("mistral_system_late.jsonl",
         [{"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late"},
                        {"role": "assistant", "content": "c"}]}],
         1, None, MISTRAL),
    ]
    for fname, samples, line, msg, template in cases:
        path = os.path.join(work, fname)
        write_jsonl(path, samples)
        bad = [s for s in samples if s is not None][-1]
        try:
            render(template, to_messages(bad), specials)
            raised = None
        except jinja2.exceptions.TemplateError as ex:
            raised = str(ex)
        assert raised is not None, "oracle: the template should raise on %s" % fname
        for extra in ([], ["--ids"]):
            args = ["layerroute", "render", "--data", path, "--tokenizer", tdir, "--count",
                    str(len([s for s in samples if s is not None]))] + extra
            rc, out, err = ck.run(args)
            repro = shell([ck.lol] + args)
            ck.check(rc == 2 and ("%s:%d" % (path, line)) in err and raised in err,
                     "mistral raise_exception refused (%s%s)" % (fname, " --ids" if extra else ""),
                     "repro: %s\nexpected exit 2, '%s:%d' and %r on stderr\nlol rc=%d stderr=%r" % (
                         repro, path, line, raised, rc, err))
    # Qwen3: an earlier turn renders differently once later turns follow
    tdir, specials, enc, _ = dirs["qwen3"]
    multi = {"messages": [{"role": "user", "content": "First?"},
                          {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nOne."},
                          {"role": "user", "content": "Second?"},
                          {"role": "assistant", "content": "Two."}]}
    plain_multi = {"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"},
                                     {"from": "human", "value": "z"}, {"from": "gpt", "value": "w"}]}
    for fname, samples, line in (("qwen3_multi.jsonl", [{"question": "q", "answer": "a"}, multi], 2),
                                 ("qwen3_multi_plain.jsonl", [None, None, plain_multi], 3)):
        path = os.path.join(work, fname)
        write_jsonl(path, samples)
        bad = [s for s in samples if s is not None][-1]
        assert prefix_rule_spans(QWEN3, to_messages(bad), specials) is None, "oracle: qwen3 prefix"
        count = str(len([s for s in samples if s is not None]))
        args = ["layerroute", "render", "--data", path, "--tokenizer", tdir, "--count", count, "--ids"]
        rc, out, err = ck.run(args)
        repro = shell([ck.lol] + args)
        ck.check(rc == 2 and ("%s:%d" % (path, line)) in err,
                 "qwen3 multi-turn refused (%s --ids)" % fname,
                 "repro: %s\nexpected exit 2 and '%s:%d' on stderr\nlol rc=%d stderr=%r" % (
                     repro, path, line, rc, err))
        if fname == "qwen3_multi.jsonl":
            # ASSUMED A9: the text alone needs no prefix renderings; not counted
            args = args[:-1]
            rc, out, err = ck.run(args)
            ck.notes.append("NOTE qwen3 multi-turn sample without --ids: exit %d%s (%s)" % (
                rc, ", the text is printed" if rc == 0 else ", " + err.strip()[:200], shell([ck.lol] + args)))


def selftest():
    """Pre-tokenizer spot checks against hand-derived splits."""
    def pieces(f, s):
        return [s[a:b] for a, b in f(s)]
    assert pieces(split_qwen2, "Hello, world!\n\n  ok 123 it's I'M") == \
        ["Hello", ",", " world", "!\n\n", " ", " ok", " ", "1", "2", "3", " it", "'s", " I", "'M"]
    assert pieces(split_qwen2, "a \n\n b  ") == ["a", " \n\n", " b", "  "]
    assert pieces(split_qwen2, "|>\n\nHi") == ["|>\n\n", "Hi"]
    assert pieces(split_qwen2, "x  y") == ["x", " ", " y"]
    assert pieces(split_qwen2, "\U0001F600ok") == ["\U0001F600ok"]
    assert pieces(split_gpt2, "Hello, world!\n\n  ok 123 it's I'M") == \
        ["Hello", ",", " world", "!", "\n\n ", " ok", " 123", " it", "'s", " I", "'", "M"]
    assert pieces(split_gpt2, "[/INST]  ") == ["[/", "INST", "]", "  "]
    print("selftest ok")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--lol", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--only", default=None, help="comma-separated template names")
    sub.add_parser("selftest")
    a = ap.parse_args(argv)
    if a.cmd == "selftest":
        selftest()
        return 0
    t0 = time.time()
    selftest()
    lol = os.path.abspath(a.lol)
    work = os.path.abspath(a.work)
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    ck = Checker(lol, work)
    only = set(a.only.split(",")) if a.only else None
    dirs = {}
    for name, template, key, bos, eos, eot in TEMPLATES:
        if only and name not in only:
            continue
        dirs[name] = check_template(ck, work, name, template, key, bos, eos, eot)
        if name in ("llama3", "gemma"):
            tdir, specials, enc, _ = dirs[name]
            check_system(ck, work, name, template, tdir, specials, enc)
    if not only or "alpaca" in only:
        check_boundary_merge(ck, work)
    check_encoder(ck, work)
    if not only:
        probe_refused_families(ck, work)
    if not only or ("mistral" in only and "qwen3" in only):
        check_refusals(ck, work, dirs)
    for n in ck.notes:
        print(n)
    print("INFO: tokens straddling a generation-span start: %d, an end: %d" % (STRADDLE["start"], STRADDLE["end"]))
    print("(%d lol runs, %.1f s)" % (ck.calls, time.time() - t0))
    print("%d checks, %d disagreements" % (ck.checks, len(ck.bad)))
    return 1 if ck.bad else 0


if __name__ == "__main__":
    sys.exit(main())
