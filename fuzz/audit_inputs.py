#!/usr/bin/env python3
"""Malformed-input audit of the `lol` command (issue 13, docs/robustness.md).

Builds a tiny valid setting (maze dataset, 2-step training run, BPE tokenizer, routing
paths), then feeds the real binary one broken file at a time and records the exit
status and the first line of stderr. Prints a Markdown table; exits 1 when any case
did not end with exit status 2 and a message (a crash, an internal error, exit 0).

    python3 fuzz/audit_inputs.py build/lol [--work DIR] > /tmp/audit.md

Takes about a minute (each run loads LibTorch).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def write_st(path, tensors, metadata=None, header_override=None, tail=b""):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    data = b""
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = header_override if header_override is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data + tail)


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    tensors = []
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        s, t = e["data_offsets"]
        tensors.append([name, e["dtype"], e["shape"], b[8 + n + s:8 + n + t]])
    return tensors, meta


class Audit:
    def __init__(self, lol, work):
        self.lol = os.path.abspath(lol)
        self.work = work
        self.rows = []
        self.bad = 0

    def run(self, cls, case, args, cwd=None):
        p = subprocess.run([self.lol] + args, cwd=cwd or self.work, capture_output=True, text=True,
                           errors="replace", timeout=300)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        msg = lines[0] if lines else ""
        msg = msg.replace(self.work + "/", "").replace(self.work, ".")
        ok = p.returncode == 2 and bool(msg) and not msg.startswith("internal error")
        if not ok:
            self.bad += 1
        self.rows.append((cls, case, msg, p.returncode, ok))

    def table(self):
        out = ["| input class | what was tried | message (first line of stderr) | exit |", "|---|---|---|---|"]
        for cls, case, msg, rc, ok in self.rows:
            m = msg.replace("|", "\\|")
            if len(m) > 220:
                m = m[:217] + "..."
            flag = "" if ok else " **(!)**"
            out.append(f"| {cls} | {case} | `{m}` | {rc}{flag} |")
        return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lol")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="lol_audit_")
    work = os.path.abspath(work)
    os.makedirs(work, exist_ok=True)
    A = Audit(a.lol, work)
    W = lambda *p: os.path.join(work, *p)

    def sh(args):
        subprocess.run([A.lol] + args, cwd=work, check=True, capture_output=True)

    # ------------------------------------------------------------------ valid baseline
    sh(["data", "maze", "--n", "40", "--size", "4", "--seed", "3", "--valid-fraction", "0.25", "--out", "data"])
    model_cfg = {"architecture": "lol", "d_model": 32, "n_heads": 2, "n_kv_heads": 2, "ffn_hidden": 64,
                 "n_prelude": 1, "n_coda": 1, "library_size": 3, "core_depth": 2, "window": 8, "stride": 4,
                 "max_seq_len": 256}
    run_cfg = {"model": model_cfg, "data": {"dir": "data", "batch_size": 8},
               "train": {"steps": 2, "out": "run", "progress": False, "seed": 1}}
    json.dump(run_cfg, open(W("run.json"), "w"))
    sh(["train", "--config", "run.json"])
    ck = os.path.join("run", open(W("run", "latest")).read().strip())
    with open(W("text.txt"), "w") as f:
        for i in range(100):
            f.write(f"the quick brown fox jumps over the lazy dog {i}\n")
    sh(["tokenizer", "train", "--in", "text.txt", "--vocab-size", "300", "--out", "tok", "--no-progress"])
    good_tok = json.load(open(W("tok", "tokenizer.json")))
    good_cfg = json.load(open(W(ck, "config.json")))
    good_model, good_meta = read_st(W(ck, "model.safetensors"))

    def ckpt_with(name, cfg=None, tensors=None, meta=None, raw_cfg=None, st_bytes=None):
        d = W("ck_" + name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(W(ck), d)
        if raw_cfg is not None:
            open(os.path.join(d, "config.json"), "w").write(raw_cfg)
        elif cfg is not None:
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        if st_bytes is not None:
            open(os.path.join(d, "model.safetensors"), "wb").write(st_bytes)
        elif tensors is not None:
            write_st(os.path.join(d, "model.safetensors"), tensors, meta if meta is not None else good_meta)
        return d

    # ------------------------------------------------------------------ model config.json
    C = "model config.json (`lol info`)"
    A.run(C, "truncated JSON", ["info", ckpt_with("trunc", raw_cfg=json.dumps(good_cfg)[:40])])
    A.run(C, "empty file", ["info", ckpt_with("empty", raw_cfg="")])
    for case, patch in [
        ("unknown key `windw`", {"windw": 8}),
        ("`n_heads` = 3 does not divide `d_model` = 32", {"n_heads": 3}),
        ("`n_kv_heads` = 2 of `n_heads` = 1", {"n_heads": 1, "n_kv_heads": 2}),
        ("`stride` = `window`", {"stride": 8}),
        ("`window` = 0", {"window": 0}),
        ("`library_size` = 0", {"library_size": 0}),
        ("`vocab_size` as a string", {"vocab_size": "31"}),
        ("`d_model` = 2.5", {"d_model": 2.5}),
        ("`core_depth` = -1", {"core_depth": -1}),
        ("`d_model` = 1048576 (huge; weights are 32-wide)", {"d_model": 1048576, "n_heads": 1024, "n_kv_heads": 1024}),
        ("`vocab_size` = 2^31 (huge)", {"vocab_size": 2 ** 31}),
        ("`vocab_size` = 2^64-1 (unsigned overflow)", {"vocab_size": 2 ** 64 - 1}),
        ("`norm_eps` = 0", {"norm_eps": 0}),
        ("`architecture` = \"gpt\"", {"architecture": "gpt"}),
    ]:
        c = dict(good_cfg)
        c.update(patch)
        A.run(C, case, ["info", ckpt_with("cfg", cfg=c)])
    A.run(C, "missing directory", ["info", W("nope")])

    # ------------------------------------------------------------------ safetensors (model weights)
    C = "model.safetensors (`lol info`)"
    good_bytes = open(W(ck, "model.safetensors"), "rb").read()
    A.run(C, "empty file", ["info", ckpt_with("st", st_bytes=b"")])
    A.run(C, "4 bytes", ["info", ckpt_with("st", st_bytes=b"\x01\x02\x03\x04")])
    A.run(C, "header length 2^63", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", 2 ** 63) + b"{}")])
    A.run(C, "header length past end of file", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", 1000) + b"{}")])
    A.run(C, "truncated to half", ["info", ckpt_with("st", st_bytes=good_bytes[:len(good_bytes) // 2])])
    A.run(C, "header not JSON", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", 4) + b"{{{{")])
    A.run(C, "header is a JSON array", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", 2) + b"[]")])
    t = [list(x) for x in good_model]
    t[0][1] = "F99"
    A.run(C, "unknown dtype `F99`", ["info", ckpt_with("st", tensors=t)])
    t = [list(x) for x in good_model]
    t[0][1] = "I32"
    A.run(C, "float weight stored as I32", ["info", ckpt_with("st", tensors=t)])
    t = [list(x) for x in good_model]
    t[0][2] = [t[0][2][0] * t[0][2][1] // 2, 2] if len(t[0][2]) == 2 else [len(t[0][3]) // 8, 2]
    A.run(C, f"wrong shape of `{t[0][0]}`", ["info", ckpt_with("st", tensors=t)])
    A.run(C, f"missing tensor `{good_model[0][0]}`", ["info", ckpt_with("st", tensors=good_model[1:])])
    A.run(C, "extra tensor `junk`", ["info", ckpt_with("st", tensors=good_model + [["junk", "F32", [1], b"\0" * 4]])])
    t = [list(x) for x in good_model]
    t[0][3] = struct.pack("<f", float("nan")) + t[0][3][4:]
    A.run(C, "one NaN weight", ["info", ckpt_with("st", tensors=t)])
    t[0][3] = struct.pack("<f", float("inf")) + t[0][3][4:]
    A.run(C, "one +Inf weight", ["info", ckpt_with("st", tensors=t)])
    hdr = {"w": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 4]}}
    A.run(C, "declared shape 2^40 x 2^40", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", len(json.dumps(hdr))) +
                                                            json.dumps(hdr).encode() + b"\0" * 4)])
    hdr = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    A.run(C, "overlapping data_offsets", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", len(json.dumps(hdr))) +
                                                            json.dumps(hdr).encode() + b"\0" * 12)])
    hdr = {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}
    A.run(C, "negative shape", ["info", ckpt_with("st", st_bytes=struct.pack("<Q", len(json.dumps(hdr))) +
                                                  json.dumps(hdr).encode() + b"\0" * 8)])

    # ------------------------------------------------------------------ run configs
    C = "run config (`lol train --config`)"

    def run_with(case, mutate, extra=()):
        c = json.loads(json.dumps(run_cfg))
        c["train"]["out"] = "run_bad"
        mutate(c)
        json.dump(c, open(W("bad_run.json"), "w"))
        shutil.rmtree(W("run_bad"), ignore_errors=True)
        A.run(C, case, ["train", "--config", "bad_run.json", "--no-progress"] + list(extra))

    run_with("unknown section `trian`", lambda c: c.update({"trian": {}}))
    run_with("unknown key `train.stepz`", lambda c: c["train"].update({"stepz": 3}))
    run_with("`train.steps` = -5", lambda c: c["train"].update({"steps": -5}))
    run_with("`data.batch_size` = 0", lambda c: c["data"].update({"batch_size": 0}))
    run_with("`optim.lr` = -1", lambda c: c.update({"optim": {"lr": -1}}))
    run_with("`optim.betas` = [0.9]", lambda c: c.update({"optim": {"betas": [0.9]}}))
    run_with("`train.on_nonfinite` = \"ignore\"", lambda c: c["train"].update({"on_nonfinite": "ignore"}))
    run_with("`data.dir` missing directory", lambda c: c["data"].update({"dir": "nowhere"}))
    run_with("`model.vocab_size` = 5 < dataset's tokens", lambda c: c["model"].update({"vocab_size": 5}))
    run_with("`model.max_seq_len` = 16 < longest row", lambda c: c["model"].update({"max_seq_len": 16}))
    run_with("`--set train.nope=1`", lambda c: None, ["--set", "train.nope=1"])
    run_with("`--set train.steps=abc`", lambda c: None, ["--set", "train.steps=abc"])
    open(W("bad_run.json"), "w").write('{"model": {"d_model": 32,,}}')
    A.run(C, "syntax error", ["train", "--config", "bad_run.json"])

    # ------------------------------------------------------------------ datasets
    C = "dataset.json + token shards (`lol train`)"

    def data_with(case, mutate_info=None, mutate_shard=None, shard_bytes=None):
        d = W("data_bad")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(W("data"), d)
        if mutate_info:
            info = json.load(open(os.path.join(d, "dataset.json")))
            mutate_info(info)
            json.dump(info, open(os.path.join(d, "dataset.json"), "w"))
        sp = os.path.join(d, "train-00000.safetensors")
        if shard_bytes is not None:
            open(sp, "wb").write(shard_bytes)
        elif mutate_shard:
            t, m = read_st(sp)
            t = {x[0]: list(x) for x in t}
            mutate_shard(t)
            write_st(sp, list(t.values()), m)
        c = json.loads(json.dumps(run_cfg))
        c["train"]["out"] = "run_bad"
        c["data"]["dir"] = "data_bad"
        json.dump(c, open(W("bad_run.json"), "w"))
        shutil.rmtree(W("run_bad"), ignore_errors=True)
        A.run(C, case, ["train", "--config", "bad_run.json", "--no-progress"])

    data_with("dataset.json unknown key", lambda i: i.update({"splitz": {}}))
    data_with("dataset.json `version` = 2", lambda i: i.update({"version": 2}))
    data_with("dataset.json `vocab_size` = 0", lambda i: i.update({"vocab_size": 0}))
    data_with("shard file missing", lambda i: i["splits"].update({"train": ["gone.safetensors"]}))
    data_with("shard name `../../etc/passwd`", lambda i: i["splits"].update({"train": ["../../etc/passwd"]}))
    data_with("no `train` split", lambda i: i["splits"].pop("train"))
    data_with("dataset `vocab_size` 5 < token ids", lambda i: i.update({"vocab_size": 5}))

    def tokens_f32(t):
        t["tokens"][1] = "F16"
    data_with("tokens stored as F16", mutate_shard=tokens_f32)

    def offsets_decreasing(t):
        raw = bytearray(t["offsets"][3])
        raw[8:16] = struct.pack("<q", 10 ** 6)
        t["offsets"][3] = bytes(raw)
    data_with("offsets jump past the token count", mutate_shard=offsets_decreasing)

    def mask_short(t):
        t["loss_mask"][3] = t["loss_mask"][3][:-1]
        t["loss_mask"][2] = [len(t["loss_mask"][3])]
    data_with("loss_mask one entry short", mutate_shard=mask_short)

    def prompt_long(t):
        raw = bytearray(t["prompt_len"][3])
        raw[0:4] = struct.pack("<i", 100000)
        t["prompt_len"][3] = bytes(raw)
    data_with("prompt_len > sequence length", mutate_shard=prompt_long)

    def offsets_2d(t):
        t["offsets"][2] = [len(t["offsets"][3]) // 16, 2]
    data_with("offsets 2-D", mutate_shard=offsets_2d)
    data_with("shard truncated to 100 bytes",
              shard_bytes=open(W("data", "train-00000.safetensors"), "rb").read()[:100])

    # ------------------------------------------------------------------ JSONL task records
    C = "JSONL task records (`lol data verify`)"
    good_line = open(W("data", "train.jsonl")).readline().rstrip("\n")
    rec = json.loads(good_line)
    for case, text in [
        ("line not JSON", "{\"task\": \"maze\", "),
        ("JSON array instead of object", "[1,2]"),
        ("missing field `question`", json.dumps({k: v for k, v in rec.items() if k != "question"})),
        ("`strategy` = 9", json.dumps({**rec, "strategy": 9})),
        ("`strategy` as string", json.dumps({**rec, "strategy": "1"})),
        ("unknown `task`", json.dumps({**rec, "task": "chess"})),
        ("question with an unknown word", json.dumps({**rec, "question": rec["question"] + " banana"})),
        ("invalid UTF-8", None),
    ]:
        p = W("bad.jsonl")
        if text is None:
            open(p, "wb").write(good_line.encode()[:-2] + b"\xff\xfe\"}\n")
        else:
            open(p, "w").write(good_line + "\n" + text + "\n")
        A.run(C, case, ["data", "verify", "bad.jsonl"])

    C = "JSONL text (`lol corpus --in x.jsonl`)"
    for case, text in [("line not JSON", b'{"text": "a"}\n{"text": \n'),
                       ("`text` is a number", b'{"text": 5}\n'),
                       ("missing `text`", b'{"body": "x"}\n'),
                       ("invalid UTF-8 in text", b'{"text": "a\xff\xfe b"}\n')]:
        open(W("bad_c.jsonl"), "wb").write(text)
        shutil.rmtree(W("corp_bad"), ignore_errors=True)
        A.run(C, case, ["corpus", "--in", "bad_c.jsonl", "--out", "corp_bad", "--no-progress"])

    # ------------------------------------------------------------------ tokenizers
    C = "tokenizer.json (`lol tokenizer encode`)"

    def tok_with(case, mutate=None, raw=None):
        d = W("tok_bad")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if raw is not None:
            open(os.path.join(d, "tokenizer.json"), "wb").write(raw)
        else:
            t = json.loads(json.dumps(good_tok))
            mutate(t)
            json.dump(t, open(os.path.join(d, "tokenizer.json"), "w"))
        A.run(C, case, ["tokenizer", "encode", "--tokenizer", d, "--text", "the quick fox"])

    tok_with("truncated", raw=json.dumps(good_tok).encode()[:200])
    tok_with("`model` missing", lambda t: t.pop("model"))
    tok_with("`model.type` = \"WordPiece\"", lambda t: t["model"].update({"type": "WordPiece"}))
    tok_with("vocab id 10^12", lambda t: t["model"]["vocab"].update({"zz": 10 ** 12}))
    tok_with("vocab id -1", lambda t: t["model"]["vocab"].update({"zz": -1}))
    tok_with("duplicate vocab id", lambda t: t["model"]["vocab"].update({"zz": 5}))
    tok_with("merge of unknown tokens", lambda t: t["model"]["merges"].append("qqq zzz")
             if isinstance(t["model"]["merges"][0], str) else t["model"]["merges"].append(["qqq", "zzz"]))
    tok_with("merge with one token", lambda t: t["model"]["merges"].append("abc")
             if isinstance(t["model"]["merges"][0], str) else t["model"]["merges"].append(["abc"]))
    tok_with("added token id 10^9", lambda t: t["added_tokens"].append(
        dict(t["added_tokens"][0], id=10 ** 9, content="<big>")))
    tok_with("unknown pre_tokenizer type", lambda t: t.update({"pre_tokenizer": {"type": "Whitespace"}}))
    tok_with("unknown normalizer type", lambda t: t.update({"normalizer": {"type": "Lowercase"}}))

    C = "vocab.json + merges.txt (`lol tokenizer encode`)"
    vocab = good_tok["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in good_tok["model"]["merges"]]

    def vm_with(case, v, m_text):
        d = W("vm_bad")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        open(os.path.join(d, "vocab.json"), "w").write(v if isinstance(v, str) else json.dumps(v))
        open(os.path.join(d, "merges.txt"), "wb").write(m_text)
        A.run(C, case, ["tokenizer", "encode", "--tokenizer", d, "--text", "the quick fox"])

    mt = ("#version: 0.2\n" + "\n".join(merges) + "\n").encode()
    vm_with("vocab.json is a list", "[1,2,3]", mt)
    vm_with("vocab id as string", dict(vocab, zz="7"), mt)
    vm_with("merges line with 3 tokens", vocab, mt + b"a b c\n")
    vm_with("merges line of unknown tokens", vocab, mt + b"qqq zzz\n")
    vm_with("merges.txt invalid UTF-8", vocab, mt + b"\xff \xfe\n")

    # ------------------------------------------------------------------ routing paths
    C = "routing path (`lol forward --force-path`)"
    sh(["paths", "extract", "--model", "run", "--data", "data", "--out", "paths"])
    good_path = json.load(open(W("paths", "S1.json")))

    def path_with(case, mutate=None, raw=None):
        p = W("bad_path.json")
        if raw is not None:
            open(p, "w").write(raw)
        else:
            q = json.loads(json.dumps(good_path))
            mutate(q)
            json.dump(q, open(p, "w"))
        A.run(C, case, ["forward", "--model", ck, "--tokens", "2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
                        "--force-path", "bad_path.json", "--out", "fw.safetensors"])

    path_with("truncated", raw=json.dumps(good_path)[:30])
    path_with("expert index 7 >= library_size 3", lambda q: q["expert"][0].__setitem__(0, 7))
    path_with("expert index -1", lambda q: q["expert"][0].__setitem__(0, -1))
    path_with("alpha 1.5", lambda q: q["alpha"][0].__setitem__(0, 1.5))
    path_with("`library_size` 5 != model's 3", lambda q: q.update({"library_size": 5}))
    path_with("`core_depth` 4 != rows", lambda q: q.update({"core_depth": 4}))
    path_with("5 routed depths for a depth-2 model",
              lambda q: q.update({"core_depth": 5, "expert": q["expert"] + q["expert"] + [q["expert"][0]],
                                  "alpha": q["alpha"] + q["alpha"] + [q["alpha"][0]]}))
    path_with("unknown key `experts`", lambda q: q.update({"experts": []}))
    path_with("`format` wrong", lambda q: q.update({"format": "other"}))

    # ------------------------------------------------------------------ command-line token ids
    C = "token ids (`lol forward --tokens`)"
    for case, toks in [("id 31 = vocab_size", "1 2 31"), ("id -1", "1 -1"), ("not a number", "1 x"),
                       ("300 tokens > max_seq_len 256", " ".join(["2"] * 300)), ("empty", "")]:
        A.run(C, case, ["forward", "--model", ck, "--tokens", toks, "--out", "fw.safetensors"])

    # ------------------------------------------------------------------ resume
    C = "checkpoint resume (`lol train --resume`)"

    def resume_with(case, mutate):
        d = W("run_res")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(W("run"), d)
        mutate(d)
        A.run(C, case, ["train", "--resume", "run_res", "--no-progress"])

    resume_with("`latest` points to a missing dir", lambda d: open(os.path.join(d, "latest"), "w").write("checkpoints/step-9\n"))
    resume_with("trainer_state.json truncated",
                lambda d: open(os.path.join(d, ck[4:], "trainer_state.json"), "w").write("{\"step\": "))
    resume_with("trainer_state.json `step` = -3", lambda d: (lambda p: json.dump(
        dict(json.load(open(p)), step=-3), open(p + ".x", "w")) or os.replace(p + ".x", p))(
        os.path.join(d, ck[4:], "trainer_state.json")))
    resume_with("optimizer.safetensors empty",
                lambda d: open(os.path.join(d, ck[4:], "optimizer.safetensors"), "wb").write(b""))
    resume_with("model.safetensors missing", lambda d: os.remove(os.path.join(d, ck[4:], "model.safetensors")))

    print(A.table())
    print(f"\n{len(A.rows)} cases, {A.bad} not ending with exit 2 and a message.", file=sys.stderr)
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if A.bad else 0


if __name__ == "__main__":
    sys.exit(main())
