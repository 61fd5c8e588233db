"""Regenerates bl_bpe_tokenizer.json and added_golden_*.jsonl: the ids Hugging Face
`tokenizers` gives when tokenizer.json lists added tokens of every kind
(normalized true/false, single_word, lstrip, rstrip, special or not, ids with gaps
or clashing with the model vocabulary) under byte-level and SentencePiece-style
pipelines with normalizers (NFC, NFKC, Prepend/Replace, an empty Sequence).

  npm install tokenizers            # the Rust library's Node binding (0.23.2 was used)
  NODE_PATH=$PWD/node_modules python3 make_added_golden.py

bl_bpe_tokenizer.json, a byte-level BPE, is derived from spm_bpe_tokenizer.json (the
inverse of that file's conversion: U+2581 -> ' ', UTF-8 bytes -> GPT-2's byte
characters, <0xXX> -> the byte's character), ids renumbered without gaps.
Each output starts with a header line {"variant", "base", and the fields replaced in
the base file}, then one line {"vocab_size", "added_ids"} and hf_golden.js lines.
"""
import json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SP = "\u2581"
sys.path.insert(0, HERE)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
         list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def byte_level_base(spm):
    b2u = bytes_to_unicode()

    def conv(tok):
        if len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            return b2u[int(tok[3:5], 16)]
        return "".join(b2u[b] for b in tok.replace(SP, " ").encode("utf-8"))

    specials = [t["content"] for t in spm["added_tokens"]]
    by_id = sorted(spm["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for tok, _ in by_id:
        t = tok if tok in specials else conv(tok)
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = []
    for m in spm["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        ca, cb = conv(a), conv(b)
        if ca in vocab and cb in vocab and ca + cb in vocab:
            merges.append([ca, cb])
    added = [dict(t, id=vocab[t["content"]]) for t in spm["added_tokens"]]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None, "pre_tokenizer": bl, "post_processor": dict(bl, trim_offsets=False),
            "decoder": bl,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": merges}}


def tok(content, id, special=False, normalized=False, single_word=False, lstrip=False, rstrip=False):
    return {"id": id, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


SPECIALS = [tok("<unk>", 0, special=True), tok("<s>", 1, special=True), tok("</s>", 2, special=True)]


def added_a(v):
    """Byte-level set; ids as a careless file might list them (gaps, a clash)."""
    return SPECIALS + [
        tok("<|sep|>", v + 7, special=True),
        tok("A\u030a", v + 3, normalized=True),           # decomposed A-ring: matched as NFC "\u00c5"
        tok("\u212b", v + 1),                              # ANGSTROM SIGN, raw only (NFC: "\u00c5")
        tok("  ", v + 2, normalized=True),                  # GPT-NeoX's space runs
        tok("    ", v + 4, normalized=True),
        tok("<|sep|>x", v + 5, normalized=True),            # loses to <|sep|> (raw phase first)
        tok("cat", v + 6, single_word=True),
        tok("dog", v + 8, single_word=True, normalized=True),
        tok("\u03be\u03c8", v + 9, single_word=True),       # a dropped match is skipped over, ...
        tok("\u03c8", v + 10),                              # ... hiding this one inside it
        tok("<L>", v + 11, lstrip=True),
        tok("<R>", v + 12, rstrip=True, special=True),
        tok("<LR>", v + 13, lstrip=True, rstrip=True, normalized=True),
        tok("the", 5),                                      # in the model vocabulary: its model id
        tok("\ufb01x", v + 14, normalized=True),            # NFKC: "fix"
        tok("<norm>", v + 15, special=True, normalized=True),
        tok("<|sep|>", v + 16, special=True),               # listed twice
        tok("and", 7),                                      # in the model vocabulary, another id listed
    ]


def added_b(v):
    """SentencePiece-style set."""
    return SPECIALS + [
        tok("<y>", v + 3, normalized=True),                 # Prepend makes the pattern "\u2581<y>"
        tok("<y", v, special=True),
        tok("q z", v + 1, normalized=True),
        tok("<sep>", v + 2, single_word=True),
        tok(SP + "<t>", v + 4, normalized=True),
        tok("abc", v + 5, lstrip=True, rstrip=True),
        tok("\u03be\u03c8", v + 6, single_word=True),
        tok("\u03c8", v + 7),
        tok("Hello", 9),                                    # id 9 is another model token's
        tok("and", 3),                                      # a model token: its model id
        tok("<n>", v + 8, normalized=True, single_word=True, special=True),
    ]


TEXTS = [
    "", " ", "  ", "   ", "    ", "     ", "a  b    c      d", "Hello world", " Hello", "The LORD said unto Moses",
    "<|sep|>", "a<|sep|>b", "<|sep|>x", "<|sep|>xy", "x<|sep|>x<|sep|>",
    "A\u030a", "\u00c5", "\u212b", "xA\u030ay", "x\u00c5y", "\u212b\u00c5A\u030a",
    "cat", "a cat", "cats", "concat", "cat_", "_cat", "cat.", "(cat)", "\u00e9cat", "cat\u00e9", "\u2014cat\u2014",
    "\u4e2dcat", "\u0663cat", "\u00b2cat", "cat\u00b2", "\u2160cat", "\u00aacat", "cat\u0301", "\u200dcat", "1cat",
    "dog", "hotdog", "dog dog", "dogs", "A\u030adog", "\u00c5 dog",
    "\u03be\u03c8", "a\u03be\u03c8", "\u03be\u03c8b", "x\u03be\u03c8 \u03c8", "\u03c8\u03be\u03c8", "\u03be\u03c8\u03c8",
    "a <L> b", "a\u3000\t<L>b", "<L><L>", "a <R> b", "a<R>\n\n b", "<R> <R>", "x <LR> y", " <LR> ", "<LR><LR>",
    "the", "then", "the the", " the", "and", "band", "and and", "\ufb01x", "fix", "a fix", "pre\ufb01x", "<norm>", "a<norm>b",
    "<y>", "a<y>", "a <y>", "<y> <y>", "q z", "aq z", "a q z", "<sep>", "a<sep>", "a <sep> b", "<sep>_",
    SP + "<t>", "<t>", "a <t>", "a" + SP + "<t>", "abc", "x abc y", "xabcy", "  abc  ", "Hello", "Hello Hello",
    "<n>", "a <n> b", "a<n>", "<unk><s></s>", "x<s>y", " </s> ", "\t tab\tx", "Hi, you. Ok!! 12345 x1y22",
    "I'm  here\n\n  and   there,twice", "aeiou xyz", "1 22 333 4444",
    "\u65e5\u672c\u8a9ecat\u65e5\u672c", "emoji \U0001F600 cat \U0001F642", "\u041f\u0440\u0438\u0432\u0435\u0442 dog",
]

VARIANTS = {
    # Qwen2 / GPT-NeoX: NFC
    "bl_nfc": ("bl", added_a, {"normalizer": {"type": "NFC"}}),
    # DeepSeek V3: an empty Sequence normalizer, Split steps before ByteLevel(use_regex=false)
    "bl_deepseek": ("bl", added_a, {
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
             "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}}),
    # NFKC in a Sequence
    "bl_nfkc": ("bl", added_a, {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}]}}),
    # GPT-4 / GPT-4o conversions of tiktoken files: Split(Removed, invert) keeps only the matches
    "bl_gpt4": ("bl", added_a, {
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}}),
    # the other Split behaviours, one step each
    "bl_split_behaviors": ("bl", added_a, {
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "\t"}, "behavior": "Removed", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[.,!?]"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Contiguous", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "Isolated", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}}),
    # Gemma 2: spaces replaced, then Split(" ", MergedWithPrevious); here without the
    # normalizer, so that the split acts
    "spm_gemma2_split": ("spm", added_b, {
        "normalizer": None,
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}]}}),
    # Llama 2 legacy pipeline
    "spm_legacy": ("spm", added_b, {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SP}, {"type": "Replace", "pattern": {"String": " "}, "content": SP}]},
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}),
    # Metaspace, prepend only at the start of the input
    "spm_metaspace_first": ("spm", added_b, {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": True},
        "decoder": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": True}}),
}


def main():
    spm = json.load(open(os.path.join(HERE, "spm_bpe_tokenizer.json"), encoding="utf-8"))
    bl = byte_level_base(spm)
    with open(os.path.join(HERE, "bl_bpe_tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(bl, f, ensure_ascii=False)
    bases = {"bl": bl, "spm": spm}
    with tempfile.TemporaryDirectory() as tmp:
        tpath = os.path.join(tmp, "texts.jsonl")
        with open(tpath, "w", encoding="utf-8") as f:
            for t in TEXTS:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        for name, (base, added, fields) in VARIANTS.items():
            j = json.loads(json.dumps(bases[base]))
            fields = dict(fields, added_tokens=added(len(j["model"]["vocab"])))
            j.update(fields)
            jpath = os.path.join(tmp, name + ".json")
            json.dump(j, open(jpath, "w", encoding="utf-8"), ensure_ascii=False)
            golden = subprocess.run(["node", os.path.join(HERE, "hf_golden.js"), jpath, tpath, "--added"],
                                    check=True, capture_output=True, text=True).stdout
            with open(os.path.join(HERE, "added_golden_" + name + ".jsonl"), "w", encoding="utf-8") as f:
                f.write(json.dumps(dict(variant=name, base=base, **fields), ensure_ascii=False) + "\n")
                f.write(golden)
            print(name, golden.count("\n") - 1, "texts", file=sys.stderr)


main()
