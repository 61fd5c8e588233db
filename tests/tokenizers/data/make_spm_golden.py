"""Regenerates spm_golden_*.jsonl: the ids Hugging Face `tokenizers` gives for
spm_bpe_tokenizer.json (a SentencePiece-style BPE: UTF-8 spellings with U+2581,
<0xXX> byte fallback, fuse_unk) under four pipelines real checkpoints use.

  npm install tokenizers            # the Rust library's Node binding (0.23.2 was used)
  NODE_PATH=$PWD/node_modules python3 make_spm_golden.py

spm_bpe_tokenizer.json itself was converted from a byte-level BPE trained with
`lol tokenizer train` on en_kjv.txt + multilingual_valid.jsonl (vocabulary 1200):
tokens that are valid UTF-8 kept with ' ' -> U+2581, merges among them kept,
<unk> <s> </s> and the 256 <0xXX> tokens first (Llama's layout).
Each output starts with a header line {"variant", "normalizer", "pre_tokenizer",
"decoder"} (the fields replaced in spm_bpe_tokenizer.json), then hf_golden.js lines.
"""
import json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "../../../../shared/data/corpora")
SP = "\u2581"
REPLACE_DEC = {"type": "Replace", "pattern": {"String": SP}, "content": " "}
VARIANTS = {
    # Llama 2 / Mistral / TinyLlama tokenizer.json (transformers' legacy conversion)
    "legacy": {"normalizer": {"type": "Sequence", "normalizers": [
                   {"type": "Prepend", "prepend": SP},
                   {"type": "Replace", "pattern": {"String": " "}, "content": SP}]},
               "pre_tokenizer": None,
               "decoder": {"type": "Sequence", "decoders": [REPLACE_DEC, {"type": "ByteFallback"}, {"type": "Fuse"},
                                                            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}},
    # transformers' non-legacy conversion (Metaspace, prepend only at the start of the input)
    "metaspace_first": {"normalizer": None,
                        "pre_tokenizer": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": False},
                        "decoder": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": False}},
    # older conversions: Metaspace with add_prefix_space (always), splitting before each U+2581
    "metaspace_always_split": {"normalizer": None,
                               "pre_tokenizer": {"type": "Metaspace", "replacement": SP, "add_prefix_space": True},
                               "decoder": {"type": "Sequence", "decoders": [REPLACE_DEC, {"type": "ByteFallback"},
                                                                            {"type": "Fuse"},
                                                                            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}},
    # Gemma / Yi: spaces replaced, nothing prepended, nothing stripped
    "replace_only": {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SP},
                     "pre_tokenizer": None,
                     "decoder": {"type": "Sequence", "decoders": [REPLACE_DEC, {"type": "ByteFallback"}, {"type": "Fuse"}]}},
}

def texts():
    out = []
    with open(os.path.join(SHARED, "multilingual_valid.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(l)["text"] for l in f if l.strip()]
    out += [d[:150] for d in docs[::10]]  # 20 documents, 10 languages
    kjv = open(os.path.join(SHARED, "en_kjv.txt"), encoding="utf-8").read()
    out += [kjv[i * 40000:i * 40000 + 200] for i in range(3)]
    out += ["", " ", "  ", "Hello", " Hello", "Hello ", "  Hello  world  ", "\n", "a\nb\n\nc", "\t tab",
            "<s>Hello</s>", "Hi <s> there </s>", "</s>", "x<unk>y", "emoji \U0001F600\U0001F642 and \U0001D11E music",
            "\u00c0\u00c9\u00ce\u00f5\u00fc \u00df", "\u65e5\u672c\u8a9e", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
            "\ufb01 ligature", "a" + SP + "b", SP + SP, "<0x41>", "mixed\u00a0nbsp", "zero\u200bwidth", "1234567890",
            "   leading", "trailing   ", "The LORD said unto Moses"]
    return out

def main():
    base = json.load(open(os.path.join(HERE, "spm_bpe_tokenizer.json"), encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        tpath = os.path.join(tmp, "texts.jsonl")
        with open(tpath, "w", encoding="utf-8") as f:
            for t in texts():
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        for name, fields in VARIANTS.items():
            j = dict(base)
            j.update(fields)
            jpath = os.path.join(tmp, name + ".json")
            json.dump(j, open(jpath, "w", encoding="utf-8"), ensure_ascii=False)
            golden = subprocess.run(["node", os.path.join(HERE, "hf_golden.js"), jpath, tpath], check=True,
                                    capture_output=True, text=True).stdout
            with open(os.path.join(HERE, "spm_golden_" + name + ".jsonl"), "w", encoding="utf-8") as f:
                f.write(json.dumps(dict(variant=name, **fields), ensure_ascii=False) + "\n")
                f.write(golden)
            print(name, golden.count("\n"), "texts", file=sys.stderr)

main()
