#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Qwen3 (Qwen3ForCausalLM) in pure Python
(stdlib only), and a check that `lol` agrees with it on Qwen3 folders: `hf info|ppl|generate|
bench`, LayerRoute on a Qwen3 base (`layerroute train|eval|generate|merge`), and `lol export
--hf --arch qwen3` of a dense model trained with `"qk_norm": true`.

  python3 tests/reference/qwen3_reference.py check --lol build/lol --work /tmp/x
  python3 tests/reference/qwen3_reference.py selftest       # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from: transformers' modeling_qwen3.py / configuration_qwen3.py (as remembered: Qwen3Attention
= Qwen2's attention without q/k/v biases unless `attention_bias`, plus `q_norm` / `k_norm`,
a Qwen3RMSNorm over head_dim with `rms_norm_eps`, applied to every head of the q and k
projections BEFORE RoPE; Qwen3Config defaults head_dim 128, num_key_value_heads 32 (null ->
num_attention_heads), attention_bias false, rms_norm_eps 1e-6, tie_word_embeddings false,
use_sliding_window false, sliding_window 4096, max_window_layers 28); the contract the
project's brief gives for lol's Qwen3 support (config fields read and refused, the tensors
`model.layers.{i}.self_attn.{q,k}_norm.weight` of shape [head_dim], `hf generate` / `hf
bench` accepting any head_dim for every architecture, LayerRoute on a Qwen3 base, the dense
config field `qk_norm` and `export --arch qwen3`); docs/hf.md (commands, loading rules,
sliding windows, RoPE scaling, Export), docs/layerroute.md (method, files, merge,
measurements, generate), docs/baselines.md (dense fields, tensor names), docs/training.md
(run config), docs/text.md (`eval lm`), docs/tokenizers.md (byte tokenizer). It reuses
tests/reference/qwen2_reference.py (float32 RoPE tables as transformers builds them, the
Qwen2 / Llama float64 `Ref`, folder / tokenizer / weight writers, LayerRoute helpers,
`Checker` and the ppl / greedy comparisons) and export_reference.py's `make_docs` /
`PPL_TEXT`; the Qwen3 forward (`Qwen3Ref`) and every Qwen3 / qk_norm check are written here.

The reference (float64, RoPE tables in float32 as transformers builds them):
  per layer: x = RMSNorm(h); q,k,v = x W^T (no biases); for each head a:
             q_a = RoPE(q_norm(q_a)), k_a = RoPE(k_norm(k_a)), with
             q_norm(u) = w_q * u / sqrt(mean(u^2) + rms_norm_eps) over the head_dim entries;
             grouped-query causal attention, scale head_dim^-0.5, o_proj; SwiGLU MLP as Qwen2.
Self-checks (run first by `check`, alone by `selftest`): the per-head RMSNorm and the order
norm -> RoPE against numbers worked by hand; Qwen3Ref with the norms switched off equals
qwen2_reference's `Ref` on the same weights (bit for bit); with the norms on, scaling one
query head's (or one key/value head's) q/k projection rows leaves the logits unchanged
(eps 1e-12), which a whole-vector norm or no norm would not; the KV-cached greedy path
equals full recomputation.

