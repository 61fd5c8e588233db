#!/usr/bin/env python3
"""An independent float64 reference of the first optimizer steps of `lol layerroute
train`, in pure Python (stdlib only), and a check that `lol` agrees with it.

Provenance: written by a reviewer from the LayerRoute paper
(shared/seeds/004_e703cc39d0eba2cf.txt, sections 3.1-3.4 and 4 "Training"),
docs/layerroute.md ("Method as implemented", "Data", "Files", "Commands"),
docs/training.md ("Optimizers", "Schedules": the project AdamW, clipping and cosine
schedule that docs/layerroute.md says the LayerRoute loop uses) and
`lol layerroute train --help`, WITHOUT reading src/. From qwen2_reference.py (this folder)
it imports only the tiny-folder builders (config, weights, byte-level tokenizer), the
ChatML token/mask builder, the float32 RoPE tables of transformers, and its float64
gated forward as a self-check of the forward computed here; the training math
(reverse-mode autodiff, STE, LoRA, objective, clipping, AdamW, schedule) is written here.

  python3 tests/reference/layerroute_train_reference.py check --lol build/lol --work /tmp/x

The reference: a small tape-based scalar reverse-mode autodiff (each node keeps its
parents and local derivatives; nodes are fused per dot product / per output so a step of
a tiny model is ~1e6 tape entries) of
  L = L_LM + lambda * (1 / (S L)) sum_{samples, layers} sigma_i
L_LM the mean cross entropy over the step's target tokens (assistant contents and their
<|im_end|>, or all tokens with --loss-tokens all), S the step's samples. Per layer:
hbar_i = mean over the sample's tokens of the residual stream entering block i,
s_i = w_i . hbar_i + b_i, sigma_i = sigmoid(s_i), g_i = 1[sigma_i > 0.5]; the block
output is h + ghat (Block(h) - h) with ghat's forward value the hard g_i and its
derivative that of sigma_i (straight-through estimator; every block is computed; the
gradient also flows through hbar_i into earlier layers: nothing is detached). LoRA
W' = W + (alpha / r) B A on the targets, base weights frozen. Then the torch-style
global-norm clip (g *= min(1, clip / (norm + 1e-6))), AdamW (betas 0.9 / 0.999, eps
1e-8, decoupled weight decay p *= 1 - lr wd on every trained tensor, bias correction
with the step count) and lr = peak * warmup-then-cosine-to-0 factor of step s of N.
The initial A and w are drawn by lol: they are read from a run with --lr 0 (nothing
moves: the saved adapter is the initial state; B = 0 and b = the band pattern are
predicted, not read).

Cases: a Qwen2 (4 layers, q/k/v biases, --band 1 1 4, LoRA rank 3 alpha 5 on q/k/v/o) and a
Llama (3 layers, tied embeddings, the default band 8 16 24 -> layers 1..2, rank 2 alpha 3 on
all seven projections) of hidden size 8 (2 heads, 1 kv head; qwen2_reference's random
weights with q_proj / k_proj halved, see make_weights), the byte-level ChatML
tokenizer of qwen2_reference, three chat samples (question/answer, and a multi-turn
`messages` sample with a system turn: 29 / 74 / 44 tokens), --system "", lol --seed 5.

Runs of `layerroute train` (--threads 1 --log-every 1 --save-every 0; batch x accum = the
three samples, so every step sees all of them whatever the order):
  qwen2 steps1/2/3        lr 0.01, default biases, batch 3 (each its own cosine schedule)
  qwen2 accum-clip        batch 1 x accum 3, clip 0.02 (active every step), wd 0.1
  qwen2 lambda            lambda 30, lr 0.15, clip 0 (off), biases -0.3 / 0.4: gates flip
  qwen2 split             --bias-outside / --bias-band chosen here from lol's initial w so
                          that the band layer is open for one sample and closed for the
                          others (per-row gating in a padded batch)
  qwen2 split-accum-clip  the same with batch 1 x accum 3, clip 0.05
  qwen2 split-checkpoint  2 steps, --save-every 1, the final write made to fail (a folder in
                          the way of OUT/gates.safetensors), so that train_state/ keeps the
                          step-1 checkpoint: its AdamW moments are (1 - b1) g and (1 - b2) g^2
                          of the clipped step-1 gradient, i.e. the raw gradient is compared
  llama mlp-split-warmup-all  --warmup 1, --loss-tokens all, split gates, MLP LoRA
  llama mlp-steps1        default biases

Check groups (one summary line each; exit 1 on any disagreement):
  render    the tokens / loss masks of the samples (`render --ids`) equal the ChatML built
            here (otherwise every later number would differ for a trivial reason)
  init      adapter / gate tensor names and shapes (docs "Files"); B = 0; b = the band
            pattern (round(8L/24)..round(16L/24) or --band, --bias-band, --bias-outside);
            |A| <= 1/sqrt(in) and |w| <= 1/sqrt(d), spread over that range
  forward   self-check: the reference's LoRA (B = 0) gated forward equals qwen2_reference's
            base-model forward with the same gates
  steps     every logged step (train_log.jsonl: lm_loss, gate_mean, layer_sigma, lr,
            grad_norm), lol's step-1 lm_loss = the base model's loss with those gates
            ("a fresh adapter computes exactly the base model"), and every saved LoRA A / B
            and gate w / b tensor after the run
  moves     after step 1 every A is exactly A0 (1 - lr wd) (its gradient is 0 as B = 0);
            B of a layer closed for every sample so far stays exactly 0, B of an open layer
            moves; the base model file is unchanged
  gates     the open share / mean sigma per layer of the trained adapter on the training
            samples (`layerroute eval --json` layer_open, layer_sigma) against the reference
  optimizer the checkpoint (tensors, exp_avg, exp_avg_sq, per-tensor step counts)
Tolerances. lol computes in float32, and some gradient elements of a tiny random model are
ill-conditioned (AdamW turns even a small gradient into an O(lr) step, so its relative
float32 error shows up in the weights); so each run is also simulated, in float64, from
N_PERTURB copies of the base weights with every value moved by a float32 rounding
(relative 2^-24 N(0,1)), and the spread of those copies measures the float32 noise this
case can carry. An element agrees when |lol - ref| <= 5e-6 max|ref tensor| + 20 spread;
logged values when |lol - ref| <= 1e-5 |ref| + 20 spread. Observed: within 0.4 of these
tolerances. Deliberate faults in the reference (hbar detached, Adam eps 1e-6, lr schedule
one step off, lambda x3, alpha instead of alpha / r, weight decay x2, clip x1.01, no STE
gradient, LM loss as a mean of per-sample means) each exceeded them, in at least one run,
30 to 4e5 times. A gate score within 1e-4 of the tie (float32 may decide otherwise) stops
the comparison of a run with a note. Adam's eps is not in docs/layerroute.md; 1e-8 is the
project default (docs/training.md `optim.eps`) and torch's. Runtime: about 2 minutes on
one core (mostly the float64 reference; lol takes ~30 s of it).
"""
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_st  # noqa: E402
import qwen2_reference as Q  # noqa: E402  (folder builders, ChatML ids, RoPE tables, forward self-check)

