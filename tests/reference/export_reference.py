#!/usr/bin/env python3
"""An independent check of `lol export --hf` (a trained dense model written as a Hugging
Face Qwen2 / Llama folder), in pure Python (stdlib only), by a reviewer who did not read
src/ (nor tests/ outside tests/reference/).

  python3 tests/reference/export_reference.py check --lol build/lol --work /tmp/x

Written from docs/hf.md ("Export", "What is loaded, and what is refused", "Commands"),
docs/baselines.md (dense config fields, "Tensor names are exactly Hugging Face
Llama/Qwen2's"), docs/training.md (run config, checkpoint layout: config.json,
model.safetensors, tokenizer.json + tokenizer_config.json), docs/text.md (`lol corpus`,
`eval lm`, `eval choice` conventions), docs/tokenizers.md (tokenizer.json layouts, byte
tokenizer), `lol export --help`, and what transformers' `save_pretrained` writes and
`from_pretrained` reads for Qwen2ForCausalLM / LlamaForCausalLM (config classes'
fields and defaults: LlamaConfig's bos/eos default to 1/2 when the keys are absent;
safetensors `__metadata__` {"format": "pt"}; shards `model-0000k-of-0000n.safetensors`
with `model.safetensors.index.json` {"metadata": {"total_size"}, "weight_map"}; a size
string "5KB" = 5 * 10^3 bytes, a tensor larger than the limit alone in its shard).
The float64 forward is tests/reference/qwen2_reference.py's `Ref` (transformers'
Qwen2 / Llama definitions); the tokenizer encoder is tests/reference/tokenizer_reference.py's
`RefTokenizer` with its hand-written GPT-2 / Qwen2 pre-tokenizers; the checks of the
export are written here.

Steps: three tiny dense models are trained with `lol train` (AdamW lr 0.05, 4 steps, so
the norm weights and biases move well away from their initial 1 / 0; then the q/k
projections and biases of each checkpoint are multiplied by 4, rounded to float32, because
4 steps leave the attention nearly uniform and RoPE or head-layout mistakes would hardly
move the losses):
  A  Qwen2-pattern BPE (`lol tokenizer train --pattern qwen2`, BOS <s>, EOS
     <|endoftext|>), d 16, 4/2 heads, q/k/v biases, tied embeddings, rope_theta 500,
     norm_eps 1e-5, vocab_size 320 > the tokenizer's 300 ids;
  B  byte tokenizer (<pad> <bos> <eos> = 256..258), d 16, 4/1 heads, head_dim 6 !=
     16/4, no biases, untied, rope_theta 2000, norm_eps 1e-6;
  C  GPT-2-pattern BPE (PAD <pad>, no BOS), d 24, 3/3 heads, no biases, tied, default
     rope_theta / norm_eps;
and exported: A qwen2 float32 (the run directory, default --arch), A qwen2 bfloat16
--max-shard-size 5KB, A qwen2 float16 with --tokenizer = the dataset's (same
vocabulary); B llama float32 4KB shards, B qwen2 float16 5KB shards (zero biases), B llama
bfloat16 --no-tokenizer; C llama float32 (tied), C qwen2 bfloat16 3KB shards. Refused
(exit 2, nothing left in --out): A as llama (it has biases), A with `--tokenizer byte`
(another vocabulary).

Check groups, per export:
  files      exactly config.json, generation_config.json, the tokenizer files (unless
             --no-tokenizer) and model.safetensors or the index + shards named
             model-%05d-of-%05d.safetensors (1..n); every safetensors file well formed
             (tensors tile the data buffer, byte sizes = numel x dtype size,
             __metadata__ format "pt"); the index's weight_map names every tensor once and
             each shard holds exactly the tensors mapped to it; total_size = the sum of
             the tensors' bytes; a shard holding more than one tensor is at most
             --max-shard-size (decimal units, as transformers reads "5KB").
  config     config.json: architectures, model_type, vocab_size (the model's), hidden_size,
             intermediate_size, num_hidden_layers, num_attention_heads,
             num_key_value_heads, head_dim (required where != hidden/heads), rms_norm_eps,
             rope_theta, tie_word_embeddings, max_position_embeddings (= max_seq_len),
             torch_dtype, hidden_act silu, bos/eos ids (the tokenizer's roles; explicit
             keys for Llama, whose config defaults are 1/2), no rope_scaling, Llama
             attention_bias / mlp_bias false, Qwen2 no sliding window; JSON types (int,
             bool, float, list, string); generation_config.json's bos/eos equal.
  weights    tensor names and shapes of Qwen2 / Llama (q/k/v biases for Qwen2 only, no
             lm_head when tied), dtype as asked, values: float32 bit-equal to the
             checkpoint's, bfloat16 = round-to-nearest-even of the float32 value,
             float16 = IEEE round-to-nearest-even (Python's struct 'e'); a Qwen2 export
             of a bias-free model has all-zero biases.
  logits     the float64 forward of the exported folder (Ref) against the source
             checkpoint run by lol: `eval lm --split train --packing pad` summed loss
             (rtol 1e-5, equal targets) and `eval choice` per-choice log-likelihoods
             (1e-4 + 1e-5 relative) for float32 exports; `hf ppl --dtype float64` on the
             export (loss_sum and bits_per_byte rtol 1e-6, equal targets and bytes) for
             the other dtypes and for C's llama export; the rounding cost of 16-bit
             exports against the source is printed, not checked.
  tokenizer  tokenizer.json's vocabulary, merges and added tokens equal the source's;
             tokenizer_config.json's bos/eos/pad tokens equal the source's; the
             reference encoder built from the exported tokenizer.json encodes 9 strings
             (training-like text, digits, contractions in both cases, white-space runs,
             accented / CJK / emoji text, the tokenizer's special tokens glued to words) to
             the ids `lol tokenizer encode --jsonl` gives with the source checkpoint's
             tokenizer; config vocab_size >= the tokenizer's ids.
Sensitivity (each change made by hand to an exported folder, the checks run on it):
rope_theta 500 -> 550 (eval lm 9e-6 relative, eval choice 4e-3), rms_norm_eps 1e-2, gate/up
swapped, q/k rows permuted within heads (interleaved RoPE layout), a tie flag flipped,
a missing head_dim or Llama bos_token_id, bfloat16 by truncation, a tensor mapped to the
wrong shard, 5 merges dropped: each makes its group differ. Unchanged exports agree to
~1e-7 (eval lm, float32 lol vs float64 reference) and ~1e-11 (hf ppl float64).
32 lol processes; about 50 s wall, 46 s CPU on the loaded 2-core machine. Exit status 1
on any disagreement, each printed with the command that reproduces it (the work folder
is kept).
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import read_st, write_st  # noqa: E402
from qwen2_reference import Ref, bf16  # noqa: E402
from tokenizer_reference import RefTokenizer, gpt2_split, qwen2_split  # noqa: E402

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
DT_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8}
DTYPE_ST = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


QK_SCALE = 4.0


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def parse_size(s):
    """transformers' convert_file_size_to_int: GiB/MiB/KiB binary, GB/MB/KB decimal"""
    u = s.upper()
    for suf, mul in (("GIB", 2 ** 30), ("MIB", 2 ** 20), ("KIB", 2 ** 10), ("GB", 10 ** 9), ("MB", 10 ** 6),
                     ("KB", 10 ** 3), ("B", 1)):
        if u.endswith(suf):
            return int(float(s[:-len(suf)]) * mul)
    return int(s)


