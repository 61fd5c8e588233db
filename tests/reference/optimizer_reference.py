#!/usr/bin/env python3
"""An independent float64 reference of the first optimizer steps of `lol train` on a LoL
model, in pure Python (stdlib only), and a check that `lol` agrees with it value by value.

Provenance: written by a reviewer (session 41) from docs/training.md
("Run configuration", "Data and targets", "Optimizers", "Schedules", "Growing", "Each
step", "Outputs"), docs/checkpoint-format.md (tensor names, "The computation these tensors
define"), docs/routing-paths.md ("Window indices"), docs/architecture.md, docs/text.md
(`lol corpus` shards), the paper shared/seeds/000_8d63fd016cd52d41.txt (Algorithm 1, 3.2.2
"The Router", Appendix A: alpha_k = a_{k,rho_k} keeps the router differentiable, PyTorch
Muon with adjust_lr_fn=match_rms_adamw plus AdamW) and `lol train|init|corpus --help`,
WITHOUT reading src/ or tests/ outside tests/reference/. Imported: safetensors_io, and
lol_reference.LoL only as the float64 forward that the finite-difference self-check
differentiates. The backward pass, the loss, clipping, Muon, AdamW, schedules and growing
are written here.

  python3 tests/reference/optimizer_reference.py check --lol build/lol --work /tmp/x

Exit status 0 when every check agrees, 1 otherwise; one line per check (198 checks).
Runtime: about 35 s on one core (lol runs with one thread, pinned to core 1 when the
process may use it).

The reference
-------------
* Forward: Algorithm 1 as docs/checkpoint-format.md states it (pre-norm Llama blocks,
  RMSNorm, RoPE at the position within the document, GQA, SwiGLU; routed depth l: windows
  floor((j + delta_l) / W), delta_l = ((l-1) S) mod W; r_0 = (e^(l) + s_0) / 2, r_k = mean
  of the earlier windows' means; a = softmax(R_l r_k); rho = argmax(a + b), ties to the
  lowest index; s <- s + alpha (E_rho(s) - s) with FiLM gamma * (w * RMSNorm(x)) + beta on
  the expert's two norms; final RMSNorm, tied or untied head).
* Loss: mean cross entropy over every next-token target of the step (each document's n-1
  targets, docs/training.md "Data and targets").
* Backward: hand-written, per operation (linear, RMSNorm+FiLM, RoPE, causal attention,
  SwiGLU, the routed residual, the router through alpha and through its inputs r_k into
  the states and e^(l), the embedding / head). Self-check: the loss equals lol_reference's
  forward to 1e-12, and central differences of lol_reference's forward (h = 1e-5) at the
  largest-gradient element of every tensor agree to < 1e-6 of the tensor's max |g|
  (measured <= 2.5e-9).
* Step: clip_grad_norm_ (global L2 norm over every gradient present, g *= clip / (norm +
  1e-6) when that is < 1; clip 0 = off); lr factor of the schedule for 0-based step s;
  Muon (buf = lerp(buf, g, 1 - momentum); u = lerp(g, buf, momentum) with Nesterov, else
  buf; O = NS5(u) in float64 with (3.4445, -4.7750, 2.0315), transposed when tall, unit
  Frobenius norm; p *= 1 - lr_muon wd; p -= lr_muon 0.2 sqrt(max(rows, cols)) O); AdamW
  (torch.optim.AdamW, per-tensor step count t, bias corrections, eps outside the sqrt);
  groups: muon = *_proj.weight, adamw_decay = embed_tokens / lm_head / router(s),
  adamw_no_decay = norms, FiLM, depth_embed; a tensor that took no part in the forward
  (expert no window chose, FiLM / untied router of a depth not grown yet) gets no gradient
  and is not touched; depth(s) of docs/training.md "Growing"; the balancing bias b + u
  sign(mean - load).

Data and models
---------------
`lol corpus` (byte tokenizer, --valid-fraction 0) of four short documents (23, 19, 18, 16
tokens): every step sees all four whatever the data order (batch 4; batch 2 x accum 2; or
one packed row of exactly all 76 tokens). `lol init` checkpoints (d_model 16, 2 heads,
ffn 24, 1 prelude + 1 coda block, library 3, core depth 3, W 6, S 2, router noise 0,
balance rate 1e-3) with every tensor replaced by random float32 values:
  A: tied embeddings, shared router, 1 kv head; balancing bias [0.05, -0.05, -3] shuts
     expert 2 out (it never gets a gradient) while experts 0 and 1 both get >= 10 windows;
  B: untied embeddings, one router per depth, 2 kv heads; every expert used at every depth.
The weight seed is searched (from 100 on) until the smallest a + b routing margin of the
first step is > 2e-2 (measured A 0.098, B 0.024); every step's margin is recomputed and a
step whose margin is < 1e-4 would be reported as a near tie and not compared (measured
minimum over all steps: 1e-3, ~10^4 x float32 rounding of a + b).

Runs (train.save_every 1, threads 1, eval off, log every step)
---------------------------------------------------------------
  muon_cosine    A, 4 steps, muon lr 0.01 / muon_lr 0.02, wd 0.3, cosine warmup 2 min 0.1, clip off
  muon_wsd_grow  B, 4 steps, betas (0.8, 0.9), eps 1e-5, momentum 0.9 without Nesterov,
                 muon_lr 0.03, wd 0.2, wsd 1-sqrt (decay 0.5, min 0.2), clip 0.4 x the
                 initial norm (binds every step), growing start 1 fraction 1 linear:
                 depths 1, 1, 2, 3 (FiLM / routers of depth 2 and 3 first stepped at
                 steps 3 and 4: their AdamW t starts at 1 there)
  adamw_constant A, 3 steps, optim.type adamw, wd 0.3, eps 1e-4 (comparable to |g|, so eps
                 matters), muon_lr 0.05 (must be unused), constant, clip binding
  adamw_wsd      B, 4 steps, adamw lr 0.02, betas (0.9, 0.99), wsd linear (decay 0.5,
                 warmup 2, min 0.1), clip off
  muon_ns3       A, 2 steps, ns_steps 3, momentum 0.8, ns_dtype float32 given explicitly
  muon_ns_bf16   A, 1 step, ns_dtype bfloat16 (see "bfloat16" below)
  batch4 / accum2 / packed  A, 2 steps each, constant, clip binding: batch 4; batch 2 x
                 grad_accum 2; one packed row (data.packing pack, seq_len 76, batch 1)
  sched_*        A, 6-10 steps, save_every 0: only metrics.jsonl `lr` (cosine warmup 3
                 min 0.05; wsd 1-sqrt decay 0.3 warmup 1; wsd linear decay 0.4 min 0;
                 constant warmup 4)

Checks of every step k of every run (one line each)
----------------------------------------------------
The "one-step" reference starts from lol's checkpoint k-1 (weights, balancing bias,
optimizer.safetensors; the initial model for k = 1), so float32 differences do not
compound:
 1. metrics.jsonl: active_depth; loss (2e-5 rel); lr = peak x factor (1e-6 rel); grad_norm
    = the pre-clip global norm (1e-4 rel); whether the clip binds is printed;
 2. tensors without a gradient are bit-identical and their optimizer state unchanged;
    loads and the balancing bias;
 3. the gradient after clipping, recovered from lol's optimizer state (Muon: (buf_k -
    momentum buf_{k-1}) / (1 - momentum); AdamW: (m_k - b1 m_{k-1}) / (1 - b1)), against
    the float64 one: worst |diff| / max|g| of the tensor per group <= TOL_G;
 4. AdamW exp_avg_sq against b2 v + (1 - b2) g^2 (tolerance from TOL_G), and every
    `.step` counter (AdamW and, undocumented, Muon) = the steps in which that tensor had
    a gradient;
 5. every parameter element against the float64 step (tolerances below); printed per
    group: worst |diff| / max|update| and worst |diff| / tolerance;
 6. the learning rate actually used: the least-squares lr per group that explains lol's
    parameter change (AdamW with lol's own stored m, v: 1e-4 rel; Muon with the reference
    O: 2e-3 rel) against muon_lr x factor and lr x factor;
 7. the chained reference: its own float64 weights, state and bias from the initial model
    through all steps, every parameter against lol's checkpoint k (tolerance CHAIN_C = 20 x
    the summed one-step tolerances: lol's float32 trajectory drifts from the float64 one
    through the gradients of the later steps, which AdamW's m / sqrt(v) amplifies where
    |g| is small, and the summed tolerances do not model that; measured worst 0.11 of
    3 x in the GCC Release build and 1.0 of 3 x in the ASan build (-DLOL_SANITIZE=ON),
    whose float32 rounding differs: adamw_wsd step 4, session 41; the one-step checks 1-6
    stay tight);
and per run pair: accum2 and packed equal batch4 within twice the tolerance; plus the
schedule-only lr lines and two finite-difference self-checks.

Tolerances (lol computes in float32; unit roundoff 6e-8)
--------------------------------------------------------
* TOL_G = 5e-5 of the tensor's max |g| for the recovered gradient: float32 sums over ~100
  tokens x 16-24 products plus the forward's own error (lol_reference measured logits
  within 6e-6 of the largest); measured worst 9.4e-6 (typically 1-3e-6).
* AdamW parameter element: the change of the float64 update when its gradient moves by
  +-TOL_G max|g| (large only where |g| is comparable to that: AdamW's m / sqrt(v) is ill-
  conditioned there), + 3e-7 |p| (a few float32 ulps of the stored value) + 1e-6 |update|.
  Measured worst 0.40 of it (the ulp term of |p| ~ 1-4 embedding entries); worst |diff| /
  max|update| 3.7e-4 (typically 1e-5..1e-4: the stored float32 value's own rounding).
* Muon tensor: TOL_MUON = 4e-4 of lr_adj max|O| + 3e-7 |p|: NS5 drives a normalised
  singular value of 0.01 to ~0.7 with a product of derivatives ~45, so float32 rounding
  and the gradient's ~1e-5 relative error along small singular directions reach ~1e-4 of
  O at most; measured worst 1.3e-5 of the largest update element (0.036 of TOL_MUON).
* bfloat16: NS5 in bfloat16 is allowed 0.3 of the largest update element and must differ
  by more than 10 x TOL_MUON (so ns_dtype is shown to be honoured); measured 0.2. Note:
  an emulation of torch's bf16 NS5 (fp32 accumulation, one bf16 rounding per op) on the
  same momentum gives 0.01-0.03, and with bf16 accumulation in every dot product
  0.04-0.06; lol's CPU bf16 NS5 is noisier than both, though its singular values still lie
  in NS5's band (0.63-1.14 vs 0.68-1.13 in float64). Not counted as a disagreement (the
  docs promise no bf16 accuracy and recommend bf16 for GPUs).

Discriminating power (measured by setting LOL_OPTREF_FAULT=<fault>, which plants that
fault in this reference; each made the listed number of the 198 checks fail, the worst by
the factor given, relative to its tolerance):
  nesterov_flipped 30 (6e4), momentum_sum (buf = m buf + g) 27 (4e3), ns_one_more_step 49
  (1e5), ns_cubic 50 (1e5), muon_adjust_original (sqrt(max(1, rows/cols))) 32 (5e5),
  muon_decay_adjusted_lr (decay with the adjusted lr) 32 (300), adam_no_bias_correction
  48 (1e6), adam_eps_inside_sqrt 48 (6e4), adam_global_step (global instead of per-tensor
  t) 6 (4e5; only the growing run can tell), decay_groups_swapped 72 (1e4), no_clip 58
  (3e4), lr_one_step_late 34 (3e6), alpha_detached 138, router_input_detached 138,
  loss_mean_of_doc_means 137 (2e6).

ASSUMED rules (the docs leave them open)
-----------------------------------------
* The router's inputs r_k are not detached: the gradient flows from alpha through R_l r_k
  into the window means (the states) and into e^(l) and s_0 (Algorithm 1 has no
  stop-gradient; the paper only says the discrete choice is not differentiated).
* optim.type = adamw puts the projections into AdamW *with* weight decay (adamw_decay);
  the docs say only "AdamW for everything". muon_lr is then unused.
* wsd: the decay covers the last n_d = round(decay_fraction N) steps (half away from
  zero) with q = (s - (N - n_d)) / n_d; warmup precedes it.
* The logged grad_norm is the norm before clipping (what clip_grad_norm_ returns).
* NS5 normalises by max(||X||_F, 1e-7) (torch.optim.Muon's eps; irrelevant here).
* Document order inside a step does not matter (all documents are in every step), and a
  packed row of whole documents computes what the same documents do padded (docs/
  training.md "Data and targets": attention, windows and positions restart per document).
"""
import argparse
import json
import math
import operator
import os
import random
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lol_reference import LoL  # noqa: E402  (float64 forward: the finite-difference self-check)
from safetensors_io import read_st, write_st  # noqa: E402