TIE = 1e-4
REL = 1e-5          # logged losses, sigmas, lr (plus C_SPREAD x the perturbation spread)
FLOOR = 5e-6        # tensors: of the tensor's largest |value| ...
C_SPREAD = 20.0     # ... plus this many times the element's perturbation spread
N_PERTURB = 2
B1, B2, EPS = 0.9, 0.999, 1e-8

# ---------------------------------------------------------------- autodiff
TAPE = []


class V:
    """a scalar node: d value, g gradient, p parents, l local derivatives d self / d parent"""
    __slots__ = ("d", "g", "p", "l")

    def __init__(self, d, p=(), l=()):
        self.d = d
        self.g = 0.0
        self.p = p
        self.l = l


def node(d, p, l):
    v = V(d, p, l)
    TAPE.append(v)
    return v


def leaf(d):
    return V(d)


def backward(root):
    root.g = 1.0
    for n in reversed(TAPE):
        g = n.g
        if g:
            for p, l in zip(n.p, n.l):
                p.g += l * g


def sigmoid(s):
    return 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s))


# ---------------------------------------------------------------- the model with LoRA and gates
ATT = ("q_proj", "k_proj", "v_proj", "o_proj")


class Model:
    """base weights (floats, frozen) from qwen2_reference.make_weights; trained leaves:
    lora[(i, proj)] = (A [r][in], B [out][r]) and gate (w [L][d], b [L])"""

    def __init__(self, cfg, T, targets, rank, alpha):
        self.cfg = cfg
        self.d = cfg["hidden_size"]
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads") or self.H
        self.hd = cfg.get("head_dim") or self.d // self.H
        self.eps = cfg["rms_norm_eps"]
        self.V = cfg["vocab_size"]
        self.targets, self.rank, self.scale = list(targets), rank, alpha / rank
        M = {k: Q.mat((s, v)) for k, (s, v) in T.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if cfg.get("tie_word_embeddings") else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        self.layers = []
        for i in range(self.L):
            p = "model.layers.%d." % i
            ly = {"in": M[p + "input_layernorm.weight"], "post": M[p + "post_attention_layernorm.weight"]}
            for proj in Q.PROJ:
                sub = "self_attn." if proj in ATT else "mlp."
                ly[proj] = M[p + sub + proj + ".weight"]
                ly[proj + ".b"] = M.get(p + sub + proj + ".bias")
            self.layers.append(ly)
        self.cos, self.sin = Q.rope_tables(cfg, self.hd, cfg["max_position_embeddings"])
        self.lora = {}
        self.gw = self.gb = None

    def io(self, proj):
        d, F = self.d, self.cfg["intermediate_size"]
        H, Hkv, hd = self.H, self.Hkv, self.hd
        return {"q_proj": (d, H * hd), "k_proj": (d, Hkv * hd), "v_proj": (d, Hkv * hd), "o_proj": (H * hd, d),
                "gate_proj": (d, F), "up_proj": (d, F), "down_proj": (F, d)}[proj]

    def peft_name(self, i, proj, which):
        sub = "self_attn." if proj in ATT else "mlp."
        return "base_model.model.model.layers.%d.%s%s.lora_%s.weight" % (i, sub, proj, which)

    def set_params(self, ad, gates):
        """from safetensors dicts (adapter_model, gates); B may be given as None = zeros"""
        self.lora = {}
        for i in range(self.L):
            for proj in self.targets:
                inn, out = self.io(proj)
                A = ad[self.peft_name(i, proj, "A")][1]
                Bt = ad.get(self.peft_name(i, proj, "B"))
                Bv = Bt[1] if Bt is not None else [0.0] * (out * self.rank)
                self.lora[(i, proj)] = ([[leaf(A[k * inn + j]) for j in range(inn)] for k in range(self.rank)],
                                        [[leaf(Bv[k * self.rank + j]) for j in range(self.rank)] for k in range(out)])
        w, b = gates["gates.weight"][1], gates["gates.bias"][1]
        self.gw = [[leaf(w[i * self.d + j]) for j in range(self.d)] for i in range(self.L)]
        self.gb = [leaf(b[i]) for i in range(self.L)]

    def params(self):
        """name -> flat list of leaves (PEFT / gates names)"""
        out = {}
        for (i, proj), (A, B) in sorted(self.lora.items()):
            out[self.peft_name(i, proj, "A")] = [x for r in A for x in r]
            out[self.peft_name(i, proj, "B")] = [x for r in B for x in r]
        out["gates.weight"] = [x for r in self.gw for x in r]
        out["gates.bias"] = list(self.gb)
        return out

    # -- pieces
    def rmsnorm(self, xs, w):
        n = len(xs)
        r = 1.0 / math.sqrt(sum(x.d * x.d for x in xs) / n + self.eps)
        r3n = r * r * r / n
        rn = node(r, xs, [-x.d * r3n for x in xs])
        return [node(wj * x.d * r, (x, rn), (wj * r, wj * x.d)) for wj, x in zip(w, xs)]

    def proj(self, i, name, xs):
        ly = self.layers[i]
        W, b = ly[name], ly[name + ".b"]
        xd = [x.d for x in xs]
        lo = self.lora.get((i, name))
        out = []
        if lo is None:
            for j, row in enumerate(W):
                v = sum(w * x for w, x in zip(row, xd)) + (b[j] if b is not None else 0.0)
                out.append(node(v, xs, row))
            return out
        A, B = lo
        sc = self.scale
        u = []
        for Ar in A:
            u.append(node(sum(a.d * x for a, x in zip(Ar, xd)), list(Ar) + list(xs), xd + [a.d for a in Ar]))
        ud = [x.d for x in u]
        scu = [sc * x for x in ud]
        for j, row in enumerate(W):
            Bj = B[j]
            v = (sum(w * x for w, x in zip(row, xd)) + (b[j] if b is not None else 0.0)
                 + sc * sum(bb.d * x for bb, x in zip(Bj, ud)))
            out.append(node(v, list(xs) + list(Bj) + u, list(row) + scu + [sc * bb.d for bb in Bj]))
        return out

    def rope(self, x, pos):
        c, s = self.cos[pos], self.sin[pos]
        half = len(x) // 2
        out = []
        for j in range(len(x)):
            if j < half:
                o, so = x[j + half], -s[j]
            else:
                o, so = x[j - half], s[j]
            out.append(node(x[j].d * c[j] + o.d * so, (x[j], o), (c[j], so)))
        return out

    def block(self, i, X):
        ly = self.layers[i]
        H, Hkv, hd = self.H, self.Hkv, self.hd
        rep = H // Hkv
        scale = hd ** -0.5
        xs = [self.rmsnorm(h, ly["in"]) for h in X]
        qs, ks, vs = [], [], []
        for pos, x in enumerate(xs):
            q, k, v = self.proj(i, "q_proj", x), self.proj(i, "k_proj", x), self.proj(i, "v_proj", x)
            qs.append([self.rope(q[a * hd:(a + 1) * hd], pos) for a in range(H)])
            ks.append([self.rope(k[a * hd:(a + 1) * hd], pos) for a in range(Hkv)])
            vs.append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
        out = []
        for t, h in enumerate(X):
            att = []
            for a in range(H):
                g = a // rep
                q = qs[t][a]
                qd = [x.d for x in q]
                sc = []
                for u in range(t + 1):
                    k = ks[u][g]
                    kd = [x.d for x in k]
                    sc.append(node(scale * sum(x * y for x, y in zip(qd, kd)), list(q) + list(k),
                                   [scale * y for y in kd] + [scale * x for x in qd]))
                m = max(x.d for x in sc)
                es = []
                for x in sc:
                    e = math.exp(x.d - m)
                    es.append(node(e, (x,), (e,)))
                Z = node(sum(e.d for e in es), es, [1.0] * len(es))
                ps = [node(e.d / Z.d, (e, Z), (1.0 / Z.d, -e.d / (Z.d * Z.d))) for e in es]
                pd = [p.d for p in ps]
                for j in range(hd):
                    vj = [vs[u][g][j] for u in range(t + 1)]
                    att.append(node(sum(p * v.d for p, v in zip(pd, vj)), ps + vj, [v.d for v in vj] + pd))
            ao = self.proj(i, "o_proj", att)
            h2 = [node(x.d + y.d, (x, y), (1.0, 1.0)) for x, y in zip(h, ao)]
            x2 = self.rmsnorm(h2, ly["post"])
            gt, up = self.proj(i, "gate_proj", x2), self.proj(i, "up_proj", x2)
            mid = []
            for gg, uu in zip(gt, up):
                z = gg.d
                sg = sigmoid(z)
                silu = z * sg
                mid.append(node(silu * uu.d, (gg, uu), ((sg * (1 + z * (1 - sg))) * uu.d, silu)))
            dn = self.proj(i, "down_proj", mid)
            out.append([node(x.d + y.d, (x, y), (1.0, 1.0)) for x, y in zip(h2, dn)])
        return out

    def ce_node(self, h, target):
        """cross entropy of the next token `target` from the final state h, one fused node"""
        hn = self.rmsnorm(h, self.norm)
        hd = [x.d for x in hn]
        z = [sum(w * x for w, x in zip(row, hd)) for row in self.lm_head]
        m = max(z)
        e = [math.exp(v - m) for v in z]
        Z = sum(e)
        loss = m + math.log(Z) - z[target]
        gl = [0.0] * self.d
        for k, row in enumerate(self.lm_head):
            c = e[k] / Z - (1.0 if k == target else 0.0)
            if c:
                for j in range(self.d):
                    gl[j] += c * row[j]
        return node(loss, hn, gl)

    def sample(self, toks, mask):
        """forward of one sample: (list of CE nodes of its targets, sigma nodes [L],
        scores s [L] floats, gate decisions [L])"""
        X = [[leaf(v) for v in self.embed[t]] for t in toks]
        n = len(X)
        sig, scores, opens = [], [], []
        for i in range(self.L):
            hbar = [node(sum(h[j].d for h in X) / n, [h[j] for h in X], [1.0 / n] * n) for j in range(self.d)]
            w, b = self.gw[i], self.gb[i]
            s = node(sum(a.d * x.d for a, x in zip(w, hbar)) + b.d, list(w) + hbar + [b],
                     [x.d for x in hbar] + [a.d for a in w] + [1.0])
            sg = sigmoid(s.d)
            sn = node(sg, (s,), (sg * (1.0 - sg),))
            hard = 1.0 if s.d > 0 else 0.0
            ghat = node(hard, (sn,), (1.0,))
            Y = self.block(i, X)
            X = [[node(x.d + hard * (y.d - x.d), (x, y, ghat), (1.0 - hard, hard, y.d - x.d))
                  for x, y in zip(hx, hy)] for hx, hy in zip(X, Y)]
            sig.append(sn)
            scores.append(s.d)
            opens.append(hard > 0)
        ces = [self.ce_node(X[j - 1], toks[j]) for j in range(1, n) if mask[j]]
        return ces, sig, scores, opens


# ---------------------------------------------------------------- training reference
def lr_factor(s, N, warm):
    if s < warm:
        return (s + 1) / warm
    p = (s - warm) / (N - warm)
    return (1 + math.cos(math.pi * p)) / 2


class RefTrainer:
    def __init__(self, model, samples, o):
        """samples: [(tokens, mask)]; o: dict lr, wd, lam, clip, steps, warmup"""
        self.m, self.samples, self.o = model, samples, o
        self.state = {}  # name -> (m list, v list)
        self.t = 0

    def step(self):
        """one optimizer step over every sample; returns the step's log dict"""
        m, o = self.m, self.o
        del TAPE[:]
        P = m.params()
        for vals in P.values():
            for x in vals:
                x.g = 0.0
        ces, sigs, scores, opens = [], [], [], []
        for toks, mask in self.samples:
            c, sg, sc, op = m.sample(toks, mask)
            ces += c
            sigs.append(sg)
            scores.append(sc)
            opens.append(op)
        S, L = len(self.samples), m.L
        lm = sum(c.d for c in ces) / len(ces)
        gmean = sum(x.d for sg in sigs for x in sg) / (S * L)
        flat = [x for sg in sigs for x in sg]
        loss = node(lm + o["lam"] * gmean, ces + flat, [1.0 / len(ces)] * len(ces) + [o["lam"] / (S * L)] * len(flat))
        backward(loss)
        grads = {k: [x.g for x in vals] for k, vals in P.items()}
        norm = math.sqrt(sum(g * g for gs in grads.values() for g in gs))
        coef = min(1.0, o["clip"] / (norm + 1e-6)) if o["clip"] > 0 else 1.0
        s = self.t
        self.t += 1
        lr = o["lr"] * lr_factor(s, o["steps"], o["warmup"])
        t = self.t
        bc1, bc2 = 1 - B1 ** t, 1 - B2 ** t
        for k, vals in P.items():
            mm, vv = self.state.setdefault(k, ([0.0] * len(vals), [0.0] * len(vals)))
            for j, x in enumerate(vals):
                g = grads[k][j] * coef
                x.d *= 1 - lr * o["wd"]
                mm[j] = B1 * mm[j] + (1 - B1) * g
                vv[j] = B2 * vv[j] + (1 - B2) * g * g
                den = math.sqrt(vv[j]) / math.sqrt(bc2) + EPS
                x.d -= lr / bc1 * mm[j] / den
        del TAPE[:]
        margin = min(abs(x) for sc in scores for x in sc)
        return {"loss": lm, "gate_mean": gmean, "sigma": [sum(sg[i].d for sg in sigs) / S for i in range(L)],
                "lr": lr, "grad_norm": norm, "clip_coef": coef, "opens": opens, "margin": margin,
                "grads": grads}

    def snapshot(self, moments=False):
        """parameters by name; with moments also NAME.exp_avg / NAME.exp_avg_sq (the AdamW
        state as optimizer.safetensors names it, docs/training.md "Outputs")"""
        out = {k: [x.d for x in vals] for k, vals in self.m.params().items()}
        if moments:
            for k, (mm, vv) in self.state.items():
                out[k + ".exp_avg"] = list(mm)
                out[k + ".exp_avg_sq"] = list(vv)
        return out


def decisions(model, samples):
    """per sample the open flags and sigmas of the current parameters (no training)"""
    del TAPE[:]
    out = []
    for toks, mask in samples:
        _, sg, sc, op = model.sample(toks, [0] * len(toks))
        out.append((op, [x.d for x in sg], sc))
    del TAPE[:]
    return out


# ---------------------------------------------------------------- checking
class Checker:
    def __init__(self, lol, work):
        self.lol, self.work = lol, work
        self.failures, self.notes = [], []
        self.groups = {}
        self.calls, self.lol_seconds = 0, 0.0
        self.last_cmd = None
        self.group = None

    def set_group(self, g):
        self.group = g
        self.groups.setdefault(g, [0, 0])

    def run(self, args, expect_rc=0):
        cmd = [self.lol] + [str(a) for a in args]
        env = dict(os.environ, OMP_NUM_THREADS="1", LOL_NUM_THREADS="1")
        t = time.time()
        r = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True, env=env)
        self.lol_seconds += time.time() - t
        self.calls += 1
        self.last_cmd = "cd %s && %s" % (self.work, " ".join(Q._q(c) for c in cmd))
        if expect_rc is not None and r.returncode != expect_rc:
            self.fail("exit status %d (expected %d): %s" % (r.returncode, expect_rc, r.stderr.strip()[-800:]))
        return r

    def ok(self, cond, what, detail="", cmd=None):
        self.groups[self.group][0] += 1
        if not cond:
            self.fail("%s: %s" % (what, detail), cmd)
        return cond

    def fail(self, msg, cmd=None):
        self.groups[self.group][1] += 1
        cmd = cmd or self.last_cmd
        self.failures.append((self.group, msg, cmd))
        print("  DISAGREE [%s] %s\n    repro: %s" % (self.group, msg, cmd), flush=True)

    def close(self, what, got, want, rtol, atol=0.0):
        good = got is not None and want is not None and abs(got - want) <= atol + rtol * abs(want)
        return self.ok(good, what, "lol %r, reference %r" % (got, want))

    def note(self, msg):
        self.notes.append(msg)
        print("  note: " + msg, flush=True)


