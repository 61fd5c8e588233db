#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Phi-3 (Phi3ForCausalLM, model_type
"phi3") in pure Python (stdlib only), and a check that `lol hf ppl|generate|info` agrees
with it on tiny Phi-3 folders written here.

  python3 tests/reference/phi3_reference.py check --lol PATH/TO/lol --work /tmp/x
        [--probe]                 # also note the readings a comparison cannot tell apart (slower)
        [--crossing keep]         # see "Greedy generation across original" below
  python3 tests/reference/phi3_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside
tests/reference/, from transformers' modeling_phi3.py / configuration_phi3.py as
remembered and the feature's brief. It imports qwen2_reference.py (unchanged) for the
float32 RoPE tables as transformers builds them, RMSNorm / SiLU / matvec, the
prefill / greedy driver of its `Ref` (this file's `Phi3Ref` supplies its own weights and
attention block), `mean_ce`, the folder / tokenizer / safetensors writers, `Checker` and
the ppl / greedy comparisons (summed CE, perplexity, bits/byte within 1e-5 relative;
greedy ids exact except after a float32 near-tie).

The reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  qkv = x Wqkv^T with Wqkv = model.layers.N.self_attn.qkv_proj.weight
        [(H + 2 Hkv) hd, d]; as Phi3Attention slices it:
        q = qkv[:, :H hd], k = qkv[:, H hd : H hd + Hkv hd], v = qkv[:, H hd + Hkv hd :],
        each then viewed as [heads, hd] (head a = rows a hd .. a hd + hd - 1 of its part).
  gate_up = x Wgu^T with Wgu = model.layers.N.mlp.gate_up_proj.weight [2 F, d];
        gate, up = gate_up.chunk(2, dim=-1)  (gate = rows 0..F-1, up = rows F..2F-1);
        mlp = down_proj(up * silu(gate)).
  The rest is Llama: pre-norm RMSNorm blocks (input_layernorm, post_attention_layernorm,
  model.norm), rotate-half RoPE on q and k, grouped-query attention (query head a uses
  kv head a // (H / Hkv)), scale hd^-0.5, o_proj, no biases anywhere; lm_head.weight
  (model.embed_tokens.weight when tie_word_embeddings).
  Phi3Config defaults: rms_norm_eps 1e-5, rope_theta 10000, num_key_value_heads = H when
  missing or null, tie_word_embeddings false, sliding_window None, head_dim =
  hidden_size / num_attention_heads.
  sliding_window W (every layer): query i sees keys j with i - W < j <= i; a window
  W >= max_position_embeddings never binds (full attention).

LongRoPE and partial rotary (session 45; Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini), from
transformers' modeling_rope_utils.py (_compute_longrope_parameters, the dynamic_rope_update
/ longrope_frequency_update decorator), modeling_phi3.py and configuration_phi3.py as
remembered:
  rotary_dim = int(head_dim * partial_rotary_factor) (default 1.0); RoPE rotates
    q[..., :rotary_dim] and k[..., :rotary_dim] with rotate_half inside them (pairs
    (i, i + rotary_dim / 2)); the remaining dims pass unchanged.
  rope_scaling {"type": "longrope", "short_factor": [...], "long_factor": [...]} (each
    rotary_dim / 2 numbers); Phi3Config renames the legacy types "su" and "yarn" to
    longrope; "rope_type" is read when "type" is missing (ASSUMED, see below).
  original = the top-level original_max_position_embeddings (Phi3Config default 4096);
    factor = max_position_embeddings / original (a "factor" in rope_scaling is not used);
    attention factor = rope_scaling's attention_factor when given, else
    sqrt(1 + ln(factor) / ln(original)) for factor > 1, else 1; cos and sin are multiplied
    by it in float32 (so only the rotary dims of q.k are scaled, by its square).
  inv_freq = 1 / (ext_factors * base ** (arange(0, rotary_dim, 2).float() / rotary_dim)),
    float32; ext_factors = long_factor when the forward call's seq_len = max(position_ids)
    + 1 exceeds original, else short_factor: chosen per forward call, for every position of
    that call.
  hf ppl: each window is one forward call over all its tokens (transformers' model(window),
    labels = the window shifted): a window of original + 1 tokens or more uses the long
    factors, a shorter one (the text's last window too) the short ones.
  Greedy generation across original: the prompt is one forward call, each new token one
    call whose seq_len is its position + 1, so decoding switches to the long factors at
    position original. transformers' generate() then also drops the KV cache once
    (Phi3ForCausalLM.prepare_inputs_for_generation, transformers PR #33129: when the input
    reaches original + 1 tokens with at most original cached) and recomputes the whole
    sequence, so every cached key then carries the long factors: the default here
    ('recompute'). `--crossing keep` checks instead a plain cached loop in which the keys
    cached before the switch keep their short-factor rotation. The two agree for a prompt
    longer than original and for generations that stay below it.

Cases (vocab 264 > the byte tokenizer's 259 ids, hidden 32, 3 layers, intermediate 40; the
qwen2_reference byte-level tokenizer; a 199-token text):
  A phi3-gqa-f32: 4 heads / 2 kv heads, rope_theta 500, rms_norm_eps 1e-5 given,
    partial_rotary_factor 1.0 given, original_max_position_embeddings 4096 (Phi3Config's
    default as save_pretrained writes it) with rope_scaling null, sliding_window null, F32:
    hf ppl float64 --context 9, 64 and float32 64; hf generate --tokens --ids greedy
    float64 / float32; hf info --check.
  B phi3-mha-bf16-defaults: no num_key_value_heads / rope_theta / rms_norm_eps /
    tie_word_embeddings / sliding_window keys (-> MHA, 10000, 1e-5, untied, none), BF16
    storage in 2 shards + index, embeddings of std 0.003 so that the first RMSNorm's eps
    matters (the reference with eps 1e-6, Llama's, differs by far more than the
    tolerance: checked and noted); ppl float64 / float32 / bfloat16 (3e-2); generate
    float64; hf info --check.
  C phi3-sw5-kvnull: "num_key_value_heads": null (-> 4), sliding_window 5,
    max_position_embeddings 64: ppl float64 --context 7 (the first context where W binds)
    and 40, float32 40; generate float64 with prompts of 3 and 17 ids (+30 / +25 new:
    crossing W many times), float32 17; hf info (if it mentions the window, the line
    must contain 5).
  D phi3-sw64: C's weights with sliding_window 64 = max_position_embeddings: full
    attention (ppl float64 --context 64, generate float64).
  E phi3-tied-mqa: tie_word_embeddings true, no lm_head tensor, 1 kv head: ppl float64,
    generate float64.
  Refusals (hf ppl, exit 2, stderr naming what is wrong):
    qkv_proj of layer 1 with the MHA shape [3 H hd, d] in a GQA folder (names
    model.layers.1.self_attn.qkv_proj.weight); gate_up_proj of layer 0 of shape [F, d]
    (names model.layers.0.mlp.gate_up_proj.weight; ASSUMED from docs/hf.md's strict
    loading); a folder holding both qkv_proj and a separate q_proj in layer 0 (names
    q_proj); Llama's separate q/k/v/gate/up tensors instead of the fused ones (ASSUMED:
    refused, names qkv_proj).
  LongRoPE / partial rotary (check_longrope; hf ppl float64 unless said):
  F phi3-longrope: head_dim 8 (4 factors, short 1.3..4.7, long 2.6..19.5), original 20 of
    80 positions (factor 4, attention 1.2094): ppl --context 20 (short), 21 (windows of
    21: long; the last of 10: short) and 40 (long); generate float64 with a 9-id prompt
    + 30 (crosses 20) and a 21-id prompt (= original + 1) + 20; float32 9 + 30; hf info
    (the RoPE scaling line says longrope).
  phi3-longrope-su: F with "type": "su" (ppl 40). phi3-longrope-orig-eq-mpe: original =
    max_position_embeddings = 64 (factor 1: attention 1, short factors 2.5..35; ppl 64).
    phi3-longrope-orig-default: no original_max_position_embeddings key (4096 > 80
    positions: attention 1, short factors; ppl 40).
  G phi3-partial: case A's weights with partial_rotary_factor 0.75 (rotary_dim 6), no
    scaling: ppl 64, generate; phi3-partial-half: 0.5 (rotary_dim 4): ppl 64.
  H phi3-partial-longrope (Phi-4-mini's form): 2 heads / 1 kv head, head_dim 16,
    partial 0.75 -> rotary_dim 12 (6 factors), original 16 of 96 (attention 1.2831): ppl
    --context 16, 17 (last window 12: short), 48 float64 and float32; generate 7 + 20
    (crosses 16) float64 and float32; hf info (longrope; the rotary line names 0.75 or 12).
  Accepted with the reference's reading, or refused (exit 2, a note: transformers versions
    differ): {"rope_type": "longrope", ...} (ppl 40); attention_factor 1.7 in rope_scaling
    (must then be used; ppl 40); {"type": "yarn", short/long factors} (Phi3Config renames
    it to longrope; ppl 40).
  Refusals (exit 2 naming the field): short_factor of 3 values for 4 frequencies; no
    long_factor; with partial rotary, factors of head_dim / 2 = 8 values instead of
    rotary_dim / 2 = 6 (names short_factor or long_factor); partial_rotary_factor 0.625
    (rotary_dim 5, odd) and 0.1 (rotary_dim 0).
  Export: a dense lol model (d 24, 2 layers, 4/2 heads, ffn 32, no biases, untied) trained
    4 steps on a byte corpus, `export --hf --arch phi3`: config.json (architectures,
    model_type, sizes, kv heads / rope_theta / rms_norm_eps given or by Phi3Config's
    defaults, no rope scaling / partial rotary / window), no unfused projection and no bias
    tensors, qkv_proj = the checkpoint's q_proj, k_proj, v_proj rows in that order and
    gate_up_proj = gate_proj then up_proj rows (bit for bit, F32), and `hf ppl --dtype
    float64` of the export against this reference on the exported tensors (1e-6).
  hf info --check (A, B, C): exit 0, names Phi3ForCausalLM, "all tensors present", a printed
    parameter count = transformers' num_parameters() (fused shapes); C: the window line
    names 5.