TIE = 1e-4  # a+b routing margin below which float32 may decide otherwise
# deliberate faults of the reference (to measure the checks' discriminating power; see docstring)
FAULT = os.environ.get("LOL_OPTREF_FAULT", "")


# ================================================================ small helpers
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def dot(a, b):
    return sum(map(operator.mul, a, b))


def transpose(M):
    return [list(c) for c in zip(*M)]


def vadd(a, b):
    return list(map(operator.add, a, b))


def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def nested(shape, flat):
    if len(shape) == 1:
        return [float(v) for v in flat]
    r, c = shape
    return [[float(v) for v in flat[i * c:(i + 1) * c]] for i in range(r)]


def flat(x):
    if x and isinstance(x[0], list):
        return [v for row in x for v in row]
    return list(x)


def zeros_like(x):
    if x and isinstance(x[0], list):
        return [[0.0] * len(r) for r in x]
    return [0.0] * len(x)


# ================================================================ forward + backward (float64)
class Grads(dict):
    """name -> gradient (nested lists like the parameter); only tensors that took part in
    the forward get an entry (torch: no .grad at all for the others)"""

    def __init__(self, P):
        super().__init__()
        self.P = P

    def of(self, name):
        g = self.get(name)
        if g is None:
            g = self[name] = zeros_like(self.P[name])
        return g


def linear(W, X):
    return [[dot(w, x) for w in W] for x in X]


def linear_bwd(W, X, dY, G, name):
    """Y = X W^T: returns dX, accumulates dW into G[name]"""
    WT = transpose(W)
    dX = [[dot(col, dy) for col in WT] for dy in dY]
    dW = G.of(name)
    XT = transpose(X)
    for o in range(len(W)):
        gcol = [dy[o] for dy in dY]
        if any(gcol):
            row = dW[o]
            dW[o] = [r + dot(gcol, xc) for r, xc in zip(row, XT)]
        else:
            dW[o] = dW[o]
    return dX


def rms_fwd(X, w, eps, film=None):
    """w * x / sqrt(mean(x^2) + eps), then gamma * . + beta when film = (gamma, beta)"""
    out, H, Rr, Y = [], [], [], []
    n = len(w)
    for x in X:
        r = 1.0 / math.sqrt(dot(x, x) / n + eps)
        h = [v * r for v in x]
        y = list(map(operator.mul, w, h))
        H.append(h)
        Rr.append(r)
        Y.append(y)
        if film is not None:
            g, b = film
            out.append([gi * yi + bi for gi, yi, bi in zip(g, y, b)])
        else:
            out.append(y)
    return out, (H, Rr, Y, film)


def rms_bwd(cache, dZ, w, G, wname, film_names):
    H, Rr, Y, film = cache
    n = len(w)
    dX = []
    gw = G.of(wname)
    if film is not None:
        gg, gb = G.of(film_names[0]), G.of(film_names[1])
    for h, r, y, dz in zip(H, Rr, Y, dZ):
        if film is not None:
            gam = film[0]
            for t in range(n):
                gg[t] += dz[t] * y[t]
                gb[t] += dz[t]
            dy = list(map(operator.mul, dz, gam))
        else:
            dy = dz
        for t in range(n):
            gw[t] += dy[t] * h[t]
        dh = list(map(operator.mul, dy, w))
        s = dot(dh, h) / n
        dX.append([r * (a - hh * s) for a, hh in zip(dh, h)])
    return dX


class Rope:
    def __init__(self, hd, theta):
        self.hd, self.half = hd, hd // 2
        self.inv = [theta ** (-2.0 * j / hd) for j in range(self.half)]
        self.tab = {}

    def cs(self, pos):
        t = self.tab.get(pos)
        if t is None:
            t = self.tab[pos] = ([math.cos(pos * f) for f in self.inv], [math.sin(pos * f) for f in self.inv])
        return t

    def fwd(self, vec, pos, nh):
        c, s = self.cs(pos)
        hd, half = self.hd, self.half
        out = []
        for h in range(nh):
            x = vec[h * hd:(h + 1) * hd]
            a, b = x[:half], x[half:]
            out += [ai * ci - bi * si for ai, bi, ci, si in zip(a, b, c, s)]
            out += [bi * ci + ai * si for ai, bi, ci, si in zip(a, b, c, s)]
        return out

    def bwd(self, dvec, pos, nh):
        c, s = self.cs(pos)
        hd, half = self.hd, self.half
        out = []
        for h in range(nh):
            x = dvec[h * hd:(h + 1) * hd]
            a, b = x[:half], x[half:]
            out += [ai * ci + bi * si for ai, bi, ci, si in zip(a, b, c, s)]
            out += [bi * ci - ai * si for ai, bi, ci, si in zip(a, b, c, s)]
        return out


def heads(M, nh, hd):
    return [[row[h * hd:(h + 1) * hd] for row in M] for h in range(nh)]


def attn_fwd(Q, K, V, H, Hkv, hd):
    """causal attention over one segment (all rows are queries and keys)"""
    grp = H // Hkv
    scale = 1.0 / math.sqrt(hd)
    Qh, Kh, Vh = heads(Q, H, hd), heads(K, Hkv, hd), heads(V, Hkv, hd)
    n = len(Q)
    O = [[] for _ in range(n)]
    Pr = []
    for h in range(H):
        kh = h // grp
        ph = []
        for i in range(n):
            q = Qh[h][i]
            p = softmax([scale * dot(q, Kh[kh][j]) for j in range(i + 1)])
            o = [0.0] * hd
            for pj, v in zip(p, Vh[kh]):
                o = [a + pj * b for a, b in zip(o, v)]
            O[i] += o
            ph.append(p)
        Pr.append(ph)
    return O, (Qh, Kh, Vh, Pr)