# ---------------------------------------------------------------- cases
def make_samples():
    return [
        {"question": "2+3?", "answer": "5 ok"},
        {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"},
                      {"role": "assistant", "content": "yo"}, {"role": "user", "content": "sum 1 2"},
                      {"role": "assistant", "content": "3."}]},
        {"question": "capital of France?", "answer": "Paris"},
    ]


CASES = [
    # tag, config changes, weight seed, targets, rank, alpha, band args (None = default), tied
    dict(tag="qwen2", arch="Qwen2ForCausalLM", layers=4, seed=34, targets=list(ATT), rank=3, alpha=5.0,
         band=[1, 1, 4], extra_cfg={}),
    dict(tag="llama", arch="LlamaForCausalLM", layers=3, seed=31, targets=list(Q.PROJ), rank=2, alpha=3.0,
         band=None, extra_cfg={"tie_word_embeddings": True}),
]


def runs_for(tag):
    """(run name, case tag, options) -- options of `layerroute train` that the reference models"""
    base = dict(lr=0.01, wd=0.01, lam=1.0, clip=1.0, warmup=0, batch=3, accum=1, bias_band=None,
                bias_out=None, loss_tokens="assistant")
    if tag == "qwen2":
        out = [("steps%d" % n, dict(base, steps=n)) for n in (1, 2, 3)]
        out.append(("accum-clip", dict(base, steps=3, batch=1, accum=3, clip=0.02, wd=0.1)))
        out.append(("lambda", dict(base, steps=3, lam=30.0, lr=0.15, bias_band=-0.3, bias_out=0.4, clip=0.0)))
        out.append(("split", dict(base, steps=3, split=True)))
        out.append(("split-accum-clip", dict(base, steps=2, batch=1, accum=3, clip=0.05, split=True)))
        out.append(("split-checkpoint", dict(base, steps=2, split=True, ckpt=True)))
        return out
    return [("mlp-split-warmup-all", dict(base, steps=3, warmup=1, loss_tokens="all", lr=0.02, split=True)),
            ("mlp-steps1", dict(base, steps=1, lr=0.02))]


