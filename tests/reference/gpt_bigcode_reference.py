#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face GPT-BigCode (GPTBigCodeForCausalLM,
model_type "gpt_bigcode": StarCoder / SantaCoder) in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info` and `lol export --hf` agree with it on tiny folders written here.

  python3 tests/reference/gpt_bigcode_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/gpt_bigcode_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_gpt_bigcode.py / configuration_gpt_bigcode.py as remembered, the
brief, and docs/hf.md ("GPT-BigCode (StarCoder, SantaCoder)", "GPT-2", "Commands", "Export";
docs/baselines.md for the dense training keys of the export check). It imports
gpt2_reference.py (unchanged: the tokenizer files and encoder, GELU forms, LayerNorm,
storage rounding) and qwen2_reference.py (unchanged: Checker, compare_greedy, parse_ids,
log_softmax, argmax) and safetensors_io.py; the model, the weights, the folder writer and the
comparisons are this file's.

Rules of the reference (float64 on the stored, float32- / bfloat16- / float16-rounded weights):
  h0[t] = wte[id_t] + wpe[t]   (positions 0.. within each forward call / hf ppl window)
  per block i (pre-norm, GPT-2's):
      a   = ln_1(h)                        LayerNorm with bias, biased variance, eps inside sqrt
      y   = c_attn.weight @ a + c_attn.bias      nn.Linear: weight [out, in]
      multi_query (default true): q = y[0:d] (head j = q[j hd:(j+1) hd]), k = y[d:d+hd],
          v = y[d+hd:d+2hd]; every query head attends with that one k / v head
      multi_query false: y viewed [n_head, 3 hd]: head j = y[3j hd:(3j+3) hd] = [q_j; k_j; v_j]
      scores = q . k / sqrt(hd) (scale_attn_weights), causal, softmax (the
          scale_attention_softmax_in_fp32 unscale 1/(layer+1) and rescale cancel); o = heads concatenated
      h = h + attn.c_proj(o);  h = h + mlp.c_proj(act(mlp.c_fc(ln_2(h))))   (all Linear with bias)
  logits = ln_f(h) @ wte^T (tie_word_embeddings default true), else lm_head.weight [V, d], no bias.
  Defaults (GPTBigCodeConfig): n_inner null -> 4 n_embd, activation_function gelu_pytorch_tanh,
      layer_norm_epsilon 1e-5, multi_query true, scale_attn_weights true, bos / eos 50256.

Cases (vocab_size 300, n_embd 32, 4 heads (head_dim 8), n_positions 64, gpt2_reference's
byte-level tokenizer and text):
  A bigcode-mq-buffer-tanh: multi_query true given, the model-level "transformer.bias" BOOL
    [64, 64] causal-mask buffer, gelu_pytorch_tanh, 3 layers, StarCoder's
    attention_softmax_in_fp32 / scale_attention_softmax_in_fp32 true: ppl float64 context 0 / 9,
    float32; greedy generate float64 (3 + 30, 40 + 20), float32 40 + 20, a --prompt text, 50 + 30
    reduced to 14 by n_positions; hf info --check (parameters).
  B bigcode-mha-gelu-untied: multi_query false, exact gelu, n_inner 48, eps 1e-3,
    tie_word_embeddings false with lm_head.weight: ppl float64 / float32, generate, info.
  C bigcode-mq-bf16: BF16 storage, 2 layers, multi_query true: ppl float64 / float32 /
    bfloat16 (5e-3), generate float64, info.
  D bigcode-defaults: config with only architectures, model_type and the sizes: ppl, generate,
    info (defaults: multi_query, tanh GELU, 1e-5, tied, 4 n_embd, bos / eos 50256).
  Refusals (hf ppl, exit 2 naming the field / tensor): scale_attn_weights false,
    add_cross_attention true, activation relu, c_attn stored Conv1D-transposed [d, d + 2 hd],
    a missing tensor, an unexpected tensor.
  Export: a dense model of GPT-2's layout with n_kv_heads 1 (learned positions, LayerNorms,
    plain MLP, all biases, tied) trained 12 steps by `lol train`, `lol export --hf` with the
    default --arch: GPTBigCodeForCausalLM / gpt_bigcode, multi_query true, tensors = the
    checkpoint's (c_attn = [q_proj; k_proj; v_proj] rows) bit for bit, hf ppl float64 = this
    reference on the exported folder, greedy generate.
Tolerances: float64 1e-8 relative (1e-7 perplexity), float32 1e-6, bfloat16 5e-3; greedy ids exact
(float32: up to a near-tie, as gpt2_reference).

ASSUMED (not decided by the brief / transformers):
  * hf ppl windows and the --context 0 default are as gpt2_reference (docs/hf.md "Commands").
  * An unexpected tensor is refused naming it (transformers would only warn and drop it; the
    brief asks for the refusal; docs/hf.md says the loader validates strictly).
  * the Conv1D-transposed c_attn [d, d+2hd] is refused naming c_attn (docs/hf.md says so).
  * hf info prints "GPTBigCodeForCausalLM", "all tensors present" and a "parameters N" count
    equal to transformers' num_parameters() (tied head counted once, buffers not at all).
  * lol's checkpoint names (model.embed_tokens, model.embed_positions, model.layers.i.
    input_layernorm / post_attention_layernorm / self_attn.{q,k,v,o}_proj / mlp.{up,down}_proj,
    model.norm) from docs/baselines.md and the other references' export checks.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as g2  # noqa: E402
from gpt2_reference import (EOT, TEXT, encode, token_bytes, write_tokenizer, layernorm, matvec, store,  # noqa
                            windows, ACTS, gelu_exact, DROP)
from qwen2_reference import Checker, argmax_low, compare_greedy, f32, log_softmax, parse_ids, top2_gap  # noqa
from safetensors_io import write_st, read_st  # noqa: E402
import random
import operator

_mul = operator.mul
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}


# ---------------------------------------------------------------- config
def bc_params(cfg):
    d = cfg["n_embd"]
    inner = cfg.get("n_inner")
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["n_layer"], "H": cfg["n_head"], "P": cfg["n_positions"],
            "F": inner if inner is not None else 4 * d, "act": cfg.get("activation_function", "gelu_pytorch_tanh"),
            "eps": cfg.get("layer_norm_epsilon", 1e-5), "tied": cfg.get("tie_word_embeddings", True),
            "mq": cfg.get("multi_query", True)}


def bc_config(**kw):
    c = {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "vocab_size": 300, "n_embd": 32,
         "n_layer": 3, "n_head": 4, "n_positions": 64, "n_inner": None, "activation_function": "gelu_pytorch_tanh",
         "layer_norm_epsilon": 1e-5, "multi_query": True, "scale_attn_weights": True, "resid_pdrop": 0.1,
         "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02, "use_cache": True,
         "attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True,
         "bos_token_id": EOT, "eos_token_id": EOT, "torch_dtype": "float32"}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def qkv_rows(p):
    hd = p["d"] // p["H"]
    return p["d"] + 2 * hd if p["mq"] else 3 * p["d"]


def param_count(cfg):
    p = bc_params(cfg)
    d, F, R = p["d"], p["F"], qkv_rows(p)
    per = 4 * d + R * d + R + d * d + d + F * d + F + F * d + d
    return p["V"] * d * (1 if p["tied"] else 2) + p["P"] * d + p["L"] * per + 2 * d


def bc_weights(cfg, seed, emb_std=0.5, fc=2.5):
    """name -> (shape, float32-rounded flat values); Linear weights [out, in]; q / k rows larger
    than v's (attention far from uniform)"""
    rng = random.Random(seed)
    p = bc_params(cfg)
    V, d, L, P, F, H = p["V"], p["d"], p["L"], p["P"], p["F"], p["H"]
    hd, R = d // H, qkv_rows(p)
    T = {}

    def put(name, shape, sd, mean=0.0, row_sd=None):
        n = 1
        for s_ in shape:
            n *= s_
        if row_sd is None:
            vals = [f32(rng.gauss(mean, sd)) for _ in range(n)]
        else:
            vals = [f32(rng.gauss(0.0, row_sd(j // shape[1]))) for j in range(n)]
        T[name] = (list(shape), vals)

    def is_v(r):
        if p["mq"]:
            return r >= d + hd
        return r % (3 * hd) >= 2 * hd

    put("transformer.wte.weight", [V, d], emb_std)
    put("transformer.wpe.weight", [P, d], 0.5)
    for i in range(L):
        pre = "transformer.h.%d." % i
        put(pre + "ln_1.weight", [d], 0.3, 1.0)
        put(pre + "ln_1.bias", [d], 0.3)
        put(pre + "attn.c_attn.weight", [R, d], 0, row_sd=lambda r: (1.2 if is_v(r) else 2.5) / math.sqrt(d))
        put(pre + "attn.c_attn.bias", [R], 0.3)
        put(pre + "attn.c_proj.weight", [d, d], 1.0 / math.sqrt(d))
        put(pre + "attn.c_proj.bias", [d], 0.3)
        put(pre + "ln_2.weight", [d], 0.3, 1.0)
        put(pre + "ln_2.bias", [d], 0.3)
        put(pre + "mlp.c_fc.weight", [F, d], fc / math.sqrt(d))
        put(pre + "mlp.c_fc.bias", [F], 0.5)
        put(pre + "mlp.c_proj.weight", [d, F], 1.2 / math.sqrt(F))
        put(pre + "mlp.c_proj.bias", [d], 0.3)
    put("transformer.ln_f.weight", [d], 0.3, 1.0)
    put("transformer.ln_f.bias", [d], 0.3)
    if not p["tied"]:
        put("lm_head.weight", [V, d], 0.3)
    return T


def write_folder(folder, cfg, T, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    gc = {"_from_model_config": True}
    for k in ("bos_token_id", "eos_token_id"):
        if k in cfg:
            gc[k] = cfg[k]
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(gc, f)
    write_tokenizer(folder, cfg.get("n_positions", 64))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- the model
class BigCodeRef:
    """GPTBigCodeForCausalLM in float64. Keyword arguments select alternative readings.
    layout: None (by multi_query), "mq" ([q; k; v] with one k/v head), "per_head" ([H, 3 hd]),
    "blocks" (GPT-2's [q all; k all; v all]), "mq_kv_swapped" (mq with v before k),
    "mq_kv_first" ([k; v; q]), "per_head_qvk" (per head [q; v; k])"""

    def __init__(self, cfg, T, layout=None, positions=True, transpose=False, head=None, act=None, scale=True):
        p = bc_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.V, self.P = p["d"], p["L"], p["H"], p["V"], p["P"]
        self.hd = self.d // self.H
        self.eps = p["eps"]
        self.act = ACTS[act or p["act"]]
        self.scale = self.hd ** -0.5 if scale else 1.0
        self.positions = positions
        self.layout = layout or ("mq" if p["mq"] else "per_head")
        W = {(k[len("transformer."):] if k.startswith("transformer.") else k): v for k, v in T.items()}
        d, F, R = self.d, p["F"], qkv_rows(p)

        def rows(name):
            s, v = W[name][0], W[name][1]
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def lin(name, n_in, n_out):
            s, v = W[name + ".weight"][0], W[name + ".weight"][1]
            assert s == [n_out, n_in], (name, s)
            if transpose:  # alternative: the flat data read as Conv1D's [in, out]
                M = [[v[i * n_out + j] for i in range(n_in)] for j in range(n_out)]
            else:
                M = [list(v[j * n_in:(j + 1) * n_in]) for j in range(n_out)]
            return M, list(W[name + ".bias"][1])

        def ln(name):
            return list(W[name + ".weight"][1]), list(W[name + ".bias"][1])
        self.wte = rows("wte.weight")
        self.wpe = rows("wpe.weight")
        self.layers = []
        for i in range(self.L):
            pre = "h.%d." % i
            self.layers.append({"ln_1": ln(pre + "ln_1"), "ln_2": ln(pre + "ln_2"),
                                "c_attn": lin(pre + "attn.c_attn", d, R), "a_proj": lin(pre + "attn.c_proj", d, d),
                                "c_fc": lin(pre + "mlp.c_fc", d, F), "m_proj": lin(pre + "mlp.c_proj", F, d)})
        self.ln_f = ln("ln_f")
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.wte if tied else rows("lm_head.weight")
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps)

    def embed(self, t, pos):
        e = self.wte[t]
        return [a + b for a, b in zip(e, self.wpe[pos])] if self.positions else list(e)

    def split(self, y):
        d, H, hd, lay = self.d, self.H, self.hd, self.layout
        if lay in ("mq", "mq_kv_swapped", "mq_kv_first"):
            if lay == "mq_kv_first":
                k, v, q = y[:hd], y[hd:2 * hd], y[2 * hd:2 * hd + d]
            else:
                q, k, v = y[:d], y[d:d + hd], y[d + hd:d + 2 * hd]
                if lay == "mq_kv_swapped":
                    k, v = v, k
            return [q[j * hd:(j + 1) * hd] for j in range(H)], [k] * H, [v] * H
        if lay == "blocks":
            return ([y[j * hd:(j + 1) * hd] for j in range(H)], [y[d + j * hd:d + (j + 1) * hd] for j in range(H)],
                    [y[2 * d + j * hd:2 * d + (j + 1) * hd] for j in range(H)])
        o = (0, 2, 1) if lay == "per_head_qvk" else (0, 1, 2)
        return tuple([y[(3 * j + o[c]) * hd:(3 * j + o[c] + 1) * hd] for j in range(H)] for c in range(3))

    def block(self, i, X, cache):
        ly = self.layers[i]
        H, hd = self.H, self.hd
        out = []
        for h in X:
            a = self._ln(h, ly["ln_1"])
            M, b = ly["c_attn"]
            qh, kh, vh = self.split([s + bb for s, bb in zip(matvec(M, a), b)])
            cache["k"].append(kh)
            cache["v"].append(vh)
            att = []
            for j in range(H):
                sc = [sum(map(_mul, qh[j], kk[j])) * self.scale for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for w, vv in zip(e, cache["v"]):
                    w /= tot
                    o = [oj + w * vj for oj, vj in zip(o, vv[j])]
                att.extend(o)
            M, b = ly["a_proj"]
            h2 = [x1 + s + bb for x1, s, bb in zip(h, matvec(M, att), b)]
            m_ = self._ln(h2, ly["ln_2"])
            M, b = ly["c_fc"]
            f = [self.act(s + bb) for s, bb in zip(matvec(M, m_), b)]
            M, b = ly["m_proj"]
            out.append([x1 + s + bb for x1, s, bb in zip(h2, matvec(M, f), b)])
        return out

    def head(self, h):
        return matvec(self.lm_head, self._ln(h, self.ln_f))

    def prefill(self, tokens):
        key = tuple(tokens)
        if key not in self.memo:
            X = [self.embed(t, j) for j, t in enumerate(tokens)]
            caches = []
            for i in range(self.L):
                c = {"k": [], "v": []}
                X = self.block(i, X, c)
                caches.append(c)
            self.memo[key] = ([self.head(h) for h in X], caches)
        return self.memo[key]

    def greedy(self, prompt, n):
        logits, caches = self.prefill(prompt)
        caches = [{"k": list(c["k"]), "v": list(c["v"])} for c in caches]
        toks, gaps = [], []
        z = logits[-1]
        pos = len(prompt)
        for _ in range(n):
            t = argmax_low(z)
            toks.append(t)
            gaps.append(top2_gap(z) / max(1.0, max(abs(v) for v in z)))
            if len(toks) == n:
                break
            h = self.embed(t, pos)
            for i in range(self.L):
                h = self.block(i, [h], caches[i])[0]
            z = self.head(h)
            pos += 1
        return toks, gaps


def mean_ce(model, wins):
    tot, cnt = 0.0, 0
    for w in wins:
        logits = model.prefill(w)[0]
        for j in range(len(w) - 1):
            tot -= log_softmax(logits[j])[w[j + 1]]
            cnt += 1
    return tot, cnt


def alternatives(cfg):
    p = bc_params(cfg)
    other = "gelu" if ACTS[p["act"]] is not gelu_exact else "gelu_pytorch_tanh"
    out = [("no position embeddings", {"positions": False}),
           ("Linear weights read as Conv1D [in, out] (transposed)", {"transpose": True}),
           ("activation %s" % other, {"act": other}),
           ("no attention scale", {"scale": False})]
    if p["mq"]:
        out += [("multi-query k / v rows swapped", {"layout": "mq_kv_swapped"}),
                ("multi-query k / v rows first ([k; v; q])", {"layout": "mq_kv_first"})]
    else:
        out += [("multi-query layout on a multi-head model", {"layout": "mq"}),
                ("GPT-2's [q all; k all; v all] layout", {"layout": "blocks"}),
                ("per head [q; v; k]", {"layout": "per_head_qvk"})]
    if not p["tied"]:
        out.append(("tied head (wte) instead of lm_head.weight", {"head": "tied"}))
    return out


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", buffer=False):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        F = dict(T)
        if buffer:
            P = cfg["n_positions"]
            F["transformer.bias"] = ([P, P], [j <= i for i in range(P) for j in range(P)], "BOOL")
        write_folder(os.path.join(ck.work, tag), cfg, F, dtype)
        self.T = store(T, dtype)
        self.model = BigCodeRef(cfg, self.T)
        p = bc_params(cfg)
        print("[%s] %s storage, layers %d, multi_query %s, n_inner %d, act %s, eps %g, tied %s%s" % (
            tag, dtype, p["L"], p["mq"], p["F"], p["act"], p["eps"], p["tied"],
            ", transformer.bias buffer" if buffer else ""), flush=True)

    def ppl(self, ids, context, dtype="float64"):
        ck = self.ck
        rtol = TOL[dtype]
        eff = context or min(512, self.model.P)
        out = os.path.join(ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
        r = ck.run(["hf", "ppl", self.tag, "--data", "text.txt", "--context", context, "--dtype", dtype,
                    "--out", out, "--threads", 1])
        if r.returncode != 0:
            return
        res = json.load(open(out))
        wins = windows(ids, eff)
        tot, cnt = mean_ce(self.model, wins)
        nb = sum(token_bytes(t) for w in wins for t in w[1:])
        what = "%s hf ppl --dtype %s --context %d" % (self.tag, dtype, context)
        nf = len(ck.failures)
        ck.equal(what + ": targets", res.get("targets"), cnt)
        ck.close(what + ": loss_sum", res.get("loss_sum"), tot, rtol)
        ck.close(what + ": perplexity", res.get("perplexity"), math.exp(tot / cnt), rtol * 10)
        ck.close(what + ": bits_per_byte", res.get("bits_per_byte"), tot / math.log(2) / nb, rtol)
        got = res.get("loss_sum")
        if len(ck.failures) > nf and got is not None:
            for name, kw in alternatives(self.cfg):
                a, _ = mean_ce(BigCodeRef(self.cfg, self.T, **kw), wins)
                if abs(a - got) <= max(rtol, 1e-6) * abs(a):
                    print("    lol matches the alternative reading: %s" % name)

    def generate(self, prompt, n, dtype="float64", text=None, expect_n=None):
        ck = self.ck
        args = ["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype, "--threads", 1]
        args += ["--prompt", text] if text is not None else ["--tokens", ",".join(map(str, prompt))]
        r = ck.run(args)
        if r.returncode != 0:
            return
        m = n if expect_n is None else expect_n
        toks, gaps = self.model.greedy(prompt, m)
        got = parse_ids(r.stdout)
        what = "%s hf generate --dtype %s %s (%d prompt ids, %d new)" % (
            self.tag, dtype, "--prompt" if text is not None else "--tokens", len(prompt), m)
        if expect_n is not None:
            ck.equal(what + ": number of new ids (--max-new %d reduced by n_positions)" % n, len(got), m)
        if not compare_greedy(ck, what, got, toks, gaps, dtype != "float64"):
            for name, kw in alternatives(self.cfg):
                if BigCodeRef(self.cfg, self.T, **kw).greedy(prompt, m)[0] == got:
                    print("    lol matches the alternative reading: %s" % name)

    def info(self):
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return
        ck.equal("%s hf info names GPTBigCodeForCausalLM" % self.tag, "GPTBigCodeForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)


def refusal(ck, tag, cfg, T, needles):
    write_folder(os.path.join(ck.work, tag), cfg, T)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    ck.compared += 1
    if not (r.returncode == 2 and any(n in r.stderr for n in needles)):
        ck.fail("%s: expected exit 2 naming %s; got exit %d, stderr %r" % (
            tag, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


def case_table():
    A = bc_config(multi_query=True)
    B = bc_config(multi_query=False, activation_function="gelu", n_inner=48, layer_norm_epsilon=1e-3,
                  tie_word_embeddings=False)
    C = bc_config(n_layer=2, torch_dtype="bfloat16")
    D = {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "vocab_size": 300, "n_embd": 32,
         "n_layer": 2, "n_head": 4, "n_positions": 64}
    # B: MLP pre-activations of std ~1.5 (where the tanh and exact GELU differ most) so that the GELU forms differ visibly
    return {"A": (A, 601, {}), "B": (B, 602, {"fc": 1.5}), "C": (C, 603, {}), "D": (D, 604, {})}


# ---------------------------------------------------------------- export
EXPORT_MODEL = {"architecture": "dense", "n_layers": 2, "d_model": 32, "n_heads": 4, "n_kv_heads": 1,
                "ffn_hidden": 64, "qkv_bias": True, "o_bias": True, "mlp_bias": True, "norm": "layernorm",
                "mlp": "plain", "positions": "learned", "activation": "gelu_pytorch_tanh", "norm_eps": 1e-5,
                "tie_word_embeddings": True, "max_seq_len": 64}


def check_export(ck):
    w = ck.work
    tag, run = "export-bigcode-mq", "run_export-bigcode-mq"
    print("[export] a GPT-2-layout dense model with one key/value head -> GPTBigCodeForCausalLM", flush=True)
    with open(os.path.join(w, "train.txt"), "w", encoding="utf-8") as f:
        f.write((TEXT + "\n\n") * 6)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    rc = {"model": EXPORT_MODEL, "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
          "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
          "train": {"steps": 12, "out": run, "progress": False, "threads": 1, "seed": 0}}
    with open(os.path.join(w, run + ".json"), "w") as f:
        json.dump(rc, f, indent=1)
    shutil.rmtree(os.path.join(w, run), ignore_errors=True)
    if ck.run(["train", "--config", run + ".json", "--no-progress"]).returncode != 0:
        return
    ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
    S = read_st(os.path.join(ckpt, "model.safetensors"))
    shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
    if ck.run(["export", "--hf", run, "--out", tag]).returncode != 0:
        return
    cfg = json.load(open(os.path.join(w, tag, "config.json")))
    E = {k: (v[0], v[1]) for k, v in read_st(os.path.join(w, tag, "model.safetensors")).items()}
    m = EXPORT_MODEL
    ck.equal("%s: architectures / model_type (the default --arch)" % tag,
             (cfg.get("architectures"), cfg.get("model_type")), (["GPTBigCodeForCausalLM"], "gpt_bigcode"))
    try:
        p = bc_params(cfg)
    except (KeyError, TypeError) as e:
        ck.fail("%s: config.json unreadable as GPTBigCodeConfig: %r" % (tag, e))
        return
    act = "gelu_pytorch_tanh" if p["act"] in ("gelu_new", "gelu_fast", "gelu_pytorch_tanh") else p["act"]
    ck.equal("%s: config.json read as GPTBigCodeConfig (defaults for absent keys)" % tag,
             {"d": p["d"], "L": p["L"], "H": p["H"], "P": p["P"], "F": p["F"], "act": act, "eps": p["eps"],
              "tied": p["tied"], "mq": p["mq"], "scale": cfg.get("scale_attn_weights", True),
              "cross": cfg.get("add_cross_attention", False)},
             {"d": 32, "L": 2, "H": 4, "P": 64, "F": 64, "act": m["activation"], "eps": 1e-5, "tied": True,
              "mq": True, "scale": True, "cross": False})
    want = {}
    missing = []

    def src(k):
        if k not in S:
            missing.append(k)
            return None
        return S[k]
    pairs = [("model.embed_tokens.weight", "transformer.wte.weight"),
             ("model.embed_positions.weight", "transformer.wpe.weight"),
             ("model.norm.weight", "transformer.ln_f.weight"), ("model.norm.bias", "transformer.ln_f.bias")]
    for i in range(m["n_layers"]):
        a, h = "model.layers.%d." % i, "transformer.h.%d." % i
        for y in ("weight", "bias"):
            pairs += [(a + "input_layernorm." + y, h + "ln_1." + y), (a + "post_attention_layernorm." + y, h + "ln_2." + y),
                      (a + "self_attn.o_proj." + y, h + "attn.c_proj." + y), (a + "mlp.up_proj." + y, h + "mlp.c_fc." + y),
                      (a + "mlp.down_proj." + y, h + "mlp.c_proj." + y)]
            parts = [src(a + "self_attn.%s_proj.%s" % (x, y)) for x in "qkv"]
            if None not in parts:
                rows = sum(pt[0][0] for pt in parts)
                want[h + "attn.c_attn." + y] = ([rows] + list(parts[0][0][1:]), [v for pt in parts for v in pt[1]])
    for s_, dst in pairs:
        t = src(s_)
        if t is not None:
            want[dst] = (t[0], t[1])
    if missing:
        ck.note("%s: checkpoint tensors not found under the assumed names: %s; checkpoint has %s" % (
            tag, missing, sorted(S)))
    ck.equal("%s: tensor names" % tag, sorted(E), sorted(want))
    diff = sorted(k for k in want if k in E and E[k] != want[k])
    ck.equal("%s: tensors = the checkpoint's ([q; k; v] rows for c_attn) bit for bit (names differing)" % tag,
             diff, [])
    try:
        model = BigCodeRef(cfg, E)
    except (KeyError, AssertionError) as e:
        ck.fail("%s: the exported tensors do not form a GPTBigCodeForCausalLM: %r" % (tag, e))
        return
    ids = list(TEXT.encode("utf-8"))  # lol's byte tokenizer: id = byte
    out = os.path.join(w, "ppl_%s.json" % tag)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                "--threads", 1])
    if r.returncode == 0:
        res = json.load(open(out))
        tot, cnt = mean_ce(model, windows(ids, 64))
        ck.equal("%s hf ppl --context 64: targets" % tag, res.get("targets"), cnt)
        ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag, res.get("loss_sum"), tot, TOL["float64"])
        ck.close("%s hf ppl --dtype float64 --context 64: bits_per_byte" % tag, res.get("bits_per_byte"),
                 tot / math.log(2) / cnt, TOL["float64"])
    pr = ids[10:30]
    r = ck.run(["hf", "generate", tag, "--ids", "--no-stop", "--max-new", 20, "--dtype", "float64", "--threads", 1,
                "--tokens", ",".join(map(str, pr))])
    if r.returncode == 0:
        toks, gaps = model.greedy(pr, 20)
        compare_greedy(ck, "%s hf generate --dtype float64 (20 prompt ids, 20 new)" % tag, parse_ids(r.stdout),
                       toks, gaps, False)


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    tab = case_table()

    cfg, sd, wkw = tab["A"]
    c = Case(ck, "bigcode-mq-buffer-tanh", cfg, bc_weights(cfg, sd, **wkw), buffer=True)
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:100], 20)
    c.generate(ids[60:100], 20, "float32")
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.generate(ids[100:150], 30, expect_n=64 - 50)
    c.info()

    cfg, sd, wkw = tab["B"]
    c = Case(ck, "bigcode-mha-gelu-untied", cfg, bc_weights(cfg, sd, **wkw))
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[120:160], 22, "float32")
    c.info()

    cfg, sd, wkw = tab["C"]
    c = Case(ck, "bigcode-mq-bf16", cfg, bc_weights(cfg, sd, **wkw), dtype="BF16")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    cfg, sd, wkw = tab["D"]
    c = Case(ck, "bigcode-defaults", cfg, bc_weights(cfg, sd, **wkw))
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()

    print("[refusals]", flush=True)
    base = bc_config(n_layer=2)
    Ts = bc_weights(base, 7)
    refusal(ck, "refuse-scale_attn_weights", dict(base, scale_attn_weights=False), Ts, ["scale_attn_weights"])
    refusal(ck, "refuse-cross-attention", dict(base, add_cross_attention=True), Ts, ["add_cross_attention"])
    refusal(ck, "refuse-relu", dict(base, activation_function="relu"), Ts, ["activation_function"])
    T = dict(Ts)
    sh, v = T["transformer.h.0.attn.c_attn.weight"]
    T["transformer.h.0.attn.c_attn.weight"] = ([sh[1], sh[0]], [v[j * sh[1] + i] for i in range(sh[1])
                                                                 for j in range(sh[0])])  # Conv1D [in, out]
    refusal(ck, "refuse-c_attn-conv1d-transposed", base, T, ["h.0.attn.c_attn.weight"])
    T = dict(Ts)
    del T["transformer.h.1.mlp.c_fc.bias"]
    refusal(ck, "refuse-missing-c_fc-bias", base, T, ["h.1.mlp.c_fc.bias"])
    T = dict(Ts)
    T["transformer.h.0.attn.q_attn.weight"] = ([32, 32], [0.01] * 1024)
    refusal(ck, "refuse-unexpected-q_attn", base, T, ["h.0.attn.q_attn.weight"])

    check_export(ck)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# ---------------------------------------------------------------- selftest
def selftest():
    t0 = time.time()
    bad = []
    ids = encode(TEXT)
    for tag, (cfg, sd, wkw) in case_table().items():
        n = sum(len(v[1]) for v in bc_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    # multi-query with n_head 1 equals multi-head with one head (the two layouts agree there)
    c1 = bc_config(n_head=1, n_layer=1)
    T1 = bc_weights(c1, 9)
    a = BigCodeRef(c1, T1).prefill(ids[:12])[0]
    b = BigCodeRef(dict(c1, multi_query=False), T1).prefill(ids[:12])[0]
    if max(abs(x - y) for r1, r2 in zip(a, b) for x, y in zip(r1, r2)) > 1e-12:
        bad.append("one head: multi-query != multi-head")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B"):
        cfg, sd, wkw = case_table()[tag]
        m = BigCodeRef(cfg, bc_weights(cfg, sd, **wkw))
        pr = ids[60:75]
        toks = m.greedy(pr, 8)[0]
        seq = list(pr)
        for j in range(8):
            t = argmax_low(m.prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (tag, j, toks[j], t))
                break
            seq.append(t)
    gen = {"A": (ids[60:100], 20), "B": (ids[:5], 30), "C": (ids[10:40], 25), "D": (ids[30:62], 25)}
    for tag, (cfg, sd, wkw) in sorted(case_table().items()):
        T = store(bc_weights(cfg, sd, **wkw), "BF16" if tag == "C" else "F32")
        model = BigCodeRef(cfg, T)
        wins = windows(ids, 64)
        ref, cnt = mean_ce(model, wins)
        g = model.greedy(*gen[tag])[0]
        if len(set(g)) < 4:
            bad.append("%s: greedy continuation %s too repetitive" % (tag, g))
        for name, kw in alternatives(cfg):
            alt = BigCodeRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            if rel < 20 * TOL["float64"]:
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = alt.greedy(*gen[tag])[0] == g
            print("  selftest %s %-55s relative change %.2e%s" % (tag, name, rel,
                                                                   "  (greedy ids unchanged)" if same else ""))
        print("  selftest %s loss %.8g over %d targets (ppl %.4g); greedy %s" % (tag, ref, cnt, math.exp(ref / cnt), g))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny GPT-BigCode folders, run lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    sub.add_parser("selftest", help="the reference's own checks (no lol)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        bad = selftest()
        for b in bad:
            print("FAIL " + b)
        print("selftest: %d failures" % len(bad))
        sys.exit(1 if bad else 0)
    sys.exit(check(a.lol, a.work, not a.quiet))


if __name__ == "__main__":
    main()
