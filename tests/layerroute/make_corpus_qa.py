#!/usr/bin/env python3
"""Builds LayerRoute JSONL data (issue 11) from the shared corpora.

Three sources, like the paper's mix of tool-call and reasoning data:
  kjv-tool      tool-call conversation: the user asks for a verse, the assistant calls
                lookup_verse(book, chapter, verse), the tool returns the text, the
                assistant quotes it (messages with tool_calls / tool roles);
  kjv-continue  question/answer: continue a verse from its first half (longer answers);
  devil         question/answer: define a word of The Devil's Dictionary.
Samples are assigned to train / held-out by a hash of their text (deterministic).

usage: make_corpus_qa.py CORPORA_DIR OUT_DIR [--train N] [--heldout N] [--seed S]
"""
import argparse, hashlib, json, os, random, re

p = argparse.ArgumentParser()
p.add_argument("corpora"); p.add_argument("out")
p.add_argument("--train", type=int, default=2000); p.add_argument("--heldout", type=int, default=200)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
rng = random.Random(a.seed)

verses = []  # (book, chapter, verse, text)
book = chap = None; v = 0
for line in open(os.path.join(a.corpora, "en_kjv.txt"), encoding="utf-8"):
    line = line.strip()
    if not line: continue
    m = re.fullmatch(r"((?:[1-3] )?[A-Z][A-Za-z ]+?) (\d+)", line)
    if m: book, chap, v = m.group(1), int(m.group(2)), 0; continue
    if book: v += 1; verses.append((book, chap, v, line))

entries = []
for block in open(os.path.join(a.corpora, "en_devil.txt"), encoding="utf-8").read().split("\n\n"):
    m = re.match(r"([A-Z][A-Z' -]+), ([a-z.]+) (.+)", block.strip().split("\n")[0])
    if m and 20 <= len(m.group(3)) <= 300: entries.append((m.group(1).title(), m.group(3)))

def tool(vs):
    b, c, n, t = vs
    return {"source": "kjv-tool", "messages": [
        {"role": "user", "content": f"Quote {b} {c}:{n}."},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "lookup_verse", "arguments": {"book": b, "chapter": c, "verse": n}}}]},
        {"role": "tool", "content": t},
        {"role": "assistant", "content": f"{b} {c}:{n} reads: {t}"}]}

def cont(i):
    t = verses[i][3]; words = t.split(); h = max(1, len(words) // 2)
    nxt = verses[i + 1][3] if i + 1 < len(verses) else ""
    return {"source": "kjv-continue", "question": "Continue the passage: " + " ".join(words[:h]),
            "answer": " ".join(words[h:]) + (" " + nxt if nxt and len(nxt) < 200 else "")}

def devil(e):
    return {"source": "devil", "question": f"Define {e[0]}.", "answer": f"{e[0]}: {e[1]}"}

pool = [tool(verses[i]) for i in rng.sample(range(len(verses)), 3000) if len(verses[i][3]) < 220]
pool += [cont(i) for i in rng.sample(range(len(verses) - 1), 3000) if len(verses[i][3]) < 220]
pool += [devil(e) for e in entries]
rng.shuffle(pool)
train, held = [], []
for s in pool:
    h = int(hashlib.sha256(json.dumps(s, sort_keys=True).encode()).hexdigest(), 16) % 10
    (held if h == 0 else train).append(s)
os.makedirs(a.out, exist_ok=True)
for name, rows, n in (("train.jsonl", train, a.train), ("heldout.jsonl", held, a.heldout)):
    with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
        for s in rows[:n]: f.write(json.dumps(s) + "\n")
    src = {}
    for s in rows[:n]: src[s["source"]] = src.get(s["source"], 0) + 1
    print(name, min(n, len(rows)), src)