def train_args(case, o, out, data="train.jsonl"):
    a = ["layerroute", "train", "--base", "base_" + case["tag"], "--data", data, "--out", out,
         "--seed", 5, "--steps", o["steps"], "--batch", o["batch"], "--accum", o["accum"], "--lr", repr(o["lr"]),
         "--weight-decay", repr(o["wd"]), "--lambda", repr(o["lam"]), "--clip", repr(o["clip"]),
         "--warmup", o["warmup"], "--rank", case["rank"], "--alpha", repr(case["alpha"]),
         "--targets", ",".join(case["targets"]), "--system", "", "--max-len", 128, "--loss-tokens", o["loss_tokens"],
         "--threads", 1, "--no-progress", "--save-every", 1 if o.get("ckpt") else 0, "--log-every", 1, "--overwrite"]
    if case["band"]:
        a += ["--band"] + case["band"]
    if o["bias_band"] is not None:
        a += ["--bias-band", repr(o["bias_band"])]
    if o["bias_out"] is not None:
        a += ["--bias-outside", repr(o["bias_out"])]
    return a


def band_bias(case, o, L):
    first, last, depth = case["band"] or (8, 16, 24)
    lo, hi = round(first * L / depth), round(last * L / depth)
    bb = -1.0 if o["bias_band"] is None else o["bias_band"]
    bo = 1.0 if o["bias_out"] is None else o["bias_out"]
    return [bb if lo <= i <= hi else bo for i in range(L)]


