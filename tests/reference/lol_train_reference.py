#!/usr/bin/env python3
"""An independent check of what a few steps of `lol train` do beyond autograd, in pure
Python (stdlib only).

Provenance: written by a reviewer from the paper (shared/seeds/000_8d63fd016cd52d41.txt:
Algorithm 1, 3.2.2 "The Router", 3.3 "Increasing Depth During Training", Appendix A,
C.3/C.4 on the loss of the task data), docs/training.md, docs/architecture.md,
docs/checkpoint-format.md, docs/routing-paths.md, docs/tasks.md and the `--help` texts,
WITHOUT reading src/. The forward pass is the float64 reference lol_reference.py of this
folder (imported, not modified); everything about training is reimplemented here.

  python3 tests/reference/lol_train_reference.py check --lol build/lol --work /tmp/x

What it checks (exit status 1 on any disagreement, 0 when all agree; a line per check):

1. Loss-free load balancing (paper App. A: rho_k = argmax_m(a_{k,m} + b_m), alpha_k =
   a_{k,rho_k}; Wang et al. 2024, which the paper cites: b_m <- b_m + u sign(mean load -
   load_m) after each step; docs/architecture.md: "window counts accumulate during
   training forwards; update_balance() moves the bias b after each optimizer step";
   docs/training.md "Each step" 4; checkpoint-format.md: `model.balance_bias` [L], "a
   buffer, never trained"; docs/baselines.md for the MoE prelude/coda, per token):
   * `expert_load` in metrics.jsonl equals the number of windows, summed over every
     routed depth run and every sequence of the step, whose noise-free top-1 of a + b is
     expert m, recomputed in float64 from the weights and bias the step started from (the
     previous checkpoint, or the initial model); padding makes no windows; in packed rows
     windows restart per document;
   * the checkpointed bias after step k is float32(b_{k-1} + u sign(mean - load_k)), mean
     = total / L, in runs with a real learning rate and weight decay (so the bias got no
     gradient and no decay, and has no optimizer state); the bias updated after step k
     is the one step k+1 routes with; sign(0) = 0 (a library of one expert: the bias
     never moves); the evaluation forwards after each step add no load;
   * with gradient accumulation the loads of all micro-batches of the step are summed;
   * with router noise on, the bias follows the logged (noisy) loads, the loads still sum
     to the number of windows, the training forward differs from the noise-free one and
     the evaluation (`valid_loss`) is the noise-free one;
   * MoE prelude/coda (`prelude_coda_experts`): `prelude_coda_expert_load` per layer
     (prelude then coda) = (token, expert) pairs of the noise-free top-k of p + b over
     every token, and each layer's `mlp.balance_bias` follows the same rule.
2. The loss (docs/training.md "Data and targets", docs/tasks.md, paper C.3/C.4: loss only
   over the solving steps and the answer): the logged training loss and `valid_loss` equal
   the float64 mean cross entropy over targets t+1 with loss_mask[t+1] = 1 inside the
   same document (all targets for text); `lol eval lm` on a checkpoint saved while growing
   counts the same targets and runs the depth that checkpoint trained at.
3. What the optimizer touches (docs/training.md "Optimizers": "a parameter without a
   gradient in a step (an expert no window chose, FiLM of a depth not yet grown) is not
   touched: no decay, no state change"): between consecutive checkpoints a library (or
   MoE) expert changes iff its logged load was > 0; FiLM, the untied router and the
   depth-embedding row of depth l change iff l <= the active depth; every other
   parameter changes; with learning rate 0 nothing but the bias changes; where
   optimizer.safetensors holds per-tensor `.step` counters they count exactly the steps
   in which the tensor had a gradient. A run resumed from step 4 ends bit-identical
   (bias included) to the uninterrupted one (docs/training.md "Resume and determinism").
4. Growing (paper 3.3, 4.2; docs/training.md "Growing"): `active_depth` of every step
   equals min(D, start + floor((D - start + 1) f(s / G))), G = ceil(fraction N), s the
   0-based step (metrics step s + 1), f = 1 - sqrt(1 - x) (`1-sqrt`), sqrt(x) (`sqrt`)
   or x (`linear`, no formula in the docs), D from step G on; trainer_state.json records
   the depth of the checkpoint's last step and `lol forward` on that checkpoint runs it.

Runs (each a few steps of a tiny model, 1 thread): G (8 steps growing 1 -> 4, real lr,
untied routers, evaluation every step), GR (G resumed at step 4), GA (grad_accum 2), N
(noise 1.0, lr 0), L1 (one expert), P (four text documents packed into one row, shared
router), M (MoE prelude/coda), S (four growing schedules, 30 steps each, lr 0).
Data: a 4x4 maze dataset with exactly one puzzle (5 sequences: one batch) in the train
split and one in the valid split, so the batch of every step is the whole train split
whatever the data order; for P one packed row holds exactly all the documents. Models:
every tensor randomised (biases, FiLM and depth embeddings included) so that routing is
spread out and all of them matter. A decision whose best and runner-up a + b are closer
than 1e-4 (float32 vs float64) is reported as a near tie, not as a failure.
Runtime: about 1-1.5 minutes on one core.
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lol_reference import LoL  # noqa: E402  (the float64 forward)
from safetensors_io import read_st, write_st  # noqa: E402

TIE = 1e-4          # a+b margin below which float32 may decide otherwise
LOSS_REL = 2e-5     # float32 training loss vs float64 reference
OUTPUTS = ["data", "text_data", "text_data.txt", "init", "runs", "fwd.safetensors"]  # what check() writes in --work

# ---------------------------------------------------------------- safetensors
def write_st_f32(path, tensors):
    """tensors: name -> (shape, flat values), stored as F32"""
    write_st(path, {k: (shape, vals, "F32") for k, (shape, vals) in tensors.items()})


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sign(x):
    return (x > 0) - (x < 0)


# ---------------------------------------------------------------- running lol
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOL_NUM_THREADS="1")


def run(cmd, ok=(0,)):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if r.returncode not in ok:
        raise RuntimeError("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def load_split(data_dir, split):
    """Sequences of a split: dicts tokens, loss_mask, router_only (positions), prompt_len.
    Text shards (`lol corpus`) have no loss_mask / router_only / prompt_len: every target
    counts, no router-only token, no prompt window."""
    meta = json.load(open(os.path.join(data_dir, "dataset.json")))
    seqs = []
    for shard in meta["splits"].get(split, []):
        t = read_st(os.path.join(data_dir, shard))
        tok, off = t["tokens"][1], t["offsets"][1]
        n = len(tok)
        lm = t["loss_mask"][1] if "loss_mask" in t else [1] * n
        ro = t["router_only"][1] if "router_only" in t else [0] * n
        pl = t["prompt_len"][1] if "prompt_len" in t else [0] * (len(off) - 1)
        for i in range(len(off) - 1):
            a, b = off[i], off[i + 1]
            seqs.append(dict(tokens=tok[a:b], loss_mask=lm[a:b], prompt_len=pl[i],
                             router_only=[j for j in range(b - a) if ro[a + j]]))
    return seqs


def metrics(run_dir):
    steps, evals = {}, {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        d = json.loads(line)
        (evals if "valid_loss" in d else steps)[d["step"]] = d
    return steps, evals


def ckpt(run_dir, k):
    return os.path.join(run_dir, "checkpoints", "step-%06d" % k)


# ---------------------------------------------------------------- the reference step
class RecLoL(LoL):
    """the float64 forward, recording every MoE prelude/coda routing decision (per block
    prefix, in token order: lol_reference's block visits a segment's tokens in order)"""
    rec = None

    def moe_ffn(self, p, u):
        if self.rec is not None:
            E, k = self.c["prelude_coda_experts"], self.c["prelude_coda_top_k"]
            z = [sum(w * x for w, x in zip(row, u)) for row in self.M[p + ".mlp.gate.weight"]]
            mx = max(z)
            e = [math.exp(v - mx) for v in z]
            pr = [v / sum(e) for v in e]
            b = self.M[p + ".mlp.balance_bias"]
            sc = [pr[i] + b[i] for i in range(E)]
            order = sorted(range(E), key=lambda i: (-sc[i], i))
            self.rec.setdefault(p, []).append((order[:k], sc[order[k - 1]] - sc[order[k]] if k < E else float("inf")))
        return super().moe_ffn(p, u)


def moe_layers(c):
    return ["model.prelude.%d" % i for i in range(c["n_prelude"])] + ["model.coda.%d" % i for i in range(c["n_coda"])]


def ref_step(model_dir, seqs, depth, bias=None):
    """Noise-free forward of every sequence (one document per row or per packed-row
    segment: windows, positions and router inputs restart per document) at `depth` routed
    depths, with the balancing bias of `model_dir` (or `bias`). Returns window loads per
    expert summed over depths and sequences, token-weighted and per-depth loads (for the
    alternative rules), MoE prelude/coda loads per layer, the masked mean cross entropy
    (and the all-token mean) and the smallest top-1 (top-k) margins."""
    m = RecLoL(model_dir)
    m.rec = {}
    c = m.c
    L, E = c["library_size"], c.get("prelude_coda_experts", 0)
    if bias is not None:
        m.M["model.balance_bias"] = list(bias)
    b = m.M["model.balance_bias"]
    loads, tok_loads = [0] * L, [0] * L
    per_depth = [[0] * L for _ in range(depth)]
    margin, nwin = float("inf"), 0
    ce_sum, n_t, ce_all, n_all = 0.0, 0, 0.0, 0
    moe = {p: [0] * E for p in moe_layers(c)} if E else {}
    moe_no_ronly = {p: [0] * E for p in moe_layers(c)} if E else {}
    moe_margin = float("inf")
    for s in seqs:
        m.rec = {}
        logits, trace = m.forward(s["tokens"], s["prompt_len"], s["router_only"], depth)
        for l, dec in enumerate(trace):
            win = m.windows(len(s["tokens"]), l + 1, s["prompt_len"])
            for k, (rho, _, a) in enumerate(dec):
                loads[rho] += 1
                per_depth[l][rho] += 1
                tok_loads[rho] += win.count(k)
                nwin += 1
                sc = sorted((a[i] + b[i] for i in range(L)), reverse=True)
                if L > 1:
                    margin = min(margin, sc[0] - sc[1])
        for p, decs in m.rec.items():
            for j, (sel, mg) in enumerate(decs):
                moe_margin = min(moe_margin, mg)
                for e in sel:
                    moe[p][e] += 1
                    if j not in s["router_only"]:
                        moe_no_ronly[p][e] += 1
        toks = s["tokens"]
        for t in range(len(toks) - 1):
            z = logits[t]
            mx = max(z)
            ce = mx + math.log(sum(math.exp(v - mx) for v in z)) - z[toks[t + 1]]
            ce_all += ce
            n_all += 1
            if s["loss_mask"][t + 1]:
                ce_sum += ce
                n_t += 1
    return dict(loads=loads, tok_loads=tok_loads, per_depth=per_depth, margin=margin, windows=nwin,
                loss=ce_sum / max(n_t, 1), targets=n_t, loss_sum=ce_sum, loss_all=ce_all / max(n_all, 1),
                moe=[moe[p] for p in moe_layers(c)] if E else None,
                moe_no_ronly=[moe_no_ronly[p] for p in moe_layers(c)] if E else None, moe_margin=moe_margin)


def bias_rule(prev, loads, u):
    """Wang et al. 2024: b_m <- b_m + u sign(mean load - load_m), in float32"""
    L = len(loads)
    mean = sum(loads) / L
    return [f32(prev[i] + f32(u) * sign(mean - loads[i])) for i in range(L)]


def bias_per_depth(prev, per_depth, u):
    """alternative reading (informational): one sign per routed depth, summed"""
    out = list(prev)
    for row in per_depth:
        mean = sum(row) / len(row)
        out = [out[i] + u * sign(mean - row[i]) for i in range(len(row))]
    return [f32(v) for v in out]


def same(a, b, tol=1e-7):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def expected_depth(s, n_steps, D, start, fraction, shape):
    """docs/training.md "Growing" (s 0-based); returns (depth, on an exact boundary of floor)"""
    if fraction == 0:
        return D, False
    G = math.ceil(fraction * n_steps)
    if s >= G:
        return D, False
    x = s / G
    f = {"1-sqrt": lambda v: 1 - math.sqrt(1 - v), "sqrt": math.sqrt, "linear": lambda v: v}[shape](x)
    y = (D - start + 1) * f
    return min(D, start + int(math.floor(y))), abs(y - round(y)) < 1e-9 and round(y) != 0


# ---------------------------------------------------------------- set-up
MODEL = {"architecture": "lol", "vocab_size": None, "d_model": 16, "n_heads": 2, "n_kv_heads": 2, "ffn_hidden": 24,
         "n_prelude": 1, "n_coda": 1, "library_size": 4, "core_depth": 4, "window": 8, "stride": 3,
         "router_noise_std": 0.0, "balance_update_rate": 0.05, "tie_embeddings": True, "untied_router": True,
         "max_seq_len": 128}


def perturb(src, dst, seed, config_changes=None):
    """copy of checkpoint `src` with every tensor random (float32): routers wide enough to
    spread the router probabilities, non-zero balancing biases, FiLM and depth embeddings
    away from their initial identity / zero"""
    rng = random.Random(seed)
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(config_changes or {})
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    out = {}
    for k, (shape, vals, _) in read_st(os.path.join(src, "model.safetensors")).items():
        n = len(vals)
        if k.endswith("balance_bias"):
            v = [rng.gauss(0, 0.2) for _ in range(n)]
        elif "gamma" in k or "layernorm" in k or k == "model.norm.weight":
            v = [1 + rng.gauss(0, 0.3) for _ in range(n)]
        elif "beta" in k:
            v = [rng.gauss(0, 0.3) for _ in range(n)]
        elif k == "model.depth_embed" or "embed_tokens" in k:
            v = [rng.gauss(0, 1.0) for _ in range(n)]
        elif "router" in k or k.endswith("mlp.gate.weight"):
            v = [rng.gauss(0, 3.0 / math.sqrt(shape[1])) for _ in range(n)]
        else:
            v = [rng.gauss(0, 1.0 / math.sqrt(shape[1])) for _ in range(n)]
        out[k] = (shape, [f32(x) for x in v])
    write_st_f32(os.path.join(dst, "model.safetensors"), out)


def make_init(name, data, seed, changes=None, config_changes=None):
    """`lol init` of MODEL (+ changes) for the vocabulary of `data`, then randomised"""
    vocab = json.load(open(os.path.join(data, "dataset.json")))["vocab_size"]
    cfg = dict(MODEL, vocab_size=vocab, **(changes or {}))
    path = os.path.join(WORK, "init", name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    base = os.path.join(WORK, "init", name + "_lol_init")
    run([LOL, "init", "--config", path, "--seed", "1", "--out", base])
    out = os.path.join(WORK, "init", name)
    perturb(base, out, seed, config_changes)
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

    def note(self, what):
        print("note " + what, flush=True)
        self.notes.append(what)


def train(cfg, name, extra=()):
    out = os.path.join(WORK, "runs", name)
    cfg["train"]["out"] = out
    path = out + ".json"
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    run([LOL, "train", "--config", path, "--no-progress"] + list(extra))
    return out


def run_cfg(init, data, steps, lr, grow=(1, 0.0, "1-sqrt"), eval_every=1, grad_accum=1, save_every=1,
            batch_size=5, packing="pad", seq_len=0):
    return {"init_from": init,
            "data": {"dir": data, "batch_size": batch_size, "packing": packing, "seq_len": seq_len},
            "optim": {"type": "muon", "lr": lr, "muon_lr": lr, "weight_decay": 0.1},
            "schedule": {"type": "constant", "warmup_steps": 0},
            "grow": {"start": grow[0], "fraction": grow[1], "shape": grow[2]},
            "train": {"steps": steps, "grad_accum": grad_accum, "eval_every": eval_every, "eval_batches": 0,
                      "save_every": save_every, "keep_last": 1000, "log_every": 1, "seed": 5, "threads": 1,
                      "progress": False}}


# ---------------------------------------------------------------- per-step checks
def param_groups(names, c):
    """tensor name -> (kind, index): ('bias', _), ('expert', m), ('depth', l: FiLM, untied
    router), ('depth_embed', _), ('moe_expert', (layer, e)), ('always', _)"""
    layers = moe_layers(c)
    g = {}
    for n in names:
        parts = n.split(".")
        if n.endswith("balance_bias"):
            g[n] = ("bias", None)
        elif n.startswith("model.library."):
            g[n] = ("expert", int(parts[2]))
        elif n.startswith("model.film."):
            g[n] = ("depth", int(parts[2]) + 1)
        elif c["untied_router"] and n.startswith("model.routers."):
            g[n] = ("depth", int(parts[2]) + 1)
        elif n == "model.depth_embed":
            g[n] = ("depth_embed", None)
        elif ".mlp.experts." in n:
            g[n] = ("moe_expert", (layers.index(".".join(parts[:3])), int(parts[5])))
        else:
            g[n] = ("always", None)
    return g


def has_grad(kind, x, loads, moe_loads, depth):
    if kind == "expert":
        return loads[x] > 0
    if kind == "depth":
        return x <= depth
    if kind == "moe_expert":
        return moe_loads[x[0]][x[1]] > 0
    return True


def check_param_changes(R, c, before, after, loads, moe_loads, depth, where):
    D = c["core_depth"]
    bad = []
    for n, (kind, x) in sorted(param_groups(after.keys(), c).items()):
        if kind == "bias":
            continue
        b, a = before[n][1], after[n][1]
        if kind == "depth_embed":
            d = len(a) // D
            for l in range(1, D + 1):
                ch = a[(l - 1) * d:l * d] != b[(l - 1) * d:l * d]
                if ch != (l <= depth):
                    bad.append("%s row %d %s" % (n, l - 1, "changed" if ch else "unchanged"))
            continue
        ch = a != b
        want = has_grad(kind, x, loads, moe_loads, depth)
        if ch != want:
            bad.append("%s %s (expected %s)" % (n, "changed" if ch else "unchanged", "changed" if want else "unchanged"))
    R.check(not bad, "%s: parameters change exactly where there is a gradient (experts with load > 0: %s, depths <= %d)"
            % (where, [m for m in range(len(loads)) if loads[m] > 0], depth), "; ".join(bad[:6]))


def check_optimizer_steps(R, opt_path, grads_seen, where):
    """grads_seen: tensor name -> number of steps it had a gradient"""
    st = read_st(opt_path)
    counters = {n[:-len(".step")]: int(v[1][0]) for n, v in st.items() if n.endswith(".step")}
    if not counters:
        R.note("%s: optimizer.safetensors has no '.step' counters (layout not documented): skipped" % where)
        return
    bias_state = [n for n in st if "balance_bias" in n]
    R.check(not bias_state, "%s: no balancing bias has optimizer state" % where, ", ".join(bias_state))
    bad = ["%s step %d, expected %d" % (n, counters.get(n, 0), want) for n, want in sorted(grads_seen.items())
           if counters.get(n, 0) != want]
    R.check(not bad, "%s: optimizer step counters = steps with a gradient" % where, "; ".join(bad[:6]))


def compare_loads(R, where, logged, ref, margin):
    if logged == ref:
        R.check(True, "%s = reference (margin %.1e)" % (where, margin))
    elif margin < TIE:
        R.note("%s: lol %s, reference %s with a near tie (margin %.1e): not compared" % (where, logged, ref, margin))
    else:
        R.check(False, "%s: lol %s, reference %s (margin %.1e)" % (where, logged, ref, margin))


def check_run(R, tag, rd, init, seqs, n_steps, depth_of, valid_seqs=None, discr=None):
    """every step k of run `rd`: recompute from the weights and biases step k started from
    (checkpoint k-1, or `init`) and compare loads, loss, the bias after the step, which
    tensors moved, optimizer counters, valid_loss, the recorded depth"""
    c = json.load(open(os.path.join(init, "config.json")))
    u, E = c["balance_update_rate"], c.get("prelude_coda_experts", 0)
    steps, evals = metrics(rd)
    prev_dir, prev_t = init, read_st(os.path.join(init, "model.safetensors"))
    prev2_bias = None
    groups = param_groups(prev_t.keys(), c)
    grads_seen = {n: 0 for n, (kind, _) in groups.items() if kind != "bias"}
    for k in range(1, n_steps + 1):
        a_k = depth_of(k)
        m = steps[k]
        w = "%s step %d (depth %d)" % (tag, k, a_k)
        R.check(m["active_depth"] == a_k, "%s: logged active_depth %d" % (w, m["active_depth"]))
        ts = json.load(open(os.path.join(ckpt(rd, k), "trainer_state.json")))
        R.check(ts.get("active_depth") == a_k, "%s: trainer_state.json active_depth %s" % (w, ts.get("active_depth")))
        r = ref_step(prev_dir, seqs, a_k)
        logged = m["expert_load"]
        compare_loads(R, "%s: logged expert_load %s (windows per expert)" % (w, logged), logged, r["loads"], r["margin"])
        R.check(sum(logged) == r["windows"], "%s: loads sum to the %d windows of the batch" % (w, r["windows"]),
                "sum %d" % sum(logged))
        rel = abs(m["loss"] - r["loss"]) / r["loss"]
        tie = logged != r["loads"] and r["margin"] < TIE
        R.check(rel < LOSS_REL or tie, "%s: logged loss %.7f = masked mean CE %.7f over %d targets (%.1e rel; "
                "all-target mean %.4f)" % (w, m["loss"], r["loss"], r["targets"], rel, r["loss_all"]))
        cur_t = read_st(os.path.join(ckpt(rd, k), "model.safetensors"))
        b_prev, b_now = prev_t["model.balance_bias"][1], cur_t["model.balance_bias"][1]
        want = bias_rule(b_prev, logged, u)
        R.check(same(b_now, want), "%s: bias after the step %s = b + u sign(mean - load) %s"
                % (w, [round(v, 5) for v in b_now], [round(v, 5) for v in want]))
        moe_logged = m.get("prelude_coda_expert_load") if E else None
        if E:
            compare_loads(R, "%s: logged prelude_coda_expert_load %s (tokens per expert and layer)" % (w, moe_logged),
                          moe_logged, r["moe"], r["moe_margin"])
            if moe_logged != r["moe"] and moe_logged == r["moe_no_ronly"]:
                R.note("%s: MoE loads match only without router-only tokens" % w)
            for i, p in enumerate(moe_layers(c)):
                n = p + ".mlp.balance_bias"
                wb = bias_rule(prev_t[n][1], moe_logged[i], u)
                R.check(same(cur_t[n][1], wb), "%s: %s after the step = b + u sign(mean - load)" % (w, n),
                        "%s vs %s" % (cur_t[n][1], wb))
        if discr is not None:  # informational: would other readings have given something else?
            discr["steps"] += 1
            if not same(bias_rule(b_prev, r["tok_loads"], u), want):
                discr["token loads"] += 1
            if not same(bias_per_depth(b_prev, r["per_depth"], u), want):
                discr["per-depth signs"] += 1
            if prev2_bias is not None and ref_step(prev_dir, seqs, a_k, bias=prev2_bias)["loads"] != logged:
                discr["stale bias"] += 1
        check_param_changes(R, c, prev_t, cur_t, logged, moe_logged, a_k, w)
        for n in grads_seen:
            kind, x = groups[n]
            grads_seen[n] += has_grad(kind, x, logged, moe_logged, a_k)
        check_optimizer_steps(R, os.path.join(ckpt(rd, k), "optimizer.safetensors"), grads_seen, w)
        if valid_seqs is not None:
            # the evaluation after step k: checkpoint k's weights and bias, no noise, depth a_k
            if k in evals:
                rv = ref_step(ckpt(rd, k), valid_seqs, a_k)
                e = evals[k]
                relv = abs(e["valid_loss"] - rv["loss"]) / rv["loss"]
                R.check(relv < LOSS_REL and e.get("valid_targets", rv["targets"]) == rv["targets"],
                        "%s: valid_loss %.7f = reference %.7f (%d targets, lol %s; %.1e rel)"
                        % (w, e["valid_loss"], rv["loss"], rv["targets"], e.get("valid_targets"), relv))
            else:
                R.check(False, "%s: no valid_loss record with eval_every 1" % w)
        fwd = os.path.join(WORK, "fwd.safetensors")
        run([LOL, "forward", "--model", ckpt(rd, k), "--tokens", " ".join(map(str, seqs[0]["tokens"])),
             "--prompt-len", str(seqs[0]["prompt_len"]), "--out", fwd])
        rows = read_st(fwd)["routing.expert"][0][0]
        R.check(rows == a_k, "%s: lol forward on its checkpoint runs %d routed depths" % (w, rows))
        prev2_bias = b_prev
        prev_dir, prev_t = ckpt(rd, k), cur_t
    return steps


# ---------------------------------------------------------------- the runs
def part_growing(R, data, init):
    """run G: real learning rate, growing 1 -> D over 8 steps, untied routers, eval every step"""
    c = json.load(open(os.path.join(init, "config.json")))
    N, grow = 8, (1, 0.75, "1-sqrt")
    rd = train(run_cfg(init, data, N, 0.01, grow), "G")
    discr = {"steps": 0, "stale bias": 0, "token loads": 0, "per-depth signs": 0}
    train_seqs = load_split(data, "train")
    steps = check_run(R, "G", rd, init, train_seqs, N,
                      lambda k: expected_depth(k - 1, N, c["core_depth"], *grow)[0], load_split(data, "valid"), discr)
    print("  (discriminating power over %d steps: a stale bias would have changed the loads in %d steps, token-"
          "weighted loads the bias in %d, one sign per depth the bias in %d)"
          % (discr["steps"], discr["stale bias"], discr["token loads"], discr["per-depth signs"]))
    # lol eval lm on a checkpoint saved while growing (step 5: depth 2 of 4)
    k = 5
    a_k = expected_depth(k - 1, N, c["core_depth"], *grow)[0]
    r = run([LOL, "eval", "lm", "--model", ckpt(rd, k), "--data", data, "--split", "train", "--json", "--no-progress"])
    got = json.loads(r.stdout[r.stdout.index("{"):])
    ref = ref_step(ckpt(rd, k), train_seqs, a_k)
    full = ref_step(ckpt(rd, k), train_seqs, c["core_depth"])
    rel = abs(got["loss_sum"] - ref["loss_sum"]) / ref["loss_sum"]
    R.check(got["targets"] == ref["targets"] and rel < LOSS_REL,
            "eval lm on G step %d: %d targets (reference %d), loss_sum %.5f = reference at depth %d %.5f (%.1e rel;"
            " at depth %d it would be %.5f)" % (k, got["targets"], ref["targets"], got["loss_sum"], a_k,
                                                 ref["loss_sum"], rel, c["core_depth"], full["loss_sum"]))
    return rd, steps


def part_resume(R, g_dir):
    """docs/training.md "Resume and determinism": N steps = k steps + resume + N - k, bit for bit
    on CPU (weights, the balancing bias, optimizer state)"""
    out = os.path.join(WORK, "runs", "GR")
    run([LOL, "train", "--resume", ckpt(g_dir, 4), "--set", "train.out=" + out, "--no-progress"])
    a = read_st(os.path.join(ckpt(out, 8), "model.safetensors"))
    b = read_st(os.path.join(ckpt(g_dir, 8), "model.safetensors"))
    diff = [n for n in b if a.get(n, (0, None))[1] != b[n][1]]
    R.check(not diff and a["model.balance_bias"][1] == b["model.balance_bias"][1],
            "G resumed from step 4 to 8: every tensor (balancing bias included) equals the uninterrupted run's",
            ", ".join(diff[:5]))
    sa, sb = metrics(out)[0], metrics(g_dir)[0]
    bad = [k for k in range(5, 9) if (sa[k]["expert_load"], sa[k]["loss"]) != (sb[k]["expert_load"], sb[k]["loss"])]
    R.check(not bad, "G resumed: loads and losses of steps 5-8 equal", "steps %s differ" % bad)


def part_grad_accum(R, data, init, g_steps):
    c = json.load(open(os.path.join(init, "config.json")))
    rd = train(run_cfg(init, data, 1, 0.01, (1, 0.75, "1-sqrt"), eval_every=0, grad_accum=2), "GA")
    steps, _ = metrics(rd)
    m, g1 = steps[1], g_steps[1]
    R.check(m["expert_load"] == [2 * v for v in g1["expert_load"]],
            "grad_accum 2 over the same 5 sequences twice: loads %s = 2 x %s" % (m["expert_load"], g1["expert_load"]))
    R.check(abs(m["loss"] - g1["loss"]) <= 1e-6 * g1["loss"],
            "grad_accum 2: loss %.7f = one-batch loss %.7f" % (m["loss"], g1["loss"]))
    b0 = read_st(os.path.join(init, "model.safetensors"))["model.balance_bias"][1]
    b1 = read_st(os.path.join(ckpt(rd, 1), "model.safetensors"))["model.balance_bias"][1]
    R.check(same(b1, bias_rule(b0, m["expert_load"], c["balance_update_rate"])),
            "grad_accum 2: bias follows the summed loads")


def part_noise_lr0(R, data, init_noise):
    """run N: router noise 1.0, learning rate 0: only the bias may move; evaluation is noise-free"""
    c = json.load(open(os.path.join(init_noise, "config.json")))
    D, u = c["core_depth"], c["balance_update_rate"]
    rd = train(run_cfg(init_noise, data, 3, 0.0), "N")
    steps, evals = metrics(rd)
    train_seqs, valid_seqs = load_split(data, "train"), load_split(data, "valid")
    t0 = read_st(os.path.join(init_noise, "model.safetensors"))
    prev_b, prev_dir, differs = t0["model.balance_bias"][1], init_noise, 0
    for k in (1, 2, 3):
        m = steps[k]
        t = read_st(os.path.join(ckpt(rd, k), "model.safetensors"))
        moved = [n for n in t if n != "model.balance_bias" and t[n][1] != t0[n][1]]
        R.check(not moved, "N step %d (lr 0): every parameter equals the initial one" % k, ", ".join(moved[:5]))
        R.check(same(t["model.balance_bias"][1], bias_rule(prev_b, m["expert_load"], u)),
                "N step %d (noise on): bias = b + u sign(mean - logged load %s)" % (k, m["expert_load"]))
        r = ref_step(prev_dir, train_seqs, D)
        R.check(sum(m["expert_load"]) == r["windows"], "N step %d: loads sum to the %d windows" % (k, r["windows"]))
        if abs(m["loss"] - r["loss"]) > 1e-6 * r["loss"] or m["expert_load"] != r["loads"]:
            differs += 1
        rv = ref_step(ckpt(rd, k), valid_seqs, D)
        e = evals.get(k, {})
        relv = abs(e.get("valid_loss", float("nan")) - rv["loss"]) / rv["loss"]
        R.check(relv < LOSS_REL, "N step %d: valid_loss %s = noise-free reference %.7f (%.1e rel)"
                % (k, e.get("valid_loss"), rv["loss"], relv))
        prev_b, prev_dir = t["model.balance_bias"][1], ckpt(rd, k)
    R.check(differs > 0, "N: the training forward is noisy (loss/loads differ from the noise-free forward in %d of 3"
            " steps)" % differs)


def part_one_expert(R, data, init1):
    """L = 1: every window picks expert 0, load = mean, sign(0) = 0: the bias never moves"""
    rd = train(run_cfg(init1, data, 2, 0.0, eval_every=0), "L1")
    steps, _ = metrics(rd)
    b0 = read_st(os.path.join(init1, "model.safetensors"))["model.balance_bias"][1]
    for k in (1, 2):
        b = read_st(os.path.join(ckpt(rd, k), "model.safetensors"))["model.balance_bias"][1]
        R.check(b == b0, "L1 step %d: load %s = mean, the bias stays %s (sign(0) = 0)" % (k, steps[k]["expert_load"], b),
                "initial %s" % b0)


def part_packed_text(R, init_p, text_data, n_tokens):
    """run P: text documents packed into one row of exactly all their tokens (pack), shared
    router: windows, loads and targets per document; 3 steps"""
    rd = train(run_cfg(init_p, text_data, 3, 0.01, eval_every=0, batch_size=1, packing="pack", seq_len=n_tokens), "P")
    c = json.load(open(os.path.join(init_p, "config.json")))
    check_run(R, "P", rd, init_p, load_split(text_data, "train"), 3, lambda k: c["core_depth"])


def part_moe(R, data, init_m):
    """run M: MoE prelude/coda (3 experts, top 2): per-layer token loads and biases; 3 steps"""
    rd = train(run_cfg(init_m, data, 3, 0.01, eval_every=0), "M")
    c = json.load(open(os.path.join(init_m, "config.json")))
    check_run(R, "M", rd, init_m, load_split(data, "train"), 3, lambda k: c["core_depth"])


def part_schedules(R, data, init):
    D = json.load(open(os.path.join(init, "config.json")))["core_depth"]
    for start, fraction, shape in [(1, 0.75, "1-sqrt"), (2, 0.5, "sqrt"), (1, 1.0, "linear"), (1, 0.0, "1-sqrt")]:
        N = 30
        rd = train(run_cfg(init, data, N, 0.0, (start, fraction, shape), eval_every=0, save_every=0),
                   "S_%s_%d_%g" % (shape, start, fraction))
        steps, _ = metrics(rd)
        got = [steps[k]["active_depth"] for k in range(1, N + 1)]
        want, bad = [], []
        for s in range(N):
            d, boundary = expected_depth(s, N, D, start, fraction, shape)
            want.append(d)
            if got[s] != d:
                if boundary:
                    R.note("%s step %d: depth %d vs %d on an exact boundary of floor()" % (shape, s + 1, got[s], d))
                else:
                    bad.append(s + 1)
        R.check(not bad, "growing %s start %d fraction %g over %d steps: active_depth %s"
                % (shape, start, fraction, N, "".join(map(str, got))),
                "expected %s (steps %s differ)" % ("".join(map(str, want)), bad) if bad else "")


# ---------------------------------------------------------------- main
TEXT = ["The cat sat on the mat today.", "A dog ran far away from home.", "Hi there, said the old man.",
        "Birds fly south in the winter."]


def check(lol, work):
    global LOL, WORK
    LOL, WORK = os.path.abspath(lol), os.path.abspath(work)
    t0 = time.time()
    os.makedirs(WORK, exist_ok=True)
    for o in OUTPUTS:
        p = os.path.join(WORK, o)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    os.makedirs(os.path.join(WORK, "runs"))
    os.makedirs(os.path.join(WORK, "init"))
    R = Report()
    # one maze puzzle (5 sequences = one batch) in train, one in valid
    data = os.path.join(WORK, "data")
    for seed in range(1, 40):
        shutil.rmtree(data, ignore_errors=True)
        run([LOL, "data", "maze", "--n", "2", "--size", "4", "--valid-fraction", "0.5", "--n-test", "0",
             "--seed", str(seed), "--out", data, "--no-progress"])
        st = json.load(open(os.path.join(data, "dataset.json")))["stats"]
        if st["sequences_train"] == 5 and st["sequences_valid"] == 5:
            break
    else:
        raise RuntimeError("no seed gave a 1/1 puzzle split")
    # four text documents, byte tokenizer, no validation split
    text = os.path.join(WORK, "text_data.txt")
    with open(text, "w") as f:
        f.write("\n\n".join(TEXT) + "\n")
    text_data = os.path.join(WORK, "text_data")
    run([LOL, "corpus", "--in", text, "--tokenizer", "byte", "--valid-fraction", "0", "--out", text_data,
         "--no-progress"])
    n_text = json.load(open(os.path.join(text_data, "dataset.json")))["stats"]["train"]["tokens"]

    init = make_init("G", data, 7)
    init_noise = make_init("N", data, 8, config_changes={"router_noise_std": 1.0, "balance_update_rate": 0.2})
    init1 = make_init("L1", data, 9, {"library_size": 1})
    init_p = make_init("P", text_data, 10, {"untied_router": False, "core_depth": 3, "window": 6, "stride": 2})
    init_m = make_init("M", data, 11, {"core_depth": 2, "library_size": 3, "n_coda": 2, "prelude_coda_experts": 3,
                                       "prelude_coda_top_k": 2, "prelude_coda_expert_ffn": 12})

    print("== G: growing run, real learning rate (8 steps, depth 1 -> 4, untied routers, eval every step)", flush=True)
    g_dir, g_steps = part_growing(R, data, init)
    print("== GR: resume", flush=True)
    part_resume(R, g_dir)
    print("== GA: gradient accumulation", flush=True)
    part_grad_accum(R, data, init, g_steps)
    print("== N: router noise on, learning rate 0", flush=True)
    part_noise_lr0(R, data, init_noise)
    print("== L1: a library of one expert", flush=True)
    part_one_expert(R, data, init1)
    print("== P: packed text documents, shared router", flush=True)
    part_packed_text(R, init_p, text_data, n_text)
    print("== M: MoE prelude/coda", flush=True)
    part_moe(R, data, init_m)
    print("== S: growing schedules", flush=True)
    part_schedules(R, data, init)
    print("%d checks, %d disagree, %d notes (%.0f s)" % (R.n, len(R.fail), len(R.notes), time.time() - t0))
    for f in R.fail:
        print("  " + f)
    return 1 if R.fail else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="train tiny runs with lol and compare every step with this reference")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory (its outputs are replaced)")
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))