def attn_bwd(cache, dO, H, Hkv, hd):
    Qh, Kh, Vh, Pr = cache
    grp = H // Hkv
    scale = 1.0 / math.sqrt(hd)
    n = len(dO)
    dQ = [[] for _ in range(n)]
    dKh = [[[0.0] * hd for _ in range(n)] for _ in range(Hkv)]
    dVh = [[[0.0] * hd for _ in range(n)] for _ in range(Hkv)]
    for h in range(H):
        kh = h // grp
        for i in range(n):
            do = dO[i][h * hd:(h + 1) * hd]
            p = Pr[h][i]
            dp = [dot(do, Vh[kh][j]) for j in range(i + 1)]
            s = dot(p, dp)
            ds = [pj * (dpj - s) * scale for pj, dpj in zip(p, dp)]
            dq = [0.0] * hd
            q = Qh[h][i]
            for j in range(i + 1):
                dq = [a + ds[j] * b for a, b in zip(dq, Kh[kh][j])]
                dKh[kh][j] = [a + ds[j] * b for a, b in zip(dKh[kh][j], q)]
                dVh[kh][j] = [a + p[j] * b for a, b in zip(dVh[kh][j], do)]
            dQ[i] += dq
    dK = [[v for kh in range(Hkv) for v in dKh[kh][i]] for i in range(n)]
    dV = [[v for kh in range(Hkv) for v in dVh[kh][i]] for i in range(n)]
    return dQ, dK, dV