def choose_split(model, samples, case, ad0, g0, L):
    """--bias-outside / --bias-band for which every layer outside the band is open and the
    first band layer is open for some samples and closed for others (the threshold in the
    widest gap of their scores w . hbar), every score at least 0.02 from the tie. Returns
    (bias_band, bias_outside, decisions) or None."""
    lo = band_bias(case, dict(bias_band=0.0, bias_out=1.0), L).index(0.0)
    for bo in (2.5, 4.0, 6.0):
        g = dict(g0)
        g["gates.bias"] = ([L], band_bias(case, dict(bias_band=0.0, bias_out=bo), L), "F32")
        model.set_params(ad0, g)
        u = sorted(sc[lo] for _, _, sc in decisions(model, samples))
        gap, mid = max((u[k + 1] - u[k], (u[k + 1] + u[k]) / 2) for k in range(len(u) - 1))
        if gap < 0.05:
            continue
        bb = round(-mid, 3)
        g["gates.bias"] = ([L], band_bias(case, dict(bias_band=bb, bias_out=bo), L), "F32")
        model.set_params(ad0, g)
        dec = decisions(model, samples)
        margin = min(abs(x) for _, _, sc in dec for x in sc)
        outside_open = all(op[i] for op, _, _ in dec for i in range(L) if g["gates.bias"][1][i] == bo)
        if margin >= 0.02 and outside_open:
            return bb, bo, dec
    return None


def make_weights(cfg, seed):
    """qwen2_reference's random weights with q_proj / k_proj scaled by 0.5: its sharper
    attention makes some LoRA gradients of this tiny model ill-conditioned (a 6e-8 relative
    perturbation of the embeddings moved the gradient norm by up to 6e-5), which float32
    cannot reproduce to 1e-5"""
    T = Q.make_weights(cfg, seed)
    return {k: (s, [f32(0.5 * v) for v in vals]) if k.endswith(("q_proj.weight", "k_proj.weight")) else (s, vals)
            for k, (s, vals) in T.items()}


def read_log(path):
    rows = []
    for line in open(path):
        if line.strip():
            rows.append(json.loads(line))
    return rows


def log_get(row, *keys):
    for k in keys:
        if k in row:
            return row[k]
    return None


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def f32(x):
    return Q.f32(x)


def compare_tensors(ck, what, got, want, spread, cmd):
    """per element |lol - ref| <= FLOOR max |ref tensor| + C spread (module docstring)"""
    missing = [k for k in want if k not in got]
    ck.ok(not missing, "%s: tensors present" % what, "missing %s" % missing[:4], cmd)
    worst_name, worst = None, (0.0, 0.0)
    for k, w in want.items():
        if k not in got:
            continue
        g = got[k][1]
        if len(g) != len(w):
            ck.ok(False, "%s %s size" % (what, k), "%d vs %d" % (len(g), len(w)), cmd)
            continue
        amax = max(max(abs(b) for b in w), 1e-30)
        ratio = [abs(a - b) / (FLOOR * amax + C_SPREAD * sp) for a, b, sp in zip(g, w, spread[k])]
        j = max(range(len(w)), key=lambda i: ratio[i])
        rel = max(abs(a - b) for a, b in zip(g, w)) / amax
        if (ratio[j], rel) > worst:
            worst, worst_name = (ratio[j], rel), k
        ck.ok(ratio[j] <= 1.0, "%s %s" % (what, k), "element %d: lol %.9g, reference %.9g (|diff| %.3g = %.3g of "
              "max|ref|; tolerance %.3g, perturbation spread %.3g)" %
              (j, g[j], w[j], abs(g[j] - w[j]), abs(g[j] - w[j]) / amax, FLOOR * amax + C_SPREAD * spread[k][j],
               spread[k][j]), cmd)
    if worst_name:
        print("  ok %-40s worst %s: |diff| / tolerance %.2f, max |diff| / max|ref| %.1e" %
              (what, worst_name.replace("base_model.model.model.", ""), worst[0], worst[1]), flush=True)