Cases (tiny folders, byte-level tokenizer of qwen2_reference with ChatML specials and the
Qwen2 ChatML template, vocab 264; random weights, q_norm ~ 1.5 +- 0.5 and k_norm ~ 1 +- 0.4
per entry so that they matter):
  A qwen3-hd10-tied-yarn: hidden 24, 4 heads, head_dim 10 (!= 24/4), 2 kv heads, tied, F32,
    yarn RoPE; hf info --check (architecture, head_dim, parameter count incl. the norms),
    hf ppl float64 (contexts 9, 64) and float32, hf generate greedy float64 (--prompt with
    stop at EOS, --tokens, --chat) and float32 (--tokens), hf bench (runs, parameter count).
  B qwen3-untied-bf16-llama3-eps: hidden 32, 4 heads, head_dim 8, 1 kv head, untied, BF16 in
    2 shards + index, llama3 RoPE, rms_norm_eps 0.02 with small q/k projections (so that the
    q/k norms' eps changes the function by far more than the tolerance); hf ppl float64,
    float32, bfloat16 (3e-2), hf generate float64 / float32.
  C qwen3-headdim-absent: hidden 16, 2 heads, no head_dim key (-> 128, Qwen3Config's
    default), num_key_value_heads null (-> 2); hf info --check (head_dim 128, parameters),
    hf ppl float64, hf generate float64.
  D' qwen3-headdim-null: hidden 16, 2 heads, "head_dim": null (-> 16/2 = 8, docs/hf.md), 1 kv
    head; hf info --check, hf ppl float64.
  D qwen3-kv-missing: hidden 16, 64 heads, head_dim 2, no num_key_value_heads key (-> 32:
    two query heads per kv head), default RoPE; hf info --check (32 key/value heads), hf
    ppl float64.
  E qwen3 sliding-window keys with no sliding layer (use_sliding_window true,
    max_window_layers = layers): hf ppl float64 = the reference.
  qwen2-hd12: a Qwen2 folder with head_dim 12 != 32/4: hf generate greedy float64 and
    float32 against qwen2_reference's Ref (new for every architecture; qwen2_reference.py
    still expects the refusal there), hf bench runs.
  refusals (exit 2, stderr naming what is wrong): attention_bias true (config.json,
    attention_bias); num_key_value_heads missing with 4 heads (32 does not divide 4;
    num_key_value_heads); a missing layers.1 q_norm and a k_norm of shape [hidden] (the
    tensor's name; hf ppl and hf info --check); use_sliding_window true with
    max_window_layers 1 < 2 layers and sliding_window 16 < positions (config.json, a
    sliding-window key); layer_types with "sliding_attention" (use_sliding_window true, so
    that every transformers version reads a sliding layer; config.json, layer_types).
  LayerRoute on A's shape (4 layers, LoRA rank 4 alpha 8 on the seven projections): an
    adapter directory from a 1-step `layerroute train` (tensor names and shapes: the seven
    projections only, no q_norm/k_norm) whose LoRA tensors are replaced by random ones and
    whose gates are designed (qwen2_reference.design_gates) so that decisions differ
    between samples and between a sample and its prompt; `--targets ...,q_norm` refused;
    `eval --json` --gates learned (--max-prompt 256 and 12) and closed; `generate --ids`
    (learned on two prompts, open, --chat); `merge` (folded projections within 1e-6,
    q_norm/k_norm and every other tensor copied bit for bit, the tensor set of a Qwen3
    folder, config.json keeps architectures / model_type / head_dim / ..., gates copied);
    `hf ppl` / `hf generate` of the merged folder = every layer + LoRA; `eval --adapter
    MERGED` = the adapter's numbers with backbone = open; `generate --adapter MERGED`;
    `merge --dtype bfloat16` (projections within half a bf16 ulp of the exact fold, q/k norms
    = their bfloat16 rounding).
  export: a byte-tokenizer corpus; dense model Q (`"qk_norm": true`, d 24, 2 layers, 4/2
    heads, head_dim 8 != 6, untied, norm_eps 1e-2 so that the q/k norms' eps matters, no
    biases), P (no qk_norm) and R (below) trained 4 steps with AdamW lr 0.05; then Q's
    q_norm weights x3 (float32) to sharpen attention, and its q_proj / k_proj x 0.25 (exact;
    the norms undo it but for their eps, which then moves the loss ~25x the tolerance);
    Q's checkpoint holds `model.layers.{i}.self_attn.{q,k}_norm.weight` [8]; `eval lm
    --split train --packing pad` of Q (lol) against the float64 forward of the exported
    folder (rtol 1e-5, equal targets); `export --arch qwen3` float32: config.json
    (Qwen3ForCausalLM, qwen3, head_dim 8, sizes, rms_norm_eps, rope_theta, tie flag, no
    biases / sliding / rope scaling), tensor set and shapes, values bit-equal to the
    checkpoint; `hf ppl --dtype float64` of the export (rtol 1e-6); `hf generate` float64;
    bfloat16 export (values = bf16 rounding; hf ppl float64 against the reference on the
    rounded weights); without --arch (docs/hf.md: qwen3 is a qk_norm model's default) a Qwen3
    folder of the same values; refused (exit 2, nothing written): Q as qwen2 and as llama,
    P as qwen3, R (qk_norm and q/k/v biases, 1 layer) by default and as qwen3 (docs/hf.md
    "a model with biases cannot be exported as Llama or Qwen3").

Sensitivity (the reference's float64 loss on case A's ppl windows, changed one way at a
time; the tolerance is 1e-5): RoPE applied before the q/k norms 1.0e-2 relative, the norm
weights ignored 1.4e-2, no q/k norms 1.6e-2; case B's q/k norms with eps 1e-6 instead of
rms_norm_eps 3.4e-3; export Q's with eps 1e-6 instead of norm_eps 2.6e-4 (both printed by
each run). A head_dim or kv-head count read differently changes the tensor shapes, which
lol's strict loading refuses.

Tolerances as qwen2_reference: summed losses 1e-5 relative (float32 compute), 1e-6 for
float64 compute of an export; greedy ids exact (a float32 near-tie, top-2 gap < 1e-4 of
max |logit|, ends the comparison with a note).

ASSUMED (rules the brief / docs leave open, taken at their most natural reading):
  - the q/k norms of a dense "qk_norm" model use the model's norm_eps (Qwen3 uses
    rms_norm_eps for every norm, and the export writes one rms_norm_eps);
  - `hf info` prints "parameters    N" and "head_dim N" as it does for Qwen2, and N counts
    the q/k norm weights (transformers' num_parameters()); `hf bench --json` "parameters"
    likewise;
  - a refusal of a missing / misshapen q_norm or k_norm names the tensor in full
    (`model.layers.1.self_attn.q_norm.weight`), as docs/hf.md's strict loading names tensors;
  - a refusal of num_key_value_heads names that field; of sliding windows, config.json and
    one of use_sliding_window / sliding_window / max_window_layers / layer_types;
  - `layerroute train --targets` with q_norm is refused (exit 2) naming q_norm;
  - the refused exports (qk_norm model as qwen2 / llama, model without qk_norm as qwen3)
    leave nothing in a new --out (docs/hf.md "Export": a failing export removes what it wrote);
    whether the message names qk_norm is printed as a note, not checked;
  - the exported config.json may omit attention_bias / use_sliding_window (their Qwen3Config
    defaults, false, are what is meant) but must carry head_dim (Qwen3's default 128 is not
    the model's);
  - "head_dim": null in a Qwen3 config is hidden_size / num_attention_heads (docs/hf.md says so;
    transformers versions differ: those reading `getattr(config, "head_dim", None) or ...` agree);
  - lol's dense checkpoints use the Hugging Face tensor names (docs/baselines.md), so the
    export's tensors are compared by name with the checkpoint's model.safetensors.
  - a dense model with both qk_norm and qkv_bias trains (if it does not, a note says so and
    its export refusal is skipped); its refused export exits 2.

Runtime: about 60 s on one core (65 lol runs, ~47 s of it); 230 comparisons.
Exit status 1 on any disagreement, each printed with the lol command that reproduces it
(the work folder is kept).
"""
import argparse
import re
import json
import math
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (PROJ, TEXT, Checker, Ref, apply_rope, as_weights, bf16, chatml_ids,  # noqa: E402
                             compare_eval, compare_generate, compare_ppl, design_gates, encode, f32,
                             layerroute_eval_ref, log_softmax, lr_data, lr_generate, mat, matmul, matvec,
                             random_lora, read_folder_weights, rmsnorm, rope_tables, silu, write_folder)
from safetensors_io import read_st, write_st  # noqa: E402

DROP = object()  # make_config3: remove the key


# ---------------------------------------------------------------- Qwen3 config rules (configuration_qwen3.py)
def qwen3_kv_heads(c):
    """num_key_value_heads: missing -> 32 (Qwen3Config's default), null -> the query heads"""
    if "num_key_value_heads" not in c:
        return 32
    v = c["num_key_value_heads"]
    return c["num_attention_heads"] if v is None else v


def qwen3_head_dim(c):
    """head_dim: missing -> 128 (Qwen3Config's default), NOT hidden / heads"""
    return c["head_dim"] if c.get("head_dim") is not None else (128 if "head_dim" not in c else
                                                                 c["hidden_size"] // c["num_attention_heads"])


def head_norm(vec, w, eps, hd):
    """Qwen3RMSNorm(head_dim) applied to each head of a projection output (a flat vector of
    heads x hd): every head normalised by its own mean square"""
    out = []
    for a in range(len(vec) // hd):
        out.extend(rmsnorm(vec[a * hd:(a + 1) * hd], w, eps))
    return out


def qk_head(u, w, eps, c, s):
    """one head of q or k as Qwen3Attention computes it: the norm first, then RoPE"""
    return apply_rope(rmsnorm(u, w, eps) if w is not None else list(u), c, s)


class Qwen3Ref(Ref):
    """Qwen3ForCausalLM (float64) from a folder, or from (cfg, weights); `qk_norm=False`
    drops q_norm / k_norm (then it is Qwen2's forward without biases). LoRA and gates as
    qwen2_reference.Ref; prefill / greedy / head / gate_score are Ref's."""

    def __init__(self, folder=None, lora=None, lora_scale=0.0, gates=None, weights=None, cfg=None, qk_norm=True):
        self.cfg = c = cfg if cfg is not None else json.load(open(os.path.join(folder, "config.json")))
        self.arch = c["architectures"][0]
        self.d = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.H = c["num_attention_heads"]
        self.Hkv = qwen3_kv_heads(c)
        self.hd = qwen3_head_dim(c)
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.V = c["vocab_size"]
        self.qk_norm = qk_norm
        self.qk_eps = None  # None: rms_norm_eps (as transformers); another value only to measure its effect
        T = weights if weights is not None else read_folder_weights(folder)
        M = {k: mat(v) for k, v in T.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if c.get("tie_word_embeddings", False) else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        self.layers = []
        for i in range(self.L):
            p = "model.layers.%d." % i
            ly = {"in_norm": M[p + "input_layernorm.weight"], "post_norm": M[p + "post_attention_layernorm.weight"],
                  "q_norm": M[p + "self_attn.q_norm.weight"] if qk_norm else None,
                  "k_norm": M[p + "self_attn.k_norm.weight"] if qk_norm else None}
            for proj in PROJ:
                sub = "mlp." if proj in ("gate_proj", "up_proj", "down_proj") else "self_attn."
                W0 = M[p + sub + proj + ".weight"]
                W = W0
                key = "layers.%d.%s%s" % (i, sub, proj)
                if lora and key in lora:
                    A, B = lora[key]
                    BA = matmul(B, A)
                    W = [[w + lora_scale * ba for w, ba in zip(rw, rb)] for rw, rb in zip(W0, BA)]
                ly[proj] = W
                ly[proj + "_base"] = W0
                ly[proj + ".b"] = M.get(p + sub + proj + ".bias")
            self.layers.append(ly)
        self.gates = gates
        self.cos, self.sin = rope_tables(c, self.hd, c["max_position_embeddings"])
        self.use_lora = True
        self.memo = {}

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        sfx = "" if self.use_lora else "_base"
        H, Hkv, hd, eps = self.H, self.Hkv, self.hd, self.eps
        qeps = eps if self.qk_eps is None else self.qk_eps
        rep = H // Hkv
        scale = hd ** -0.5
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in_norm"], eps)
            q = matvec(ly["q_proj" + sfx], x)
            k = matvec(ly["k_proj" + sfx], x)
            v = matvec(ly["v_proj" + sfx], x)
            for nm, vec in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                b = ly[nm + ".b"]
                if b is not None:
                    for j in range(len(vec)):
                        vec[j] += b[j]
            c, s = self.cos[pos], self.sin[pos]
            qh = [qk_head(q[a * hd:(a + 1) * hd], ly["q_norm"], qeps, c, s) for a in range(H)]
            kh = [qk_head(k[a * hd:(a + 1) * hd], ly["k_norm"], qeps, c, s) for a in range(Hkv)]
            vh = [v[a * hd:(a + 1) * hd] for a in range(Hkv)]
            cache["k"].append(kh)
            cache["v"].append(vh)
            att = []
            for a in range(H):
                g = a // rep
                sc = [sum(x1 * x2 for x1, x2 in zip(qh[a], kk[g])) * scale for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for wgt, vv in zip(e, cache["v"]):
                    vg = vv[g]
                    wgt /= tot
                    for j in range(hd):
                        o[j] += wgt * vg[j]
                att.extend(o)
            ao = matvec(ly["o_proj" + sfx], att)
            if ly["o_proj.b"] is not None:
                ao = [x1 + x2 for x1, x2 in zip(ao, ly["o_proj.b"])]
            h2 = [x1 + x2 for x1, x2 in zip(h, ao)]
            x = rmsnorm(h2, ly["post_norm"], eps)
            gt = matvec(ly["gate_proj" + sfx], x)
            up = matvec(ly["up_proj" + sfx], x)
            mid = [silu(a_) * b_ for a_, b_ in zip(gt, up)]
            dn = matvec(ly["down_proj" + sfx], mid)
            out.append([x1 + x2 for x1, x2 in zip(h2, dn)])
        return out


# ---------------------------------------------------------------- tiny Qwen3 folders
def make_config3(**kw):
    c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 264, "hidden_size": 24,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 10, "max_position_embeddings": 256, "rope_theta": 1000.0, "rope_scaling": None,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
         "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28,
         "use_cache": True, "initializer_range": 0.02, "torch_dtype": "float32",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def n_params(T, cfg):
    """transformers' num_parameters(): every stored tensor (lm_head shared when tied)"""
    tot = 0
    for k, (shape, _) in T.items():
        if k == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        n = 1
        for s in shape:
            n *= s
        tot += n
    return tot


def make_weights3(cfg, seed, qk_scale=1.2, biases=False):
    rng = random.Random(seed)
    d, L, V, F = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"], cfg["intermediate_size"]
    H, Hkv, hd = cfg["num_attention_heads"], qwen3_kv_heads(cfg), qwen3_head_dim(cfg)
    T = {}

    def put(name, shape, gen):
        n = 1
        for s in shape:
            n *= s
        T[name] = (shape, [f32(gen()) for _ in range(n)])
    tied = cfg.get("tie_word_embeddings", False)
    put("model.embed_tokens.weight", [V, d], lambda: rng.gauss(0, 0.3 if tied else 1.0))
    if not tied:
        put("lm_head.weight", [V, d], lambda: rng.gauss(0, 0.2))
    put("model.norm.weight", [d], lambda: 1 + rng.gauss(0, 0.4))
    for i in range(L):
        p = "model.layers.%d." % i
        put(p + "input_layernorm.weight", [d], lambda: 1 + rng.gauss(0, 0.4))
        put(p + "post_attention_layernorm.weight", [d], lambda: 1 + rng.gauss(0, 0.4))
        put(p + "self_attn.q_norm.weight", [hd], lambda: 1.5 + rng.gauss(0, 0.5))
        put(p + "self_attn.k_norm.weight", [hd], lambda: 1 + rng.gauss(0, 0.4))
        for nm, o, inn in (("self_attn.q_proj", H * hd, d), ("self_attn.k_proj", Hkv * hd, d),
                           ("self_attn.v_proj", Hkv * hd, d), ("self_attn.o_proj", d, H * hd),
                           ("mlp.gate_proj", F, d), ("mlp.up_proj", F, d), ("mlp.down_proj", d, F)):
            sc = (qk_scale if nm.endswith(("q_proj", "k_proj")) else 1.2) / math.sqrt(inn)
            put(p + nm + ".weight", [o, inn], lambda: rng.gauss(0, sc))
            if biases and not nm.startswith("mlp"):
                put(p + nm + ".bias", [o], lambda: rng.gauss(0, 0.5))
    return T


# ---------------------------------------------------------------- self-checks of the reference
def selftest(verbose=True):
    """returns a list of failures (strings)"""
    bad = []

    def want(what, ok, detail=""):
        if verbose:
            print("  %s self-check: %s %s" % ("ok" if ok else "FAILED", what, detail))
        if not ok:
            bad.append(what + " " + detail)
    # 1. per-head RMSNorm by hand: heads [3, 4] and [0.3, 0.4], weight [2, 0.5], eps 0:
    #    mean squares 12.5 and 0.125, so both heads become [2*3, 0.5*4] / sqrt(12.5) = [1.697.., 0.565..]
    r = 1 / math.sqrt(12.5)
    got = head_norm([3.0, 4.0, 0.3, 0.4], [2.0, 0.5], 0.0, 2)
    hand = [6 * r, 2 * r, 6 * r, 2 * r]
    want("per-head RMSNorm = hand values", max(abs(a - b) for a, b in zip(got, hand)) < 1e-15,
         "%s vs %s" % (["%.6f" % v for v in got], ["%.6f" % v for v in hand]))
    # with eps: head [1, 2, 3, 4], weight [1, 2, 0.5, -1], eps 0.5 -> 1/sqrt(7.5 + 0.5) = 1/sqrt(8)
    r = 1 / math.sqrt(8.0)
    got = head_norm([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 0.5, -1.0], 0.5, 4)
    want("RMSNorm with eps = hand values", max(abs(a - b) for a, b in zip(got, [r, 4 * r, 1.5 * r, -4 * r])) < 1e-15)
    whole = rmsnorm([3.0, 4.0, 0.3, 0.4], [2.0, 0.5, 2.0, 0.5], 0.0)
    want("(a whole-vector norm differs)", abs(whole[2] - 6 / math.sqrt(12.5)) > 0.1)
    # 2. norm, then RoPE (hd 2: [a, b] -> [a c - b s, b c + a s]) at angle 0.7
    c, s = math.cos(0.7), math.sin(0.7)
    u, w = [3.0, 4.0], [2.0, 0.5]
    n = [6 / math.sqrt(12.5), 2 / math.sqrt(12.5)]
    hand = [n[0] * c - n[1] * s, n[1] * c + n[0] * s]
    got = qk_head(u, w, 0.0, [c, c], [s, s])
    want("q_norm before RoPE = hand values", max(abs(a - b) for a, b in zip(got, hand)) < 1e-15)
    other = rmsnorm(apply_rope(u, [c, c], [s, s]), w, 0.0)
    want("(RoPE before the norm differs)", max(abs(a - b) for a, b in zip(other, hand)) > 0.1)
    # 3. norms off = qwen2_reference.Ref on the same weights (with and without biases)
    for biases in (False, True):
        cfg = make_config3(num_hidden_layers=2, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                              "original_max_position_embeddings": 64})
        T = make_weights3(cfg, 5, biases=biases)
        W = as_weights(T, "F32")
        toks = encode("Hi there, qwen3!")
        a = Qwen3Ref(cfg=cfg, weights=W, qk_norm=False).prefill(toks)[0]
        tmp = "/tmp/_qwen3_selftest_%d" % os.getpid()
        os.makedirs(tmp, exist_ok=True)
        json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
        b = Ref(tmp, weights=W).prefill(toks)[0]
        shutil.rmtree(tmp, ignore_errors=True)
        diff = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
        want("norms off = qwen2_reference.Ref%s" % (" (with q/k/v/o biases)" if biases else ""), diff == 0.0,
             "max |diff| %.1e" % diff)
        if not biases:
            on = Qwen3Ref(cfg=cfg, weights=W).prefill(toks)[0]
            d2 = max(abs(x - y) for ra, rb in zip(a, on) for x, y in zip(ra, rb))
            want("(the norms change the logits)", d2 > 1e-2, "max |diff| %.2g" % d2)
    # 4. scaling one query head's q rows / one kv head's k rows changes nothing with per-head norms
    cfg = make_config3(num_hidden_layers=2, rms_norm_eps=1e-12)
    T = make_weights3(cfg, 6)
    hd = 10
    T2 = dict(T)
    for i in range(2):
        for nm, head, f in (("q_proj", 1, 4.0), ("k_proj", 0, 0.25)):  # powers of 2: exact in float32
            key = "model.layers.%d.self_attn.%s.weight" % (i, nm)
            shape, vals = T[key]
            vals = list(vals)
            for rrow in range(head * hd, (head + 1) * hd):
                for col in range(shape[1]):
                    vals[rrow * shape[1] + col] = f32(vals[rrow * shape[1] + col] * f)
            T2[key] = (shape, vals)
    toks = encode("scale invariance")
    for qk, lim, what in ((True, 1e-9, "per-head norms: one head's q/k rows scaled, logits unchanged"),
                          (False, None, "(without the norms they change)")):
        a = Qwen3Ref(cfg=cfg, weights=as_weights(T, "F32"), qk_norm=qk).prefill(toks)[0]
        b = Qwen3Ref(cfg=cfg, weights=as_weights(T2, "F32"), qk_norm=qk).prefill(toks)[0]
        diff = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
        want(what, diff < lim if lim else diff > 1e-3, "max |diff| %.1e" % diff)
    # 5. KV-cached greedy = full recomputation
    m = Qwen3Ref(cfg=cfg, weights=as_weights(T, "F32"))
    prompt = encode("abc")
    toks, _, _, _ = m.greedy(prompt, 4)
    full = []
    for j in range(4):
        lg = m.prefill(prompt + toks[:j])[0][-1]
        full.append(q2.argmax_low(lg))
    want("KV-cached greedy = full recomputation", toks == full, "%s vs %s" % (toks, full))
    return bad


# ---------------------------------------------------------------- checks
def refusal(ck, what, args, needles):
    r = ck.run(args, expect_rc=None)
    ck.equal("%s: exit status" % what, r.returncode, 2)
    missing = [n for n in needles if not any(x in r.stderr for x in (n if isinstance(n, tuple) else (n,)))]
    ck.equal("%s: stderr names %s" % (what, " and ".join(n if isinstance(n, str) else "/".join(n)
                                                          for n in needles)), missing, [])
    return r


def hf_info(ck, folder, tag, T, cfg):
    r = ck.run(["hf", "info", folder, "--check"])
    out = r.stdout
    ck.equal("%s hf info: architecture Qwen3ForCausalLM" % tag, "Qwen3ForCausalLM" in out, True)
    ck.equal("%s hf info: head_dim %d" % (tag, qwen3_head_dim(cfg)),
             bool(re.search(r"head_dim %d\b" % qwen3_head_dim(cfg), out)), True)
    ck.equal("%s hf info: %d key/value heads" % (tag, qwen3_kv_heads(cfg)),
             bool(re.search(r"\b%d key/value" % qwen3_kv_heads(cfg), out)), True)
    m = re.search(r"parameters\s+(\d+)", out)
    ck.equal("%s hf info: parameters (with the q/k norms)" % tag, int(m.group(1)) if m else None, n_params(T, cfg))
    ck.equal("%s hf info --check: all tensors present" % tag, "check         all tensors present" in out, True)


def hf_bench(ck, folder, tag, T, cfg):
    r = ck.run(["hf", "bench", folder, "--context", 16, "--new", 4, "--threads", 1, "--json"])
    if r.returncode != 0:
        return
    try:
        res = json.loads(r.stdout)
    except ValueError:
        res = {}
    ck.equal("%s hf bench --json: parameters" % tag, res.get("parameters"), n_params(T, cfg))


def hf_cases():
    """(tag, config, storage dtype, shards, q/k projection scale)"""
    return [
        ("qwen3-hd10-tied-yarn", make_config3(tie_word_embeddings=True, rope_scaling={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}), "F32", 1, 1.2),
        ("qwen3-untied-bf16-llama3-eps", make_config3(hidden_size=32, head_dim=8, num_key_value_heads=1,
                                                      num_hidden_layers=2, rms_norm_eps=0.02,
                                                      torch_dtype="bfloat16", rope_theta=10000.0,
                                                      rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                    "original_max_position_embeddings": 64}),
         "BF16", 2, 0.15),
        ("qwen3-headdim-absent", make_config3(hidden_size=16, num_attention_heads=2, num_key_value_heads=None,
                                              head_dim=DROP, num_hidden_layers=2, intermediate_size=24),
         "F32", 1, 1.2),
        ("qwen3-headdim-null", make_config3(hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                                            head_dim=None, num_hidden_layers=2, intermediate_size=24),
         "F32", 1, 1.2),
        ("qwen3-kv-missing", make_config3(hidden_size=16, num_attention_heads=64, num_key_value_heads=DROP,
                                          head_dim=2, num_hidden_layers=2, intermediate_size=24), "F32", 1, 1.2),
    ]


def check_hf(ck):
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    prompts = [encode("Hello wor"), encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")]
    for k, (tag, cfg, dt, shards, qks) in enumerate(hf_cases()):
        print("[hf] %s" % tag, flush=True)
        T = make_weights3(cfg, 300 + k, qk_scale=qks)
        write_folder(os.path.join(ck.work, tag), cfg, T, dt, shards)
        model = Qwen3Ref(os.path.join(ck.work, tag), weights=as_weights(T, dt))
        if k == 1:  # the eps of q_norm / k_norm matters here: show by how much
            alt = Qwen3Ref(cfg=cfg, weights=as_weights(T, dt))
            alt.qk_eps = 1e-6
            w = q2.ppl_windows(ids, 64)
            a, _ = q2.mean_ce(model, w)
            b, _ = q2.mean_ce(alt, w)
            print("  (q/k norms with eps 1e-6 instead of rms_norm_eps 0.02 would move loss_sum by %.1e relative)"
                  % (abs(a - b) / a))
        if k != 1:
            hf_info(ck, tag, tag, T, cfg)
        if k in (3, 4):
            compare_ppl(ck, tag, model, ids, 64, "float64", 1e-5, tag)
            continue
        for context in ((9, 64) if k == 0 else (64,)):
            compare_ppl(ck, tag, model, ids, context, "float64", 1e-5, tag)
        if k != 2:
            compare_ppl(ck, tag, model, ids, 64, "float32", 1e-5, tag)
        if dt == "BF16":
            compare_ppl(ck, tag, model, ids, 64, "bfloat16", 3e-2, tag)
        compare_generate(ck, tag, model, prompts[1], 10, "float64", tag)
        if k == 2:
            continue
        compare_generate(ck, tag, model, prompts[0], 12, "float64", tag, stop=True, text="Hello wor")
        compare_generate(ck, tag, model, prompts[1], 10, "float32", tag)
        if k == 0:
            q = "Jump, fox?"
            chat = encode("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n"
                          % (q2.DEFAULT_SYSTEM, q))
            compare_generate(ck, tag, model, chat, 8, "float64", tag, chat=q)
            hf_bench(ck, tag, tag, T, cfg)
            # sliding-window keys with no sliding layer: accepted, the same function
            vcfg = dict(cfg, use_sliding_window=True, sliding_window=16, max_window_layers=cfg["num_hidden_layers"])
            vt = tag + "-sliding-no-sliding-layer"
            write_folder(os.path.join(ck.work, vt), vcfg, T, dt, shards)
            compare_ppl(ck, vt, Qwen3Ref(cfg=vcfg, weights=as_weights(T, dt)), ids, 64, "float64", 1e-5, vt)
            check_refusals(ck, cfg, T)
    # Qwen2 with head_dim != hidden / heads: hf generate now runs it (every architecture)
    print("[hf] qwen2-hd12 (hf generate with a non-default head_dim, every architecture)", flush=True)
    cfg = q2.make_config("Qwen2ForCausalLM", num_hidden_layers=2, head_dim=12)
    T = q2.make_weights(cfg, 103)
    write_folder(os.path.join(ck.work, "qwen2-hd12"), cfg, T)
    model = Ref(os.path.join(ck.work, "qwen2-hd12"), weights=as_weights(T, "F32"))
    compare_generate(ck, "qwen2-hd12", model, prompts[1], 10, "float64", "qwen2-hd12")
    compare_generate(ck, "qwen2-hd12", model, prompts[1], 10, "float32", "qwen2-hd12")
    r = ck.run(["hf", "bench", "qwen2-hd12", "--context", 16, "--new", 4, "--threads", 1])
    ck.equal("qwen2-hd12 hf bench runs (exit 0)", r.returncode, 0)


def check_refusals(ck, cfg, T):
    print("[hf] refusals", flush=True)
    w = ck.work

    def folder(name, c, TT):
        write_folder(os.path.join(w, name), c, TT)
        return name
    # attention_bias true (with the biases a transformers Qwen3 of that config has)
    cb = dict(cfg, attention_bias=True)
    f = folder("refuse-attention-bias", cb, make_weights3(cb, 1, biases=True))
    refusal(ck, "attention_bias true refused", ["hf", "ppl", f, "--data", "text.txt", "--threads", 1],
            ["config.json", "attention_bias"])
    # num_key_value_heads missing: 32, which does not divide 4 query heads
    ck_ = make_config3(num_key_value_heads=DROP)
    TT = make_weights3(make_config3(), 1)  # weights of 2 kv heads: the refusal must come from the config
    f = folder("refuse-kv-missing", ck_, TT)
    refusal(ck, "num_key_value_heads missing (32) with 4 heads refused",
            ["hf", "ppl", f, "--data", "text.txt", "--threads", 1], ["num_key_value_heads"])
    # a missing q_norm, a k_norm of the wrong shape
    TT = dict(T)
    del TT["model.layers.1.self_attn.q_norm.weight"]
    f = folder("refuse-missing-q_norm", cfg, TT)
    for cmd in (["hf", "ppl", f, "--data", "text.txt", "--threads", 1], ["hf", "info", f, "--check"]):
        refusal(ck, "missing layers.1 q_norm refused (%s)" % " ".join(cmd[:2]), cmd,
                ["model.layers.1.self_attn.q_norm.weight"])
    TT = dict(T)
    TT["model.layers.0.self_attn.k_norm.weight"] = ([cfg["hidden_size"]], [1.0] * cfg["hidden_size"])
    f = folder("refuse-k_norm-shape", cfg, TT)
    for cmd in (["hf", "ppl", f, "--data", "text.txt", "--threads", 1], ["hf", "info", f, "--check"]):
        refusal(ck, "k_norm of shape [hidden] refused (%s)" % " ".join(cmd[:2]), cmd,
                ["model.layers.0.self_attn.k_norm.weight"])
    # sliding-window layers: loaded since session 43 (checked by hf_sliding_reference.py);
    # a pattern that is neither full layers first nor a full layer every P-th after them is
    # still refused (session 46: [full, sliding, full] reads as 1 full + every third, so
    # the refused case is now [sliding, full, full])
    cs = dict(cfg, use_sliding_window=True, sliding_window=16,
              layer_types=["sliding_attention", "full_attention", "full_attention"])
    f = folder("refuse-layer-types", cs, T)
    refusal(ck, "layer_types sliding_attention refused", ["hf", "ppl", f, "--data", "text.txt", "--threads", 1],
            ["config.json", ("layer_types", "sliding")])


# ---------------------------------------------------------------- LayerRoute on a Qwen3 base
def check_merged3(ck, tag, model, base_T, folder, dtype="F32"):
    q2.check_merged_weights(ck, tag, model, folder, dtype)
    mT = read_folder_weights(folder)
    rnd = bf16 if dtype == "BF16" else (lambda x: x)
    proj = {"model.layers.%d.%s%s.weight" % (i, "mlp." if p in ("gate_proj", "up_proj", "down_proj") else
                                             "self_attn.", p) for i in range(model.L) for p in PROJ}
    ck.equal("%s merge%s: tensor names = the Qwen3 base's (q_norm/k_norm, no biases)" % (
        tag, " --dtype bfloat16" if dtype == "BF16" else ""), sorted(mT), sorted(base_T))
    diff = []
    for k, (shape, vals) in sorted(base_T.items()):
        if k in proj or k not in mT:
            continue
        if mT[k][0] != shape or mT[k][1] != [rnd(v) for v in vals]:
            diff.append(k)
    ck.equal("%s merge%s: q_norm/k_norm and every other non-LoRA tensor %s" % (
        tag, " --dtype bfloat16" if dtype == "BF16" else "", "= its bf16 rounding" if dtype == "BF16" else
        "copied bit for bit"), diff, [])


def check_layerroute3(ck):
    tag = "qwen3"
    print("[layerroute %s]" % tag, flush=True)
    w = ck.work
    cfg = make_config3(num_hidden_layers=4, rope_theta=500.0)
    T = make_weights3(cfg, 7)
    targets, rank, alpha = q2.LR_TARGETS, 4, 8.0
    policy = ["open", "split", "sep", "split"]
    base, adapter, merged = "lr_" + tag, "adapter_" + tag, "merged_" + tag
    write_folder(os.path.join(w, base), cfg, T)
    train, held = lr_data(11)
    for fn, rows in (("train.jsonl", train), ("held.jsonl", held)):
        with open(os.path.join(w, fn), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    samples = [chatml_ids(s, None) + (s["source"],) for s in held]
    refusal(ck, "%s layerroute train --targets q_proj,q_norm refused" % tag,
            ["layerroute", "train", "--base", base, "--data", "train.jsonl", "--out", adapter + "_refused", "--steps",
             1, "--targets", "q_proj,q_norm", "--threads", 1], ["q_norm"])
    r = ck.run(["layerroute", "train", "--base", base, "--data", "train.jsonl", "--out", adapter, "--steps", 1,
                "--batch", 2, "--accum", 1, "--rank", rank, "--alpha", alpha, "--targets", ",".join(targets),
                "--max-len", 128, "--system", "", "--threads", 1, "--save-every", 0, "--overwrite"])
    if r.returncode != 0:
        return
    st, lora = random_lora(cfg, targets, rank, 13)
    old = read_st(os.path.join(w, adapter, "adapter_model.safetensors"))
    ck.equal("%s adapter tensor names and shapes (the seven projections, head_dim 10)" % tag,
             sorted((k, v[0]) for k, v in old.items()), sorted((k, v[0]) for k, v in st.items()))
    write_st(os.path.join(w, adapter, "adapter_model.safetensors"), st, {"format": "pt"})
    model = Qwen3Ref(os.path.join(w, base), lora=lora, lora_scale=alpha / rank, weights=as_weights(T, "F32"))
    chat_q = "seven plus five?"
    gen_prompts = [samples[0][0][:samples[0][2]], samples[1][0][:samples[1][2]],
                   encode("<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % chat_q),
                   encode("twelve get_weather")]
    ns = len(samples)
    MP = q2.MAX_PROMPT
    contexts = ([s[0] for s in samples] + [s[0][:s[2]] for s in samples] + gen_prompts[2:] +
                [s[0][:s[2]][-MP:] for s in samples])
    W, b, margin = design_gates(model, contexts, policy, 17, pairs=[(k, ns + k) for k in range(ns)], n_primary=ns)
    print("  gates designed: bias %s, smallest |s| %.3g" % (["%.3f" % v for v in b], margin))
    if margin < 0.01:
        ck.fail("reference: the designed gates leave a score within %.3g of the tie (choose other seeds)" % margin)
    write_st(os.path.join(w, adapter, "gates.safetensors"),
             {"gates.weight": ([len(W), len(W[0])], [v for r_ in W for v in r_], "F32"),
              "gates.bias": ([len(b)], b, "F32")})
    ref_learned = None
    for gates, mp in (("learned", 256), ("learned", MP), ("closed", 256)):
        out = os.path.join(w, "eval_%s_%s_%d.json" % (tag, gates, mp))
        r = ck.run(["layerroute", "eval", "--adapter", adapter, "--data", "held.jsonl", "--samples", 0,
                    "--timing-samples", 0, "--gates", gates, "--max-prompt", mp, "--json", out, "--threads", 1])
        if r.returncode == 0:
            ref = layerroute_eval_ref(model, samples, gates, max_prompt=mp)
            compare_eval(ck, "%s eval --gates %s --max-prompt %d:" % (tag, gates, mp), json.load(open(out)), ref,
                         gates)
            if gates == "learned" and mp == 256:
                ref_learned = ref
    lr_generate(ck, model, adapter, tag + " prompt 0", gen_prompts[0])
    lr_generate(ck, model, adapter, tag + " prompt 3", gen_prompts[3])
    lr_generate(ck, model, adapter, tag + " prompt 1", gen_prompts[1], "open")
    lr_generate(ck, model, adapter, tag + " --chat", gen_prompts[2], chat=chat_q)
    r = ck.run(["layerroute", "merge", "--adapter", adapter, "--out", merged, "--overwrite"])
    if r.returncode != 0:
        return
    check_merged3(ck, tag, model, T, os.path.join(w, merged))
    mcfg = json.load(open(os.path.join(w, merged, "config.json")))
    keys = ("architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps",
            "tie_word_embeddings", "max_position_embeddings", "vocab_size")
    ck.equal("%s merge: config.json keeps the base's fields" % tag, [mcfg.get(k) for k in keys],
             [cfg.get(k) for k in keys])
    ck.equal("%s merge: no attention_bias / sliding window / rope scaling switched on" % tag,
             [bool(mcfg.get("attention_bias")), bool(mcfg.get("use_sliding_window")), mcfg.get("rope_scaling")],
             [False, False, None])
    g = read_st(os.path.join(w, merged, "gates.safetensors"))
    ck.equal("%s merge: gates.safetensors copied" % tag, (g["gates.weight"][1], g["gates.bias"][1]),
             ([v for r_ in W for v in r_], b))
    compare_generate(ck, merged, model, gen_prompts[3], 10, "float64", tag + " merged (= every layer + LoRA)")
    compare_ppl(ck, merged, model, encode(TEXT), 64, "float64", 1e-5, tag + " merged (= every layer + LoRA)")
    out = os.path.join(w, "eval_%s_merged.json" % tag)
    r = ck.run(["layerroute", "eval", "--adapter", merged, "--data", "held.jsonl", "--samples", 0,
                "--timing-samples", 0, "--json", out, "--threads", 1])
    if r.returncode == 0 and ref_learned:
        ref = dict(ref_learned)
        ref["ppl_base"] = ref_learned["ppl_open"]
        ref["sources"] = {s: dict(o, ppl_base=o["ppl_open"]) for s, o in ref_learned["sources"].items()}
        compare_eval(ck, "%s eval --adapter MERGED:" % tag, json.load(open(out)), ref, "learned")
    lr_generate(ck, model, merged, tag + " MERGED prompt 1", gen_prompts[1])
    r = ck.run(["layerroute", "merge", "--adapter", adapter, "--out", merged + "_bf16", "--dtype", "bfloat16",
                "--overwrite"])
    if r.returncode == 0:
        check_merged3(ck, tag, model, T, os.path.join(w, merged + "_bf16"), "BF16")


# ---------------------------------------------------------------- export of a dense qk_norm model
def qwen3_names(c):
    d, H, Hkv, F, V = c["d_model"], c["n_heads"], c["n_kv_heads"], c["ffn_hidden"], c["vocab_size"]
    hd = c.get("head_dim") or d // H
    out = {"model.embed_tokens.weight": [V, d], "model.norm.weight": [d]}
    if not c.get("tie_word_embeddings"):
        out["lm_head.weight"] = [V, d]
    for i in range(c["n_layers"]):
        p = "model.layers.%d." % i
        out.update({p + "input_layernorm.weight": [d], p + "post_attention_layernorm.weight": [d],
                    p + "self_attn.q_proj.weight": [H * hd, d], p + "self_attn.k_proj.weight": [Hkv * hd, d],
                    p + "self_attn.v_proj.weight": [Hkv * hd, d], p + "self_attn.o_proj.weight": [d, H * hd],
                    p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd],
                    p + "mlp.gate_proj.weight": [F, d], p + "mlp.up_proj.weight": [F, d],
                    p + "mlp.down_proj.weight": [d, F]})
    return out


EXPORT_MODELS = {
    "Q": {"d_model": 24, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "ffn_hidden": 32,
          "qkv_bias": False, "tie_word_embeddings": False, "rope_theta": 1000.0, "norm_eps": 1e-2, "max_seq_len": 96,
          "qk_norm": True},
    "P": {"d_model": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 24, "qkv_bias": False,
          "tie_word_embeddings": True, "max_seq_len": 96},
    "R": {"d_model": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 24, "qkv_bias": True,
          "tie_word_embeddings": True, "max_seq_len": 96, "qk_norm": True},
}
Q_NORM_SCALE = 3.0
QK_PROJ_SCALE = 0.25


def check_export(ck):
    print("[export] dense qk_norm model -> Qwen3 folder", flush=True)
    from export_reference import PPL_TEXT, make_docs
    w = ck.work
    docs = make_docs(3, 14)
    with open(os.path.join(w, "train.txt"), "w") as f:
        f.write("\n\n".join(docs) + "\n")
    with open(os.path.join(w, "ppl.txt"), "w") as f:
        f.write(PPL_TEXT)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    src = {}
    for m, spec in EXPORT_MODELS.items():
        model = dict(spec, architecture="dense")
        rc = {"model": model, "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
              "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
              "train": {"steps": 4, "out": "run_" + m, "progress": False, "threads": 1, "seed": 0}}
        with open(os.path.join(w, "run_%s.json" % m), "w") as f:
            json.dump(rc, f, indent=1)
        shutil.rmtree(os.path.join(w, "run_" + m), ignore_errors=True)
        r = ck.run(["train", "--config", "run_%s.json" % m, "--no-progress"], expect_rc=0 if m != "R" else None)
        if r.returncode != 0:
            if m != "R":
                return
            ck.note("a dense model with qk_norm and qkv_bias does not train (exit %d: %s); its export refusal is "
                    "not checked" % (r.returncode, r.stderr.strip()[-200:]))
            continue
        ckpt = os.path.join("run_" + m, open(os.path.join(w, "run_" + m, "latest")).read().strip())
        src[m] = {"ckpt": ckpt, "run": "run_" + m, "cfg": json.load(open(os.path.join(w, ckpt, "config.json")))}
    # Q: the checkpoint's q/k norm tensors, then q_norm x Q_NORM_SCALE (sharper attention)
    s = src["Q"]
    c = s["cfg"]
    path = os.path.join(w, s["ckpt"], "model.safetensors")
    T = read_st(path)
    want_names = qwen3_names(c)
    ck.equal("Q checkpoint: q_norm/k_norm tensors [head_dim] under the Hugging Face names (docs/baselines.md)",
             sorted((k, v[0]) for k, v in T.items() if "_norm" in k and "self_attn" in k),
             sorted((k, v) for k, v in want_names.items() if "self_attn" in k and "_norm" in k))
    moved = max(abs(v - 1) for k, (sh, vals, _) in T.items() if "q_norm" in k or "k_norm" in k for v in vals)
    print("  trained q/k norm weights up to %.3f from 1; q_norm x %g, q_proj and k_proj x %g" % (
        moved, Q_NORM_SCALE, QK_PROJ_SCALE))
    for k in list(T):
        if k.endswith("self_attn.q_norm.weight"):
            shp, vals, _ = T[k]
            T[k] = (shp, [f32(v * Q_NORM_SCALE) for v in vals], "F32")
        if k.endswith(("self_attn.q_proj.weight", "self_attn.k_proj.weight")):
            shp, vals, _ = T[k]  # exact (a power of 2); only the q/k norms' eps sees it
            T[k] = (shp, [v * QK_PROJ_SCALE for v in vals], "F32")
    write_st(path, T, {"format": "pt"})
    T = {k: (v[0], v[1]) for k, v in read_st(path).items()}
    st = read_st(os.path.join(w, "data_byte", "train-00000.safetensors"))
    toks, offs = st["tokens"][1], st["offsets"][1]
    docs_ids = [[int(t) for t in toks[offs[i]:offs[i + 1]]] for i in range(len(offs) - 1)]
    out = "evallm_Q.json"
    r = ck.run(["eval", "lm", "--model", s["ckpt"], "--data", "data_byte", "--split", "train", "--packing", "pad",
                "--seq-len", c["max_seq_len"], "--batch-size", 16, "--out", out, "--no-progress", "--threads", 1])
    evallm = json.load(open(os.path.join(w, out))) if r.returncode == 0 else None
    evallm_cmd = ck.last_cmd
    for dtype in ("float32", "bfloat16"):
        folder = "hf_Q_qwen3_" + dtype
        shutil.rmtree(os.path.join(w, folder), ignore_errors=True)
        r = ck.run(["export", "--hf", s["run"], "--out", folder, "--arch", "qwen3", "--dtype", dtype])
        if r.returncode != 0:
            continue
        tag = "export Q --arch qwen3 --dtype %s:" % dtype
        xc = json.load(open(os.path.join(w, folder, "config.json")))
        want_cfg = [("architectures", ["Qwen3ForCausalLM"]), ("model_type", "qwen3"), ("hidden_size", c["d_model"]),
                    ("intermediate_size", c["ffn_hidden"]), ("num_hidden_layers", c["n_layers"]),
                    ("num_attention_heads", c["n_heads"]), ("num_key_value_heads", c["n_kv_heads"]),
                    ("head_dim", c["head_dim"]), ("rms_norm_eps", c["norm_eps"]), ("rope_theta", c["rope_theta"]),
                    ("tie_word_embeddings", False), ("max_position_embeddings", c["max_seq_len"]),
                    ("vocab_size", c["vocab_size"]), ("hidden_act", "silu")]
        ck.equal("%s config.json fields" % tag, [(k, xc.get(k)) for k, _ in want_cfg], want_cfg)
        ck.equal("%s config.json: attention_bias / use_sliding_window false or absent, no rope_scaling" % tag,
                 [xc.get("attention_bias", False), xc.get("use_sliding_window", False), xc.get("rope_scaling")],
                 [False, False, None])
        XT = read_folder_weights(os.path.join(w, folder))
        ck.equal("%s tensor names and shapes (Qwen3: q_norm/k_norm, no biases)" % tag,
                 sorted((k, v[0]) for k, v in XT.items()), sorted(want_names.items()))
        stdt = "F32" if dtype == "float32" else "BF16"
        rnd = bf16 if dtype == "bfloat16" else (lambda x: x)
        ck.equal("%s stored dtype %s" % (tag, stdt), sorted({v[2] for v in XT.values()}), [stdt])
        bad = [k for k in sorted(T) if k in XT and XT[k][1] != [rnd(v) for v in T[k][1]]]
        ck.equal("%s values = the checkpoint's%s" % (tag, "" if dtype == "float32" else " rounded to bfloat16"),
                 bad, [])
        model = Qwen3Ref(os.path.join(w, folder))
        if dtype == "float32" and evallm is not None:
            tot, cnt = 0.0, 0
            for doc in docs_ids:
                if len(doc) < 2:
                    continue
                lg = model.prefill(doc)[0]
                for j in range(len(doc) - 1):
                    tot -= log_softmax(lg[j])[doc[j + 1]]
                    cnt += 1
            alt = Qwen3Ref(os.path.join(w, folder))
            alt.qk_eps = 1e-6
            atot = 0.0
            for doc in docs_ids:
                if len(doc) >= 2:
                    lg = alt.prefill(doc)[0]
                    atot -= sum(log_softmax(lg[j])[doc[j + 1]] for j in range(len(doc) - 1))
            print("  (q/k norms with eps 1e-6 instead of norm_eps %g would move the loss by %.1e relative)"
                  % (c["norm_eps"], abs(atot - tot) / tot))
            ck.last_cmd = evallm_cmd
            ck.equal("Q eval lm (lol, source checkpoint): targets = the export's reference count",
                     evallm.get("targets"), cnt)
            ck.close("Q eval lm (lol, source checkpoint) loss_sum vs float64 forward of the export",
                     evallm.get("loss_sum"), tot, 1e-5)
        # hf ppl --dtype float64 of the export against the reference
        ids = list(PPL_TEXT.encode("utf-8"))
        res_path = os.path.join(w, "ppl_%s.json" % folder)
        r = ck.run(["hf", "ppl", folder, "--data", "ppl.txt", "--context", 16, "--dtype", "float64",
                    "--out", res_path, "--threads", 1])
        if r.returncode == 0:
            res = json.load(open(res_path))
            ptot, pcnt, nbytes = 0.0, 0, 0
            for i in range(0, len(ids), 16):
                win = ids[i:i + 16]
                if len(win) < 2:
                    continue
                lg = model.prefill(win)[0]
                for j in range(len(win) - 1):
                    ptot -= log_softmax(lg[j])[win[j + 1]]
                    pcnt += 1
                nbytes += len(win) - 1
            ck.equal("%s hf ppl targets / bytes" % tag, (res.get("targets"), res.get("bytes")), (pcnt, nbytes))
            ck.close("%s hf ppl --dtype float64 loss_sum" % tag, res.get("loss_sum"), ptot, 1e-6)
            ck.close("%s hf ppl --dtype float64 bits_per_byte" % tag, res.get("bits_per_byte"),
                     ptot / math.log(2) / nbytes, 1e-6)
        if dtype == "float32":
            compare_generate(ck, folder, model, list(b"the cat"), 8, "float64", "export Q qwen3")
    # the default --arch of a qk_norm model is qwen3 (docs/hf.md "Export")
    out = "hf_Q_default_arch"
    shutil.rmtree(os.path.join(w, out), ignore_errors=True)
    r = ck.run(["export", "--hf", s["run"], "--out", out])
    if r.returncode == 0:
        xc = json.load(open(os.path.join(w, out, "config.json")))
        XT = read_folder_weights(os.path.join(w, out))
        ck.equal("export Q (qk_norm) without --arch: a Qwen3 folder, the checkpoint's values",
                 (xc.get("architectures"), xc.get("model_type"), sorted(XT),
                  [k for k in sorted(T) if k in XT and XT[k][1] != T[k][1]]),
                 (["Qwen3ForCausalLM"], "qwen3", sorted(want_names), []))
    # refusals: Q as qwen2 / llama, P (no qk_norm) as qwen3, R (qk_norm and q/k/v biases) by default
    # and as qwen3 (docs/hf.md: "a model with biases cannot be exported as Llama or Qwen3")
    for m, arch in (("Q", "qwen2"), ("Q", "llama"), ("P", "qwen3"), ("R", None), ("R", "qwen3")):
        if m not in src:
            continue
        out = "hf_refused_%s_%s" % (m, arch)
        shutil.rmtree(os.path.join(w, out), ignore_errors=True)
        what = "export %s %s %s refused" % (m, {"Q": "(qk_norm)", "P": "(no qk_norm)", "R": "(qk_norm, q/k/v biases)"}[m],
                                            "--arch " + arch if arch else "(default --arch)")
        r = ck.run(["export", "--hf", src[m]["run"], "--out", out] + (["--arch", arch] if arch else []),
                   expect_rc=None)
        ck.equal("%s: exit status" % what, r.returncode, 2)
        left = os.listdir(os.path.join(w, out)) if os.path.isdir(os.path.join(w, out)) else []
        ck.equal("%s: nothing left in --out" % what, left, [])
        need = ("bias",) if m == "R" else ("qk_norm", "q_norm")
        if not any(x in r.stderr for x in need):
            ck.note("%s: the message does not name %s: %s" % (what, need[0], r.stderr.strip()[-200:]))


# ---------------------------------------------------------------- main
def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    print("[reference self-checks]", flush=True)
    bad = selftest(verbose)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    for b in bad:
        ck.fail("reference self-check failed: " + b, "python3 tests/reference/qwen3_reference.py selftest")
    check_hf(ck)
    check_layerroute3(ck)
    check_export(ck)
    dt = time.time() - t0
    print("\n%d comparisons, %d lol runs (%.1f s of them), %.1f s in all" % (ck.compared, ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    if ck.failures:
        print("%d DISAGREEMENTS:" % len(ck.failures))
        for msg, cmd in ck.failures:
            print("- %s\n    %s" % (msg, cmd))
        return 1
    print("all agree")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Qwen3 folders and a qk_norm dense run, run lol, compare")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    sub.add_parser("selftest", help="the reference's own checks (no lol)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        sys.exit(1 if selftest() else 0)
    sys.exit(check(a.lol, a.work, not a.quiet))


if __name__ == "__main__":
    main()