def log_softmax(z):
    m = max(z)
    ls = m + math.log(sum(math.exp(v - m) for v in z))
    return [v - ls for v in z]


# ---------------------------------------------------------------- data
WORDS = ("the cat sat on a mat and dog ran far away in of to is it was Hello world! Zebras jump, "
         "quickly: 12 dozen jugs? don't").split()
CHOICES = [
    {"context": "the cat sat on", "choices": ["a mat", "the dog", "far away!", "12", "Zebras jump"], "gold": 0},
    {"context": "Hello world! Zebras", "choices": ["jump,", "ran", "quickly: 12 dozen", "is it", "cat"], "gold": 0},
]
PPL_TEXT = "the dog ran far away, and the cat sat on a mat.\nHello world! 12 dozen jugs? Zebras jump quickly"
ENCODE_STRINGS = [
    "the cat sat on a mat",
    "Hello world!!!\n\nZebras jump, quickly: 12345 dozen jugs?",
    "don't DON'T we'll I'M it's",
    "  leading and   multiple   spaces\t\ttabs \n",
    "caf\u00e9 na\u00efve \u2014 \u00fcber \U0001F600 \u4e2d\u6587 \u0661\u0662",
    "a\n\n\nb\r\nc $hello 3.14 x=y+z",
    "jugs?\n",
]


def make_docs(seed, n):
    import random
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randrange(4, 10))) for _ in range(n)]


# ---------------------------------------------------------------- cases
MODELS = {
    "A": {"tokenizer": "qwen2", "vocab_size": 320, "d_model": 16, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
          "ffn_hidden": 24, "qkv_bias": True, "tie_word_embeddings": True, "rope_theta": 500.0, "norm_eps": 1e-5,
          "max_seq_len": 64},
    "B": {"tokenizer": "byte", "d_model": 16, "n_layers": 2, "n_heads": 4, "n_kv_heads": 1, "head_dim": 6,
          "ffn_hidden": 20, "qkv_bias": False, "tie_word_embeddings": False, "rope_theta": 2000.0, "norm_eps": 1e-6,
          "max_seq_len": 96},
    "C": {"tokenizer": "gpt2", "d_model": 24, "n_layers": 3, "n_heads": 3, "n_kv_heads": 3, "ffn_hidden": 40,
          "qkv_bias": False, "tie_word_embeddings": True, "max_seq_len": 64},
}
# (name, model, from the run directory (else its checkpoint), --arch or None (the default), --dtype or None,
#  --max-shard-size or None, extra args, run `hf ppl` on it)
EXPORTS = [
    ("A-qwen2-f32", "A", True, None, None, None, [], False),
    ("A-qwen2-bf16-5KB", "A", False, "qwen2", "bfloat16", "5KB", [], True),
    ("A-qwen2-f16-dataset-tokenizer", "A", False, "qwen2", "float16", None, ["--tokenizer", "@data"], True),
    ("B-llama-f32-4KB", "B", False, "llama", "float32", "4KB", [], False),
    ("B-qwen2-f16-5KB", "B", False, "qwen2", "float16", "5KB", [], True),
    ("B-llama-bf16-no-tokenizer", "B", False, "llama", "bfloat16", None, ["--no-tokenizer"], False),
    ("C-llama-f32", "C", True, "llama", "float32", None, [], True),
    ("C-qwen2-bf16-3KB", "C", False, "qwen2", "bfloat16", "3KB", [], True),
]


def _q(s):
    return s if s and all(ch.isalnum() or ch in "/._-=,:@" for ch in s) else "'" + s.replace("'", "'\\''") + "'"