def check_checkpoint(ck, w, out, o, L, snaps, spreads, params, cmd):
    """the checkpoint an unfinished training left (step N - 1 of N): its adapter, gates and
    AdamW moments (exp_avg = the bias-uncorrected m, exp_avg_sq = v, per tensor `step`)"""
    rel = open(os.path.join(w, out, "train_state", "latest")).read().strip()
    cdir = os.path.join(w, out, "train_state", rel)
    st = json.load(open(os.path.join(cdir, "trainer_state.json")))
    k = st.get("step")
    ck.ok(k == o["steps"] - 1, "%s: latest checkpoint is of step N - 1" % out, "step %r" % k, cmd)
    if not isinstance(k, int) or not 1 <= k <= len(snaps):
        return
    got = read_st(os.path.join(cdir, "adapter_model.safetensors"))
    got.update(read_st(os.path.join(cdir, "gates.safetensors")))
    opt = read_st(os.path.join(cdir, "optimizer.safetensors"))
    want = {n: v for n, v in snaps[k - 1].items() if n in params}
    compare_tensors(ck, "%s checkpoint step %d tensors" % (out, k), got, want, spreads[k - 1], cmd)
    mom = {n: v for n, v in snaps[k - 1].items() if n not in params}
    compare_tensors(ck, "%s checkpoint step %d AdamW moments" % (out, k), opt, mom, spreads[k - 1], cmd)
    steps = {n[:-len(".step")]: v[1] for n, v in opt.items() if n.endswith(".step")}
    ck.ok(sorted(steps) == sorted(params) and all(v == [k] for v in steps.values()),
          "%s: every trained tensor (A's gradient is 0 at step 1, not absent) has step count %d" % (out, k),
          str({n: v for n, v in list(steps.items())[:3]}), cmd)
    extra = sorted(n for n in opt if not n.endswith((".step", ".exp_avg", ".exp_avg_sq")))
    ck.ok(not extra, "%s: optimizer.safetensors holds only step / exp_avg / exp_avg_sq" % out, str(extra[:4]), cmd)
    print("  ok checkpoint step %d: adapter, gates, AdamW moments and step counts" % k, flush=True)


def perturbed(T, seed):
    """the base weights with every value moved by a float32 rounding error (relative 2^-24 N(0,1))"""
    rng = random.Random(seed)
    return {k: (s, [v * (1 + 2 ** -24 * rng.gauss(0, 1)) for v in vals]) for k, (s, vals) in T.items()}


