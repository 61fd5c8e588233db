"""Regenerates vocab_gap_golden_*.jsonl: the ids Hugging Face `tokenizers` gives added
tokens when the model vocabulary's ids have gaps. A new added token gets the number of
vocabulary entries (Model::get_vocab_size), not 1 + the largest id; in the "clash"
variant that number is the id of a model token ("Ġthe" moved to it), which the added
token then shares.

  npm install tokenizers            # the Rust library's Node binding (0.23.2 was used)
  NODE_PATH=$PWD/node_modules python3 make_vocab_gap_golden.py

Each output starts with a header line {"variant", "move" (model token -> new id, applied
to bl_bpe_tokenizer.json), "added_tokens"}, then hf_golden.js lines (with --added).
"""
import json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def tok(content, id, special=False):
    return {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


ADDED = [tok("<unk>", 0, True), tok("<s>", 1, True), tok("</s>", 2, True),
         tok("<x>", 5000, True), tok("<y>", 5001), tok("and", 7)]
TEXTS = ["", "the", " the", "The the", "<x>", "<y>", "a<x> the<y>the", " the<x> the", "<s> the</s>",
         "then the there", "Hello world the end<x>", "and band", "<x>and the"]
# variant: (model tokens moved to new ids, added tokens). "high": an added token whose
# content is a model token above the entry count ("and" at 1300) does not raise the next
# new id ("<x>" still gets the entry count, 1159, shared with "Ġthe").
VARIANTS = {"gap": ({"\u0120the": 1300}, ADDED), "clash": ({"\u0120the": 1159}, ADDED),
            "high": ({"\u0120the": 1159, "and": 1300}, ADDED[:3] + [ADDED[5]] + ADDED[3:5])}


def main():
    base = json.load(open(os.path.join(HERE, "bl_bpe_tokenizer.json"), encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        tpath = os.path.join(tmp, "texts.jsonl")
        with open(tpath, "w", encoding="utf-8") as f:
            for t in TEXTS:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        for name, (move, added) in VARIANTS.items():
            j = json.loads(json.dumps(base))
            j["model"]["vocab"].update(move)
            j["added_tokens"] = added
            jpath = os.path.join(tmp, name + ".json")
            json.dump(j, open(jpath, "w", encoding="utf-8"), ensure_ascii=False)
            golden = subprocess.run(["node", os.path.join(HERE, "hf_golden.js"), jpath, tpath, "--added"],
                                    check=True, capture_output=True, text=True).stdout
            with open(os.path.join(HERE, "vocab_gap_golden_" + name + ".jsonl"), "w", encoding="utf-8") as f:
                f.write(json.dumps({"variant": name, "move": move, "added_tokens": added}, ensure_ascii=False) + "\n")
                f.write(golden)
            print(name, golden.count("\n") - 1, "texts", file=sys.stderr)


main()