class Checker:
    def __init__(self, lol, work):
        self.lol, self.work = lol, work
        self.env = dict(os.environ, OMP_NUM_THREADS="1")
        self.failures, self.groups, self.calls, self.lol_s = [], 0, 0, 0.0
        self.last_cmd = None

    def run(self, args, expect=0):
        cmd = [self.lol] + [str(a) for a in args]
        t = time.time()
        r = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True, env=self.env)
        self.lol_s += time.time() - t
        self.calls += 1
        self.last_cmd = "cd %s && %s" % (self.work, " ".join(_q(c) for c in cmd))
        if expect is not None and r.returncode != expect:
            raise RuntimeError("exit %d (expected %d): %s\n%s%s" % (r.returncode, expect, self.last_cmd,
                                                                 r.stdout[-1500:], r.stderr[-1500:]))
        return r

    def report(self, group, problems, detail, repro=None):
        self.groups += 1
        ok = not problems
        print("%-46s %s  %s" % (group, "ok  " if ok else "DIFF", detail), flush=True)
        for p in problems[:12]:
            print("    - " + p)
        if len(problems) > 12:
            print("    - ... %d more" % (len(problems) - 12))
        if not ok:
            if repro:
                print("    repro: " + repro)
            self.failures.append((group, problems, repro))


# ---------------------------------------------------------------- safetensors, raw
def parse_st(path):
    """(header without __metadata__, metadata, problems) with the layout checks safetensors makes"""
    probs = []
    raw = open(path, "rb").read()
    if len(raw) < 8:
        return {}, None, ["%s: shorter than 8 bytes" % path]
    hl = struct.unpack("<Q", raw[:8])[0]
    try:
        hdr = json.loads(raw[8:8 + hl].decode("utf-8"))
    except Exception as e:  # noqa: BLE001
        return {}, None, ["%s: header is not JSON (%s)" % (path, e)]
    meta = hdr.pop("__metadata__", None)
    data_len = len(raw) - 8 - hl
    spans = []
    for name, e in hdr.items():
        a, b = e["data_offsets"]
        n = 1
        for s in e["shape"]:
            n *= s
        if e["dtype"] not in DT_SIZE:
            probs.append("%s: %s has dtype %s" % (os.path.basename(path), name, e["dtype"]))
        elif b - a != n * DT_SIZE[e["dtype"]]:
            probs.append("%s: %s spans %d bytes, shape %s x %s needs %d" % (
                os.path.basename(path), name, b - a, e["shape"], e["dtype"], n * DT_SIZE[e["dtype"]]))
        spans.append((a, b, name))
    spans.sort()
    pos = 0
    for a, b, name in spans:
        if a != pos:
            probs.append("%s: %s starts at %d, expected %d (tensors must tile the buffer)" % (
                os.path.basename(path), name, a, pos))
        pos = b
    if pos != data_len:
        probs.append("%s: tensors end at %d, data buffer is %d bytes" % (os.path.basename(path), pos, data_len))
    if not isinstance(meta, dict) or meta.get("format") != "pt":
        probs.append("%s: __metadata__ %r lacks format 'pt' (transformers refuses such a file)" % (
            os.path.basename(path), meta))
    return hdr, meta, probs


# ---------------------------------------------------------------- expectations
def hf_names(c, arch, tied):
    """name -> shape of a Qwen2 / Llama model of lol dense config c"""
    d, H, Hkv, F, V = c["d_model"], c["n_heads"], c["n_kv_heads"], c["ffn_hidden"], c["vocab_size"]
    hd = c.get("head_dim") or d // H
    out = {"model.embed_tokens.weight": [V, d], "model.norm.weight": [d]}
    if not tied:
        out["lm_head.weight"] = [V, d]
    for i in range(c["n_layers"]):
        p = "model.layers.%d." % i
        out[p + "input_layernorm.weight"] = [d]
        out[p + "post_attention_layernorm.weight"] = [d]
        out[p + "self_attn.q_proj.weight"] = [H * hd, d]
        out[p + "self_attn.k_proj.weight"] = [Hkv * hd, d]
        out[p + "self_attn.v_proj.weight"] = [Hkv * hd, d]
        out[p + "self_attn.o_proj.weight"] = [d, H * hd]
        if arch == "qwen2":
            out[p + "self_attn.q_proj.bias"] = [H * hd]
            out[p + "self_attn.k_proj.bias"] = [Hkv * hd]
            out[p + "self_attn.v_proj.bias"] = [Hkv * hd]
        out[p + "mlp.gate_proj.weight"] = [F, d]
        out[p + "mlp.up_proj.weight"] = [F, d]
        out[p + "mlp.down_proj.weight"] = [d, F]
    return out


def token_id(tj, tok):
    """id of a role token (string, {"content"} or None) in a tokenizer.json"""
    if isinstance(tok, dict):
        tok = tok.get("content")
    if tok is None:
        return None
    for at in tj.get("added_tokens", []):
        if at["content"] == tok:
            return at["id"]
    return tj["model"]["vocab"].get(tok)


def splitter_for(tj):
    """the pre-tokenizer of a tokenizer.json, for the layouts lol writes (docs/tokenizers.md)"""
    pt = tj.get("pre_tokenizer") or {}
    if tj.get("normalizer") is not None:
        return None, "normalizer %r not in the reference" % tj.get("normalizer")
    if pt.get("type") == "ByteLevel" and not pt.get("add_prefix_space"):
        if pt.get("use_regex", True):
            return gpt2_split, "ByteLevel(use_regex) = GPT-2 split"
        return (lambda t: [t] if t else []), "ByteLevel(use_regex=false), no split"
    if pt.get("type") == "Sequence":
        steps = pt.get("pretokenizers", [])
        if (len(steps) == 2 and steps[0].get("type") == "Split" and
                (steps[0].get("pattern") or {}).get("Regex") == QWEN2_PATTERN and
                steps[0].get("behavior") == "Isolated" and not steps[0].get("invert") and
                steps[1].get("type") == "ByteLevel" and not steps[1].get("use_regex", True) and
                not steps[1].get("add_prefix_space")):
            return qwen2_split, "Sequence[Split(Qwen2), ByteLevel] = Qwen2 split"
    return None, "pre_tokenizer %s not in the reference" % json.dumps(pt)[:200]


