#!/usr/bin/env python3
"""An independent float64 reference of sliding-window attention in Hugging Face Mistral /
Qwen2 / Qwen3 folders, and a check that `lol hf ppl|generate|info` agrees with it.

  python3 tests/reference/hf_sliding_reference.py check --lol build/lol --work /tmp/x

Written by a reviewer who did not read src/ nor tests/ outside tests/reference/, from
transformers as remembered (masking_utils' `sliding_window_overlay` and the eager/sdpa
masks of 4.4x, configuration_mistral.py / configuration_qwen2.py / configuration_qwen3.py,
modeling_qwen3.py), the feature's brief and `lol hf ... --help`. It imports
qwen2_reference.py (same folder, unchanged) for the float64 forward's pieces (RMSNorm,
float32 RoPE tables as transformers builds them, the prefill/greedy driver, mean_ce),
the tiny-folder writers (make_config, make_weights, write_folder with F32/BF16 storage,
the byte-level tokenizer), Checker and the ppl / greedy comparisons (compare_ppl,
compare_generate: summed CE, perplexity and bits/byte within 1e-5 relative, greedy ids
exact except after a float32 near-tie). The attention block with the window is written
here (`SlidingRef.block`).

Rules implemented (the reference's reading of transformers):
  mask: in a sliding layer of window W, query position i attends key position j iff
        i - W < j <= i (W keys including itself; masking_utils: kv_idx > q_idx - W and
        kv_idx <= q_idx; 4.4x: tril(ones, diagonal=-W) masked out). Full layer: j <= i.
  Mistral: every layer slides with W = config "sliding_window"; a missing key is
        MistralConfig's default 4096; null = full attention. ("layer_types" not read.)
  Qwen2 / Qwen3: W = "sliding_window" (missing: 4096) when "use_sliding_window" is true
        (default false), else no window; "layer_types", when given, says which layers
        slide; otherwise layer i slides iff W is not None and i >= "max_window_layers"
        (missing: 28).
  Llama: no window.
  A window W >= max_position_embeddings never binds (every position is < max_position_embeddings).
Qwen3 is Qwen2 without biases plus per-head q_norm / k_norm (RMSNorm over head_dim, eps
rms_norm_eps) before RoPE.

Cases (vocab 264, hidden 32, 4 heads / 2 kv heads, 3 layers, max_position_embeddings 64,
a byte-level text of 116 tokens; runs in ~37 s on one core):
  mistral-w5 (F32): hf ppl float64 --context 4, 5, 6, 7, 13, 40 (below, at and above W;
      a window of C tokens predicts from positions 0..C-2, so 7 = W+2 is the first context
      where the window binds, at one position per window: W vs W+1 keys) and float32
      --context 40; hf generate --tokens --ids greedy float64 with prompts of 3, 17 and 40 ids (prompt + new tokens cross W many times, and a
      prompt longer than W), float32 with 17; hf info.
  mistral-w5-bf16 (BF16 storage): ppl float64 (= reference on the bf16-rounded weights),
      ppl --dtype bfloat16 within 2e-3 relative (the window moves it by 1.2e-2; lol was
      within 4e-6 when written), generate float64.
  mistral-w50: a window that binds only in generation (prompt 30 + 34 new tokens).
  qwen2-sw6-mwl1 (use_sliding_window, sliding_window 6, max_window_layers 1: layers 1, 2
      slide): ppl float64 --context 7, 8, 40, float32 40; generate float64 / float32; info.
  qwen2-mwl0-w4: every layer slides.
  qwen3-layer_types ([full, sliding, sliding], W 5): ppl float64 7, 40; generate float64 /
      float32; info.
  qwen2-layer_types-over-mwl ([full, full, sliding] with max_window_layers absent, i.e.
      28): layer_types decides (transformers >= 4.53 takes a given layer_types as is).
  qwen2-layer_types-full-sliding-full: [full, sliding, full] (session 46: accepted, one
      leading full layer, then every third full).
  refused (exit 2, stderr naming layer_types): sliding then full (full, full);
      a list shorter than num_hidden_layers (ASSUMED: transformers raises); an unknown
      type "chunked_attention" (ASSUMED).
  full-attention equivalents, each against the full-attention reference: Mistral
      sliding_window 64 (= positions), null, missing (4096 >= 64); Mistral with
      8192 positions and no sliding_window key (window 4096: binds beyond any sequence
      used here); Qwen2 use_sliding_window true without max_window_layers (28 >= 3
      layers); use_sliding_window false with a window and max_window_layers 0; window
      null; window missing (4096).
Every compared case is also evaluated with full attention, so that a check whose
reference does not differ from full attention is noted (it would not test the window).
On a disagreement, the reference is rerun with alternative rules (full attention, W+1
keys as flash-attention's window_size=(W, W) of 4.4x, W-1 keys, ...) and the one that
matches lol is named (first 6 disagreements). Checked by mutation: with the reference's
windows set to W+1, 50 comparisons disagree and each diagnosis names "W-1 keys".
`hf info` is only required to exit 0; if it prints a line with "window"/"sliding", that
line must contain the window.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (Checker, Ref, apply_rope, as_weights, compare_generate, compare_ppl,  # noqa: E402
                             make_config, make_weights, matvec, mean_ce, ppl_windows, rmsnorm, silu,
                             write_folder)

MPE = 64
TEXT = ("Sliding windows: the quick brown fox jumps over 13 lazy dogs; caf\u00e9 na\u00efve \u2014 "
        "sphinx of black quartz, judge my vow.")


# ---------------------------------------------------------------- which layers slide
def layer_windows(cfg):
    """per layer: the window W (keys i-W < j <= i), or None for full attention"""
    arch = cfg["architectures"][0]
    L = cfg["num_hidden_layers"]
    if arch == "MistralForCausalLM":
        W = cfg.get("sliding_window", 4096)
        return [W] * L
    if arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        W = cfg.get("sliding_window", 4096) if cfg.get("use_sliding_window", False) else None
        types = cfg.get("layer_types")
        if types is None:
            mwl = cfg.get("max_window_layers", 28)
            types = ["sliding_attention" if W is not None and i >= mwl else "full_attention" for i in range(L)]
        return [W if t == "sliding_attention" else None for t in types]
    return [None] * L


def effective(windows, mpe):
    """a window no position can exceed is full attention"""
    return tuple(None if (w is None or w >= mpe) else w for w in windows)


# ---------------------------------------------------------------- the forward with windows
class SlidingRef(Ref):
    """qwen2_reference.Ref (Qwen2 / Llama / Mistral forward, float64) with a per-layer
    attention window, and Qwen3's q_norm / k_norm when the weights have them. The folder's
    config.json gives the shapes and RoPE; `windows` the window per layer (None: full)."""

    def __init__(self, folder, weights, windows):
        Ref.__init__(self, folder, weights=weights)
        self.windows = list(windows)
        for i, ly in enumerate(self.layers):
            p = "model.layers.%d.self_attn." % i
            ly["q_norm"] = list(weights[p + "q_norm.weight"][1]) if p + "q_norm.weight" in weights else None
            ly["k_norm"] = list(weights[p + "k_norm.weight"][1]) if p + "k_norm.weight" in weights else None

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        W = self.windows[i]
        H, Hkv, hd, eps = self.H, self.Hkv, self.hd, self.eps
        rep = H // Hkv
        scale = hd ** -0.5
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in_norm"], eps)
            q = matvec(ly["q_proj"], x)
            k = matvec(ly["k_proj"], x)
            v = matvec(ly["v_proj"], x)
            for nm, vec in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                b = ly[nm + ".b"]
                if b is not None:
                    for j in range(len(vec)):
                        vec[j] += b[j]
            c, s = self.cos[pos], self.sin[pos]
            qh, kh = [], []
            for a in range(H):
                u = q[a * hd:(a + 1) * hd]
                qh.append(apply_rope(rmsnorm(u, ly["q_norm"], eps) if ly["q_norm"] else u, c, s))
            for a in range(Hkv):
                u = k[a * hd:(a + 1) * hd]
                kh.append(apply_rope(rmsnorm(u, ly["k_norm"], eps) if ly["k_norm"] else u, c, s))
            cache["k"].append(kh)
            cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
            assert len(cache["k"]) == pos + 1, "the cache holds every position from 0"
            lo = 0 if W is None else max(0, pos - W + 1)  # keys j with pos - W < j <= pos
            keys, vals = cache["k"][lo:], cache["v"][lo:]
            att = []
            for a in range(H):
                g = a // rep
                sc = [sum(x1 * x2 for x1, x2 in zip(qh[a], kk[g])) * scale for kk in keys]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for wgt, vv in zip(e, vals):
                    vg = vv[g]
                    wgt /= tot
                    for j in range(hd):
                        o[j] += wgt * vg[j]
                att.extend(o)
            ao = matvec(ly["o_proj"], att)
            h2 = [x1 + x2 for x1, x2 in zip(h, ao)]
            x = rmsnorm(h2, ly["post_norm"], eps)
            mid = [silu(a_) * b_ for a_, b_ in zip(matvec(ly["gate_proj"], x), matvec(ly["up_proj"], x))]
            dn = matvec(ly["down_proj"], mid)
            out.append([x1 + x2 for x1, x2 in zip(h2, dn)])
        return out


# ---------------------------------------------------------------- models, memoised
class Models:
    """reference models by (weights tag, storage dtype, effective windows)"""

    def __init__(self):
        self.cache = {}

    def get(self, folder, cfg, wtag, T, dt, windows):
        """folder: any folder written with `cfg`'s shapes and RoPE (the windows come from
        `windows`, not from its config.json)"""
        key = (wtag, dt, effective(windows, cfg["max_position_embeddings"]), cfg["max_position_embeddings"])
        if key not in self.cache:
            self.cache[key] = SlidingRef(folder, as_weights(T, dt), key[2])
        return self.cache[key]


MODELS = Models()
DIAGNOSE = [6]  # diagnose (rerun alternatives for) at most this many more disagreeing comparisons


# ---------------------------------------------------------------- folders
def mistral_config(**kw):
    c = make_config("MistralForCausalLM", model_type="mistral", num_hidden_layers=3, max_position_embeddings=MPE,
                    rope_theta=1000.0)
    c.pop("attention_bias", None)
    c.pop("mlp_bias", None)
    c.update(kw)
    return c


def qwen2_config(**kw):
    c = make_config("Qwen2ForCausalLM", num_hidden_layers=3, max_position_embeddings=MPE)
    c.update(kw)
    return c


def qwen3_config(**kw):
    c = make_config("Qwen3ForCausalLM", model_type="qwen3", num_hidden_layers=3, max_position_embeddings=MPE,
                    head_dim=8, attention_bias=False, use_sliding_window=False, sliding_window=None,
                    max_window_layers=28)
    c.pop("mlp_bias", None)
    c.update(kw)
    return c


def qwen3_weights(cfg, seed):
    import random
    T = make_weights(cfg, seed)  # no biases for an architecture other than Qwen2
    rng = random.Random(seed + 1000)
    hd = cfg["head_dim"]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d.self_attn." % i
        T[p + "q_norm.weight"] = ([hd], [q2.f32(1.5 + rng.gauss(0, 0.5)) for _ in range(hd)])
        T[p + "k_norm.weight"] = ([hd], [q2.f32(1.0 + rng.gauss(0, 0.4)) for _ in range(hd)])
    return T


def drop(cfg, *keys):
    c = dict(cfg)
    for k in keys:
        c.pop(k, None)
    return c


# ---------------------------------------------------------------- diagnostics
def alternatives(windows):
    """other readings of the window, for naming what lol computes on a disagreement"""
    out = [("full attention everywhere", [None] * len(windows))]
    if any(w is not None for w in windows):
        out.append(("W+1 keys (j >= i - W, flash-attention window_size=(W, W))",
                    [None if w is None else w + 1 for w in windows]))
        out.append(("W-1 keys (j > i - W + 1)", [None if w is None or w <= 1 else w - 1 for w in windows]))
        out.append(("every layer sliding", [max(w for w in windows if w is not None)] * len(windows)))
        out.append(("windows on the other layers (reversed order)", list(reversed(windows))))
    return out


class Case:
    def __init__(self, ck, tag, cfg, T, dt="F32", wtag=None):
        self.ck, self.tag, self.cfg, self.T, self.dt = ck, tag, cfg, T, dt
        self.wtag = wtag or tag
        self.windows = layer_windows(cfg)
        write_folder(os.path.join(ck.work, tag), cfg, T, dt)
        self.folder = os.path.join(ck.work, tag)
        self.model = MODELS.get(self.folder, cfg, self.wtag, T, dt, self.windows)
        self.full = MODELS.get(self.folder, cfg, self.wtag, T, dt, [None] * cfg["num_hidden_layers"])
        print("[%s] windows per layer %s (effective %s)" % (tag, self.windows,
                                                             list(effective(self.windows, cfg["max_position_embeddings"]))),
              flush=True)

    def alt(self, windows):
        return MODELS.get(self.folder, self.cfg, self.wtag, self.T, self.dt, windows)

    def ppl(self, ids, context, dtype="float64", rtol=1e-5):
        nf = len(self.ck.failures)
        compare_ppl(self.ck, self.tag, self.model, ids, context, dtype, rtol, self.tag)
        sl, _ = mean_ce(self.model, ppl_windows(ids, context))
        fu, _ = mean_ce(self.full, ppl_windows(ids, context))
        sliding = effective(self.windows, MPE) != effective([None] * len(self.windows), MPE)
        binds = abs(sl - fu) > 2 * rtol * abs(fu)
        # a window of `context` tokens predicts from positions 0 .. context-2: W binds when W < context - 1
        if sliding and not binds and any(w is not None and w < context - 1 for w in self.windows):
            self.ck.note("%s ppl --context %d --dtype %s: the window changes the summed CE by %.2e only"
                         % (self.tag, context, dtype, abs(sl - fu)))
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
            out = os.path.join(self.ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
            try:
                got = json.load(open(out)).get("loss_sum")
            except (OSError, ValueError):
                got = None
            print("    reference loss_sum %.10g (full attention: %.10g); lol %r" % (sl, fu, got))
            if got is not None:
                for name, w in alternatives(self.windows):
                    a, _ = mean_ce(self.alt(w), ppl_windows(ids, context))
                    if abs(a - got) <= rtol * abs(a):
                        print("    lol matches the reference under: %s (loss_sum %.10g)" % (name, a))

    def generate(self, prompt, n, dtype="float64"):
        nf = len(self.ck.failures)
        compare_generate(self.ck, self.tag, self.model, prompt, n, dtype, self.tag)
        toks, _, _, _ = self.model.greedy(prompt, n)
        ftoks, _, _, _ = self.full.greedy(prompt, n)
        if toks == ftoks and effective(self.windows, MPE) != (None,) * len(self.windows) \
                and len(prompt) + n > min(w for w in self.windows if w is not None):
            self.ck.note("%s generate (%d prompt ids): same greedy ids as full attention" % (self.tag, len(prompt)))
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
            print("    prompt %s\n    reference %s\n    full attn %s" % (prompt, toks, ftoks))
            r = self.ck.run(["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype,
                             "--threads", 1, "--tokens", ",".join(map(str, prompt))], expect_rc=None)
            got = q2.parse_ids(r.stdout) if r.returncode == 0 else None
            print("    lol       %s" % got)
            if got:
                for name, w in alternatives(self.windows):
                    a, _, _, _ = self.alt(w).greedy(prompt, n)
                    if a == got:
                        print("    lol matches the reference under: %s" % name)
                k = next((j for j, (x, y) in enumerate(zip(got, toks)) if x != y), None)
                if k is not None:
                    print("    first difference at new token %d (sequence position %d)" % (k, len(prompt) + k))

    def info(self, needle=None):
        r = self.ck.run(["hf", "info", self.tag])
        self.ck.equal("%s hf info exits 0" % self.tag, r.returncode, 0)
        low = r.stdout.lower()
        if "window" in low or "sliding" in low:
            line = next(l_ for l_ in r.stdout.splitlines() if "window" in l_.lower() or "sliding" in l_.lower())
            print("    info: %s" % line.strip())
            if needle is not None:
                self.ck.equal("%s hf info names the window %s" % (self.tag, needle), str(needle) in line, True)
        else:
            self.ck.note("%s: hf info does not mention the sliding window" % self.tag)


def refusal(ck, tag, cfg, T, needle, assumed=""):
    write_folder(os.path.join(ck.work, tag), cfg, T)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    ok = r.returncode == 2 and needle in r.stderr
    ck.compared += 1
    if not ok:
        ck.fail("%s%s: expected exit 2 naming %s; got exit %d, stderr %r" % (
            tag, assumed, needle, r.returncode, r.stderr.strip()[-300:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit 2, names %s)" % (tag, needle), r.stderr.strip()[:110]))


# ---------------------------------------------------------------- self-checks of the reference
def selftest():
    """the window rule on hand-made cases, and the cached greedy path = full recomputation"""
    bad = []
    L = 3
    cases = [
        (mistral_config(sliding_window=5), [5, 5, 5]),
        (drop(mistral_config(), "sliding_window"), [4096] * 3),
        (mistral_config(sliding_window=None), [None] * 3),
        (qwen2_config(use_sliding_window=True, sliding_window=6, max_window_layers=1), [None, 6, 6]),
        (drop(qwen2_config(use_sliding_window=True, sliding_window=6), "max_window_layers"), [None] * 3),
        (qwen2_config(use_sliding_window=False, sliding_window=6, max_window_layers=0), [None] * 3),
        (drop(qwen2_config(use_sliding_window=True, max_window_layers=2), "sliding_window"), [None, None, 4096]),
        (qwen3_config(use_sliding_window=True, sliding_window=5,
                      layer_types=["full_attention", "sliding_attention", "sliding_attention"]), [None, 5, 5]),
    ]
    for cfg, want in cases:
        got = layer_windows(cfg)
        if got != want:
            bad.append("layer_windows %s: %s != %s" % ({k: cfg.get(k) for k in (
                "sliding_window", "use_sliding_window", "max_window_layers", "layer_types")}, got, want))
    import tempfile
    tmp = tempfile.mkdtemp(prefix="hf_sliding_selftest_")
    cfg = mistral_config(sliding_window=2)
    T = make_weights(cfg, 5)
    write_folder(tmp, cfg, T)
    m = MODELS.get(tmp, cfg, "self", T, "F32", layer_windows(cfg))
    full = MODELS.get(tmp, cfg, "self", T, "F32", [None] * L)
    big = MODELS.get(tmp, cfg, "self", T, "F32", [7] * L)
    ids = q2.encode("abcdefgh")
    lg, _, _, _ = m.prefill(ids)
    lf, _, _, _ = full.prefill(ids)
    lb, _, _, _ = big.prefill(ids)
    # position 1 has 2 keys (0, 1): window 2 = full; position 2 drops key 0
    if max(abs(a - b) for a, b in zip(lf[1], lg[1])) > 1e-12:
        bad.append("window 2 differs from full attention at position 1 (keys 0, 1)")
    if max(abs(a - b) for a, b in zip(lf[2], lg[2])) < 1e-6:
        bad.append("window 2 equals full attention at position 2")
    # window 7 over 8 tokens: only the last position (7) loses key 0
    if max(abs(a - b) for p_ in range(7) for a, b in zip(lf[p_], lb[p_])) > 1e-12:
        bad.append("window 7 differs from full attention before position 7")
    if max(abs(a - b) for a, b in zip(lf[7], lb[7])) < 1e-6:
        bad.append("window 7 equals full attention at position 7")
    # the KV-cached greedy path = recomputing the whole sequence at every step
    toks, _, _, _ = m.greedy(ids, 6)
    seq = list(ids)
    for k in range(6):
        lgk, _, _, _ = m.prefill(seq)
        t = q2.argmax_low(lgk[-1])
        if t != toks[k]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (k, toks[k], t))
            break
        seq.append(t)
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return bad


# ---------------------------------------------------------------- the check
def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    for msg in selftest():
        ck.fail("reference self-check: " + msg, "python3 " + os.path.abspath(__file__) + " selftest")
    ids = q2.encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    print("text: %d tokens" % len(ids))
    p3, p17, p40 = ids[:3], ids[5:22], ids[10:50]

    # (1) Mistral, W = 5, every layer
    cfgm = mistral_config(sliding_window=5)
    Tm = make_weights(cfgm, 201)
    c = Case(ck, "mistral-w5", cfgm, Tm, wtag="mistral")
    for ctx in (4, 5, 6, 7, 13, 40):
        c.ppl(ids, ctx)
    c.ppl(ids, 40, "float32")
    c.generate(p3, 30)
    c.generate(p17, 25)
    c.generate(p40, 20)
    c.generate(p17, 25, "float32")
    c.info(5)
    cb = Case(ck, "mistral-w5-bf16", dict(cfgm, torch_dtype="bfloat16"), Tm, "BF16", wtag="mistral")
    cb.ppl(ids, 40)
    cb.ppl(ids, 40, "bfloat16", 2e-3)
    cb.generate(p17, 20)
    c50 = Case(ck, "mistral-w50", mistral_config(sliding_window=50), Tm, wtag="mistral")
    c50.generate(ids[:30], 34)

    # (2) Qwen2, use_sliding_window, window 6 from layer 1
    cfgq = qwen2_config(use_sliding_window=True, sliding_window=6, max_window_layers=1)
    Tq = make_weights(cfgq, 202)
    c = Case(ck, "qwen2-sw6-mwl1", cfgq, Tq, wtag="qwen2")
    for ctx in (7, 8, 40):
        c.ppl(ids, ctx)
    c.ppl(ids, 40, "float32")
    c.generate(p3, 30)
    c.generate(p17, 25, "float32")
    c.info(6)
    c = Case(ck, "qwen2-mwl0-w4", qwen2_config(use_sliding_window=True, sliding_window=4, max_window_layers=0), Tq,
             wtag="qwen2")
    c.ppl(ids, 40)

    # (3) layer_types
    lt = ["full_attention", "sliding_attention", "sliding_attention"]
    cfg3 = qwen3_config(use_sliding_window=True, sliding_window=5, max_window_layers=1, layer_types=lt)
    T3 = qwen3_weights(cfg3, 203)
    c = Case(ck, "qwen3-layer_types", cfg3, T3)
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.generate(p3, 30)
    c.generate(p17, 25, "float32")
    c.info(5)
    c = Case(ck, "qwen2-layer_types-over-mwl",
             drop(qwen2_config(use_sliding_window=True, sliding_window=4,
                               layer_types=["full_attention", "full_attention", "sliding_attention"]),
                  "max_window_layers"), Tq, wtag="qwen2")
    c.ppl(ids, 40)
    c.generate(p3, 30)
    base = qwen2_config(use_sliding_window=True, sliding_window=4, max_window_layers=1)
    refusal(ck, "refuse-sliding-then-full",
            dict(base, layer_types=["sliding_attention", "full_attention", "full_attention"]), Tq, "layer_types")
    # (Session 46: lol reads full layers first, then sliding ones of which every P-th is
    # full; [full, sliding, full] is 1 leading full layer with P = 3, no longer refused.)
    c = Case(ck, "qwen2-layer_types-full-sliding-full",
             dict(base, layer_types=["full_attention", "sliding_attention", "full_attention"]), Tq, wtag="qwen2")
    c.ppl(ids, 40)
    c.generate(p3, 30)
    refusal(ck, "refuse-layer_types-length",
            dict(base, layer_types=["full_attention", "sliding_attention"]), Tq, "layer_types",
            " (ASSUMED: transformers' layer_type_validation raises on a length mismatch)")
    refusal(ck, "refuse-layer_types-unknown",
            dict(base, layer_types=["full_attention", "chunked_attention", "sliding_attention"]), Tq, "layer_types",
            " (ASSUMED: a type lol does not implement is refused)")

    # (4) windows that never bind = full attention
    for tag, cfg in (("mistral-w64", mistral_config(sliding_window=MPE)),
                     ("mistral-wnull", mistral_config(sliding_window=None)),
                     ("mistral-wmissing", drop(mistral_config(), "sliding_window"))):
        c = Case(ck, tag, cfg, Tm, wtag="mistral")
        c.ppl(ids, 64)
        if tag == "mistral-wnull":
            c.generate(p17, 40)
    c = Case(ck, "mistral-8192pos-wmissing", drop(mistral_config(max_position_embeddings=8192), "sliding_window"),
             Tm, wtag="mistral")
    c.ppl(ids, 64)
    c.info(4096)
    for tag, cfg in (("qwen2-usw-mwl-missing", drop(qwen2_config(use_sliding_window=True, sliding_window=4),
                                                    "max_window_layers")),
                     ("qwen2-usw-false", qwen2_config(use_sliding_window=False, sliding_window=4, max_window_layers=0)),
                     ("qwen2-w-null", qwen2_config(use_sliding_window=True, sliding_window=None, max_window_layers=0)),
                     ("qwen2-w-missing", drop(qwen2_config(use_sliding_window=True, max_window_layers=0),
                                              "sliding_window"))):
        c = Case(ck, tag, cfg, Tq, wtag="qwen2")
        c.ppl(ids, 64)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny folders, run lol, compare with the reference")
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