With --probe, each case is also evaluated under other readings of the fused tensors
(gate/up swapped, q/k/v grouped per kv head, k/v swapped), with a window W+1 keys / full
attention, with LongRoPE short / long factors always, the switch at seq_len >= original,
per-position factors, no attention factor, the cache kept or recomputed at the crossing,
with partial rotary full rotary / interleaved pairs / the last dims / exponents over
head_dim; a reading that a check cannot tell from the reference is noted (none at the
time of writing). On a disagreement the readings that match lol are named (once per case
for ppl and once for generate, 8 in all). The reference's arithmetic: float64 sums in a fixed order (this file's
matvec = qwen2_reference's, faster).
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from operator import mul  # noqa: E402
from qwen2_reference import (Checker, apply_rope, compare_generate, compare_ppl, f32,  # noqa: E402
                             mean_ce, ppl_windows, rmsnorm, silu, write_folder)

TEXT = q2.TEXT


def matvec(W, x):
    """qwen2_reference.matvec's sums in the same order (bit for bit), faster"""
    return [sum(map(mul, row, x)) for row in W]
DIAGNOSE = [8]


# ---------------------------------------------------------------- config reading (Phi3Config)
def phi3_params(cfg):
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads")
    if Hkv is None:  # missing or null
        Hkv = H
    hd = cfg.get("head_dim") or d // H
    mpe = cfg["max_position_embeddings"]
    W = cfg.get("sliding_window")
    if W is not None and W >= mpe:
        W = None
    prf = cfg.get("partial_rotary_factor", 1.0)
    return {"d": d, "H": H, "Hkv": Hkv, "hd": hd, "F": cfg["intermediate_size"], "L": cfg["num_hidden_layers"],
            "V": cfg["vocab_size"], "eps": cfg.get("rms_norm_eps", 1e-5),
            "theta": cfg.get("rope_theta", 10000.0), "tied": cfg.get("tie_word_embeddings", False),
            "mpe": mpe, "window": W, "rd": int(hd * prf), "longrope": longrope_params(cfg)}


def longrope_params(cfg):
    """Phi3Config + modeling_rope_utils' longrope reading, or None without rope_scaling.
    Phi3Config renames the legacy types "su" and "yarn" to "longrope"; the type is read from
    "type" (Phi3Config's key) or else "rope_type" (transformers' generic key; ASSUMED accepted).
    original_max_position_embeddings: the top-level key (Phi3Config default 4096);
    factor = max_position_embeddings / original (rope_scaling's own "factor" is not used);
    attention factor = rope_scaling's attention_factor when given, else
    sqrt(1 + ln(factor) / ln(original)) for factor > 1, else 1."""
    rs = cfg.get("rope_scaling")
    if not rs:
        return None
    typ = rs.get("type", rs.get("rope_type"))
    if typ in ("su", "yarn"):
        typ = "longrope"
    if typ != "longrope":
        raise ValueError("rope_scaling type %r not in this reference" % typ)
    orig = cfg.get("original_max_position_embeddings", 4096)
    factor = cfg["max_position_embeddings"] / orig
    att = rs.get("attention_factor")
    if att is None:
        att = math.sqrt(1 + math.log(factor) / math.log(orig)) if factor > 1.0 else 1.0
    return {"short": list(rs["short_factor"]), "long": list(rs["long_factor"]), "orig": orig, "factor": factor,
            "att": att}


def rope_tables_rd(base, rd, npos, factors=None, att=1.0, expo_dim=None):
    """cos, sin [npos][rd] over the first rd dims of a head, float32 as transformers builds
    them: inv_freq = 1 / (ext_factors * base ** (arange(0, rd, 2).float() / rd)) (no
    ext_factors: 1 / base ** ...), angle = inv_freq * pos, cos / sin in float32, each times
    the attention factor in float32; emb = cat(freqs, freqs) (rotate-half layout).
    expo_dim: the exponent's denominator (rd; head_dim for a diagnosis reading)."""
    ed = expo_dim or rd
    pf = [f32(base ** f32(float(j) / ed)) for j in range(0, rd, 2)]
    if factors is None:
        inv = [f32(1.0 / p) for p in pf]
    else:
        assert len(factors) == rd // 2
        inv = [f32(1.0 / f32(f32(fc) * p)) for fc, p in zip(factors, pf)]
    a32 = f32(att)
    cos, sin = [], []
    for p in range(npos):
        ang = [f32(v * p) for v in inv]
        c = [f32(f32(math.cos(a)) * a32) for a in ang]
        s = [f32(f32(math.sin(a)) * a32) for a in ang]
        cos.append(c + c)
        sin.append(s + s)
    return cos, sin