class Net:
    """The LoL forward pass of docs/checkpoint-format.md "The computation these tensors
    define" (paper Algorithm 1, Appendix A) with a hand-written backward pass."""

    def __init__(self, c, P):
        self.c, self.P = c, P
        self.H, self.Hkv = c["n_heads"], c["n_kv_heads"]
        self.hd = c["d_model"] // self.H
        self.rope = Rope(self.hd, c["rope_theta"])
        self.eps = c["norm_eps"]

    def block_fwd(self, pfx, X, pos, film):
        P, H, Hkv, hd, eps = self.P, self.H, self.Hkv, self.hd, self.eps
        u, n1 = rms_fwd(X, P[pfx + ".input_layernorm.weight"], eps, film[0] if film else None)
        q = linear(P[pfx + ".self_attn.q_proj.weight"], u)
        k = linear(P[pfx + ".self_attn.k_proj.weight"], u)
        v = linear(P[pfx + ".self_attn.v_proj.weight"], u)
        qr = [self.rope.fwd(q[i], pos[i], H) for i in range(len(X))]
        kr = [self.rope.fwd(k[i], pos[i], Hkv) for i in range(len(X))]
        a, ca = attn_fwd(qr, kr, v, H, Hkv, hd)
        o = linear(P[pfx + ".self_attn.o_proj.weight"], a)
        h1 = [vadd(x, y) for x, y in zip(X, o)]
        u2, n2 = rms_fwd(h1, P[pfx + ".post_attention_layernorm.weight"], eps, film[1] if film else None)
        g = linear(P[pfx + ".mlp.gate_proj.weight"], u2)
        up = linear(P[pfx + ".mlp.up_proj.weight"], u2)
        sg = [[sigmoid(x) for x in row] for row in g]
        m = [[gi * si * ui for gi, si, ui in zip(a_, b_, c_)] for a_, b_, c_ in zip(g, sg, up)]
        f = linear(P[pfx + ".mlp.down_proj.weight"], m)
        y = [vadd(x, z) for x, z in zip(h1, f)]
        return y, (u, n1, ca, a, pos, h1, u2, n2, g, up, sg, m)

    def block_bwd(self, pfx, cache, dY, G, film_names):
        P, H, Hkv, hd = self.P, self.H, self.Hkv, self.hd
        u, n1, ca, a, pos, h1, u2, n2, g, up, sg, m = cache
        dm = linear_bwd(P[pfx + ".mlp.down_proj.weight"], m, dY, G, pfx + ".mlp.down_proj.weight")
        dg, dup = [], []
        for dmr, gr, sr, ur in zip(dm, g, sg, up):
            dup.append([d * gi * si for d, gi, si in zip(dmr, gr, sr)])
            dg.append([d * ui * si * (1.0 + gi * (1.0 - si)) for d, gi, si, ui in zip(dmr, gr, sr, ur)])
        du2 = linear_bwd(P[pfx + ".mlp.gate_proj.weight"], u2, dg, G, pfx + ".mlp.gate_proj.weight")
        du2b = linear_bwd(P[pfx + ".mlp.up_proj.weight"], u2, dup, G, pfx + ".mlp.up_proj.weight")
        du2 = [vadd(x, y) for x, y in zip(du2, du2b)]
        dh1r = rms_bwd(n2, du2, P[pfx + ".post_attention_layernorm.weight"], G,
                       pfx + ".post_attention_layernorm.weight", film_names[2:] if film_names else None)
        dh1 = [vadd(x, y) for x, y in zip(dY, dh1r)]
        da = linear_bwd(P[pfx + ".self_attn.o_proj.weight"], a, dh1, G, pfx + ".self_attn.o_proj.weight")
        dqr, dkr, dv = attn_bwd(ca, da, H, Hkv, hd)
        dq = [self.rope.bwd(dqr[i], pos[i], H) for i in range(len(dqr))]
        dk = [self.rope.bwd(dkr[i], pos[i], Hkv) for i in range(len(dkr))]
        du = linear_bwd(P[pfx + ".self_attn.q_proj.weight"], u, dq, G, pfx + ".self_attn.q_proj.weight")
        duk = linear_bwd(P[pfx + ".self_attn.k_proj.weight"], u, dk, G, pfx + ".self_attn.k_proj.weight")
        duv = linear_bwd(P[pfx + ".self_attn.v_proj.weight"], u, dv, G, pfx + ".self_attn.v_proj.weight")
        du = [vadd(vadd(x, y), z) for x, y, z in zip(du, duk, duv)]
        dxr = rms_bwd(n1, du, P[pfx + ".input_layernorm.weight"], G, pfx + ".input_layernorm.weight",
                      film_names[:2] if film_names else None)
        return [vadd(x, y) for x, y in zip(dh1, dxr)]

    def windows(self, n, l):
        W, S = self.c["window"], self.c["stride"]
        delta = ((l - 1) * S) % W
        return [(j + delta) // W for j in range(n)]

    def doc(self, toks, depth, bias, G, inv_ntot, want_grad=True):
        """one document (its own attention segments, positions, windows and router
        inputs): returns (summed CE over its n-1 targets, loads [L], smallest routing
        margin); adds d(CE sum * inv_ntot)/d(params) into G"""
        c, P = self.c, self.P
        n, d, L = len(toks), c["d_model"], c["library_size"]
        pos = list(range(n))
        E = P["model.embed_tokens.weight"]
        X = [list(E[t]) for t in toks]
        tape = []
        for i in range(c["n_prelude"]):
            pfx = "model.prelude.%d" % i
            X, cache = self.block_fwd(pfx, X, pos, None)
            tape.append(("full", pfx, cache))
        loads, margin = [0] * L, float("inf")
        for l in range(1, depth + 1):
            win = self.windows(n, l)
            K = win[-1] + 1
            segs = [[j for j in range(n) if win[j] == k] for k in range(K)]
            mus = [[sum(X[j][t] for j in seg) / len(seg) for t in range(d)] for seg in segs]
            Rn = "model.routers.%d.weight" % (l - 1) if c["untied_router"] else "model.router.weight"
            R = P[Rn]
            e = P["model.depth_embed"][l - 1]
            fp = "model.film.%d." % (l - 1)
            film = ((P[fp + "attn_gamma"], P[fp + "attn_beta"]), (P[fp + "ffn_gamma"], P[fp + "ffn_beta"]))
            decs, newX = [], [list(x) for x in X]
            for k, seg in enumerate(segs):
                if k == 0:
                    r = [(a + b) / 2 for a, b in zip(e, X[0])]
                else:
                    r = [sum(mus[j][t] for j in range(k)) / k for t in range(d)]
                a = softmax([dot(row, r) for row in R])
                sc = [a[m] + bias[m] for m in range(L)]
                rho = max(range(L), key=lambda m: (sc[m], -m))  # ties to the lowest index
                if L > 1:
                    s2 = sorted(sc, reverse=True)
                    margin = min(margin, s2[0] - s2[1])
                loads[rho] += 1
                alpha = a[rho]
                Y, cache = self.block_fwd("model.library.%d" % rho, [X[j] for j in seg], [pos[j] for j in seg], film)
                for i, j in enumerate(seg):
                    newX[j] = [s + alpha * (y - s) for s, y in zip(X[j], Y[i])]
                decs.append((r, a, rho, Y, cache))
            tape.append(("routed", l, X, segs, decs, Rn))
            X = newX
        for i in range(c["n_coda"]):
            pfx = "model.coda.%d" % i
            X, cache = self.block_fwd(pfx, X, pos, None)
            tape.append(("full", pfx, cache))
        nw = P["model.norm.weight"]
        hN, cn = rms_fwd(X, nw, self.eps)
        hname = "model.embed_tokens.weight" if c["tie_embeddings"] else "lm_head.weight"
        Hd = P[hname]
        ce, dlog = 0.0, []
        for t in range(n):
            if t == n - 1:
                dlog.append([0.0] * len(Hd))
                continue
            z = [dot(row, hN[t]) for row in Hd]
            p = softmax(z)
            tgt = toks[t + 1]
            ce -= math.log(p[tgt])
            dz = [v * inv_ntot for v in p]
            dz[tgt] -= inv_ntot
            dlog.append(dz)
        if not want_grad:
            return ce, loads, margin
        # ---------------- backward
        dh = linear_bwd(Hd, hN, dlog, G, hname)
        dX = rms_bwd(cn, dh, nw, G, "model.norm.weight", None)
        for ent in reversed(tape):
            if ent[0] == "full":
                dX = self.block_bwd(ent[1], ent[2], dX, G, None)
                continue
            _, l, Xin, segs, decs, Rn = ent
            R = P[Rn]
            fp = "model.film.%d." % (l - 1)
            fnames = [fp + "attn_gamma", fp + "attn_beta", fp + "ffn_gamma", fp + "ffn_beta"]
            dXin = [[0.0] * d for _ in range(n)]
            dmu = [[0.0] * d for _ in segs]
            GR = G.of(Rn)
            GE = G.of("model.depth_embed")
            for k, seg in enumerate(segs):
                r, a, rho, Y, cache = decs[k]
                alpha = a[rho]
                dnew = [dX[j] for j in seg]
                dalpha = sum(dot(dn, [y - x for y, x in zip(Y[i], Xin[j])]) for i, (dn, j) in enumerate(zip(dnew, seg)))
                dy = [[alpha * v for v in row] for row in dnew]
                dXb = self.block_bwd("model.library.%d" % rho, cache, dy, G, fnames)
                for i, j in enumerate(seg):
                    dXin[j] = [p + (1.0 - alpha) * q + b for p, q, b in zip(dXin[j], dX[j], dXb[i])]
                dz = [dalpha * alpha * ((1.0 if m == rho else 0.0) - a[m]) for m in range(len(a))]
                if FAULT == "alpha_detached":
                    dz = [0.0] * len(a)
                for m in range(len(a)):
                    if dz[m]:
                        GR[m] = [gv + dz[m] * rv for gv, rv in zip(GR[m], r)]
                dr = [sum(dz[m] * R[m][t] for m in range(len(a))) for t in range(d)]
                if FAULT == "router_input_detached":
                    dr = [0.0] * d
                if k == 0:
                    GE[l - 1] = [gv + 0.5 * v for gv, v in zip(GE[l - 1], dr)]
                    dXin[0] = [gv + 0.5 * v for gv, v in zip(dXin[0], dr)]
                else:
                    for j in range(k):
                        dmu[j] = [gv + v / k for gv, v in zip(dmu[j], dr)]
            for j, seg in enumerate(segs):
                w = 1.0 / len(seg)
                for i in seg:
                    dXin[i] = [gv + w * v for gv, v in zip(dXin[i], dmu[j])]
            dX = dXin
        GEm = G.of("model.embed_tokens.weight")
        for j, t in enumerate(toks):
            GEm[t] = vadd(GEm[t], dX[j])
        return ce, loads, margin


def loss_and_grads(c, P, seqs, depth, bias, want_grad=True):
    """mean cross entropy over every target of the step (docs/training.md "Data and
    targets": each document's n-1 next-token targets) and its gradient"""
    net = Net(c, P)
    G = Grads(P)
    ntot = sum(len(s) - 1 for s in seqs)
    ce, loads, margin = 0.0, [0] * c["library_size"], float("inf")
    for s in seqs:
        inv = 1.0 / ntot if FAULT != "loss_mean_of_doc_means" else 1.0 / ((len(s) - 1) * len(seqs))
        a, ld, mg = net.doc(s, depth, bias, G, inv, want_grad)
        ce += a
        loads = [x + y for x, y in zip(loads, ld)]
        margin = min(margin, mg)
    return dict(loss=ce / ntot, targets=ntot, grads=G, loads=loads, margin=margin)


# ================================================================ optimizers, schedules, growing (float64)
def group_of(name, optim_type):
    """docs/training.md "Optimizers": muon = 2-D attention / MLP projections of prelude,
    library and coda; adamw_decay = token embedding, LM head, router(s); adamw_no_decay =
    RMSNorm weights, FiLM gamma/beta, depth embeddings; the balancing bias is a buffer.
    ASSUMED: with optim.type = adamw the projections go to AdamW *with* weight decay."""
    if name.endswith("balance_bias"):
        return None
    if name.endswith("_proj.weight"):
        return "muon" if optim_type == "muon" else "adamw_decay"
    if name in ("model.embed_tokens.weight", "lm_head.weight") or name.startswith("model.router"):
        return "adamw_decay"
    return "adamw_no_decay"


def ns5(G, rows, cols, steps, coeffs=(3.4445, -4.7750, 2.0315)):
    """quintic Newton-Schulz (torch.optim.Muon's _zeropower_via_newtonschulz) in float64:
    transposed when tall, scaled to unit Frobenius norm (clamped at 1e-7)"""
    a, b, c = coeffs
    X = [G[i * cols:(i + 1) * cols] for i in range(rows)]
    if FAULT == "ns_cubic":
        a, b, c = 1.5, -0.5, 0.0
    tall = rows > cols
    if tall:
        X = transpose(X)
    nrm = math.sqrt(sum(v * v for r in X for v in r))
    X = [[v / max(nrm, 1e-7) for v in r] for r in X]
    for _ in range(steps):
        XT = transpose(X)
        A = [[dot(r1, r2) for r2 in X] for r1 in X]
        AT = transpose(A)
        AA = [[dot(r1, c2) for c2 in AT] for r1 in A]
        B = [[b * x + c * y for x, y in zip(r1, r2)] for r1, r2 in zip(A, AA)]
        BX = [[dot(r1, c2) for c2 in XT] for r1 in B]
        X = [[a * x + y for x, y in zip(r1, r2)] for r1, r2 in zip(X, BX)]
    if tall:
        X = transpose(X)
    return [v for r in X for v in r]


def lr_factor(s, N, sch):
    """docs/training.md "Schedules", step s 0-based of N.
    ASSUMED (wsd): the decay covers the last n_d = round(decay_fraction N) steps with
    q = (s - (N - n_d)) / n_d (round half away from zero, as C++ std::round)."""
    w, m = sch["warmup_steps"], sch["min_lr_ratio"]
    if s < w:
        return (s + 1) / w
    t = sch["type"]
    if t == "constant":
        return 1.0
    if t == "cosine":
        p = (s - w) / (N - w)
        return m + (1 - m) * (1 + math.cos(math.pi * p)) / 2
    nd = int(math.floor(sch["decay_fraction"] * N + 0.5))
    start = N - nd
    if s < start:
        return 1.0
    q = (s - start) / nd
    if sch["decay_shape"] == "linear":
        return m + (1 - m) * (1 - q)
    return m + (1 - m) * (1 - math.sqrt(q))


def grown_depth(s, N, D, grow):
    """docs/training.md "Growing": depth(s) = min(D, start + floor((D - start + 1) f(s/G)))"""
    start, fraction, shape = grow
    if fraction == 0:
        return D
    G = math.ceil(fraction * N)
    if s >= G:
        return D
    x = s / G
    f = {"1-sqrt": lambda v: 1 - math.sqrt(1 - v), "sqrt": math.sqrt, "linear": lambda v: v}[shape](x)
    return min(D, start + int(math.floor((D - start + 1) * f)))


def adam_elem(p, m0, v0, g, t, lr, wd, b1, b2, eps):
    """torch.optim.AdamW, one element: returns (p, exp_avg, exp_avg_sq)"""
    p = p * (1 - lr * wd)
    m = m0 + (1 - b1) * (g - m0)
    v = b2 * v0 + (1 - b2) * g * g
    if FAULT == "adam_no_bias_correction":
        p -= lr * m / (math.sqrt(v) + eps)
    elif FAULT == "adam_eps_inside_sqrt":
        p -= lr / (1 - b1 ** t) * m / math.sqrt(v / (1 - b2 ** t) + eps)
    else:
        p -= lr / (1 - b1 ** t) * m / (math.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)
    return p, m, v


class Hyper:
    def __init__(self, run):
        o = run["optim"]
        self.type = o.get("type", "muon")
        self.lr = o.get("lr", 3e-3)
        self.muon_lr = o.get("muon_lr", self.lr)
        self.b1, self.b2 = o.get("betas", [0.9, 0.95])
        self.eps = o.get("eps", 1e-8)
        self.wd = o.get("weight_decay", 0.1)
        self.mom = o.get("momentum", 0.95)
        self.nesterov = o.get("nesterov", True)
        self.clip = run["train"].get("clip", 1.0)
        self.sch = dict(dict(type="cosine", warmup_steps=0, min_lr_ratio=0.1, decay_fraction=0.2,
                             decay_shape="1-sqrt"), **run.get("schedule", {}))
        self.N = run["train"]["steps"]
        self.tol_muon, self.muon_rel_min = TOL_MUON, None
        if o.get("ns_dtype", "float32") == "bfloat16":
            # NS5 in bfloat16 (8-bit significand, 2^-9 relative rounding per operation,
            # amplified along small singular directions): tolerate 0.3 of the largest
            # update element, and require more than 10 x TOL_MUON (more than a float32
            # NS5 differs by), which shows that the option is honoured. Measured: 0.2;
            # an emulation of torch's bf16 NS5 (fp32 accumulation, one bf16 rounding per
            # operation) differs from float64 by only ~0.03 on the same input (see
            # docstring: lol's CPU bf16 path is noisier, its singular values still lie in
            # NS5's band)
            self.tol_muon, self.muon_rel_min = 0.3, 10 * TOL_MUON
        self.ns_steps = o.get("ns_steps", 5)


def opt_step(hp, s, P, shapes, grads, state, tol_g=None):
    """One optimizer step of docs/training.md "Optimizers" / "Each step" 4 in float64.
    P: name -> flat params; grads: name -> flat gradient (only tensors that had one);
    state: name -> {step, exp_avg, exp_avg_sq} or {momentum_buffer}. Returns new params,
    new state, the global norm before clipping, the clip coefficient, per-tensor
    tolerances (when tol_g is given: the change of the result when each gradient element
    moves by tol_g * max|g| of its tensor, plus float32 rounding) and the per-tensor
    pieces the implied-lr fit needs."""
    f = lr_factor(s + (FAULT == "lr_one_step_late"), hp.N, hp.sch)
    lr, mlr = hp.lr * f, hp.muon_lr * f
    norm = math.sqrt(sum(v * v for g in grads.values() for v in g))
    coef = 1.0
    if hp.clip > 0 and FAULT != "no_clip":
        coef = min(1.0, hp.clip / (norm + 1e-6))
    newP, newS, tol, parts = dict(P), dict(state), {}, {}
    for name, g0 in grads.items():
        g = [v * coef for v in g0]
        grp = group_of(name, hp.type)
        p = P[name]
        st = state.get(name, {})
        gmax = max(abs(v) for v in g) if g else 0.0
        eg = (tol_g or 0.0) * gmax
        if grp == "muon":
            rows, cols = shapes[name]
            buf0 = st.get("momentum_buffer", [0.0] * len(g))
            if FAULT == "momentum_sum":  # Keller Jordan's original buf = mom buf + g
                buf = [hp.mom * b + x for b, x in zip(buf0, g)]
            else:
                buf = [b + (1 - hp.mom) * (x - b) for b, x in zip(buf0, g)]
            nest = hp.nesterov != (FAULT == "nesterov_flipped")
            u = [x + hp.mom * (b - x) for x, b in zip(g, buf)] if nest else buf
            Om = ns5(u, rows, cols, hp.ns_steps + (FAULT == "ns_one_more_step"))
            if FAULT == "muon_adjust_original":
                adj = mlr * math.sqrt(max(1.0, rows / cols))
            else:
                adj = mlr * 0.2 * math.sqrt(max(rows, cols))
            wlr = adj if FAULT == "muon_decay_adjusted_lr" else mlr
            newP[name] = [x * (1 - wlr * hp.wd) - adj * o for x, o in zip(p, Om)]
            newS[name] = {"momentum_buffer": buf, "step": st.get("step", 0) + 1}
            parts[name] = ("muon", mlr, [hp.wd * x + 0.2 * math.sqrt(max(rows, cols)) * o for x, o in zip(p, Om)])
            if tol_g is not None:
                omax = max(abs(o) for o in Om)
                tol[name] = [hp.tol_muon * adj * omax + 3e-7 * abs(x) for x in newP[name]]
        else:
            wd = hp.wd if (grp == "adamw_decay") != (FAULT == "decay_groups_swapped") else 0.0
            t = st.get("step", 0) + 1 if FAULT != "adam_global_step" else s + 1
            m0 = st.get("exp_avg", [0.0] * len(g))
            v0 = st.get("exp_avg_sq", [0.0] * len(g))
            out = [adam_elem(x, a, b, gg, t, lr, wd, hp.b1, hp.b2, hp.eps) for x, a, b, gg in zip(p, m0, v0, g)]
            newP[name] = [o[0] for o in out]
            newS[name] = {"step": t, "exp_avg": [o[1] for o in out], "exp_avg_sq": [o[2] for o in out]}
            parts[name] = ("adam", lr, t, wd)
            if tol_g is not None:
                tl = []
                for x, a, b, gg, o in zip(p, m0, v0, g, out):
                    hi = adam_elem(x, a, b, gg + eg, t, lr, wd, hp.b1, hp.b2, hp.eps)[0]
                    lo = adam_elem(x, a, b, gg - eg, t, lr, wd, hp.b1, hp.b2, hp.eps)[0]
                    tl.append(max(abs(hi - o[0]), abs(lo - o[0])) + 3e-7 * abs(o[0]) + 1e-6 * abs(o[0] - x))
                tol[name] = tl
    return dict(P=newP, S=newS, norm=norm, coef=coef, lr=lr, mlr=mlr, tol=tol, parts=parts,
                grads={n: [v * coef for v in g] for n, g in grads.items()})


# ================================================================ tolerances
# lol computes in float32. Its gradient (recovered from optimizer.safetensors, see
# check_step) is compared element-wise with the float64 one relative to the largest
# |gradient| of the tensor; TOL_G bounds that error (measured: see the docstring).
# Every parameter tolerance is derived from it: an AdamW element may move by what its
# update moves when its gradient moves by TOL_G * max|g| (adam_elem re-run at g +- that:
# large only where |g| is comparable to it, where AdamW's g / sqrt(g^2) is ill-
# conditioned), a Muon tensor by TOL_MUON of its largest update element (NS5 maps the
# normalised momentum through five quintic steps; float32 rounding and the gradient's
# relative error of a small singular direction are amplified up to ~50x, see
# docstring), plus 3e-7 |p| (float32 rounding of the stored parameter).
TOL_G = 5e-5
TOL_MUON = 4e-4
TOL_LOSS = 2e-5
TOL_NORM = 1e-4
CHAIN_C = 20.0  # see the docstring, check 7

# ================================================================ running lol
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run(cmd, ok=(0,)):
    pin = shutil.which("taskset") and 1 in os.sched_getaffinity(0)
    r = subprocess.run(["taskset", "-c", "1"] + cmd if pin else cmd, capture_output=True, text=True, env=ENV)
    if r.returncode not in ok:
        raise RuntimeError("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def read_docs(data_dir, split="train"):
    """token sequences of a `lol corpus` split (docs/text.md: shards with `tokens` and
    `offsets`, document k = tokens[offsets[k]:offsets[k+1]])"""
    meta = json.load(open(os.path.join(data_dir, "dataset.json")))
    out = []
    for shard in meta["splits"].get(split, []):
        t = read_st(os.path.join(data_dir, shard))
        tok, off = t["tokens"][1], t["offsets"][1]
        out += [[int(x) for x in tok[off[i]:off[i + 1]]] for i in range(len(off) - 1)]
    return out


def ckpt_dir(rd, k):
    return os.path.join(rd, "checkpoints", "step-%06d" % k)


def read_model(d):
    T = read_st(os.path.join(d, "model.safetensors"))
    return {k: list(v[1]) for k, v in T.items()}, {k: tuple(v[0]) for k, v in T.items()}


OPT_SUFFIXES = (".step", ".exp_avg_sq", ".exp_avg", ".momentum_buffer")


def read_opt(d):
    """optimizer.safetensors (docs/training.md "Outputs"): `<name>.step`, `.exp_avg`,
    `.exp_avg_sq` (AdamW), `.momentum_buffer` (Muon)"""
    S, unknown = {}, []
    path = os.path.join(d, "optimizer.safetensors")
    for k, (shape, vals, dt) in read_st(path).items():
        for suf in OPT_SUFFIXES:
            if k.endswith(suf):
                S.setdefault(k[:-len(suf)], {})[suf[1:]] = int(round(vals[0])) if suf == ".step" else list(vals)
                break
        else:
            unknown.append(k)
    return S, unknown


def metrics(rd):
    out = {}
    for line in open(os.path.join(rd, "metrics.jsonl")):
        d = json.loads(line)
        if "valid_loss" not in d:
            out[d["step"]] = d
    return out


class Report:
    def __init__(self):
        self.fail, self.notes, self.n = [], [], 0

    def check(self, ok, what, detail=""):
        self.n += 1
        line = "%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail else "")
        print(line, flush=True)
        if not ok:
            self.fail.append(line)
        return ok

    def note(self, what):
        print("note " + what, flush=True)
        self.notes.append(what)


# ================================================================ models and data
MODEL = {"architecture": "lol", "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 24,
         "n_prelude": 1, "n_coda": 1, "library_size": 3, "core_depth": 3, "window": 6, "stride": 2,
         "router_noise_std": 0.0, "balance_update_rate": 1e-3, "tie_embeddings": True, "untied_router": False,
         "max_seq_len": 128}

TEXT = ["The cat sat on the mat.", "A dog ran far away.", "Hi there, said he.", "Birds fly south."]


def random_weights(names_shapes, seed, bias=None):
    """every tensor random (float32 values): norms, FiLM and depth embeddings away from
    their identity / zero start, routers wide (decisive routing: large a + b margins)"""
    rng = random.Random(seed)
    out = {}
    for k in sorted(names_shapes):
        shape = names_shapes[k]
        n = 1
        for s in shape:
            n *= s
        if k.endswith("balance_bias"):
            v = list(bias) if bias is not None else [rng.gauss(0, 0.05) for _ in range(n)]
        elif "gamma" in k or "layernorm" in k or k == "model.norm.weight":
            v = [1 + rng.gauss(0, 0.3) for _ in range(n)]
        elif "beta" in k:
            v = [rng.gauss(0, 0.3) for _ in range(n)]
        elif k in ("model.depth_embed", "model.embed_tokens.weight"):
            v = [rng.gauss(0, 1.0) for _ in range(n)]
        elif k == "lm_head.weight":
            v = [rng.gauss(0, 0.5) for _ in range(n)]
        elif "router" in k:
            v = [rng.gauss(0, 4.0 / math.sqrt(shape[1])) for _ in range(n)]
        else:
            v = [rng.gauss(0, 1.0 / math.sqrt(shape[1])) for _ in range(n)]
        out[k] = [f32(x) for x in v]
    return out


def full_config(cfg_path):
    """the model configuration with the defaults of docs/checkpoint-format.md filled in
    (the same defaults lol_reference's LoL fills in)"""
    d = dict(vocab_size=256, d_model=256, n_heads=8, n_kv_heads=8, ffn_hidden=688, n_prelude=2, n_coda=2,
             library_size=8, core_depth=8, window=64, stride=32, rope_theta=10000.0, norm_eps=1e-5,
             tie_embeddings=True, untied_router=False, prelude_coda_experts=0)
    d.update(json.load(open(cfg_path)))
    return d


# ================================================================ comparing one step
def worst_by_group(items):
    """items: (group, ratio) -> {group: max ratio}"""
    out = {}
    for g, v in items:
        out[g] = max(out.get(g, 0.0), v)
    return out


def fmt(d, f="%.2g"):
    return ", ".join(("%s " + f) % (k, v) for k, v in sorted(d.items()))


def sign(x):
    return (x > 0) - (x < 0)


def implied_lr(parts, P_prev, P_cur, S_cur, hp):
    """least-squares learning rate per group that explains lol's parameter change:
    AdamW dp = -lr (wd p + m / (bc1 (sqrt(v) / sqrt(bc2) + eps))) with lol's own stored m, v;
    Muon dp = -lr (wd p + 0.2 sqrt(max(rows, cols)) O) with O = NS5 of the reference"""
    num, den = {}, {}
    for name, pt in parts.items():
        dp = [a - b for a, b in zip(P_cur[name], P_prev[name])]
        if pt[0] == "muon":
            grp, a = "muon", pt[2]
        else:
            _, _, t, wd = pt
            st = S_cur.get(name)
            if not st or "exp_avg" not in st:
                continue
            bc1, bc2 = 1 - hp.b1 ** t, 1 - hp.b2 ** t
            a = [wd * p + m / (bc1 * (math.sqrt(v) / math.sqrt(bc2) + hp.eps))
                 for p, m, v in zip(P_prev[name], st["exp_avg"], st["exp_avg_sq"])]
            grp = "adamw_decay" if wd else "adamw_no_decay"
        num[grp] = num.get(grp, 0.0) - dot(dp, a)
        den[grp] = den.get(grp, 0.0) + dot(a, a)
    return {g: num[g] / den[g] for g in num if den[g] > 0}


def check_step(R, tag, k, c, hp, shapes, prev, cur, bias_prev, seqs, logged, depth):
    """step k of a run: the reference step from lol's checkpoint k-1 (weights, balancing
    bias, optimizer state) against lol's checkpoint k. prev/cur: dicts P (flat params), S
    (optimizer state). Returns the reference's loads."""
    w = "%s step %d" % (tag, k)
    Pn = {n: nested(shapes[n], v) for n, v in prev["P"].items()}
    fb = loss_and_grads(c, Pn, seqs, depth, bias_prev)
    if fb["margin"] < TIE:
        R.note("%s: routing near tie (a+b margin %.1e < %.0e): float32 may route otherwise, step not compared"
               % (w, fb["margin"], TIE))
        return None
    grads = {n: flat(g) for n, g in fb["grads"].items()}
    res = opt_step(hp, k - 1, prev["P"], shapes, grads, prev["S"], tol_g=TOL_G)
    # ---- what metrics.jsonl logs
    ok = logged.get("active_depth") == depth
    rel_loss = abs(logged["loss"] - fb["loss"]) / fb["loss"]
    rel_lr = abs(logged["lr"] - res["lr"]) / max(res["lr"], 1e-30)
    gn = logged.get("grad_norm")
    rel_gn = abs(gn - res["norm"]) / res["norm"] if gn is not None else float("nan")
    R.check(ok and rel_loss < TOL_LOSS and rel_lr < 1e-6 and (gn is None or rel_gn < TOL_NORM),
            "%s: logged depth %s (ref %d), loss %.7f (ref %.7f, %.1e), lr %.6g (ref %.6g = %g x %.6f), grad_norm %s "
            "(ref pre-clip %.6g, %.1e; clip %g %s, coef %.4f); routing margin %.3f"
            % (w, logged.get("active_depth"), depth, logged["loss"], fb["loss"], rel_loss, logged["lr"], res["lr"],
               hp.lr, res["lr"] / hp.lr if hp.lr else 0, "%.6g" % gn if gn is not None else "not logged",
               res["norm"], rel_gn, hp.clip, "binds" if res["coef"] < 1 else "does not bind", res["coef"],
               fb["margin"]))
    if gn is not None and rel_gn >= TOL_NORM:
        post = res["norm"] * res["coef"]
        if abs(gn - post) / post < TOL_NORM:
            R.note("%s: logged grad_norm %.6g is the post-clip norm" % (w, gn))
    # ---- untouched tensors: no gradient -> no decay, no state change
    no_grad = sorted(n for n in prev["P"] if n not in grads and group_of(n, hp.type))
    bad = [n for n in no_grad if cur["P"][n] != prev["P"][n] or cur["S"].get(n) != prev["S"].get(n)]
    if no_grad:
        R.check(not bad, "%s: %d tensors without a gradient (%s) bit-identical, optimizer state unchanged"
                % (w, len(no_grad), short_names(no_grad)), ("changed: " + ", ".join(bad[:6])) if bad else "")
    # ---- the balancing bias: b + u sign(mean - load) with the reference loads
    u, L = c["balance_update_rate"], c["library_size"]
    mean = sum(fb["loads"]) / L
    want_b = [f32(b + f32(u) * sign(mean - ld)) for b, ld in zip(bias_prev, fb["loads"])]
    got_b = cur["P"]["model.balance_bias"]
    R.check(all(abs(a - b) <= 1e-7 * max(1, abs(b)) for a, b in zip(got_b, want_b))
            and logged.get("expert_load") == fb["loads"],
            "%s: loads %s (logged %s), bias follows them" % (w, fb["loads"], logged.get("expert_load")))
    # ---- gradients recovered from lol's optimizer state, and the state itself
    gerr, verr, missing, steps_bad = [], [], [], []
    for n, gc in res["grads"].items():
        grp = group_of(n, hp.type)
        st, st0 = cur["S"].get(n), prev["S"].get(n, {})
        gmax = max(max(abs(v) for v in gc), 1e-30)
        if grp == "muon":
            if not st or "momentum_buffer" not in st:
                missing.append(n)
                continue
            b0 = st0.get("momentum_buffer", [0.0] * len(gc))
            gl = [(b - hp.mom * a) / (1 - hp.mom) for b, a in zip(st["momentum_buffer"], b0)]
            if "step" in st and st["step"] != st0.get("step", 0) + 1:  # a Muon .step is not documented
                steps_bad.append("%s step %s, expected %d" % (n, st.get("step"), st0.get("step", 0) + 1))
        else:
            if not st or "exp_avg" not in st or "exp_avg_sq" not in st:
                missing.append(n)
                continue
            m0 = st0.get("exp_avg", [0.0] * len(gc))
            gl = [(m - hp.b1 * a) / (1 - hp.b1) for m, a in zip(st["exp_avg"], m0)]
            v0 = st0.get("exp_avg_sq", [0.0] * len(gc))
            eg = TOL_G * gmax
            for vl, a, g in zip(st["exp_avg_sq"], v0, gc):
                vr = hp.b2 * a + (1 - hp.b2) * g * g
                t_ = (1 - hp.b2) * (2 * abs(g) * eg + eg * eg) + 1e-6 * vr + 1e-30
                verr.append((grp, abs(vl - vr) / t_))
            want_t = st0.get("step", 0) + 1
            if st.get("step") != want_t:
                steps_bad.append("%s step %s, expected %d" % (n, st.get("step"), want_t))
        gerr.append((grp, max(abs(a - b) for a, b in zip(gl, gc)) / gmax))
    ge, ve = worst_by_group(gerr), worst_by_group(verr)
    R.check(not missing and all(v <= TOL_G for v in ge.values()),
            "%s: gradient after clipping, recovered from optimizer state (Muon momentum_buffer, AdamW exp_avg), vs "
            "reference, worst |diff| / max|g| of the tensor: %s (tolerance %.0e)" % (w, fmt(ge), TOL_G),
            ("no state for " + ", ".join(missing[:5])) if missing else "")
    R.check(all(v <= 1 for v in ve.values()) and not steps_bad,
            "%s: AdamW exp_avg_sq (worst |diff| / tolerance %s) and per-tensor step counts (each = steps in "
            "which the tensor had a gradient)" % (w, fmt(ve) or "no AdamW tensor"), "; ".join(steps_bad[:5]))
    # ---- every parameter
    perr, prel = [], []
    for n in res["tol"]:
        grp = group_of(n, hp.type)
        ref, got, tol, p0 = res["P"][n], cur["P"][n], res["tol"][n], prev["P"][n]
        perr.append((grp, max(abs(a - b) / t for a, b, t in zip(got, ref, tol))))
        upd = max(abs(a - b) for a, b in zip(ref, p0))
        prel.append((grp, max(abs(a - b) for a, b in zip(got, ref)) / max(upd, 1e-30)))
    pe, pr = worst_by_group(perr), worst_by_group(prel)
    R.check(all(v <= 1 for v in pe.values()) and (hp.muon_rel_min is None or pr.get("muon", 0) > hp.muon_rel_min),
            "%s: every parameter vs the float64 step from checkpoint %d: worst |diff| / max|update| %s; "
            "worst |diff| / tolerance %s" % (w, k - 1, fmt(pr), fmt(pe)))
    # ---- the learning rate actually used
    imp = implied_lr(res["parts"], prev["P"], cur["P"], cur["S"], hp)
    want = {"muon": res["mlr"], "adamw_decay": res["lr"], "adamw_no_decay": res["lr"]}
    errs = {g: abs(v - want[g]) / want[g] for g, v in imp.items() if want[g] > 0}
    R.check(all(v < (max(2e-3, hp.tol_muon) if g == "muon" else 1e-4) for g, v in errs.items()),
            "%s: implied learning rates %s (expected muon %.6g, adamw %.6g)"
            % (w, fmt(imp, "%.6g"), res["mlr"] if hp.type == "muon" else float("nan"), res["lr"]))
    return dict(res=res, fb=fb, rel=pr)


def short_names(ns):
    s = ", ".join(ns[:4])
    return s + (", ... (%d more)" % (len(ns) - 4) if len(ns) > 4 else "")


# ================================================================ runs
def train(cfg, rd):
    cfg["train"]["out"] = rd
    path = rd + ".json"
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    run([LOL, "train", "--config", path, "--no-progress"])
    return rd


def run_cfg(init, data, N, optim, schedule, clip, grow=(1, 0.0, "1-sqrt"), batch=4, accum=1, packing="pad",
            seq_len=0, save_every=1):
    return {"init_from": init,
            "data": {"dir": data, "batch_size": batch, "packing": packing, "seq_len": seq_len},
            "optim": dict(optim), "schedule": dict(schedule),
            "grow": {"start": grow[0], "fraction": grow[1], "shape": grow[2]},
            "train": {"steps": N, "grad_accum": accum, "clip": clip, "eval_every": 0, "eval_batches": 0,
                      "save_every": save_every, "keep_last": 100, "log_every": 1, "seed": 3, "threads": 1,
                      "progress": False}}


class Init:
    """a `lol init` checkpoint with every tensor replaced by random float32 values"""

    def __init__(self, name, data, docs, changes, bias, need, depths):
        vocab = json.load(open(os.path.join(data, "dataset.json")))["vocab_size"]
        cfg = dict(MODEL, vocab_size=vocab, **changes)
        base = os.path.join(WORK, "init", name + "_lol_init")
        path = base + ".json"
        with open(path, "w") as f:
            json.dump(cfg, f)
        run([LOL, "init", "--config", path, "--seed", "1", "--out", base])
        self.dir = os.path.join(WORK, "init", name)
        os.makedirs(self.dir, exist_ok=True)
        shutil.copy(os.path.join(base, "config.json"), os.path.join(self.dir, "config.json"))
        self.c = full_config(os.path.join(self.dir, "config.json"))
        T = read_st(os.path.join(base, "model.safetensors"))
        self.shapes = {k: tuple(v[0]) for k, v in T.items()}
        # a seed whose routing is decisive (margins far above float32 noise) with the loads `need` wants
        for seed in range(100, 160):
            P = random_weights(self.shapes, seed, bias)
            Pn = {n: nested(self.shapes[n], v) for n, v in P.items()}
            rs = [loss_and_grads(self.c, Pn, docs, dd, Pn["model.balance_bias"], want_grad=False) for dd in depths]
            margin = min(r["margin"] for r in rs)
            if margin > 2e-2 and all(need(r["loads"]) for r in rs):
                break
        else:
            raise RuntimeError("no seed gave decisive routing for " + name)
        self.P, self.seed, self.margin = P, seed, margin
        self.loads = [r["loads"] for r in rs]
        write_st(os.path.join(self.dir, "model.safetensors"), {k: (list(self.shapes[k]), v, "F32") for k, v in P.items()})


def check_run(R, tag, rd, init, seqs, hp, grow, compare_to=None):
    """every step of run `rd`: the one-step reference from lol's previous checkpoint
    (check_step), and a chained float64 reference from the initial model alone"""
    c, shapes = init.c, init.shapes
    N, D = hp.N, c["core_depth"]
    logged = metrics(rd)
    prev = dict(P=dict(init.P), S={})
    chain = dict(P=dict(init.P), S={}, bias=list(init.P["model.balance_bias"]),
                 tol={n: [0.0] * len(v) for n, v in init.P.items()})
    out = {}
    for k in range(1, N + 1):
        depth = grown_depth(k - 1, N, D, grow)
        cd = ckpt_dir(rd, k)
        P, _ = read_model(cd)
        S, unknown = read_opt(cd)
        if unknown:
            R.note("%s step %d: optimizer.safetensors tensors of no documented kind: %s" % (tag, k, unknown[:4]))
        cur = dict(P=P, S=S)
        if k not in logged:
            R.check(False, "%s step %d: no metrics.jsonl line" % (tag, k))
            return out
        st = check_step(R, tag, k, c, hp, shapes, prev, cur, prev["P"]["model.balance_bias"], seqs, logged[k], depth)
        out[k] = st
        # ---- the chained reference: its own weights, state and bias from the start
        Pn = {n: nested(shapes[n], v) for n, v in chain["P"].items()}
        fb = loss_and_grads(c, Pn, seqs, depth, chain["bias"])
        res = opt_step(hp, k - 1, chain["P"], shapes, {n: flat(g) for n, g in fb["grads"].items()}, chain["S"],
                       tol_g=TOL_G)
        L, u = c["library_size"], c["balance_update_rate"]
        mean = sum(fb["loads"]) / L
        chain["bias"] = [f32(b + f32(u) * sign(mean - ld)) for b, ld in zip(chain["bias"], fb["loads"])]
        res["P"]["model.balance_bias"] = chain["bias"]
        chain["P"], chain["S"] = res["P"], res["S"]
        for n, t in res["tol"].items():
            chain["tol"][n] = [a + b for a, b in zip(chain["tol"][n], t)]
        cerr, crel, untouched_bad = [], [], []
        for n, ref in chain["P"].items():
            grp = group_of(n, hp.type)
            if grp is None:
                continue
            got = P[n]
            tol = chain["tol"][n]
            if not any(tol):
                if got != [f32(x) for x in ref]:
                    untouched_bad.append(n)
                continue
            cerr.append((grp, max(abs(a - b) / (CHAIN_C * t + 1e-30) for a, b, t in zip(got, ref, tol))))
            upd = max(abs(a - b) for a, b in zip(ref, init.P[n]))
            crel.append((grp, max(abs(a - b) for a, b in zip(got, ref)) / max(upd, 1e-30)))
        ce, cr = worst_by_group(cerr), worst_by_group(crel)
        R.check(all(v <= 1 for v in ce.values()) and not untouched_bad and fb["margin"] >= TIE,
                "%s step %d: every parameter vs the chained float64 reference (from the initial model alone): worst "
                "|diff| / max|total update| %s; |diff| / (%g x summed step tolerances) %s; routing margin %.3f"
                % (tag, k, fmt(cr), CHAIN_C, fmt(ce), fb["margin"]),
                ("never-updated tensors differ: " + ", ".join(untouched_bad[:4])) if untouched_bad else "")
        prev = cur
    return out


def check_schedule_only(R, tag, init, data, N, schedule, lr=0.01):
    """a longer run of lr only: metrics.jsonl `lr` against docs/training.md "Schedules" """
    hp_run = run_cfg(init.dir, data, N, {"type": "muon", "lr": lr, "muon_lr": lr}, schedule, 0.0, save_every=0)
    rd = train(hp_run, os.path.join(WORK, "runs", tag))
    hp = Hyper(hp_run)
    logged = metrics(rd)
    got = [logged[k]["lr"] for k in range(1, N + 1)]
    want = [lr * lr_factor(s, N, hp.sch) for s in range(N)]
    bad = [k + 1 for k in range(N) if abs(got[k] - want[k]) > 1e-6 * want[k] + 1e-12]
    R.check(not bad, "%s: logged lr of %d steps %s = peak x factor %s" % (
        tag, N, " ".join("%.5g" % v for v in got), " ".join("%.5g" % (v / lr) for v in want)),
        "steps %s differ" % bad)


def fd_check(R, init, docs, depth):
    """self-check of the hand-written backward: the loss equals lol_reference's float64
    forward, and central differences of lol_reference's forward (h = 1e-5) equal the
    analytic gradient at the largest-|g| element of every tensor"""
    ref = LoL(init.dir)
    Pn = {n: nested(init.shapes[n], v) for n, v in init.P.items()}
    r = loss_and_grads(init.c, Pn, docs, depth, Pn["model.balance_bias"])

    def ref_loss():
        tot, nt = 0.0, 0
        for s in docs:
            lg, _ = ref.forward(s, depth=depth)
            for t in range(len(s) - 1):
                z = lg[t]
                m = max(z)
                tot += m + math.log(sum(math.exp(v - m) for v in z)) - z[s[t + 1]]
                nt += 1
        return tot / nt

    l0 = ref_loss()
    worst, where = 0.0, ""
    for n in sorted(r["grads"]):
        G = flat(r["grads"][n])
        gmax = max(abs(x) for x in G)
        i = max(range(len(G)), key=lambda j: abs(G[j]))
        M = ref.M[n]
        if isinstance(M[0], list):
            row, col = divmod(i, len(M[0]))
            x0 = M[row][col]
            def setv(v):
                M[row][col] = v
        else:
            x0 = M[i]
            def setv(v):
                M[i] = v
        h = 1e-5
        setv(x0 + h)
        lp = ref_loss()
        setv(x0 - h)
        lm = ref_loss()
        setv(x0)
        e = abs((lp - lm) / (2 * h) - G[i]) / max(gmax, 1e-30)
        if e > worst:
            worst, where = e, n
    R.check(abs(l0 - r["loss"]) <= 1e-12 * abs(l0) and worst < 1e-6,
            "self-check (%s, depth %d): loss %.12f = lol_reference forward %.12f; analytic gradient vs central "
            "differences of lol_reference at the largest element of all %d tensors with a gradient: worst %.1e of "
            "max|g| (%s)" % (init.dir.split(os.sep)[-1], depth, r["loss"], l0, len(r["grads"]), worst, where))


def compare_runs(R, tag, rd, base_rd, base_steps, N):
    """two runs that must compute the same steps (docs/training.md: grad_accum k x batch b
    = one batch of k b rows; pack vs pad of the same documents).

    After step k each run is within its steps' tolerances of the reference, so the two
    differ by at most twice the tolerances summed over steps 1..k: a difference made in
    step 1 stays in the parameters. (Until session 50 the bound was twice step k's
    tolerance alone; a Release -O3 build on an AVX-512 machine made packed and batch4
    differ by 3.6e-7 in model.embed_tokens.weight[2685] in step 1, within its tolerance
    of 0.017, and carried that unchanged through step 2, whose own tolerance there is
    1.4e-7.)"""
    summed, groups = {}, {}
    for k in range(1, N + 1):
        a, _ = read_model(ckpt_dir(rd, k))
        b, _ = read_model(ckpt_dir(base_rd, k))
        st = base_steps.get(k)
        if not st:
            continue
        res = st["res"]
        for n, tol in res["tol"].items():
            summed[n] = [u + t for u, t in zip(summed[n], tol)] if n in summed else list(tol)
            groups[n] = group_of(n, res_type(n, res))
        worst = {}
        for n, tol in summed.items():
            g = groups[n]
            r_ = max(abs(x - y) / (2 * t) for x, y, t in zip(a[n], b[n], tol))
            worst[g] = max(worst.get(g, 0.0), r_)
        same_rest = all(a[n] == b[n] for n in a if n not in summed and not n.endswith("balance_bias"))
        R.check(all(v <= 1 for v in worst.values()) and same_rest,
                "%s step %d vs %s: every parameter equal within twice the reference tolerances of steps 1-%d "
                "summed (worst %s)" % (tag, k, os.path.basename(base_rd), k, fmt(worst)))


def res_type(n, res):
    return "muon" if res["parts"][n][0] == "muon" else "adamw"


def check(lol, work):
    global LOL, WORK
    LOL, WORK = os.path.abspath(lol), os.path.abspath(work)
    t0 = time.time()
    for sub in ("data", "init", "runs"):
        shutil.rmtree(os.path.join(WORK, sub), ignore_errors=True)
    os.makedirs(os.path.join(WORK, "init"))
    os.makedirs(os.path.join(WORK, "runs"))
    R = Report()
    text = os.path.join(WORK, "docs.txt")
    with open(text, "w") as f:
        f.write("\n\n".join(TEXT) + "\n")
    data = os.path.join(WORK, "data")
    run([LOL, "corpus", "--in", text, "--tokenizer", "byte", "--valid-fraction", "0", "--out", data, "--no-progress"])
    docs = read_docs(data)
    ntok = sum(len(d) for d in docs)
    R.check(len(docs) == len(TEXT), "corpus: %d documents of %s tokens" % (len(docs), [len(d) for d in docs]))

    # A: tied embeddings, one shared router, expert 2 shut out by its balancing bias
    A = Init("A", data, docs, {}, [0.05, -0.05, -3.0], lambda ld: min(ld[0], ld[1]) >= 10 and ld[2] == 0, [3])
    # B: untied embeddings and routers, 2 kv heads, every expert used at every depth
    B = Init("B", data, docs, {"tie_embeddings": False, "untied_router": True, "n_kv_heads": 2}, None,
             lambda ld: min(ld) > 0, [1, 2, 3])
    for I in (A, B):
        print("init %s: weight seed %d, smallest routing margin %.3f, loads %s" % (I.dir, I.seed, I.margin, I.loads))
    fd_check(R, A, docs[:2], 3)
    fd_check(R, B, docs[2:], 2)

    def norm0(I, depth):
        Pn = {n: nested(I.shapes[n], v) for n, v in I.P.items()}
        r = loss_and_grads(I.c, Pn, docs, depth, Pn["model.balance_bias"])
        return math.sqrt(sum(v * v for g in r["grads"].values() for v in flat(g)))

    clipA, clipB = round(0.4 * norm0(A, 3), 4), round(0.4 * norm0(B, 1), 4)
    runs = [
        ("muon_cosine", A, run_cfg(A.dir, data, 4, {"type": "muon", "lr": 0.01, "muon_lr": 0.02, "weight_decay": 0.3},
                                   {"type": "cosine", "warmup_steps": 2, "min_lr_ratio": 0.1}, 0.0), None),
        ("muon_wsd_grow", B, run_cfg(B.dir, data, 4, {"type": "muon", "lr": 0.01, "muon_lr": 0.03, "weight_decay": 0.2,
                                                      "betas": [0.8, 0.9], "eps": 1e-5, "momentum": 0.9,
                                                      "nesterov": False},
                                     {"type": "wsd", "warmup_steps": 0, "min_lr_ratio": 0.2, "decay_fraction": 0.5,
                                      "decay_shape": "1-sqrt"}, clipB, grow=(1, 1.0, "linear")), None),
        ("adamw_constant", A, run_cfg(A.dir, data, 3, {"type": "adamw", "lr": 0.01, "muon_lr": 0.05,
                                                       "weight_decay": 0.3, "eps": 1e-4},
                                      {"type": "constant", "warmup_steps": 0}, clipA), None),
        ("adamw_wsd", B, run_cfg(B.dir, data, 4, {"type": "adamw", "lr": 0.02, "weight_decay": 0.1,
                                                  "betas": [0.9, 0.99]},
                                 {"type": "wsd", "warmup_steps": 2, "min_lr_ratio": 0.1, "decay_fraction": 0.5,
                                  "decay_shape": "linear"}, 0.0), None),
    ]
    runs += [
        ("muon_ns3", A, run_cfg(A.dir, data, 2, {"type": "muon", "lr": 0.01, "muon_lr": 0.02, "ns_steps": 3,
                                                 "momentum": 0.8, "ns_dtype": "float32"},
                                {"type": "constant", "warmup_steps": 0}, 0.0), None),
        ("muon_ns_bf16", A, run_cfg(A.dir, data, 1, {"type": "muon", "lr": 0.01, "muon_lr": 0.02,
                                                     "ns_dtype": "bfloat16"},
                                    {"type": "constant", "warmup_steps": 0}, 0.0), None),
    ]
    base_opt = {"type": "muon", "lr": 0.01, "muon_lr": 0.02, "weight_decay": 0.1}
    const = {"type": "constant", "warmup_steps": 0}
    runs += [
        ("batch4", A, run_cfg(A.dir, data, 2, base_opt, const, clipA), None),
        ("accum2", A, run_cfg(A.dir, data, 2, base_opt, const, clipA, batch=2, accum=2), "batch4"),
        ("packed", A, run_cfg(A.dir, data, 2, base_opt, const, clipA, batch=1, packing="pack", seq_len=ntok),
         "batch4"),
    ]
    done = {}
    for tag, I, cfg, same_as in runs:
        print("== %s (%s)" % (tag, json.dumps({k: cfg[k] for k in ("optim", "schedule")}) +
                              " clip %g, batch %d x accum %d %s, grow %s" % (
                                  cfg["train"]["clip"], cfg["data"]["batch_size"], cfg["train"]["grad_accum"],
                                  cfg["data"]["packing"], cfg["grow"])), flush=True)
        rd = train(cfg, os.path.join(WORK, "runs", tag))
        hp = Hyper(cfg)
        grow = (cfg["grow"]["start"], cfg["grow"]["fraction"], cfg["grow"]["shape"])
        steps = check_run(R, tag, rd, I, docs, hp, grow)
        done[tag] = (rd, steps)
        if same_as:
            compare_runs(R, tag, rd, done[same_as][0], done[same_as][1], hp.N)
    print("== schedules (logged lr only)", flush=True)
    check_schedule_only(R, "sched_cosine", A, data, 10, {"type": "cosine", "warmup_steps": 3, "min_lr_ratio": 0.05})
    check_schedule_only(R, "sched_wsd_1-sqrt", A, data, 10, {"type": "wsd", "warmup_steps": 1, "min_lr_ratio": 0.1,
                                                             "decay_fraction": 0.3, "decay_shape": "1-sqrt"})
    check_schedule_only(R, "sched_wsd_linear", A, data, 10, {"type": "wsd", "warmup_steps": 0, "min_lr_ratio": 0.0,
                                                             "decay_fraction": 0.4, "decay_shape": "linear"})
    check_schedule_only(R, "sched_constant", A, data, 6, {"type": "constant", "warmup_steps": 4})
    print("%d checks, %d disagree, %d notes (%.0f s)" % (R.n, len(R.fail), len(R.notes), time.time() - t0))
    for f in R.fail:
        print("  " + f)
    return 1 if R.fail else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="train tiny runs with lol and compare every step with this reference")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory (its data/, init/, runs/ are replaced)")
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))