# ---------------------------------------------------------------- the check
class ExportCheck:
    def __init__(self, ck):
        self.ck = ck
        self.w = ck.work
        self.src = {}

    # -- setup: tokenizers, datasets, training
    def setup(self):
        ck, w = self.ck, self.w
        docs = make_docs(3, 14)
        with open(os.path.join(w, "train.txt"), "w") as f:
            f.write("\n\n".join(docs) + "\n")
        with open(os.path.join(w, "ppl.txt"), "w") as f:
            f.write(PPL_TEXT)
        with open(os.path.join(w, "choice.jsonl"), "w") as f:
            for ex in CHOICES:
                f.write(json.dumps(ex) + "\n")
        for name in ("tok_qwen2", "tok_gpt2", "data_qwen2", "data_gpt2", "data_byte"):
            shutil.rmtree(os.path.join(w, name), ignore_errors=True)
        ck.run(["tokenizer", "train", "--in", "train.txt", "--vocab-size", 300, "--out", "tok_qwen2",
                "--pattern", "qwen2", "--special", "<|endoftext|>", "--special", "<s>", "--bos", "<s>",
                "--eos", "<|endoftext|>", "--no-progress"])
        ck.run(["tokenizer", "train", "--in", "train.txt", "--vocab-size", 290, "--out", "tok_gpt2",
                "--pattern", "gpt2", "--special", "<|endoftext|>", "--special", "<pad>", "--pad", "<pad>",
                "--no-progress"])
        for data, tok in (("data_qwen2", "tok_qwen2"), ("data_gpt2", "tok_gpt2"), ("data_byte", "byte")):
            ck.run(["corpus", "--in", "train.txt", "--tokenizer", tok, "--out", data, "--valid-fraction", 0,
                    "--no-progress"])
        for m, spec in MODELS.items():
            data = "data_" + spec["tokenizer"]
            model = {k: v for k, v in spec.items() if k != "tokenizer"}
            model["architecture"] = "dense"
            cfg = {"model": model, "data": {"dir": data, "seq_len": 32, "batch_size": 2, "packing": "pack"},
                   "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
                   "train": {"steps": 4, "out": "run_" + m, "progress": False, "threads": 1, "seed": 0}}
            with open(os.path.join(w, "run_%s.json" % m), "w") as f:
                json.dump(cfg, f, indent=1)
            shutil.rmtree(os.path.join(w, "run_" + m), ignore_errors=True)
            ck.run(["train", "--config", "run_%s.json" % m, "--no-progress"])
            latest = open(os.path.join(w, "run_" + m, "latest")).read().strip()
            ckpt = os.path.join("run_" + m, latest)
            c = json.load(open(os.path.join(w, ckpt, "config.json")))
            # 4 steps leave the attention nearly uniform: sharpen it (q/k projections and biases
            # x QK_SCALE, rounded to float32) so that RoPE and the head layout move the losses
            path = os.path.join(w, ckpt, "model.safetensors")
            T = read_st(path)
            for k in list(T):
                if ".q_proj." in k or ".k_proj." in k:
                    shp, vals, _ = T[k]
                    T[k] = (shp, [_f32(v * QK_SCALE) for v in vals], "F32")
            write_st(path, T, {"format": "pt"})
            T = read_st(path)
            tj = json.load(open(os.path.join(w, ckpt, "tokenizer.json")))
            tc = json.load(open(os.path.join(w, ckpt, "tokenizer_config.json")))
            norms = [v for k, (s, vals, _) in T.items() if "norm" in k for v in vals]
            moved = max(abs(v - 1) for v in norms)
            self.src[m] = {"ckpt": ckpt, "run": "run_" + m, "cfg": c, "T": T, "tj": tj, "tc": tc, "data": data,
                           "moved": moved}
        print("setup: 2 BPE tokenizers, 3 datasets, 3 dense models trained 4 steps (norm weights up to %s from 1)"
              % ", ".join("%s %.2f" % (m, s["moved"]) for m, s in self.src.items()), flush=True)
        # the source model run by lol: eval lm (one padded row per document) and eval choice
        for m, s in self.src.items():
            seq = s["cfg"]["max_seq_len"]
            out = "evallm_%s.json" % m
            ck.run(["eval", "lm", "--model", s["ckpt"], "--data", s["data"], "--split", "train", "--packing", "pad",
                    "--seq-len", seq, "--batch-size", 16, "--out", out, "--no-progress", "--threads", 1])
            s["evallm"] = json.load(open(os.path.join(w, out)))
            s["evallm_cmd"] = ck.last_cmd
            out = "choice_%s.jsonl" % m
            ck.run(["eval", "choice", "--model", s["ckpt"], "--data", "choice.jsonl", "--out", out,
                    "--no-progress", "--threads", 1])
            s["choice"] = [json.loads(l)["logliks"] for l in open(os.path.join(w, out)) if l.strip()]
            s["choice_cmd"] = ck.last_cmd
            st = read_st(os.path.join(w, s["data"], "train-00000.safetensors"))
            toks, offs = st["tokens"][1], st["offsets"][1]
            s["docs"] = [[int(t) for t in toks[offs[i]:offs[i + 1]]] for i in range(len(offs) - 1)]
            with open(os.path.join(w, "encode.jsonl"), "w") as f:
                specials = [at["content"] for at in s["tj"].get("added_tokens", [])]
                strings = ENCODE_STRINGS + ["".join(sp + wd for sp, wd in zip(specials, ["the", " cat", "x"] * 3))
                                            + "jugs?" + (specials[0] if specials else "")]
                for t in strings:
                    f.write(json.dumps({"text": t}) + "\n")
            r = ck.run(["tokenizer", "encode", "--tokenizer", s["ckpt"], "--jsonl", "encode.jsonl"])
            s["encode"] = list(zip(strings, [json.loads(l) for l in r.stdout.splitlines() if l.strip()]))
            s["encode_cmd"] = ck.last_cmd

    # -- one export
    def export(self, name, m, from_run, arch, dtype, shard, extra, ppl):
        ck, w, s = self.ck, self.w, self.src[m]
        out = "hf_" + name
        shutil.rmtree(os.path.join(w, out), ignore_errors=True)
        args = ["export", "--hf", s["run"] if from_run else s["ckpt"], "--out", out]
        if arch:
            args += ["--arch", arch]
        if dtype:
            args += ["--dtype", dtype]
        if shard:
            args += ["--max-shard-size", shard]
        args += [s["data"] if a == "@data" else a for a in extra]
        ck.run(args)
        repro = ck.last_cmd
        folder = os.path.join(w, out)
        arch = arch or "qwen2"
        dtype = dtype or "float32"
        no_tok = "--no-tokenizer" in extra
        tag = "[%s]" % name
        wanted_st = self.check_files(tag, folder, shard, no_tok, repro)
        cfg = self.check_config(tag, folder, s, arch, dtype, no_tok, repro)
        self.check_weights(tag, folder, s, arch, dtype, wanted_st, repro)
        if cfg is not None:
            self.check_logits(tag, folder, s, dtype, ppl, out, no_tok, repro)
        if not no_tok:
            self.check_tokenizer(tag, folder, s, cfg, repro)

    def check_files(self, tag, folder, shard, no_tok, repro):
        probs = []
        files = set(os.listdir(folder))
        want = {"config.json", "generation_config.json"}
        if not no_tok:
            want |= {"tokenizer.json", "tokenizer_config.json"}
        idx_path = os.path.join(folder, "model.safetensors.index.json")
        tensors = {}  # name -> (file, dtype, shape, nbytes)
        detail = ""
        if os.path.exists(idx_path):
            idx = json.load(open(idx_path))
            wm = idx.get("weight_map")
            total = (idx.get("metadata") or {}).get("total_size")
            shards = sorted(set(wm.values())) if isinstance(wm, dict) else []
            n = len(shards)
            names_ok = shards == ["model-%05d-of-%05d.safetensors" % (k + 1, n) for k in range(n)]
            if not names_ok:
                probs.append("shard files %s are not model-%%05d-of-%%05d.safetensors 1..%d" % (shards, n))
            want |= {"model.safetensors.index.json"} | set(shards)
            if shard is None:
                probs.append("an index without --max-shard-size")
            limit = parse_size(shard) if shard else None
            sizes = []
            for sh in shards:
                p = os.path.join(folder, sh)
                if not os.path.exists(p):
                    probs.append("weight_map names %s, which is not in the folder" % sh)
                    continue
                hdr, meta, pp = parse_st(p)
                probs += pp
                mapped = sorted(k for k, v in wm.items() if v == sh)
                held = sorted(hdr)
                if mapped != held:
                    probs.append("%s holds %s but weight_map maps %s to it" % (
                        sh, sorted(set(held) - set(mapped)) or "", sorted(set(mapped) - set(held)) or ""))
                nbytes = 0
                for k, e in hdr.items():
                    if k in tensors:
                        probs.append("%s is in %s and in %s" % (k, tensors[k][0], sh))
                    b = e["data_offsets"][1] - e["data_offsets"][0]
                    tensors[k] = (sh, e["dtype"], e["shape"], b)
                    nbytes += b
                sizes.append(nbytes)
                if limit is not None and len(hdr) > 1 and nbytes > limit:
                    probs.append("%s: %d tensors, %d bytes > --max-shard-size %s = %d bytes" % (
                        sh, len(hdr), nbytes, shard, limit))
            tb = sum(v[3] for v in tensors.values())
            if not isinstance(total, int) or total != tb:
                probs.append("index metadata.total_size %r, the tensors hold %d bytes" % (total, tb))
            if os.path.exists(os.path.join(folder, "model.safetensors")):
                probs.append("model.safetensors next to an index")
            detail = "%d shards of %s tensor bytes (limit %s), total_size %s" % (n, sizes, shard, total)
        else:
            want |= {"model.safetensors"}
            hdr, meta, pp = parse_st(os.path.join(folder, "model.safetensors")) \
                if "model.safetensors" in files else ({}, None, ["no model.safetensors and no index"])
            probs += pp
            for k, e in hdr.items():
                tensors[k] = ("model.safetensors", e["dtype"], e["shape"], e["data_offsets"][1] - e["data_offsets"][0])
            if shard is not None:
                detail = "single file although --max-shard-size %s; " % shard
            detail += "model.safetensors, %d tensors, %d bytes" % (len(tensors), sum(v[3] for v in tensors.values()))
        if files != want:
            probs.append("files: unexpected %s, missing %s" % (sorted(files - want), sorted(want - files)))
        self.ck.report(tag + " files", probs, detail, repro)
        return tensors

    def check_config(self, tag, folder, s, arch, dtype, no_tok, repro):
        probs = []
        try:
            cfg = json.load(open(os.path.join(folder, "config.json")))
            gen = json.load(open(os.path.join(folder, "generation_config.json")))
        except Exception as e:  # noqa: BLE001
            self.ck.report(tag + " config", ["config.json / generation_config.json unreadable: %s" % e], "", repro)
            return None
        c = s["cfg"]
        d, H = c["d_model"], c["n_heads"]
        hd = c.get("head_dim") or d // H
        INT, NUM, BOOL, STR, LIST = "int", "number", "bool", "str", "list"

        def want(key, value, typ, required=True):
            if key not in cfg:
                if required:
                    probs.append("%s missing (expected %r)" % (key, value))
                return
            v = cfg[key]
            okt = {INT: isinstance(v, int) and not isinstance(v, bool),
                   NUM: isinstance(v, (int, float)) and not isinstance(v, bool),
                   BOOL: isinstance(v, bool), STR: isinstance(v, str), LIST: isinstance(v, list),
                   None: True}[typ]
            if not okt:
                probs.append("%s = %r is not a JSON %s" % (key, v, typ))
            elif v != value:
                probs.append("%s = %r, expected %r" % (key, v, value))
        archname = "Qwen2ForCausalLM" if arch == "qwen2" else "LlamaForCausalLM"
        want("architectures", [archname], LIST)
        want("model_type", arch, STR)
        want("vocab_size", c["vocab_size"], INT)
        want("hidden_size", d, INT)
        want("intermediate_size", c["ffn_hidden"], INT)
        want("num_hidden_layers", c["n_layers"], INT)
        want("num_attention_heads", H, INT)
        want("num_key_value_heads", c["n_kv_heads"], INT)  # Qwen2Config's default is 32, Llama's the heads
        want("head_dim", hd, INT, required=hd != d // H)
        want("rms_norm_eps", c["norm_eps"], NUM)
        want("rope_theta", c["rope_theta"], NUM)
        want("tie_word_embeddings", c["tie_word_embeddings"], BOOL)
        want("max_position_embeddings", c["max_seq_len"], INT)
        want("torch_dtype", dtype, STR)
        want("hidden_act", "silu", STR, required=False)
        if cfg.get("rope_scaling") is not None or (cfg.get("rope_parameters") or {}).get("rope_type", "default") \
                != "default":
            probs.append("rope_scaling %r / rope_parameters %r: the source has plain RoPE" % (
                cfg.get("rope_scaling"), cfg.get("rope_parameters")))
        if arch == "llama":
            for k in ("attention_bias", "mlp_bias"):
                if cfg.get(k, False) is not False:
                    probs.append("%s = %r (the model has no such bias)" % (k, cfg[k]))
            if cfg.get("pretraining_tp", 1) != 1:
                probs.append("pretraining_tp = %r" % cfg["pretraining_tp"])
        elif cfg.get("use_sliding_window", False) is not False:
            probs.append("use_sliding_window = %r" % cfg["use_sliding_window"])
        # bos / eos: the tokenizer's roles (docs/hf.md "Export")
        bos = token_id(s["tj"], s["tc"].get("bos_token"))
        eos = token_id(s["tj"], s["tc"].get("eos_token"))
        roles = "bos %r eos %r" % (cfg.get("bos_token_id", "absent"), cfg.get("eos_token_id", "absent"))
        for key, val in (("bos_token_id", bos), ("eos_token_id", eos)):
            if arch == "llama" and key not in cfg:
                probs.append("%s absent: LlamaConfig then defaults it to %d, the tokenizer's is %r" % (
                    key, 1 if key.startswith("bos") else 2, val))
            got = cfg.get(key)
            if no_tok:
                if got != val:  # docs/hf.md: --no-tokenizer still takes the ids from the checkpoint's tokenizer
                    probs.append("%s = %r with --no-tokenizer (the checkpoint tokenizer's is %r)" % (key, got, val))
            elif got != val:
                probs.append("%s = %r, the tokenizer's %s token has id %r" % (key, got, key[:3], val))
            if key in cfg and gen.get(key, cfg.get(key)) != cfg.get(key):
                probs.append("generation_config.json %s = %r, config.json %r" % (key, gen.get(key), cfg.get(key)))
        self.ck.report(tag + " config", probs, "%s, %d layers, d %d, heads %d/%d, head_dim %s, vocab %s, %s, %s" % (
            archname, cfg.get("num_hidden_layers"), cfg.get("hidden_size"), cfg.get("num_attention_heads"),
            cfg.get("num_key_value_heads"), cfg.get("head_dim", "-"), cfg.get("vocab_size"), cfg.get("torch_dtype"),
            roles), repro)
        return cfg

    def check_weights(self, tag, folder, s, arch, dtype, tensors, repro):
        probs = []
        c = s["cfg"]
        tied = c["tie_word_embeddings"]
        shapes = hf_names(c, arch, tied)
        got_names = set(tensors)
        if got_names != set(shapes):
            probs.append("unexpected tensors %s, missing %s" % (sorted(got_names - set(shapes)),
                                                               sorted(set(shapes) - got_names)))
        st = DTYPE_ST[dtype]
        for k, (fn, dt, shp, _) in sorted(tensors.items()):
            if k in shapes and shp != shapes[k]:
                probs.append("%s shape %s, expected %s" % (k, shp, shapes[k]))
            if dt != st:
                probs.append("%s stored as %s, --dtype %s" % (k, dt, dtype))
        rnd = {"F32": lambda x: x, "BF16": bf16, "F16": f16}[st]
        T = {}
        for fn in sorted(set(v[0] for v in tensors.values())):
            T.update(read_st(os.path.join(folder, fn)))
        n_vals = n_bad = 0
        zero_bias = 0
        for k in sorted(set(T) & set(shapes)):
            vals = T[k][1]
            if k in s["T"]:
                src = s["T"][k][1]
                if len(src) != len(vals):
                    probs.append("%s: %d values, the checkpoint's has %d" % (k, len(vals), len(src)))
                    continue
                want = [rnd(v) for v in src]
            elif k.endswith(".bias") and not c.get("qkv_bias"):
                want = [0.0] * len(vals)
                zero_bias += 1
            else:
                probs.append("%s: not in the checkpoint" % k)
                continue
            exact_sign = k in s["T"]  # a bit copy / rounding keeps the sign of a zero; an added zero bias may be -0
            bad = [(j, a, b) for j, (a, b) in enumerate(zip(vals, want))
                   if not (a == b and (not exact_sign or math.copysign(1, a) == math.copysign(1, b)))]
            n_vals += len(vals)
            if bad:
                n_bad += len(bad)
                j, a, b = bad[0]
                probs.append("%s: %d of %d values differ from the %s of the checkpoint's (first [%d]: %r, want %r)" % (
                    k, len(bad), len(vals), {"F32": "value", "BF16": "bf16 RNE rounding",
                                             "F16": "f16 RNE rounding"}[st], j, a, b))
        self.ck.report(tag + " weights", probs, "%d tensors %s, %d values = %s of the checkpoint's%s" % (
            len(T), st, n_vals - n_bad, {"F32": "bit copies", "BF16": "bf16 RNE", "F16": "f16 RNE"}[st],
            ", %d zero q/k/v biases" % zero_bias if zero_bias else ""), repro)

    def check_logits(self, tag, folder, s, dtype, ppl, out, no_tok, repro):
        ck, w = self.ck, self.w
        probs, parts = [], []
        try:
            model = Ref(folder)
            model.prefill(s["docs"][0][:2])
        except Exception as e:  # noqa: BLE001
            self.ck.report(tag + " logits", ["the float64 forward cannot run the folder: %s %s" % (
                type(e).__name__, e)], "", repro)
            return
        # the documents of the training split, one padded row each (eval lm --packing pad)
        tot, cnt = 0.0, 0
        for doc in s["docs"]:
            if len(doc) < 2:
                continue
            logits = model.prefill(doc)[0]
            for j in range(len(doc) - 1):
                tot -= log_softmax(logits[j])[doc[j + 1]]
                cnt += 1
        ev = s["evallm"]
        rel = abs(ev["loss_sum"] - tot) / tot
        if dtype == "float32":
            if ev["targets"] != cnt:
                probs.append("eval lm targets %d, reference %d" % (ev["targets"], cnt))
            if not rel <= 1e-5:
                probs.append("eval lm loss_sum on the source %.10g, float64 forward of the export %.10g (rel %.1e)"
                             " [%s]" % (ev["loss_sum"], tot, rel, s["evallm_cmd"]))
            parts.append("eval lm %d targets rel %.1e" % (cnt, rel))
            # eval choice: continuation tokens = encode(context + " " + choice) after encode(context)
            tok = self.ref_tokenizer(s)
            worst = 0.0
            for ex, got in zip(CHOICES, s["choice"]):
                ctx = tok.encode(ex["context"])
                for ch, g in zip(ex["choices"], got):
                    whole = tok.encode(ex["context"] + " " + ch)
                    cont = whole[len(ctx):]
                    lg = model.prefill(whole)[0]
                    want = sum(log_softmax(lg[len(ctx) - 1 + t])[x] for t, x in enumerate(cont))
                    worst = max(worst, abs(g - want))
                    if not abs(g - want) <= 1e-4 + 1e-5 * abs(want):
                        probs.append("eval choice %r + %r: source %.8g, export %.8g [%s]" % (
                            ex["context"], ch, g, want, s["choice_cmd"]))
            parts.append("eval choice %d scores max |diff| %.1e" % (sum(len(e["choices"]) for e in CHOICES), worst))
        else:
            parts.append("16-bit rounding moves the eval lm loss by %.1e relative (not checked)" % rel)
        if ppl and not no_tok:
            res_path = os.path.join(w, "ppl_%s.json" % out)
            ck.run(["hf", "ppl", out, "--data", "ppl.txt", "--context", 16, "--dtype", "float64",
                    "--out", res_path, "--threads", 1])
            res = json.load(open(res_path))
            tok = self.ref_tokenizer_of(json.load(open(os.path.join(folder, "tokenizer.json"))))
            ids = tok.encode(PPL_TEXT)
            ptot, pcnt, nbytes = 0.0, 0, 0
            for i in range(0, len(ids), 16):
                win = ids[i:i + 16]
                if len(win) < 2:
                    continue
                lg = model.prefill(win)[0]
                for j in range(len(win) - 1):
                    ptot -= log_softmax(lg[j])[win[j + 1]]
                    pcnt += 1
                nbytes += len(tok.decode(win[1:]))
            bpb = ptot / math.log(2) / nbytes
            prel = abs(res.get("loss_sum", float("nan")) - ptot) / ptot
            brel = abs(res.get("bits_per_byte", float("nan")) - bpb) / bpb
            if (res.get("targets"), res.get("bytes")) != (pcnt, nbytes):
                probs.append("hf ppl targets/bytes %s/%s, reference %d/%d [%s]" % (
                    res.get("targets"), res.get("bytes"), pcnt, nbytes, ck.last_cmd))
            if not (prel <= 1e-6 and brel <= 1e-6):
                probs.append("hf ppl --dtype float64 loss_sum %r bits/byte %r, reference %.12g %.12g [%s]" % (
                    res.get("loss_sum"), res.get("bits_per_byte"), ptot, bpb, ck.last_cmd))
            parts.append("hf ppl %d targets rel %.1e" % (pcnt, prel))
        self.ck.report(tag + " logits", probs, "; ".join(parts), repro)

    def ref_tokenizer_of(self, tj):
        split, how = splitter_for(tj)
        if split is None:
            raise ValueError(how)
        return RefTokenizer(tj, split)

    def ref_tokenizer(self, s):
        return self.ref_tokenizer_of(s["tj"])

    def check_tokenizer(self, tag, folder, s, cfg, repro):
        probs = []
        tj = json.load(open(os.path.join(folder, "tokenizer.json")))
        tc = json.load(open(os.path.join(folder, "tokenizer_config.json")))
        src = s["tj"]
        if tj["model"].get("type") != "BPE" or tj["model"].get("byte_fallback"):
            probs.append("model type %r byte_fallback %r" % (tj["model"].get("type"), tj["model"].get("byte_fallback")))
        if tj["model"]["vocab"] != src["model"]["vocab"]:
            probs.append("model.vocab differs from the checkpoint's tokenizer.json")
        norm = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
        snorm = [m if isinstance(m, str) else " ".join(m) for m in src["model"].get("merges", [])]
        if norm != snorm:
            probs.append("model.merges differ (%d vs %d)" % (len(norm), len(snorm)))
        added = sorted((a["id"], a["content"], a.get("special")) for a in tj.get("added_tokens", []))
        sadded = sorted((a["id"], a["content"], a.get("special")) for a in src.get("added_tokens", []))
        if added != sadded:
            probs.append("added_tokens %s, the checkpoint's %s" % (added, sadded))
        for role in ("bos_token", "eos_token", "pad_token"):
            a, b = tc.get(role), s["tc"].get(role)
            a = a.get("content") if isinstance(a, dict) else a
            b = b.get("content") if isinstance(b, dict) else b
            if a != b:
                probs.append("tokenizer_config.json %s %r, the checkpoint's %r" % (role, a, b))
        for sid, at in (tc.get("added_tokens_decoder") or {}).items():
            if (int(sid), at.get("content")) not in [(x[0], x[1]) for x in added]:
                probs.append("added_tokens_decoder %s %r is not an added token of tokenizer.json" % (sid, at))
        n_ids = 1 + max(list(tj["model"]["vocab"].values()) + [a["id"] for a in tj.get("added_tokens", [])])
        if cfg is not None and not (isinstance(cfg.get("vocab_size"), int) and cfg["vocab_size"] >= n_ids):
            probs.append("config vocab_size %r < the tokenizer's %d ids" % (cfg.get("vocab_size"), n_ids))
        split, how = splitter_for(tj)
        n_tok = 0
        if split is None:
            probs.append(how)
        else:
            ref = RefTokenizer(tj, split)
            for text, ids in s["encode"]:
                want = ref.encode(text)
                n_tok += len(want)
                if ids != want:
                    k = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
                    probs.append("%r: source tokenizer (lol) %s..., exported tokenizer.json (reference) %s... "
                                 "from token %d [%s]" % (text[:40], ids[k:k + 6], want[k:k + 6], k, s["encode_cmd"]))
        self.ck.report(tag + " tokenizer", probs, "%s; %d strings, %d ids equal; %d ids (config vocab %s)" % (
            how, len(s["encode"]), n_tok, n_ids, cfg.get("vocab_size") if cfg else None), repro)

    def refusals(self):
        ck, w, s = self.ck, self.w, self.src["A"]
        for name, args, needle in (
                ("A as llama (q/k/v biases)", ["--arch", "llama"], "bias"),
                ("A with --tokenizer byte (another vocabulary)", ["--tokenizer", "byte"], "--tokenizer")):
            out = "hf_refused"
            shutil.rmtree(os.path.join(w, out), ignore_errors=True)
            r = ck.run(["export", "--hf", s["ckpt"], "--out", out] + args, expect=None)
            probs = []
            if r.returncode != 2:
                probs.append("exit %d, expected 2" % r.returncode)
            if needle not in r.stderr:
                probs.append("stderr does not name %r: %s" % (needle, r.stderr.strip()[-300:]))
            left = os.listdir(os.path.join(w, out)) if os.path.isdir(os.path.join(w, out)) else []
            if left:
                probs.append("--out keeps %s" % left)
            ck.report("[refused] " + name, probs, "exit %d: %s" % (r.returncode, r.stderr.strip().splitlines()[-1][:90]
                                                                  if r.stderr.strip() else ""), ck.last_cmd)


def check(lol, work):
    t0 = time.time()
    work = os.path.abspath(work)
    os.makedirs(work, exist_ok=True)
    pinned = os.path.join(work, "lol-under-test")
    shutil.copy2(os.path.abspath(lol), pinned)  # the build tree may be rebuilt meanwhile
    ck = Checker(pinned, work)
    ex = ExportCheck(ck)
    try:
        ex.setup()
    except RuntimeError as e:
        print("setup failed: %s" % e)
        return 1
    for spec in EXPORTS:
        try:
            ex.export(*spec)
        except RuntimeError as e:
            ck.report("[%s] (a lol run failed)" % spec[0], [str(e).splitlines()[0]], "", ck.last_cmd)
    ex.refusals()
    print("\n%d check groups, %d differ; %d lol runs (%.1f s), %.1f s in all" % (
        ck.groups, len(ck.failures), ck.calls, ck.lol_s, time.time() - t0))
    if ck.failures:
        for g, p, r in ck.failures:
            print("- %s: %s" % (g, p[0]))
        return 1
    print("all agree")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="train tiny dense models, export them, check the folders")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))


if __name__ == "__main__":
    main()