def run_case(ck, case):
    tag, w = case["tag"], ck.work
    cfg = Q.make_config(case["arch"], num_hidden_layers=case["layers"], hidden_size=8, intermediate_size=12,
                        num_attention_heads=2, num_key_value_heads=1, rope_theta=1000.0, **case["extra_cfg"])
    T = make_weights(cfg, case["seed"])
    base = os.path.join(w, "base_" + tag)
    Q.write_folder(base, cfg, T)
    base_hash = sha(os.path.join(base, "model.safetensors"))
    data = make_samples()
    with open(os.path.join(w, "train.jsonl"), "w") as f:
        for row in data:
            f.write(json.dumps(row) + "\n")
    L, d = cfg["num_hidden_layers"], cfg["hidden_size"]
    chat = [Q.chatml_ids(s, None) for s in data]

    # render: tokens and masks
    ck.set_group("render")
    print("[%s render]" % tag, flush=True)
    r = ck.run(["layerroute", "render", "--data", "train.jsonl", "--base", base, "--ids", "--count", len(data),
                "--system", "", "--max-len", 128])
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    for k, (t, m, pl) in enumerate(chat):
        got = rows[k] if k < len(rows) else {}
        ck.ok((got.get("tokens"), got.get("loss_mask")) == (t, m), "render --ids sample %d" % k,
              "lol %s / %s, reference %s / %s" % (got.get("tokens"), got.get("loss_mask"), t, m))
    print("  samples: %s tokens, %s assistant targets" % ([len(t) for t, _, _ in chat], [sum(m) for _, m, _ in chat]))

    runs = runs_for(tag)
    # the initial state: a run with --lr 0 (one per distinct bias setting: b is predicted, A / w read)
    ck.set_group("init")
    print("[%s init]" % tag, flush=True)
    o0 = dict(runs[0][1], lr=0.0, steps=1)
    out0 = "init_" + tag
    r = ck.run(train_args(case, o0, out0))
    if r.returncode != 0:
        ck.note("%s: `layerroute train --lr 0` refused; the initial state is not observable this way" % tag)
        return
    ad0 = read_st(os.path.join(w, out0, "adapter_model.safetensors"))
    g0 = read_st(os.path.join(w, out0, "gates.safetensors"))
    model = Model(cfg, T, case["targets"], case["rank"], case["alpha"])
    want_names = sorted([(model.peft_name(i, p, "A"), [case["rank"], model.io(p)[0]]) for i in range(L)
                         for p in case["targets"]] +
                        [(model.peft_name(i, p, "B"), [model.io(p)[1], case["rank"]]) for i in range(L)
                         for p in case["targets"]])
    ck.ok(sorted((k, v[0]) for k, v in ad0.items()) == want_names, "adapter tensor names and shapes",
          "lol %s" % sorted((k, v[0]) for k, v in ad0.items())[:6])
    ck.ok(g0.get("gates.weight", [None])[0] == [L, d] and g0.get("gates.bias", [None])[0] == [L],
          "gates.safetensors shapes", str({k: v[0] for k, v in g0.items()}))
    ck.ok(all(v == 0.0 for k, t in ad0.items() if k.endswith("lora_B.weight") for v in t[1]),
          "B = 0 at the start (paper 3.1)", "")
    for k, t in ad0.items():
        if k.endswith("lora_A.weight"):
            bound = 1 / math.sqrt(t[0][1])
            mx = max(abs(v) for v in t[1])
            ck.ok(mx <= bound * (1 + 1e-6) and mx > 0.3 * bound, "A ~ U(+-1/sqrt(in)) %s" % k,
                  "max |A| %.4g, bound %.4g" % (mx, bound))
    mx = max(abs(v) for v in g0["gates.weight"][1])
    ck.ok(mx <= (1 + 1e-6) / math.sqrt(d) and mx > 0.3 / math.sqrt(d), "w ~ U(+-1/sqrt(d))",
          "max |w| %.4g, bound %.4g" % (mx, 1 / math.sqrt(d)))
    ck.ok(g0["gates.bias"][1] == band_bias(case, o0, L), "b = biased init (paper 3.4, band scaled to L=%d)" % L,
          "lol %s, reference %s" % (g0["gates.bias"][1], band_bias(case, o0, L)))
    print("  ok init: b = %s, A and w within their bounds, B = 0" % g0["gates.bias"][1], flush=True)

    # forward self-check at step 1: the reference forward (B = 0) equals the base model
    ck.set_group("forward")
    samples = []
    for t, m, _ in chat:
        samples.append((t, m))
    model.set_params(ad0, g0)
    dec0 = decisions(model, samples)
    base_ref = Q.Ref(base, weights=Q.as_weights(T, "F32"))
    tot, cnt, worst = 0.0, 0, 0.0
    del TAPE[:]
    for (t, m), (op, _, _) in zip(samples, dec0):
        logits, _, _, _ = base_ref.prefill(t, "forced", op)
        ces, _, _, _ = model.sample(t, m)
        k = 0
        for j in range(1, len(t)):
            if m[j]:
                want = -Q.log_softmax(logits[j - 1])[t[j]]
                worst = max(worst, abs(ces[k].d - want))
                tot += want
                cnt += 1
                k += 1
        del TAPE[:]
    ck.ok(worst < 1e-9, "reference self-check: LoRA(B=0) gated forward = qwen2_reference base forward",
          "max |CE difference| %.3g" % worst)

    def base_loss(smp, opens):
        """mean CE of the base model (no LoRA) with the given gate decisions"""
        tot, cnt = 0.0, 0
        for (t, m), op in zip(smp, opens):
            logits, _, _, _ = base_ref.prefill(t, "forced", op)
            for j in range(1, len(t)):
                if m[j]:
                    tot -= Q.log_softmax(logits[j - 1])[t[j]]
                    cnt += 1
        return tot / cnt
    print("  step-1 gates (per sample): %s; base LM loss %.9f" %
          (["".join("1" if x else "0" for x in op) for op, _, _ in dec0], tot / cnt), flush=True)

    init = {k: list(v[1]) for k, v in ad0.items()}
    init.update({"gates.weight": list(g0["gates.weight"][1])})
    for name, o in runs:
        ck.set_group("steps")
        shown = {k: v for k, v in o.items() if v is not None and k not in ("split", "ckpt")}
        print("[%s %s] %s" % (tag, name, shown), flush=True)
        out = "run_%s_%s" % (tag, name)
        if o.get("split"):
            sp = choose_split(model, samples, case, ad0, g0, L)
            if sp is None:
                ck.note("%s %s: no bias setting splits the band layer's samples; run skipped" % (tag, name))
                continue
            o = dict(o, bias_band=sp[0], bias_out=sp[1])
            print("  --bias-band %r --bias-outside %r: step-1 gates %s" %
                  (sp[0], sp[1], ["".join("1" if x else "0" for x in op) for op, _, _ in sp[2]]), flush=True)
        t0 = time.time()
        if o.get("ckpt"):
            # a training whose final write fails leaves its latest checkpoint (docs/layerroute.md
            # "Files": train_state/ "only while a training is unfinished"): a directory in
            # the way of OUT/gates.safetensors makes the final write fail
            shutil.rmtree(os.path.join(w, out), ignore_errors=True)
            os.makedirs(os.path.join(w, out, "gates.safetensors", "x"))
            r = ck.run(train_args(case, o, out), expect_rc=None)
        else:
            r = ck.run(train_args(case, o, out))
        t_lol = time.time() - t0
        cmd = ck.last_cmd
        if o.get("ckpt"):
            latest = os.path.join(w, out, "train_state", "latest")
            if r.returncode == 0 or not os.path.exists(latest):
                ck.note("%s %s: no checkpoint of an unfinished training to read (exit %d): optimizer state not "
                        "checked" % (tag, name, r.returncode))
                continue
            shutil.move(os.path.join(w, out, "train_log.jsonl.partial"), os.path.join(w, out, "train_log.jsonl"))
        elif r.returncode != 0:
            continue
        g0b = dict(g0)
        g0b["gates.bias"] = ([L], band_bias(case, o, L), "F32")
        model.set_params(ad0, g0b)
        tmask = [(t, [0] + [1] * (len(t) - 1)) if o["loss_tokens"] == "all" else (t, m) for t, m in samples]
        t0 = time.time()
        tr = RefTrainer(model, tmask, o)
        logs, snaps = [], []
        for _ in range(o["steps"]):
            logs.append(tr.step())
            snaps.append(tr.snapshot(True))
        # the same training from float32-rounding-perturbed base weights: how much float32
        # noise this case's numbers can carry
        p_logs, p_snaps = [], []
        for k in range(N_PERTURB):
            pm = Model(cfg, perturbed(T, 100 + k), case["targets"], case["rank"], case["alpha"])
            pm.set_params(ad0, g0b)
            ptr = RefTrainer(pm, tmask, o)
            p_logs.append([])
            p_snaps.append([])
            for _ in range(o["steps"]):
                p_logs[-1].append(ptr.step())
                p_snaps[-1].append(ptr.snapshot(True))
        del pm, ptr
        spreads = [{k: [max(abs(ps[n][k][j] - v) for ps in p_snaps) for j, v in enumerate(vals)]
                    for k, vals in snaps[n].items()} for n in range(o["steps"])]
        params = set(tr.snapshot())
        want = {k: v for k, v in snaps[-1].items() if k in params}
        spread = spreads[-1]
        print("  (lol %.1f s, reference %.1f s with %d perturbed copies)" % (t_lol, time.time() - t0, N_PERTURB),
              flush=True)
        got_log = read_log(os.path.join(w, out, "train_log.jsonl"))
        ck.ok(len(got_log) == o["steps"], "train_log.jsonl has one line per step (--log-every 1)",
              "%d lines for %d steps" % (len(got_log), o["steps"]), cmd)
        errs = {}

        def close_log(what, got, ref, sp):
            good = isinstance(got, (int, float)) and abs(got - ref) <= REL * abs(ref) + C_SPREAD * sp + 1e-15
            if good:
                errs[what] = max(errs.get(what, 0.0), abs(got - ref) / (REL * abs(ref) + C_SPREAD * sp + 1e-15))
            return ck.ok(good, pre + " " + what, "lol %r, reference %r (perturbation spread %.2g)" % (got, ref, sp),
                         cmd)
        for s, (ref, row) in enumerate(zip(logs, got_log)):
            if min([ref["margin"]] + [pl[s]["margin"] for pl in p_logs]) < TIE:
                ck.note("%s %s step %d: a gate score within %.2g of the tie: this step and the tensors not compared" %
                        (tag, name, s + 1, ref["margin"]))
                break
            if any(pl[s]["opens"] != ref["opens"] for pl in p_logs):
                ck.note("%s %s step %d: the perturbed reference decides other gates: not compared" % (tag, name, s + 1))
                break
            pre = "%s %s step %d" % (tag, name, s + 1)
            ck.ok(log_get(row, "step") == s + 1, pre + " step number", str(row.get("step")), cmd)
            for key, lk in (("loss", "lm_loss"), ("gate_mean", "gate_mean"), ("grad_norm", "grad_norm"), ("lr", "lr")):
                sp = max(abs(pl[s][key] - ref[key]) for pl in p_logs)
                close_log(key, log_get(row, lk), ref[key], sp)
            sig = log_get(row, "layer_sigma")
            ck.ok(isinstance(sig, list) and len(sig) == L, pre + " layer_sigma has one value per layer", str(sig), cmd)
            for i in range(L if isinstance(sig, list) and len(sig) == L else 0):
                sp = max(abs(pl[s]["sigma"][i] - ref["sigma"][i]) for pl in p_logs)
                close_log("sigma[%d]" % i, sig[i], ref["sigma"][i], sp)
            print("  step %d: loss %.6f gate_mean %.6f lr %.4g grad_norm %.5g (clip coef %.3g) gates %s" %
                  (s + 1, ref["loss"], ref["gate_mean"], ref["lr"], ref["grad_norm"], ref["clip_coef"],
                   ["".join("1" if x else "0" for x in op) for op in ref["opens"]]), flush=True)
            if s == 0:
                bl = base_loss(tmask, ref["opens"])
                ck.close(pre + " LM loss = the base model's with these gates (B = 0)", log_get(row, "lm_loss"), bl, REL)
        else:
            worst = max(errs.items(), key=lambda kv: kv[1]) if errs else ("-", 0.0)
            print("  ok log (loss, gate_mean, grad_norm, lr, layer_sigma): worst %s at %.2f of its tolerance" % worst,
                  flush=True)
            got = read_st(os.path.join(w, out, "adapter_model.safetensors"))
            if o.get("ckpt"):
                ck.set_group("optimizer")
                want = {k: v for k, v in want.items() if k in got}
                compare_tensors(ck, "%s %s LoRA tensors after %d steps" % (tag, name, o["steps"]), got, want, spread,
                                cmd)
                check_checkpoint(ck, w, out, o, L, snaps, spreads, params, cmd)
                continue
            got.update(read_st(os.path.join(w, out, "gates.safetensors")))
            compare_tensors(ck, "%s %s tensors after %d steps" % (tag, name, o["steps"]), got, want, spread, cmd)
            # which tensors move
            ck.set_group("moves")
            ever_open = [any(lg["opens"][k][i] for lg in logs for k in range(len(samples))) for i in range(L)]
            for (i, proj) in sorted(model.lora):
                kA, kB = model.peft_name(i, proj, "A"), model.peft_name(i, proj, "B")
                if kA not in got or kB not in got:
                    continue
                if o["steps"] == 1:
                    fac = 1 - o["lr"] * lr_factor(0, 1, o["warmup"]) * o["wd"]
                    dev = max(abs(a - f32(b * fac)) for a, b in zip(got[kA][1], init[kA]))
                    ck.ok(dev <= 2 ** -22 * max(abs(b) for b in init[kA]), "%s %s step 1: %s = A0 (1 - lr wd)"
                          % (tag, name, kA), "max deviation %.3g" % dev, cmd)
                if not ever_open[i]:
                    ck.ok(all(v == 0.0 for v in got[kB][1]), "%s %s: layer %d closed for every sample: %s stays 0"
                          % (tag, name, i, kB), "max |B| %.3g" % max(abs(v) for v in got[kB][1]), cmd)
                else:
                    ck.ok(any(v != 0.0 for v in got[kB][1]), "%s %s: layer %d open: %s moved" % (tag, name, i, kB),
                          "", cmd)
            ck.ok(sha(os.path.join(base, "model.safetensors")) == base_hash, "base model file unchanged", "", cmd)
            print("  ok moves: layers ever open %s" % ever_open, flush=True)
            # gates: the trained adapter's decisions on the training samples, by lol's own eval
            ck.set_group("gates")
            dec = decisions(model, [(t, m) for t, m in samples])
            margin = min(abs(x) for _, _, sc in dec for x in sc)
            ej = os.path.join(w, out + "_eval.json")
            r = ck.run(["layerroute", "eval", "--adapter", out, "--data", "train.jsonl", "--samples", 0,
                        "--timing-samples", 0, "--json", ej, "--threads", 1])
            if r.returncode == 0:
                res = json.load(open(ej))
                want_open = [sum(op[i] for op, _, _ in dec) / len(dec) for i in range(L)]
                want_sig = [sum(sg[i] for _, sg, _ in dec) / len(dec) for i in range(L)]
                if margin < TIE:
                    ck.note("%s %s: a final gate score within %.2g of the tie: decisions not compared" %
                            (tag, name, margin))
                else:
                    ck.ok([round(v, 9) for v in res.get("layer_open", [])] == [round(v, 9) for v in want_open],
                          "%s %s eval layer_open" % (tag, name), "lol %s, reference %s" %
                          (res.get("layer_open"), want_open))
                ls = res.get("layer_sigma") or []
                ck.ok(len(ls) == L and all(abs(a - b) <= REL * b for a, b in zip(ls, want_sig)),
                      "%s %s eval layer_sigma" % (tag, name), "lol %s, reference %s" % (ls, want_sig))
                print("  ok gates: layer_open %s" % ["%.3g" % v for v in want_open], flush=True)


def check(lol, work):
    t0 = time.time()
    work = os.path.abspath(work)
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), work)
    for case in CASES:
        run_case(ck, case)
    dt = time.time() - t0
    print()
    for g, (n, bad) in ck.groups.items():
        print("%-8s %4d checks, %d disagreements" % (g, n, bad))
    print("%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    if ck.failures:
        print("%d DISAGREEMENTS:" % len(ck.failures))
        for g, msg, cmd in ck.failures:
            print("- [%s] %s\n    %s" % (g, msg, cmd))
        return 1
    print("all agree")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build a tiny base model, train with lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))


if __name__ == "__main__":
    main()