def rope_partial(x, c, s, rd, layout="half"):
    """RoPE on the first rd dims of a head x (len(c) == rd), the rest passes unchanged
    (modeling_phi3.apply_rotary_pos_emb: q_rot = q[..., :rotary_dim], rotate_half within it).
    Diagnosis layouts: 'interleaved' (pairs 2i, 2i+1), 'last' (the last rd dims rotate)."""
    if layout == "half":
        return apply_rope(x[:rd], c, s) + x[rd:]
    if layout == "last":
        n = len(x) - rd
        return x[:n] + apply_rope(x[n:], c, s)
    if layout == "interleaved":
        out = list(x)
        for i in range(rd // 2):
            a, b = x[2 * i], x[2 * i + 1]
            out[2 * i] = a * c[i] - b * s[i]
            out[2 * i + 1] = b * c[i] + a * s[i]
        return out
    raise ValueError(layout)


# ---------------------------------------------------------------- splitting the fused tensors
def split_qkv(R, H, Hkv, hd, layout="hf"):
    """rows of qkv_proj.weight -> (Wq, Wk, Wv) row lists.
    hf: [q heads | k heads | v heads] (Phi3Attention's slices);
    alternatives for diagnosis: 'grouped' ([q heads of group g, k_g, v_g] per kv head),
    'kv-swapped' ([q | v | k])."""
    nq, nk = H * hd, Hkv * hd
    if layout == "hf":
        return R[:nq], R[nq:nq + nk], R[nq + nk:]
    if layout == "kv-swapped":
        return R[:nq], R[nq + nk:], R[nq:nq + nk]
    if layout == "grouped":
        rep = H // Hkv
        q, k, v = [], [], []
        per = (rep + 2) * hd
        for g in range(Hkv):
            blk = R[g * per:(g + 1) * per]
            q += blk[:rep * hd]
            k += blk[rep * hd:(rep + 1) * hd]
            v += blk[(rep + 1) * hd:]
        return q, k, v
    raise ValueError(layout)


def split_gate_up(R, F, layout="hf"):
    """rows of gate_up_proj.weight -> (Wgate, Wup). hf: chunk(2) = [gate | up]."""
    if layout == "hf":
        return R[:F], R[F:]
    if layout == "swapped":
        return R[F:], R[:F]
    if layout == "interleaved":
        return R[0::2], R[1::2]
    raise ValueError(layout)


# ---------------------------------------------------------------- the model
class Phi3Ref(q2.Ref):
    """Phi3ForCausalLM, float64. Reuses qwen2_reference.Ref's prefill / greedy / head;
    weights and the attention block are this class's."""

    def __init__(self, cfg, weights, qkv_layout="hf", gu_layout="hf", window="config", eps=None, theta=None,
                 select="call", att_mode="tables", rot_layout="half", crossing="recompute", rd=None,
                 no_longrope=False):
        """select (longrope: which factors a forward call uses): 'call' (transformers: long
        when the call's max position + 1 > original), or for diagnosis 'call-ge' (>=),
        'position' (per position: pos >= original), 'short', 'long'.
        att_mode: 'tables' (transformers: cos and sin times the attention factor), 'none',
        'scores' (att^2 on the whole q.k score, pass-through dims included).
        rot_layout: 'half' (transformers), 'interleaved', 'last', 'expo-hd' (exponents over
        head_dim instead of rotary_dim).
        crossing (greedy): 'recompute' (transformers' Phi3ForCausalLM.prepare_inputs_for_generation:
        when the step's input reaches original + 1 tokens with at most original cached, the
        cache is dropped and the whole sequence recomputed, so every key then has the long
        factors), 'keep' (the cached keys keep their short-factor rotation)."""
        p = phi3_params(cfg)
        self.cfg = cfg
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.eps = p["eps"] if eps is None else eps
        self.window = p["window"] if window == "config" else window
        M = {k: q2.mat(v) for k, v in weights.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if p["tied"] else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            q, k, v = split_qkv(M[pre + "self_attn.qkv_proj.weight"], self.H, self.Hkv, self.hd, qkv_layout)
            g, u = split_gate_up(M[pre + "mlp.gate_up_proj.weight"], p["F"], gu_layout)
            self.layers.append({"in_norm": M[pre + "input_layernorm.weight"],
                                "post_norm": M[pre + "post_attention_layernorm.weight"],
                                "q": q, "k": k, "v": v, "o": M[pre + "self_attn.o_proj.weight"],
                                "gate": g, "up": u, "down": M[pre + "mlp.down_proj.weight"]})
        th = p["theta"] if theta is None else theta
        self.rd = p["rd"] if rd is None else rd
        self.lr = None if no_longrope else p["longrope"]
        self.select, self.att_mode, self.rot_layout, self.crossing = select, att_mode, rot_layout, crossing
        self.mpe = p["mpe"]
        if self.lr is None and self.rd == self.hd and rot_layout == "half":  # the unchanged Llama path
            self.cos, self.sin = q2.rope_tables({"rope_theta": th, "max_position_embeddings": p["mpe"]}, self.hd,
                                                p["mpe"])
            self.tables = {"short": (self.cos, self.sin)}
        else:
            ed = self.hd if rot_layout == "expo-hd" else None
            if self.lr is None:
                self.tables = {"short": rope_tables_rd(th, self.rd, p["mpe"], expo_dim=ed)}
            else:
                att = 1.0 if att_mode in ("none", "scores") else self.lr["att"]
                self.tables = {k: rope_tables_rd(th, self.rd, p["mpe"], self.lr[k], att, ed)
                               for k in ("short", "long")}
            self.cos, self.sin = self.tables["short"]
        self.gates = None
        self.use_lora = False
        self.memo = {}

    def factors_for(self, seq_len, pos):
        """'short' or 'long': the table a query / key at pos uses in a forward call whose
        positions end at seq_len - 1"""
        if self.lr is None:
            return "short"
        o, sel = self.lr["orig"], self.select
        if sel in ("short", "long"):
            return sel
        if sel == "call":
            return "long" if seq_len > o else "short"
        if sel == "call-ge":
            return "long" if seq_len >= o else "short"
        if sel == "position":
            return "long" if pos >= o else "short"
        if sel == "call-minus-last":
            return "long" if seq_len - 1 > o else "short"
        raise ValueError(sel)

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, Hkv, hd, eps, W = self.H, self.Hkv, self.hd, self.eps, self.window
        rep = H // Hkv
        scale = hd ** -0.5
        if self.att_mode == "scores" and self.lr is not None:
            scale *= self.lr["att"] ** 2
        rd, lay = self.rd, ("half" if self.rot_layout == "expo-hd" else self.rot_layout)
        seq_len = pos0 + len(X)  # transformers: max(position_ids) + 1 of this forward call
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in_norm"], eps)
            q, k, v = matvec(ly["q"], x), matvec(ly["k"], x), matvec(ly["v"], x)
            cos, sin = self.tables[self.factors_for(seq_len, pos)]
            c, s = cos[pos], sin[pos]
            if rd == hd and lay == "half":
                qh = [apply_rope(q[a * hd:(a + 1) * hd], c, s) for a in range(H)]
                cache["k"].append([apply_rope(k[a * hd:(a + 1) * hd], c, s) for a in range(Hkv)])
            else:
                qh = [rope_partial(q[a * hd:(a + 1) * hd], c, s, rd, lay) for a in range(H)]
                cache["k"].append([rope_partial(k[a * hd:(a + 1) * hd], c, s, rd, lay) for a in range(Hkv)])
            cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
            assert len(cache["k"]) == pos + 1
            lo = 0 if W is None else max(0, pos - W + 1)  # keys j: pos - W < j <= pos
            keys, vals = cache["k"][lo:], cache["v"][lo:]
            att = []
            for a in range(H):
                g = a // rep
                sc = [sum(map(mul, qh[a], kk[g])) * scale for kk in keys]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for wgt, vv in zip(e, vals):
                    wgt /= tot
                    o = [oj + wgt * vj for oj, vj in zip(o, vv[g])]
                att.extend(o)
            h2 = [x1 + x2 for x1, x2 in zip(h, matvec(ly["o"], att))]
            x = rmsnorm(h2, ly["post_norm"], eps)
            mid = [b_ * silu(a_) for a_, b_ in zip(matvec(ly["gate"], x), matvec(ly["up"], x))]
            out.append([x1 + x2 for x1, x2 in zip(h2, matvec(ly["down"], mid))])
        return out

    def head(self, h):
        return matvec(self.lm_head, rmsnorm(h, self.norm, self.eps))

    def greedy(self, prompt, n, mode="open", forced=None):
        """KV-cached greedy decoding as transformers' generate() runs a Phi-3 model: the prompt
        is one forward call, each new token one more (its seq_len = its position + 1); with
        crossing 'recompute', the step whose token sits at position original (input length
        original + 1, at most original tokens cached) drops the cache and recomputes the whole
        sequence (Phi3ForCausalLM.prepare_inputs_for_generation)."""
        logits, caches, _, _ = self.prefill(prompt)
        caches = [{"k": list(c["k"]), "v": list(c["v"])} for c in caches]
        self.use_lora = False
        seq = list(prompt)
        toks, gaps = [], []
        z = logits[-1]
        pos = len(prompt)
        while True:
            t = q2.argmax_low(z)
            toks.append(t)
            gaps.append(q2.top2_gap(z) / max(1.0, max(abs(v) for v in z)))
            if len(toks) == n:
                break
            seq.append(t)
            if self.crossing == "recompute" and self.lr is not None and pos == self.lr["orig"]:
                logits, caches, _, _ = self.prefill(seq)
                caches = [{"k": list(c["k"]), "v": list(c["v"])} for c in caches]
                z = logits[-1]
            else:
                h = list(self.embed[t])
                for i in range(self.L):
                    h = self.block(i, [h], pos, caches[i])[0]
                z = self.head(h)
            pos += 1
        return toks, gaps, [True] * self.L, []


# ---------------------------------------------------------------- tiny folders
def phi3_config(**kw):
    c = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "original_max_position_embeddings": 4096, "rope_theta": 500.0,
         "rope_scaling": None, "rms_norm_eps": 1e-5, "partial_rotary_factor": 1.0, "sliding_window": None,
         "tie_word_embeddings": False, "hidden_act": "silu", "attention_dropout": 0.0, "embd_pdrop": 0.0,
         "resid_pdrop": 0.0, "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


DROP = object()


def phi3_weights(cfg, seed, embed_std=1.0):
    """fused tensors written directly: qkv_proj [(H + 2 Hkv) hd, d] whose q and k rows are
    larger (so that attention is far from uniform), gate_up_proj [2F, d] whose gate half
    is larger than its up half (so that swapping them changes the function a lot)"""
    rng = random.Random(seed)
    p = phi3_params(cfg)
    d, L, V, F, H, Hkv, hd = p["d"], p["L"], p["V"], p["F"], p["H"], p["Hkv"], p["hd"]
    T = {}

    def put(name, shape, gen):
        T[name] = (list(shape), [f32(gen(r)) for r in range(shape[0]) for _ in range(shape[1] if len(shape) > 1
                                                                                       else 1)])
    put("model.embed_tokens.weight", [V, d], lambda r: rng.gauss(0, embed_std))
    if not p["tied"]:
        put("lm_head.weight", [V, d], lambda r: rng.gauss(0, 0.2))
    put("model.norm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
    nqk = (H + Hkv) * hd
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "post_attention_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "self_attn.qkv_proj.weight", [(H + 2 * Hkv) * hd, d],
            lambda r: rng.gauss(0, (2.5 if r < nqk else 1.2) / math.sqrt(d)))
        put(pre + "self_attn.o_proj.weight", [d, H * hd], lambda r: rng.gauss(0, 1.2 / math.sqrt(H * hd)))
        put(pre + "mlp.gate_up_proj.weight", [2 * F, d],
            lambda r: rng.gauss(0.15 if r < F else 0.0, (2.0 if r < F else 0.8) / math.sqrt(d)))
        put(pre + "mlp.down_proj.weight", [d, F], lambda r: rng.gauss(0, 1.2 / math.sqrt(F)))
    return T


def as_weights(T, dt):
    return q2.as_weights(T, dt)


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = phi3_params(cfg)
    out = [("gate/up swapped (up = first half)", {"gu_layout": "swapped"}),
           ("gate/up interleaved rows", {"gu_layout": "interleaved"}),
           ("q/k/v grouped per kv head", {"qkv_layout": "grouped"}),
           ("k and v swapped", {"qkv_layout": "kv-swapped"}),
           ("rms_norm_eps 1e-6 (Llama's default)", {"eps": 1e-6}),
           ("rope_theta 1e4" if p["theta"] != 10000.0 else "rope_theta 1e6", {"theta": 1e4 if p["theta"] != 1e4
                                                                                else 1e6})]
    if p["window"] is not None:
        out += [("full attention", {"window": None}), ("W+1 keys", {"window": p["window"] + 1}),
                ("W-1 keys", {"window": max(1, p["window"] - 1)})]
    lr, partial = p["longrope"], p["rd"] < p["hd"]
    if lr is not None:
        out += [("rope_scaling ignored (plain RoPE)", {"no_longrope": True}),
                ("short factors always", {"select": "short"}),
                ("long factors always", {"select": "long"}),
                ("long factors from seq_len >= original (off by one)", {"select": "call-ge"}),
                ("factors per position (pos >= original: long)", {"select": "position"}),
                ("ppl: the forward call over a window's first n - 1 tokens (long when n - 1 > original)",
                 {"select": "call-minus-last"})]
        if lr["att"] != 1.0:
            out.append(("no attention factor", {"att_mode": "none"}))
            if partial:
                out.append(("attention factor^2 on the whole score (pass-through dims too)", {"att_mode": "scores"}))
        other = "keep" if CROSSING[0] == "recompute" else "recompute"
        out.append(({"keep": "generate: the cached keys keep their short factors at the crossing",
                     "recompute": "generate: cache recomputed with long factors at the crossing"}[other],
                    {"crossing": other}))
    if partial:
        if lr is None:
            out.append(("full rotary (partial_rotary_factor ignored)", {"rd": p["hd"]}))
        out += [("rotary pairs interleaved (2i, 2i+1)", {"rot_layout": "interleaved"}),
                ("rotary on the last rotary_dim dims", {"rot_layout": "last"}),
                ("inv_freq exponents over head_dim, not rotary_dim", {"rot_layout": "expo-hd"})]
    return out


CROSSING = ["recompute"]
PROBE = [False]  # check --probe: note the alternative readings that a comparison cannot tell from the reference


class Case:
    models = {}

    def __init__(self, ck, tag, cfg, T, dt="F32", shards=1, wtag=None, probe_all=True):
        self.ck, self.tag, self.cfg, self.T, self.dt = ck, tag, cfg, T, dt
        self.wtag = wtag or tag
        write_folder(os.path.join(ck.work, tag), cfg, T, dt, shards)
        self.W = as_weights(T, dt)
        self.model = self.alt({})
        self.probed = not probe_all
        self.diagnosed = [False, False]
        p = phi3_params(cfg)
        lr = p["longrope"]
        print("[%s] H %d, Hkv %d, hd %d, eps %g, theta %g, window %s, tied %s, %s%s%s%s" % (
            tag, p["H"], p["Hkv"], p["hd"], p["eps"], p["theta"], p["window"], p["tied"], dt,
            " in %d shards" % shards if shards > 1 else "",
            ", rotary_dim %d" % p["rd"] if p["rd"] != p["hd"] else "",
            ", longrope original %d factor %g attention %.9g" % (lr["orig"], lr["factor"], lr["att"]) if lr else ""),
            flush=True)

    def probe(self, what, names, ref, fn, same):
        """note each named alternative reading that this comparison cannot tell from the reference"""
        for name, kw in alternatives(self.cfg):
            if any(name.startswith(n) for n in names):
                a = fn(self.alt(kw))
                if same(a, ref):
                    self.ck.note("%s %s: the reading '%s' gives the same result: this comparison does not test it"
                                 % (self.tag, what, name))

    def alt(self, kw):
        kw = dict({"crossing": CROSSING[0]}, **kw)
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = Phi3Ref(self.cfg, self.W, **kw)
        return Case.models[key]

    def ppl(self, ids, context, dtype="float64", rtol=1e-5, probe=()):
        nf = len(self.ck.failures)
        compare_ppl(self.ck, self.tag, self.model, ids, context, dtype, rtol, self.tag)
        ref, _ = mean_ce(self.model, ppl_windows(ids, context))
        if probe and PROBE[0]:
            self.probe("ppl --context %d" % context, probe, ref, lambda m: mean_ce(m, ppl_windows(ids, context))[0],
                       lambda a, b: abs(a - b) <= 3 * rtol * abs(b))
        if dtype == "float64" and not self.probed and PROBE[0]:
            self.probed = True  # once per case: which readings this case's comparisons tell apart
            for name, kw in alternatives(self.cfg):
                if "eps" in kw or "crossing" in kw or (kw.get("qkv_layout") == "grouped" and
                                                       phi3_params(self.cfg)["Hkv"] == 1):
                    continue  # not expected to differ here (eps: case B checks it; grouped = hf for one kv head;
                    # crossing: generation only)
                a, _ = mean_ce(self.alt(kw), ppl_windows(ids, context))
                if abs(a - ref) <= 10 * rtol * abs(ref):
                    self.ck.note("%s ppl --context %d: the reading '%s' gives the same loss (%.3g relative): "
                                 "this comparison does not test it" % (self.tag, context, name,
                                                                       abs(a - ref) / abs(ref)))
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[0]:
            DIAGNOSE[0] -= 1
            self.diagnosed[0] = True  # once per case for ppl
            out = os.path.join(self.ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
            try:
                got = json.load(open(out)).get("loss_sum")
            except (OSError, ValueError):
                got = None
            print("    reference loss_sum %.10g; lol %r" % (ref, got))
            if got is not None:
                for name, kw in alternatives(self.cfg):
                    a, _ = mean_ce(self.alt(kw), ppl_windows(ids, context))
                    print("    alternative %-45s loss_sum %.10g%s" % (name, a, "   <-- lol matches" if abs(
                        a - got) <= max(rtol, 1e-4) * abs(a) else ""))

    def generate(self, prompt, n, dtype="float64", probe=()):
        nf = len(self.ck.failures)
        compare_generate(self.ck, self.tag, self.model, prompt, n, dtype, self.tag)
        toks, _, _, _ = self.model.greedy(prompt, n)
        if probe and PROBE[0]:
            self.probe("generate (%d prompt ids + %d)" % (len(prompt), n), probe, toks,
                       lambda m: m.greedy(prompt, n)[0], lambda a, b: a == b)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[1]:
            DIAGNOSE[0] -= 1
            self.diagnosed[1] = True  # once per case for generate
            r = self.ck.run(["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype,
                             "--threads", 1, "--tokens", ",".join(map(str, prompt))], expect_rc=None)
            got = q2.parse_ids(r.stdout) if r.returncode == 0 else None
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            if got:
                for name, kw in alternatives(self.cfg):
                    a, _, _, _ = self.alt(kw).greedy(prompt, n)
                    if a == got:
                        print("    lol matches the reference under: %s" % name)

    def info(self, window=None, rope=None, partial=None):
        r = self.ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        self.ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return
        self.ck.equal("%s hf info names Phi3ForCausalLM" % self.tag, "Phi3ForCausalLM" in r.stdout, True)
        self.ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        import re
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            self.ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                          int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            self.ck.note("%s: hf info prints no parameter count" % self.tag)
        low = r.stdout.lower()
        if window is not None:
            if "window" in low or "sliding" in low:
                line = next(l_ for l_ in r.stdout.splitlines() if "window" in l_.lower() or "sliding" in l_.lower())
                print("    info: %s" % line.strip())
                self.ck.equal("%s hf info's window line names %d" % (self.tag, window), str(window) in line, True)
            else:
                self.ck.note("%s: hf info does not mention the sliding window" % self.tag)
        lines = [l_ for l_ in r.stdout.splitlines() if self.tag not in l_]  # not the folder's name
        if rope is not None:
            line = next((l_ for l_ in lines if "rope" in l_.lower() and any(
                w in l_.lower() for w in ("scaling", "longrope", "short_factor", "long_factor"))), None)
            if line is None:
                self.ck.note("%s: hf info does not mention the RoPE scaling" % self.tag)
            else:
                print("    info: %s" % line.strip())
                self.ck.equal("%s hf info's RoPE scaling line says %s" % (self.tag, rope), rope in line.lower(), True)
        if partial is not None:
            line = next((l_ for l_ in lines if "partial" in l_.lower() or "rotary" in l_.lower()), None)
            if line is None:
                self.ck.note("%s: hf info does not mention the partial rotary factor" % self.tag)
            else:
                import re
                print("    info: %s" % line.strip())
                nums = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", line)]
                self.ck.equal("%s hf info's rotary line names partial_rotary_factor %g or rotary_dim %d" % (
                    self.tag, partial[0], partial[1]), any(abs(x - partial[0]) < 1e-9 or x == partial[1]
                                                            for x in nums), True)


def param_count(cfg):
    p = phi3_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    per = (H + 2 * Hkv) * hd * d + d * H * hd + 2 * F * d + d * F + 2 * d
    return p["V"] * d * (1 if p["tied"] else 2) + d + p["L"] * per


def refusal(ck, tag, cfg, T, needle, assumed="", rc=2):
    """needle: a string the error must contain, or a tuple of which one must be there"""
    write_folder(os.path.join(ck.work, tag), cfg, T)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    needles = needle if isinstance(needle, tuple) else (needle,)
    ok = r.returncode == rc and any(n in r.stderr for n in needles)
    needle = " or ".join(needles)
    ck.compared += 1
    if not ok:
        ck.fail("%s%s: expected exit %d naming %s; got exit %d, stderr %r" % (
            tag, assumed, rc, needle, r.returncode, r.stderr.strip()[-400:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit %d, names %s)" % (tag, rc, needle), r.stderr.strip()[:140]))


# ---------------------------------------------------------------- self-checks
def selftest():
    bad = []
    # the split on a hand-made fused tensor: H 2, Hkv 1, hd 2 -> rows q0 q0 q1 q1 k k v v
    R = [[float(r)] for r in range(8)]
    q, k, v = split_qkv(R, 2, 1, 2)
    if (q, k, v) != ([[0.], [1.], [2.], [3.]], [[4.], [5.]], [[6.], [7.]]):
        bad.append("split_qkv hf layout")
    g, u = split_gate_up([[float(r)] for r in range(6)], 3)
    if (g, u) != ([[0.], [1.], [2.]], [[3.], [4.], [5.]]):
        bad.append("split_gate_up hf layout")
    # a Phi3Ref equals qwen2_reference's Llama Ref on the same (unfused) weights
    import tempfile
    import shutil
    tmp = tempfile.mkdtemp(prefix="phi3_selftest_")
    cfg = phi3_config(max_position_embeddings=64)
    T = phi3_weights(cfg, 5)
    p = phi3_params(cfg)
    lcfg = q2.make_config("LlamaForCausalLM", num_hidden_layers=3, max_position_embeddings=64, rope_theta=500.0,
                          rms_norm_eps=1e-5)
    LT = {}
    for name, (shape, vals) in T.items():
        if name.endswith("qkv_proj.weight"):
            rows = [vals[r * p["d"]:(r + 1) * p["d"]] for r in range(shape[0])]
            nq, nk = p["H"] * p["hd"], p["Hkv"] * p["hd"]
            for nm, part in (("q_proj", rows[:nq]), ("k_proj", rows[nq:nq + nk]), ("v_proj", rows[nq + nk:])):
                LT[name.replace("qkv_proj", nm)] = ([len(part), p["d"]], [x for rw in part for x in rw])
        elif name.endswith("gate_up_proj.weight"):
            n = shape[0] // 2 * shape[1]
            LT[name.replace("gate_up_proj", "gate_proj")] = ([shape[0] // 2, shape[1]], vals[:n])
            LT[name.replace("gate_up_proj", "up_proj")] = ([shape[0] // 2, shape[1]], vals[n:])
        else:
            LT[name] = (shape, vals)
    write_folder(tmp, lcfg, LT)
    llama = q2.Ref(tmp, weights=q2.as_weights(LT, "F32"))
    phi = Phi3Ref(cfg, q2.as_weights(T, "F32"))
    ids = q2.encode("Hello, phi three!")
    la, _, _, _ = llama.prefill(ids)
    lb, _, _, _ = phi.prefill(ids)
    if max(abs(a - b) for ra, rb in zip(la, lb) for a, b in zip(ra, rb)) > 1e-12:
        bad.append("Phi3Ref != Llama Ref on the split weights")
    # each alternative reading changes the logits
    Tsmall = phi3_weights(cfg, 5, embed_std=0.003)
    small = Phi3Ref(cfg, q2.as_weights(Tsmall, "F32")).prefill(ids)[0]
    for name, kw in alternatives(cfg) + [("window 3", {"window": 3})]:
        if "eps" in kw:  # the eps matters only for small activations: small embeddings
            lc, _, _, _ = Phi3Ref(cfg, q2.as_weights(Tsmall, "F32"), **kw).prefill(ids)
            if max(abs(a - b) for ra, rb in zip(small, lc) for a, b in zip(ra, rb)) < 1e-3:
                bad.append("alternative '%s' leaves the logits unchanged" % name)
            continue
        lc, _, _, _ = Phi3Ref(cfg, q2.as_weights(T, "F32"), **kw).prefill(ids)
        if max(abs(a - b) for ra, rb in zip(la, lc) for a, b in zip(ra, rb)) < 1e-3:
            bad.append("alternative '%s' leaves the logits unchanged" % name)
    # the window: W 2 = full at position 1, differs at 2
    w2, _, _, _ = Phi3Ref(cfg, q2.as_weights(T, "F32"), window=2).prefill(ids)
    if max(abs(a - b) for a, b in zip(w2[1], lb[1])) > 1e-12 or max(abs(a - b) for a, b in zip(w2[2], lb[2])) < 1e-6:
        bad.append("window 2: positions 0..1 must equal full attention and position 2 differ")
    # config defaults
    pd = phi3_params(phi3_config(num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP,
                                 tie_word_embeddings=DROP, sliding_window=DROP))
    if (pd["Hkv"], pd["theta"], pd["eps"], pd["tied"], pd["window"]) != (4, 10000.0, 1e-5, False, None):
        bad.append("Phi3Config defaults %s" % pd)
    if phi3_params(phi3_config(num_key_value_heads=None))["Hkv"] != 4:
        bad.append("num_key_value_heads null")
    if phi3_params(phi3_config(sliding_window=256))["window"] is not None:
        bad.append("window >= max_position_embeddings must not bind")
    # the cached greedy path with a window = recomputation
    sw = Phi3Ref(cfg, q2.as_weights(T, "F32"), window=3)
    toks, _, _, _ = sw.greedy(ids, 6)
    seq = list(ids)
    for j in range(6):
        lg, _, _, _ = Phi3Ref(cfg, q2.as_weights(T, "F32"), window=3).prefill(seq)
        t = q2.argmax_low(lg[-1])
        if t != toks[j]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (j, toks[j], t))
            break
        seq.append(t)
    if param_count(cfg) != sum(len(v[1]) for v in T.values()):
        bad.append("param_count %d != stored values %d" % (param_count(cfg), sum(len(v[1]) for v in T.values())))
    shutil.rmtree(tmp, ignore_errors=True)
    bad += selftest_longrope(cfg, T, ids)
    return bad


def selftest_longrope(cfg, T, ids):
    bad = []

    def maxdiff(A, B):
        return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb))
    W = q2.as_weights(T, "F32")
    # the rotary_dim tables without scaling = qwen2_reference's (transformers' default RoPE)
    c1, s1 = rope_tables_rd(500.0, 8, 64)
    c2, s2 = q2.rope_tables({"rope_theta": 500.0, "max_position_embeddings": 64}, 8, 64)
    if c1 != c2 or s1 != s2:
        bad.append("rope_tables_rd(no factors) != qwen2_reference.rope_tables")
    # by hand: base 10000, rotary_dim 4, factors [2, 4]: inv_freq [1/2, 1/(4 * 100)]; att 1.5
    c, s_ = rope_tables_rd(10000.0, 4, 4, [2.0, 4.0], 1.5)
    want_c = [1.5 * math.cos(1.5), 1.5 * math.cos(0.0075)] * 2
    want_s = [1.5 * math.sin(1.5), 1.5 * math.sin(0.0075)] * 2
    if max(abs(a - b) for a, b in zip(c[3] + s_[3], want_c + want_s)) > 1e-6:
        bad.append("longrope tables by hand: %s %s vs %s %s" % (c[3], s_[3], want_c, want_s))
    # rope_partial: pairs (i, i + rd/2) within the first rd dims, the rest unchanged
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    ca, cb, sa, sb = 0.6, 0.28, 0.8, 0.96
    got = rope_partial(x, [ca, cb, ca, cb], [sa, sb, sa, sb], 4)
    want = [1 * ca - 3 * sa, 2 * cb - 4 * sb, 3 * ca + 1 * sa, 4 * cb + 2 * sb, 5.0, 6.0, 7.0, 8.0]
    if max(abs(a - b) for a, b in zip(got, want)) > 1e-12:
        bad.append("rope_partial by hand: %s vs %s" % (got, want))
    # the partial path with rotary_dim = head_dim = the Llama path
    full = Phi3Ref(cfg, W).prefill(ids)[0]
    part = Phi3Ref(cfg, W, rot_layout="expo-hd").prefill(ids)[0]
    if maxdiff(full, part) > 1e-12:
        bad.append("partial-rotary code path with rotary_dim = head_dim differs from full RoPE")
    if maxdiff(full, Phi3Ref(dict(cfg, partial_rotary_factor=0.75), W).prefill(ids)[0]) < 1e-4:
        bad.append("partial_rotary_factor 0.75 leaves the logits unchanged")
    # config reading
    pa = phi3_params(dict(cfg, max_position_embeddings=131072, original_max_position_embeddings=4096,
                          rope_scaling={"type": "su", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}))
    if abs(pa["longrope"]["att"] - math.sqrt(17.0 / 12.0)) > 1e-15 or pa["longrope"]["factor"] != 32.0:
        bad.append("Phi-3-mini-128k attention factor %r != sqrt(1 + ln 32 / ln 4096)" % pa["longrope"]["att"])
    if phi3_params(dict(cfg, rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 4,
                                           "long_factor": [2.0] * 4}))["longrope"]["att"] != 1.0:
        bad.append("factor <= 1 (original 4096 > 64 positions) must give attention factor 1")
    p4 = phi3_params({"hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
                      "intermediate_size": 8192, "num_hidden_layers": 32, "vocab_size": 200064,
                      "max_position_embeddings": 131072, "partial_rotary_factor": 0.75})
    if p4["rd"] != 96:
        bad.append("Phi-4-mini rotary_dim %d != 96" % p4["rd"])
    # per forward call: 6 original positions of 64; a call of 6 tokens uses the short
    # factors everywhere, one of 7 the long ones everywhere
    lcfg = dict(cfg, original_max_position_embeddings=6,
                rope_scaling={"type": "longrope", "short_factor": LR_SHORT, "long_factor": LR_LONG})
    m = Phi3Ref(lcfg, W)
    for n, fixed in ((6, "short"), (7, "long")):
        a = m.prefill(ids[:n])[0]
        b = Phi3Ref(lcfg, W, select=fixed).prefill(ids[:n])[0]
        o = Phi3Ref(lcfg, W, select="long" if fixed == "short" else "short").prefill(ids[:n])[0]
        if maxdiff(a, b) > 1e-12 or maxdiff(a, o) < 1e-4:
            bad.append("a forward call of %d tokens (original 6) must use the %s factors only" % (n, fixed))
    # greedy: 'recompute' = recomputing the whole sequence at every step; 'keep' = plain cached
    # decoding, and they differ once the generation crosses position 6
    prompt, n = ids[:3], 8
    rec = Phi3Ref(lcfg, W).greedy(prompt, n)[0]
    keep = Phi3Ref(lcfg, W, crossing="keep").greedy(prompt, n)[0]
    seq, full_toks = list(prompt), []
    for _ in range(n):
        t = q2.argmax_low(Phi3Ref(lcfg, W).prefill(seq)[0][-1])
        full_toks.append(t)
        seq.append(t)
    if rec != full_toks:
        bad.append("greedy 'recompute' %s != full recomputation per step %s" % (rec, full_toks))
    mk = Phi3Ref(lcfg, W, crossing="keep")
    lg, caches, _, _ = mk.prefill(prompt)
    caches = [{"k": list(c["k"]), "v": list(c["v"])} for c in caches]
    toks, z, pos = [], lg[-1], len(prompt)
    for _ in range(n):
        t = q2.argmax_low(z)
        toks.append(t)
        h = list(mk.embed[t])
        for i in range(mk.L):
            h = mk.block(i, [h], pos, caches[i])[0]
        z = mk.head(h)
        pos += 1
    if keep != toks:
        bad.append("greedy 'keep' %s != plain cached decoding %s" % (keep, toks))
    if rec[:4] != keep[:4]:
        bad.append("'recompute' and 'keep' must agree before the crossing: %s %s" % (rec, keep))
    return bad


# ---------------------------------------------------------------- LongRoPE and partial rotary
LR_SHORT = [1.3, 1.9, 3.1, 4.7]
LR_LONG = [2.6, 5.2, 11.0, 19.5]
LR_SHORT_BIG = [2.5, 6.0, 14.0, 35.0]  # for the cases with attention factor 1 (short factors only)
LR6_SHORT = [1.1, 1.45, 2.3, 3.2, 4.4, 6.1]
LR6_LONG = [1.7, 3.3, 5.9, 9.7, 14.2, 22.8]


def accepted_or_refused(ck, c, context, needles, why):
    """a setting transformers versions disagree on: lol may refuse it (exit 2 naming one of
    needles: a note) or accept it, and then it must compute the reference's reading"""
    out = os.path.join(ck.work, "ppl_%s_float64_%d.json" % (c.tag, context))
    r = ck.run(["hf", "ppl", c.tag, "--data", "text.txt", "--context", context, "--dtype", "float64", "--out", out,
                "--threads", 1], expect_rc=None)
    if r.returncode == 0:
        res = json.load(open(out))
        tot, cnt = mean_ce(c.model, ppl_windows(q2.encode(TEXT), context))
        ck.equal("%s hf ppl --context %d: targets" % (c.tag, context), res.get("targets"), cnt)
        ck.close("%s hf ppl --dtype float64 --context %d: loss_sum" % (c.tag, context), res.get("loss_sum"), tot)
        return True
    ck.compared += 1
    if r.returncode == 2 and any(n in r.stderr for n in needles):
        ck.note("%s: refused (%s) -- accepted by the reference: %s" % (c.tag, r.stderr.strip()[:160], why))
    else:
        ck.fail("%s: expected exit 0 or a refusal (exit 2 naming %s); got exit %d, stderr %r" % (
            c.tag, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))
    return False


def check_longrope(ck, ids, TA, pr):
    """LongRoPE (Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini) and partial_rotary_factor (Phi-4-mini)"""
    lr = {"type": "longrope", "short_factor": LR_SHORT, "long_factor": LR_LONG}
    # F: longrope, full rotary (head_dim 8: 4 factors), original 20 of 80 positions
    cfgF = phi3_config(max_position_embeddings=80, original_max_position_embeddings=20, rope_scaling=lr)
    TF = phi3_weights(cfgF, 401, embed_std=0.3)
    c = Case(ck, "phi3-longrope", cfgF, TF, wtag="F", probe_all=False)
    c.ppl(ids, 20, probe=("long factors always", "long factors from seq_len >="))  # = original: short
    c.ppl(ids, 21, probe=("short factors always", "long factors always", "factors per position"))  # last window 10
    c.ppl(ids, 40, probe=("short factors always", "factors per position", "no attention factor",
                          "rope_scaling ignored"))  # all long
    c.generate(ids[:9], 30, probe=("generate:", "long factors always", "short factors always"))  # crosses 20
    c.generate(ids[60:81], 20, probe=("short factors always", "factors per position"))  # 21 = original + 1
    c.generate(ids[:9], 30, "float32")
    c.info(rope="longrope")
    # "su": Phi3Config's legacy name of longrope
    c = Case(ck, "phi3-longrope-su", dict(cfgF, rope_scaling=dict(lr, type="su")), TF, wtag="F", probe_all=False)
    c.ppl(ids, 40)
    # original_max_position_embeddings = max_position_embeddings: factor 1, attention 1, short factors
    lrb = dict(lr, short_factor=LR_SHORT_BIG)
    c = Case(ck, "phi3-longrope-orig-eq-mpe", dict(cfgF, max_position_embeddings=64,
                                                   original_max_position_embeddings=64, rope_scaling=lrb), TF,
             wtag="F", probe_all=False)
    c.ppl(ids, 64, probe=("rope_scaling ignored", "long factors always"))
    # original_max_position_embeddings missing: Phi3Config's 4096 > 80: attention 1, short factors
    c = Case(ck, "phi3-longrope-orig-default", phi3_config(max_position_embeddings=80,
                                                           original_max_position_embeddings=DROP, rope_scaling=lrb),
             TF, wtag="F", probe_all=False)
    c.ppl(ids, 40, probe=("rope_scaling ignored", "long factors always"))

    # G: partial rotary 0.75 (head_dim 8 -> rotary_dim 6), no scaling; G2: 0.5 (-> 4)
    cfgG = phi3_config(partial_rotary_factor=0.75)
    c = Case(ck, "phi3-partial", cfgG, TA, wtag="A", probe_all=False)
    c.ppl(ids, 64, probe=("full rotary", "rotary pairs interleaved", "rotary on the last", "inv_freq exponents"))
    c.generate(pr, 12, probe=("full rotary",))
    c = Case(ck, "phi3-partial-half", phi3_config(partial_rotary_factor=0.5), TA, wtag="A", probe_all=False)
    c.ppl(ids, 64, probe=("full rotary", "inv_freq exponents"))

    # H: partial rotary 0.75 with longrope (Phi-4-mini's form): head_dim 16 -> rotary_dim 12, 6 factors
    lr6 = {"type": "longrope", "short_factor": LR6_SHORT, "long_factor": LR6_LONG}
    cfgH = phi3_config(num_attention_heads=2, num_key_value_heads=1, partial_rotary_factor=0.75,
                       max_position_embeddings=96, original_max_position_embeddings=16, rope_theta=2000.0,
                       rope_scaling=lr6)
    TH = phi3_weights(cfgH, 402, embed_std=0.3)
    c = Case(ck, "phi3-partial-longrope", cfgH, TH, wtag="H", probe_all=False)
    c.ppl(ids, 16, probe=("long factors always", "rotary pairs interleaved", "inv_freq exponents",
                          "rotary on the last"))
    c.ppl(ids, 17, probe=("short factors always", "long factors always"))  # last window 12: short
    c.ppl(ids, 48, probe=("attention factor^2 on the whole score", "no attention factor", "factors per position"))
    c.ppl(ids, 48, "float32")
    c.generate(ids[:7], 20, probe=("generate:", "long factors always"))  # crosses 16
    c.generate(ids[:7], 20, "float32")
    c.info(rope="longrope", partial=(0.75, 12))

    # settings transformers versions disagree on: accepted (the reference's reading) or refused
    c = Case(ck, "phi3-longrope-rope_type", dict(cfgF, rope_scaling={"rope_type": "longrope", "short_factor": LR_SHORT,
                                                                     "long_factor": LR_LONG}), TF, wtag="F",
             probe_all=False)
    accepted_or_refused(ck, c, 40, ("rope_scaling", "rope_type"),
                        "'rope_type' read as 'type' (transformers' generic key; Phi3Config 4.x checks 'type')")
    c = Case(ck, "phi3-longrope-attention_factor", dict(cfgF, rope_scaling=dict(lr, attention_factor=1.7)), TF,
             wtag="F", probe_all=False)
    accepted_or_refused(ck, c, 40, ("attention_factor", "rope_scaling"),
                        "_compute_longrope_parameters uses a given attention_factor (Phi3Config 4.x allows "
                        "exactly three rope_scaling keys)")
    c = Case(ck, "phi3-longrope-yarn-name", dict(cfgF, rope_scaling=dict(lr, type="yarn")), TF, wtag="F",
             probe_all=False)
    accepted_or_refused(ck, c, 40, ("rope_scaling", "yarn", "factor"),
                        "Phi3Config renames a 'yarn' type (with short/long factors) to longrope, as 'su'")

    # refusals
    print("[longrope / partial rotary refusals]", flush=True)
    refusal(ck, "refuse-longrope-short-length", dict(cfgF, rope_scaling=dict(lr, short_factor=LR_SHORT[:3])), TF,
            "short_factor")
    refusal(ck, "refuse-longrope-no-long", dict(cfgF, rope_scaling={"type": "longrope", "short_factor": LR_SHORT}),
            TF, "long_factor")
    # with partial rotary the factors have rotary_dim / 2 entries, not head_dim / 2
    refusal(ck, "refuse-partial-longrope-hd-length", dict(cfgH, rope_scaling=dict(
        lr6, short_factor=LR6_SHORT + [7.0, 8.0], long_factor=LR6_LONG + [30.0, 40.0])), TH,
        ("short_factor", "long_factor"))
    refusal(ck, "refuse-partial-odd", phi3_config(partial_rotary_factor=0.625), TA, "partial_rotary_factor")
    refusal(ck, "refuse-partial-zero", phi3_config(partial_rotary_factor=0.1), TA, "partial_rotary_factor")


# ---------------------------------------------------------------- export --arch phi3 (a trained dense model)
EXPORT_MODEL = {"architecture": "dense", "d_model": 24, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
                "ffn_hidden": 32, "qkv_bias": False, "tie_word_embeddings": False, "rope_theta": 700.0,
                "norm_eps": 1e-5, "max_seq_len": 96}


def check_export(ck):
    """train a tiny dense model for 4 steps, `export --hf --arch phi3`: the fused tensors must be
    the checkpoint's q, k, v (gate, up) rows concatenated in that order, the config a Phi-3 one,
    and `hf ppl --dtype float64` of the export must equal this reference on the exported folder"""
    print("[export] dense model -> Phi-3 folder", flush=True)
    import shutil
    from export_reference import PPL_TEXT, make_docs
    from safetensors_io import read_st
    w = ck.work
    with open(os.path.join(w, "train.txt"), "w") as f:
        f.write("\n\n".join(make_docs(3, 14)) + "\n")
    with open(os.path.join(w, "ppl_export.txt"), "w") as f:
        f.write(PPL_TEXT)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    rc = {"model": EXPORT_MODEL, "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
          "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
          "train": {"steps": 4, "out": "run_export", "progress": False, "threads": 1, "seed": 0}}
    with open(os.path.join(w, "run_export.json"), "w") as f:
        json.dump(rc, f, indent=1)
    shutil.rmtree(os.path.join(w, "run_export"), ignore_errors=True)
    r = ck.run(["train", "--config", "run_export.json", "--no-progress"])
    if r.returncode != 0:
        return
    ckpt = os.path.join(w, "run_export", open(os.path.join(w, "run_export", "latest")).read().strip())
    S = read_st(os.path.join(ckpt, "model.safetensors"))
    folder = "export_phi3"
    shutil.rmtree(os.path.join(w, folder), ignore_errors=True)
    r = ck.run(["export", "--hf", "run_export", "--out", folder, "--arch", "phi3"])
    if r.returncode != 0:
        return
    cfg = json.load(open(os.path.join(w, folder, "config.json")))
    E = q2.read_folder_weights(os.path.join(w, folder))
    m = EXPORT_MODEL
    ck.equal("export --arch phi3: architectures / model_type", (cfg.get("architectures"), cfg.get("model_type")),
             (["Phi3ForCausalLM"], "phi3"))
    ck.equal("export --arch phi3: sizes in config.json",
             [cfg.get(k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")],
             [m["d_model"], m["n_layers"], m["n_heads"], m["ffn_hidden"]])
    p = phi3_params(cfg)
    ck.equal("export --arch phi3: num_key_value_heads (given or by Phi3Config's default)", p["Hkv"], m["n_kv_heads"])
    ck.close("export --arch phi3: rope_theta (given or 10000)", p["theta"], m["rope_theta"], 0, 1e-9)
    ck.close("export --arch phi3: rms_norm_eps (given or 1e-5)", p["eps"], m["norm_eps"], 1e-6)
    ck.equal("export --arch phi3: no rope scaling / partial rotary / window",
             (cfg.get("rope_scaling"), cfg.get("partial_rotary_factor", 1.0), p["window"]), (None, 1.0, None))
    names = {k for k in E}
    ck.equal("export --arch phi3: no unfused projection tensors",
             sorted(k for k in names if k.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")),
             [])
    ck.equal("export --arch phi3: no bias tensors", sorted(k for k in names if k.endswith(".bias")), [])
    src_names = sorted(S)
    for i in range(m["n_layers"]):
        pre = "model.layers.%d." % i
        parts = [pre + "self_attn.%s_proj.weight" % x for x in "qkv"]
        if all(k in S for k in parts):
            want = [v for k in parts for v in S[k][1]]
            got = E.get(pre + "self_attn.qkv_proj.weight")
            ck.equal("export layer %d qkv_proj = rows of q_proj, k_proj, v_proj (shape, values)" % i,
                     (got[0], got[1]) if got else None,
                     ([(m["n_heads"] + 2 * m["n_kv_heads"]) * (m["d_model"] // m["n_heads"]), m["d_model"]], want))
        else:
            ck.note("checkpoint has no %s (names: %s...): fused values not compared" % (parts[0], src_names[:6]))
        parts = [pre + "mlp.gate_proj.weight", pre + "mlp.up_proj.weight"]
        if all(k in S for k in parts):
            want = [v for k in parts for v in S[k][1]]
            got = E.get(pre + "mlp.gate_up_proj.weight")
            ck.equal("export layer %d gate_up_proj = rows of gate_proj then up_proj (shape, values)" % i,
                     (got[0], got[1]) if got else None, ([2 * m["ffn_hidden"], m["d_model"]], want))
    # hf ppl of the export against the reference on the exported tensors
    model = Phi3Ref(cfg, E)
    ids = list(PPL_TEXT.encode("utf-8"))
    out = os.path.join(w, "ppl_export_phi3.json")
    r = ck.run(["hf", "ppl", folder, "--data", "ppl_export.txt", "--context", 64, "--dtype", "float64", "--out", out,
                "--threads", 1])
    if r.returncode == 0:
        res = json.load(open(out))
        tot, cnt = mean_ce(model, ppl_windows(ids, 64))
        ck.equal("export_phi3 hf ppl --context 64: targets", res.get("targets"), cnt)
        ck.close("export_phi3 hf ppl --dtype float64 --context 64: loss_sum", res.get("loss_sum"), tot, 1e-6)


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
    pr14 = q2.encode("Hello wor")
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")

    # A: GQA, F32, given fields
    cfgA = phi3_config()
    TA = phi3_weights(cfgA, 301, embed_std=0.3)
    c = Case(ck, "phi3-gqa-f32", cfgA, TA)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr14, 12)
    c.generate(pr, 12, "float32")
    c.info()

    # B: MHA from a missing num_key_value_heads, defaults, BF16 shards
    cfgB = phi3_config(num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP, tie_word_embeddings=DROP,
                       sliding_window=DROP, partial_rotary_factor=DROP, original_max_position_embeddings=256,
                       torch_dtype="bfloat16")
    TB = phi3_weights(cfgB, 302, embed_std=0.003)
    c = Case(ck, "phi3-mha-bf16-defaults", cfgB, TB, "BF16", shards=2)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pr, 12)
    c.info()
    ref, _ = mean_ce(c.model, ppl_windows(ids, 64))
    e6, _ = mean_ce(c.alt({"eps": 1e-6}), ppl_windows(ids, 64))
    print("  reference with eps 1e-6 instead of Phi3Config's 1e-5: loss_sum %.8g vs %.8g (rel %.1e)"
          % (e6, ref, abs(e6 - ref) / ref))
    if abs(e6 - ref) < 1e-3 * ref:
        ck.note("phi3-mha-bf16-defaults: the default eps barely matters (%.1e)" % (abs(e6 - ref) / ref))

    # C: sliding window 5 on every layer, num_key_value_heads null
    cfgC = phi3_config(num_key_value_heads=None, sliding_window=5, max_position_embeddings=64,
                       original_max_position_embeddings=64, rope_theta=1000.0)
    TC = phi3_weights(cfgC, 303, embed_std=0.3)
    c = Case(ck, "phi3-sw5-kvnull", cfgC, TC, wtag="C")
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.ppl(ids, 40, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[5:22], 25)
    c.generate(ids[5:22], 25, "float32")
    c.info(5)
    full = c.alt({"window": None})
    for ctx in (7, 40):
        a, _ = mean_ce(c.model, ppl_windows(ids, ctx))
        b, _ = mean_ce(full, ppl_windows(ids, ctx))
        if abs(a - b) < 1e-4 * abs(b):
            ck.note("phi3-sw5-kvnull --context %d: the window barely changes the loss" % ctx)

    # D: a window = max_position_embeddings never binds
    c = Case(ck, "phi3-sw64", dict(cfgC, sliding_window=64), TC, wtag="C")
    c.ppl(ids, 64)
    c.generate(ids[5:22], 30)

    # E: tied embeddings, one kv head
    cfgE = phi3_config(tie_word_embeddings=True, num_key_value_heads=1, rope_theta=10000.0)
    TE = phi3_weights(cfgE, 305, embed_std=0.12)
    c = Case(ck, "phi3-tied-mqa", cfgE, TE)
    c.ppl(ids, 64)
    c.generate(pr, 12)

    # refusals
    print("[refusals]", flush=True)
    p = phi3_params(cfgA)
    d, H, hd, F = p["d"], p["H"], p["hd"], p["F"]
    T = dict(TA)
    T["model.layers.1.self_attn.qkv_proj.weight"] = ([3 * H * hd, d], [0.01] * (3 * H * hd * d))
    refusal(ck, "refuse-qkv-shape", cfgA, T, "model.layers.1.self_attn.qkv_proj.weight")
    T = dict(TA)
    T["model.layers.0.mlp.gate_up_proj.weight"] = ([F, d], [0.01] * (F * d))
    refusal(ck, "refuse-gate_up-shape", cfgA, T, "model.layers.0.mlp.gate_up_proj.weight",
            " (ASSUMED: strict loading, docs/hf.md)")
    T = dict(TA)
    T["model.layers.0.self_attn.q_proj.weight"] = ([H * hd, d], TA["model.layers.0.self_attn.qkv_proj.weight"][1][
        :H * hd * d])
    refusal(ck, "refuse-qkv-and-q_proj", cfgA, T, "q_proj")
    # Llama's unfused tensors in a Phi3 folder
    T = {}
    for name, (shape, vals) in TA.items():
        if name.endswith("qkv_proj.weight"):
            nq, nk = H * hd * d, p["Hkv"] * hd * d
            T[name.replace("qkv_proj", "q_proj")] = ([H * hd, d], vals[:nq])
            T[name.replace("qkv_proj", "k_proj")] = ([p["Hkv"] * hd, d], vals[nq:nq + nk])
            T[name.replace("qkv_proj", "v_proj")] = ([p["Hkv"] * hd, d], vals[nq + nk:])
        elif name.endswith("gate_up_proj.weight"):
            T[name.replace("gate_up_proj", "gate_proj")] = ([F, d], vals[:F * d])
            T[name.replace("gate_up_proj", "up_proj")] = ([F, d], vals[F * d:])
        else:
            T[name] = (shape, vals)
    refusal(ck, "refuse-unfused", cfgA, T, "qkv_proj", " (ASSUMED: unfused tensors are refused)")
    check_longrope(ck, ids, TA, pr)

    check_export(ck)

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
    c = sub.add_parser("check", help="build tiny Phi-3 folders, run lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    c.add_argument("--probe", action="store_true",
                   help="also note which alternative readings (fused layouts, eps, theta, window, LongRoPE, "
                        "partial rotary) the comparisons cannot tell from the reference (slower)")
    c.add_argument("--crossing", choices=("recompute", "keep"), default="recompute",
                   help="greedy generation whose positions cross original_max_position_embeddings: "
                        "'recompute' (default; transformers' generate(): Phi3ForCausalLM.prepare_inputs_for_generation "
                        "drops the cache and recomputes every key with the long factors) or 'keep' (the cached keys "
                        "keep their short-factor rotation: a plain cached forward loop)")
    sub.add_parser("selftest", help="the reference's own checks (no lol)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        bad = selftest()
        for b in bad:
            print("FAIL " + b)
        print("selftest: %d failures" % len(bad))
        sys.exit(1 if bad else 0)
    CROSSING[0] = a.crossing
    PROBE[0] = a.probe
    sys.exit(check(a.lol, a.work, not a.quiet))


if __name__ == "__main__":
    main()
