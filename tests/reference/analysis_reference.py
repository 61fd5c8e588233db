#!/usr/bin/env python3
"""An independent check of `lol analyze routing`, `lol paths extract` and the bookkeeping
of `lol eval-strategies`, recomputed from the float64 pure-Python LoL forward of
lol_reference.py (stdlib only: no numpy, no torch).

Provenance: written by a reviewer from the paper (4.1.1-4.1.4, Appendix C.2-C.4),
docs/analysis.md, docs/routing-paths.md, docs/checkpoint-format.md, docs/tasks.md and
`lol ... --help`, WITHOUT reading src/. Where the docs leave a detail open, the rule
assumed here is named in the code (search "ASSUMED") and in the printed report.

  python3 tests/reference/analysis_reference.py check --lol build/lol --work /tmp/x

What it does (about 40 s on one core, `taskset -c 0`, 19 `lol` runs taking 30 s of it;
exit 1 on any disagreement; re-running into the same --work replaces its own outputs):

1. `lol init` of a tiny LoL (L=4 experts, D=3 routed depths, W=8, S=3), every tensor
   replaced by random values (lol_reference.perturb: the balancing bias and the depth
   embeddings matter; router weights then scaled by ROUTER_SCALE), and `lol data maze
   --size 4` (valid split: 8 puzzles x 5 strategies, prompt window = question + label,
   label tokens router-only).
2. The reference forward gives, for every sequence, each (depth, window)'s expert, alpha
   and router probabilities. From those it recomputes what docs/analysis.md says
   routing.json holds: utilization counts / shares / expert-depth profile, window items
   (window index k; a depth with fewer windows contributes its last window), path
   count, entropy, its bound log2(min(items, L^D)), the top-10 paths, the same per label,
   label centroids of the one-hot paths, their distances and nearest labels, the PCA
   explained-variance ratios and the (jittered) PCA scatter of pca_paths.png.dat.
3. The probes and the nearest-centroid separation are recomputed *exactly* on a
   dataset this script writes (dataset.json + one safetensors shard): three labels,
   each a few random token sequences repeated three times, where every sequence of a
   class (and of the negative class of the probe) has its own number of windows. The
   document-level splits ("shuffled, sorted by number of windows (largest first), each
   to the part least filled relative to its target share") are then the same for any
   shuffle, so the dev/test documents, the folds, every readout's CV and test AUROC,
   the ridge penalties and inner-CV AUROCs, the chosen columns and signs, the LLR
   counts, the test ROC points, the separation confusion matrix follow from the docs.
   `--batch 1` keeps the repeated copies bit-identical in lol (docs/analysis.md: the
   batch changes the float rounding). The label-shuffling controls use an
   undocumented permutation: only their invariants are checked. On the maze data the
   split sizes (documents / windows per part and fold) are checked the same way.
4. `lol paths extract`: every (depth, window) cell's expert and alpha for
   `--rule mean-prob` (highest mean router probability over the label's sequences that
   have that window, alpha = that mean; paper 4.1.3) and `--rule most-selected`, the
   `--extend` rows (auto / N / 0), agreement.json (observations and agreement with the
   mode expert per cell), and that a strategy without sequences gets no file.
5. `lol eval-strategies --max-new 5`: the first generated tokens of every forced and
   unforced sample equal the reference's greedy decoding (forced: the mode path, the
   label replaced by the length-matched filler `[ ... ... ]`, prompt window = question +
   label, label/filler tokens router-only), and the confusion table / metrics agree
   with the per-sample verdicts. (An untrained model writes no valid trace, so the
   confusion itself is degenerate here: all "none".)

Also: the heatmap data files (utilization*.png.dat, expert_depth_profile, separation
confusion, centroid distances), `--depth`, `--max`, `--max-tokens` (also inside the
prompt window), `--no-shuffle`, `--no-separation`, two labels without `--label-positive`
(the larger id positive, with another `--seed` / `--test-fraction`), five labels without
it (probes skipped), refused labels (exit 2, nothing written), label -1 documents (in
utilization and in the PCA fit, not in probes, separation or utilization_by_label), and
an empty sequence (skipped, docs/analysis.md) at `--batch` 16 and 1.

Details the docs leave open, assumed here and matched by lol (search "ASSUMED"): the
split's "least filled" counts windows, ties go to the first part (test, then fold 0);
c = 0.01 without two training folds for the inner CV; the order of equal-count top
paths (lexicographic); ties of mode paths and of the column-selection readouts (lowest
index); most-selected's alpha (the mean router probability of the chosen expert);
--extend auto's row length (the most windows any depth can have with any prompt
length); a --max-tokens cut inside the prompt window keeps the prefix as window 0.

Found 2026-12-05 (build of commit 12acfef + working tree): an empty sequence alone in a
forward batch (`--batch 1`, or the last batch) aborts `lol analyze routing` with
"internal error: index 0 is out of bounds for dimension 1 with size 0" (exit 1).

Floats are compared to 1e-5 where they come from lol's float32 forward (router
probabilities, alphas), exactly (1e-9) where they are counts, ranks or functions of
counts. Decisions closer than float32 rounding (a + b margins below 1e-5, mode-path
mean probabilities within 1e-6) are reported as ambiguous, not as differences.
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
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lol_reference import LoL, perturb, argmax_low, read_st, write_st, trace_margin  # noqa: E402

PROB_TOL = 1e-5      # float32 router probabilities / alphas vs float64
EXACT_TOL = 1e-9     # counts, ratios of counts, AUROCs from identical rankings
C_GRID = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]   # docs/analysis.md: 1e-6 ... 10

# lol_reference.perturb's routers saturate the softmax (top-1 probabilities within 1e-8
# of 1 become 1.0 in float32: ties lol has and float64 has not, which moves AUROCs).
# Scaling the router weights keeps the probabilities away from 0 and 1.
ROUTER_SCALE = 0.3

MODEL_CFG = {"vocab_size": 31, "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 24,
             "n_prelude": 1, "n_coda": 1, "library_size": 4, "core_depth": 3, "window": 8, "stride": 3,
             "max_seq_len": 128}


# ------------------------------------------------------------------ reporting
class Report:
    def __init__(self):
        self.fail, self.amb, self.ok = [], [], 0

    def eq(self, what, got, want, tol=0.0):
        if _close(got, want, tol):
            self.ok += 1
            return True
        self.fail.append("%s: lol %s, reference %s" % (what, _short(got), _short(want)))
        print("DIFF  " + self.fail[-1])
        return False

    def true(self, what, cond, detail=""):
        if cond:
            self.ok += 1
            return True
        self.fail.append("%s %s" % (what, detail))
        print("DIFF  " + self.fail[-1])
        return False

    def ambiguous(self, what):
        self.amb.append(what)
        print("AMBIG " + what)


def _error_line(stderr):
    lines = [ln for ln in stderr.splitlines() if "error" in ln]
    return lines[0][:200] if lines else stderr.strip()[-200:]


def _short(x):
    s = json.dumps(x)
    return s if len(s) < 300 else s[:300] + "..."


def _close(a, b, tol):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_close(a[k], b[k], tol) for k in a)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= tol * max(1.0, abs(b)) if tol else a == b
    return a == b


# ------------------------------------------------------------------ datasets
_ST = {"U8": "B", "I8": "b", "U16": "H", "I16": "h", "U32": "I", "I32": "i", "U64": "Q", "I64": "q",
       "F32": "f", "F64": "d"}


def read_arrays(path):
    with open(path, "rb") as f:
        raw = f.read()
    hl = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + hl])
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        fmt = _ST[e["dtype"]]
        n = (en - b) // struct.calcsize(fmt)
        out[name] = list(struct.unpack("<%d%s" % (n, fmt), raw[8 + hl + b:8 + hl + en]))
    return out


def read_split(data, split):
    """Sequences of a dataset split: tokens, prompt_len, router_only positions, label."""
    ds = json.load(open(os.path.join(data, "dataset.json")))
    seqs = []
    for shard in ds["splits"].get(split, []):
        a = read_arrays(os.path.join(data, shard))
        off = a["offsets"]
        for i in range(len(off) - 1):
            lo, hi = off[i], off[i + 1]
            ro = a.get("router_only")
            seqs.append(dict(tokens=a["tokens"][lo:hi], prompt_len=a.get("prompt_len", [0] * (i + 1))[i],
                             router_only=[j for j in range(hi - lo) if ro and ro[lo + j]],
                             label=a["label"][i] if "label" in a else -1))
    return seqs


def write_dataset(out, split, seqs, vocab_size, label_names):
    os.makedirs(out, exist_ok=True)
    toks, offs = [], [0]
    for s in seqs:
        toks += s["tokens"]
        offs.append(len(toks))
    parts = [("tokens", "U16", toks), ("offsets", "I64", offs),
             ("prompt_len", "I32", [s.get("prompt_len", 0) for s in seqs]),
             ("label", "I64", [s["label"] for s in seqs])]
    hdr, blobs, pos = {}, [], 0
    for name, dt, v in parts:
        blob = struct.pack("<%d%s" % (len(v), _ST[dt]), *v)
        hdr[name] = {"dtype": dt, "shape": [len(v)], "data_offsets": [pos, pos + len(blob)]}
        pos += len(blob)
        blobs.append(blob)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    shard = "%s-00000.safetensors" % split
    with open(os.path.join(out, shard), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(out, "dataset.json"), "w") as f:
        json.dump({"format": "lol-dataset", "version": 1, "splits": {split: [shard]}, "vocab_size": vocab_size,
                   "meta": {"label_names": label_names}}, f)


# ------------------------------------------------------------------ reference routing
def route(model, seq, depth=None, max_tokens=None):
    """trace[l][k] = (expert, alpha, probs) of the reference forward (None for an empty
    sequence). ASSUMED: a sequence cut by --max-tokens keeps min(prompt_len, n)."""
    toks = seq["tokens"][:max_tokens] if max_tokens else seq["tokens"]
    if not toks:
        return None
    pl = min(seq["prompt_len"], len(toks))
    ro = [j for j in seq["router_only"] if j < len(toks)]
    _, trace = model.forward(toks, pl, ro, depth)
    return trace


def window_items(trace):
    """docs/analysis.md: one item per window index k up to the largest window count of
    any depth; a depth with fewer windows contributes its last window."""
    D = len(trace)
    K = max(len(t) for t in trace)
    items = []
    for k in range(K):
        dec = [trace[l][min(k, len(trace[l]) - 1)] for l in range(D)]
        items.append(dict(path=tuple(d[0] for d in dec), probs=[p for d in dec for p in d[2]],
                          top1=[d[1] for d in dec]))
    return items


def utilization(traces, L, D):
    cnt = [[0] * L for _ in range(D)]
    items = []
    for tr in traces:
        for l in range(D):
            for rho, _, _ in tr[l]:
                cnt[l][rho] += 1
        items += window_items(tr)
    share = [[c / sum(row) if sum(row) else 0.0 for c in row] for row in cnt]
    prof = []
    for m in range(L):
        tot = sum(cnt[l][m] for l in range(D))
        prof.append([cnt[l][m] / tot if tot else 0.0 for l in range(D)])
    paths = Counter(it["path"] for it in items)
    n = len(items)
    ent = -sum(v / n * math.log2(v / n) for v in paths.values()) if n else 0.0
    # ASSUMED (undocumented): top paths ordered by count, ties by the path (lexicographic).
    top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    return {"windows_per_depth_expert": cnt, "share": share, "expert_depth_profile": prof,
            "window_items": n, "distinct_paths": len(paths), "path_entropy_bits": ent,
            "max_path_entropy_bits": math.log2(min(n, L ** D)) if n else 0.0,
            "top_paths": [{"path": list(p), "count": c, "share": c / n} for p, c in top],
            "library_size": L, "routed_depths": D}


def check_utilization(rep, what, got, want):
    for k in ("windows_per_depth_expert", "window_items", "distinct_paths", "library_size", "routed_depths"):
        rep.eq("%s %s" % (what, k), got.get(k), want[k])
    for k in ("share", "expert_depth_profile", "path_entropy_bits", "max_path_entropy_bits"):
        rep.eq("%s %s" % (what, k), got.get(k), want[k], 1e-12)
    g = got.get("top_paths", [])
    rep.eq("%s top_paths counts" % what, [t["count"] for t in g], [t["count"] for t in want["top_paths"]])
    rep.eq("%s top_paths shares" % what, [t["share"] for t in g], [t["share"] for t in want["top_paths"]], 1e-12)
    if [t["path"] for t in g] != [t["path"] for t in want["top_paths"]]:
        # same multiset of (count, path) apart from the order of equal counts = tie rule only
        same_counts = sorted((t["count"], tuple(t["path"])) for t in g) == \
            sorted((t["count"], tuple(t["path"])) for t in want["top_paths"])
        if same_counts:
            rep.ambiguous("%s top_paths: equal counts in another order (tie order undocumented)" % what)
        else:
            rep.eq("%s top_paths paths" % what, [t["path"] for t in g], [t["path"] for t in want["top_paths"]])


# ------------------------------------------------------------------ statistics
def mean(v):
    return sum(v) / len(v)


def sample_sd(v):
    if len(v) < 2:
        return 0.0
    m = mean(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def auroc(scores, y):
    """Mann-Whitney U with average ranks (docs/analysis.md); None without both classes."""
    npos = sum(y)
    nneg = len(y) - npos
    if npos == 0 or nneg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0 + 1.0
        i = j + 1
    rpos = sum(r for r, t in zip(ranks, y) if t)
    return (rpos - npos * (npos + 1) / 2.0) / (npos * nneg)


def roc_points(scores, y):
    """ROC corners, thresholds from the highest score down, equal scores in one step."""
    npos = sum(y)
    nneg = len(y) - npos
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    pts = [[0.0, 0.0]]
    tp = fp = 0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for t in range(i, j + 1):
            if y[order[t]]:
                tp += 1
            else:
                fp += 1
        pts.append([fp / nneg, tp / npos])
        i = j + 1
    return pts


def greedy_split(docs, shares):
    """docs: list of (doc id, windows) of ONE class. docs/analysis.md: shuffled, sorted
    by number of windows (largest first), each to the part least filled relative to its
    target share. ASSUMED: 'filled' counts windows, relative = windows / share, ties to
    the first part (test before development, fold 0 before fold 1). The shuffle only
    orders documents with equal window counts, so the window counts per part do not
    depend on it (and nothing does, when such documents are identical copies)."""
    fill = [0] * len(shares)
    parts = [[] for _ in shares]
    for d, w in sorted(docs, key=lambda t: -t[1]):   # stable: equal windows keep id order
        key = [f / s for f, s in zip(fill, shares)]
        i = key.index(min(key))
        fill[i] += w
        parts[i].append(d)
    return parts


def stratified(docs, classes, shares):
    parts = [[] for _ in shares]
    for c in sorted(set(classes.values())):
        for i, p in enumerate(greedy_split([(d, w) for d, w in docs if classes[d] == c], shares)):
            parts[i] += p
    return parts


def cholesky_solve(A, b):
    n = len(A)
    Lm = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = A[i][j] - sum(Lm[i][k] * Lm[j][k] for k in range(j))
            if i == j:
                Lm[i][i] = math.sqrt(s)
            else:
                Lm[i][j] = s / Lm[j][j]
    z = [0.0] * n
    for i in range(n):
        z[i] = (b[i] - sum(Lm[i][k] * z[k] for k in range(i))) / Lm[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (z[i] - sum(Lm[k][i] * x[k] for k in range(i + 1, n))) / Lm[i][i]
    return x


def varying_columns(X):
    """docs/analysis.md: a feature whose standard deviation is at most 1e-5 of its root
    mean square is constant to working precision and left out."""
    keep = []
    n = len(X)
    for j in range(len(X[0])):
        col = [x[j] for x in X]
        m = sum(col) / n
        sd = math.sqrt(sum((v - m) ** 2 for v in col) / n)
        rms = math.sqrt(sum(v * v for v in col) / n)
        if sd > 1e-5 * rms:
            keep.append(j)
    return keep


def ridge_fit(X, y, c):
    """min sum (y - b - w.x)^2 + lambda |w|^2, b free; lambda = c trace(Xc'Xc)/p."""
    keep = varying_columns(X)
    n, p = len(X), len(keep)
    if p == 0:
        return (lambda x: 0.0), 0.0
    Z = [[x[j] for j in keep] for x in X]
    mx = [sum(z[j] for z in Z) / n for j in range(p)]
    my = sum(y) / n
    Zc = [[z[j] - mx[j] for j in range(p)] for z in Z]
    G = [[sum(r[i] * r[j] for r in Zc) for j in range(p)] for i in range(p)]
    lam = c * sum(G[i][i] for i in range(p)) / p
    rhs = [sum(r[i] * (t - my) for r, t in zip(Zc, y)) for i in range(p)]
    w = cholesky_solve([[G[i][j] + (lam if i == j else 0.0) for j in range(p)] for i in range(p)], rhs)
    b = my - sum(wi * mi for wi, mi in zip(w, mx))
    return (lambda x: b + sum(wi * x[j] for wi, j in zip(w, keep))), lam


class Probe:
    """Readouts of docs/analysis.md on items (features, label, doc, fold)."""

    def __init__(self, readout, X, y, fold_of, folds, L):
        self.readout, self.X, self.y, self.fold_of, self.folds, self.L = readout, X, y, fold_of, folds, L

    def idx(self, fold_set):
        return [i for i in range(len(self.y)) if self.fold_of[i] in fold_set]

    def fit(self, train_folds):
        """Returns (score function, fit record) trained on the given folds."""
        tr = self.idx(set(train_folds))
        X, y = [self.X[i] for i in tr], [self.y[i] for i in tr]
        r = self.readout
        if r.startswith("ridge"):
            usable = list(train_folds)
            inner = []
            if len(usable) >= 2:
                for c in C_GRID:
                    a = []
                    for g in usable:
                        f, _ = self.fit_ridge([h for h in usable if h != g], c)
                        te = self.idx({g})
                        a.append(auroc([f(self.X[i]) for i in te], [self.y[i] for i in te]))
                    a = [v for v in a if v is not None]
                    inner.append(mean(a) if a else None)
                best = None
                for c, v in zip(C_GRID, inner):   # ties: the larger penalty (docs)
                    if v is not None and (best is None or v >= best[1]):
                        best = (c, v)
                c = best[0]
                sel = "inner-cv"
            else:
                # ASSUMED (undocumented; seen in routing.json): c = 0.01 without 2 folds
                c, inner, sel = 1e-2, [None] * len(C_GRID), "default"
            f, lam = ridge_fit(X, y, c)
            return f, {"relative_lambda": c, "lambda": lam, "inner_cv_auroc": inner, "train_items": len(tr),
                       "lambda_selection": sel}
        if r.startswith("negative") or r.startswith("winning"):
            per = []
            keep = set(varying_columns(X))
            for j in range(len(X[0])):
                per.append(auroc([x[j] for x in X], y) if j in keep else 0.5)
            cands = []
            for j in range(len(per)):
                if j not in keep:
                    continue
                cands.append((1 - per[j], j, -1.0))
                if r.startswith("winning"):
                    cands.append((per[j], j, 1.0))
            # ASSUMED: best AUROC, ties to the lower column, then sign -1 before +1
            best = max(cands, key=lambda t: (t[0], -t[1], -t[2]))
            col, sign = best[1], best[2]
            return (lambda x: sign * x[col]), {"column": col, "sign": sign, "train_auroc": best[0],
                                              "train_auroc_per_column": per}
        if r == "expert-frequency LLR":
            L, D = self.L, len(X[0])
            cnt = {1: [[0] * L for _ in range(D)], 0: [[0] * L for _ in range(D)]}
            for x, t in zip(X, y):
                for d, e in enumerate(x):
                    cnt[t][d][e] += 1
            npos, nneg = sum(y), len(y) - sum(y)

            def llr(x):
                return sum(math.log((cnt[1][d][e] + 1.0) / (npos + L)) - math.log((cnt[0][d][e] + 1.0) / (nneg + L))
                           for d, e in enumerate(x))
            return llr, {"smoothing": 1.0, "train_items": {"negative": float(nneg), "positive": float(npos)}}
        raise ValueError(r)

    def fit_ridge(self, folds, c):
        tr = self.idx(set(folds))
        return ridge_fit([self.X[i] for i in tr], [self.y[i] for i in tr], c)

    def run(self, test_X, test_y):
        cv, fits = [], []
        for f in range(self.folds):
            fn, rec = self.fit([g for g in range(self.folds) if g != f])
            te = self.idx({f})
            cv.append(auroc([fn(self.X[i]) for i in te], [self.y[i] for i in te]))
            fits.append(rec)
        fn, rec = self.fit(list(range(self.folds)))
        ts = [fn(x) for x in test_X]
        return dict(cv=cv, fits=fits, test_fit=rec, test_auroc=auroc(ts, test_y), test_roc=roc_points(ts, test_y),
                    test_scores=ts)


def compare_fit(rep, what, got, want):
    for k, v in want.items():
        if k == "lambda_selection":
            rep.true("%s %s" % (what, k), str(got.get(k, "")).startswith(v), "lol %r, reference %r" % (got.get(k), v))
        elif k in ("lambda", "inner_cv_auroc", "train_auroc", "train_auroc_per_column"):
            rep.eq("%s %s" % (what, k), got.get(k), v, 1e-6 if k == "lambda" else EXACT_TOL)
        else:
            rep.eq("%s %s" % (what, k), got.get(k), v, EXACT_TOL)


# ------------------------------------------------------------------ PCA (Jacobi)
def jacobi_eigen(A):
    n = len(A)
    A = [r[:] for r in A]
    V = [[float(i == j) for j in range(n)] for i in range(n)]
    for _ in range(100):
        if sum(A[i][j] ** 2 for i in range(n) for j in range(n) if i != j) < 1e-30:
            break
        for p in range(n):
            for q in range(p + 1, n):
                if abs(A[p][q]) < 1e-300:
                    continue
                th = (A[q][q] - A[p][p]) / (2 * A[p][q])
                t = (1.0 if th >= 0 else -1.0) / (abs(th) + math.sqrt(th * th + 1))
                c = 1 / math.sqrt(t * t + 1)
                s = t * c
                for k in range(n):
                    akp, akq = A[k][p], A[k][q]
                    A[k][p], A[k][q] = c * akp - s * akq, s * akp + c * akq
                for k in range(n):
                    apk, aqk = A[p][k], A[q][k]
                    A[p][k], A[q][k] = c * apk - s * aqk, s * apk + c * aqk
                for k in range(n):
                    vkp, vkq = V[k][p], V[k][q]
                    V[k][p], V[k][q] = c * vkp - s * vkq, s * vkp + c * vkq
    ev = [A[i][i] for i in range(n)]
    order = sorted(range(n), key=lambda i: -ev[i])
    return [ev[i] for i in order], [[V[k][i] for k in range(n)] for i in order]


def onehot(path, L):
    v = [0.0] * (len(path) * L)
    for d, e in enumerate(path):
        v[d * L + e] = 1.0
    return v


def separation_reference(items_by_doc, labels_of_doc, L, folds):
    """Deterministic parts of routing.json 'separation' (and the full CV when the
    splits are determined: see greedy_split). Found by comparison (docs silent): the PCA
    is fitted on every window item, label -1 included, and only labelled ones plotted."""
    docs = sorted(d for d in items_by_doc if labels_of_doc[d] >= 0)
    labels = sorted(set(labels_of_doc[d] for d in docs))
    X, lab, docof = [], [], []
    for d in docs:
        for it in items_by_doc[d]:
            X.append(onehot(it["path"], L))
            lab.append(labels_of_doc[d])
            docof.append(d)
    P = len(X[0])
    cent = {c: [mean([x[j] for x, t in zip(X, lab) if t == c]) for j in range(P)] for c in labels}
    dist = [[math.sqrt(sum((a - b) ** 2 for a, b in zip(cent[c], cent[e]))) for e in labels] for c in labels]
    nearest = []
    for i, c in enumerate(labels):
        others = [(dist[i][j], j) for j in range(len(labels)) if j != i]
        nearest.append(labels[min(others)[1]])
    n = len(X)
    XA = [onehot(it["path"], L) for d in sorted(items_by_doc) for it in items_by_doc[d]]
    mu = [sum(x[j] for x in XA) / len(XA) for j in range(P)]
    C = [[sum((x[i] - mu[i]) * (x[j] - mu[j]) for x in XA) / len(XA) for j in range(P)] for i in range(P)]
    ev, vec = jacobi_eigen(C)
    tot = sum(ev)
    proj = [[sum((x[j] - mu[j]) * vec[k][j] for j in range(P)) for k in range(2)] for x in X]
    # nearest-centroid CV by document, stratified by label
    wins = [(d, len(items_by_doc[d])) for d in docs]
    parts = stratified(wins, labels_of_doc, [1.0 / folds] * folds)
    fold_of_doc = {d: f for f, p in enumerate(parts) for d in p}
    conf = [[0] * len(labels) for _ in labels]
    ties = 0
    for f in range(folds):
        tr = [i for i in range(n) if fold_of_doc[docof[i]] != f]
        cf = {}
        for c in labels:
            rows = [X[i] for i in tr if lab[i] == c]
            if rows:
                cf[c] = [mean([r[j] for r in rows]) for j in range(P)]
        for i in range(n):
            if fold_of_doc[docof[i]] != f:
                continue
            ds = sorted((sum((a - b) ** 2 for a, b in zip(X[i], cf[c])), c) for c in cf)
            if len(ds) > 1 and ds[1][0] - ds[0][0] < 1e-9:
                ties += 1
            conf[labels.index(lab[i])][labels.index(ds[0][1])] += 1
    per = [sum(r) for r in conf]
    return dict(labels=labels, centroid_distances=dist, nearest=nearest, pca_ratio=[ev[0] / tot, ev[1] / tot],
                eig=ev, proj=proj, proj_labels=lab, confusion=conf, windows_per_label=per, ties=ties,
                accuracy=sum(conf[i][i] for i in range(len(labels))) / n,
                recall=[conf[i][i] / per[i] for i in range(len(labels))],
                majority=max(per) / n)


def check_separation_invariants(rep, what, sep, shuffled=True):
    conf, per = sep["confusion"], sep["windows_per_label"]
    n = sum(per)
    rep.eq(what + " confusion row sums = windows_per_label", [sum(r) for r in conf], per)
    rep.eq(what + " accuracy = trace / windows", sep["accuracy"], sum(conf[i][i] for i in range(len(per))) / n, 1e-12)
    rec = [conf[i][i] / per[i] for i in range(len(per))]
    rep.eq(what + " recall", sep["recall"], rec, 1e-12)
    rep.eq(what + " balanced_accuracy = mean recall", sep["balanced_accuracy"], mean(rec), 1e-12)
    rep.eq(what + " majority_baseline", sep["majority_baseline"], max(per) / n, 1e-12)
    r = sep.get("pca_explained_ratio") or []
    rep.true(what + " pca_explained_ratio sorted, in [0,1], sum <= 1",
             all(0 <= v <= 1 + 1e-12 for v in r) and sum(r) <= 1 + 1e-9 and r == sorted(r, reverse=True), str(r))
    if shuffled:
        sh = sep.get("shuffled_accuracy") or []
        rep.eq(what + " 20 label shuffles", len(sh), 20)
        if sh:
            rep.eq(what + " shuffled_accuracy_mean", sep["shuffled_accuracy_mean"], mean(sh), 1e-12)
            rep.eq(what + " shuffled_accuracy_sd (sample)", sep["shuffled_accuracy_sd"], sample_sd(sh), 1e-9)
    else:
        rep.eq(what + " --no-shuffle: shuffled_accuracy_mean null", sep.get("shuffled_accuracy_mean"), None)


def check_separation(rep, what, sep, ref, names, out_dir, exact_cv):
    rep.eq(what + " labels", sep["labels"], [names[c] for c in ref["labels"]])
    rep.eq(what + " windows_per_label", sep["windows_per_label"], ref["windows_per_label"])
    rep.eq(what + " centroid_distances", sep["centroid_distances"], ref["centroid_distances"], 1e-12)
    rep.eq(what + " nearest_label", sep["nearest_label"], [names[c] for c in ref["nearest"]])
    if ref["eig"][1] - ref["eig"][2] > 1e-9 and ref["eig"][0] - ref["eig"][1] > 1e-9:
        rep.eq(what + " pca_explained_ratio", sep["pca_explained_ratio"], ref["pca_ratio"], 1e-9)
        check_pca_dat(rep, what, os.path.join(out_dir, "pca_paths.png.dat"), ref, names)
    else:
        rep.ambiguous(what + " PCA: repeated eigenvalue, components not unique")
    if exact_cv:
        if ref["ties"]:
            rep.ambiguous(what + " nearest-centroid ties (%d windows): tie rule undocumented" % ref["ties"])
        else:
            rep.eq(what + " confusion (nearest centroid, CV by document)", sep["confusion"], ref["confusion"])


def check_pca_dat(rep, what, path, ref, names):
    """pca_paths.png.dat: one block per label ('# name'), rows 'pc1 pc2', jittered (the
    .gp title says so; docs/analysis.md does not). Each point is matched to the nearest
    exact projection (up to the sign of each component; the points are not in window
    order), and every projection must get as many points as it has windows. ASSUMED:
    jitter <= 5% of the larger axis range (measured: up to 2.8%)."""
    if not os.path.exists(path):
        rep.ambiguous(what + " no pca_paths.png.dat (gnuplot missing?)")
        return
    blocks, cur = {}, None
    for ln in open(path):
        ln = ln.strip()
        if ln.startswith("#"):
            cur = ln[1:].strip()
            blocks[cur] = []
        elif ln and cur is not None:
            blocks[cur].append([float(v) for v in ln.split()[:2]])
    proj, lab = ref["proj"], ref["proj_labels"]
    span = max(max(p[k] for p in proj) - min(p[k] for p in proj) for k in range(2)) or 1.0
    span = [span, span]
    best = None
    for s0 in (1, -1):
        for s1 in (1, -1):
            worst, hist_ok = 0.0, True
            for c in ref["labels"]:
                mine = Counter((round(s0 * p[0], 9), round(s1 * p[1], 9)) for p, t in zip(proj, lab) if t == c)
                near = Counter()
                for x, y in blocks.get(names[c], []):
                    dd, q = min((max(abs(a - x) / span[0], abs(b - y) / span[1]), (a, b)) for a, b in mine)
                    worst = max(worst, dd)
                    near[q] += 1
                hist_ok = hist_ok and near == mine
            if best is None or (hist_ok, -worst) > (best[0], -best[1]):
                best = (hist_ok, worst)
    rep.true(what + " pca_paths.png.dat: each exact projection as often as its windows (points matched to the "
             "nearest, up to component signs)", best[0])
    rep.true(what + " pca_paths.png.dat: jitter within 5%% of the larger axis range", best[1] <= 0.05,
             "max deviation %.3f" % best[1])


def check_heatmap(rep, what, path, matrix):
    """<png>.dat of a heatmap: rows 'x y value "label"', blocks by y; value = matrix[y][x]
    (printed with 6 decimals)."""
    if not os.path.exists(path):
        rep.ambiguous(what + ": no " + os.path.basename(path) + " (gnuplot missing?)")
        return
    got = {}
    for ln in open(path):
        f = ln.split()
        if len(f) >= 3 and not ln.startswith("#"):
            got[(int(float(f[1])), int(float(f[0])))] = float(f[2])
    want = {(y, x): v for y, row in enumerate(matrix) for x, v in enumerate(row)}
    rep.eq(what + " cells", sorted(got), sorted(want))
    rep.true(what + " values", all(abs(got.get(k, float("nan")) - v) <= 1e-5 * max(1.0, abs(v))
                                   for k, v in want.items()),
             "max diff %.3g" % max([abs(got.get(k, 0.0) - v) for k, v in want.items()] + [0.0]))


# ------------------------------------------------------------------ probes (exact)
READOUTS = ["ridge: router probabilities", "ridge: mean router probabilities", "ridge: top-1 probability per depth",
            "negative winning-expert probability, best depth", "winning-expert probability, best depth and sign",
            "expert-frequency LLR"]


def probe_reference(traces, labels_of_doc, positive, L, folds, test_fraction):
    """Every readout of docs/analysis.md with the splits of greedy_split."""
    docs = [d for d in sorted(traces) if labels_of_doc[d] >= 0 and traces[d] is not None]
    y_doc = {d: 1 if labels_of_doc[d] == positive else 0 for d in docs}
    items = {d: window_items(traces[d]) for d in docs}
    wins = [(d, len(items[d])) for d in docs]
    test, dev = stratified(wins, y_doc, [test_fraction, 1 - test_fraction])
    fparts = stratified([(d, w) for d, w in wins if d in set(dev)], y_doc, [1.0 / folds] * folds)
    fold_of = {d: f for f, p in enumerate(fparts) for d in p}
    D = len(traces[docs[0]])
    out = {"split": {"documents_dev": len(dev), "documents_test": len(test),
                     "positive_documents_dev": sum(y_doc[d] for d in dev),
                     "positive_documents_test": sum(y_doc[d] for d in test),
                     "windows_dev": sum(len(items[d]) for d in dev),
                     "windows_test": sum(len(items[d]) for d in test)}, "readouts": {}}

    def seq_features(d):
        return [mean([dec[2][m] for dec in traces[d][l]]) for l in range(D) for m in range(L)]

    for r in READOUTS:
        level = "sequence" if r == "ridge: mean router probabilities" else "window"

        def feats(d):
            if level == "sequence":
                return [seq_features(d)]
            if r == "ridge: router probabilities":
                return [it["probs"] for it in items[d]]
            if r == "expert-frequency LLR":
                return [list(it["path"]) for it in items[d]]
            return [it["top1"] for it in items[d]]
        X, y, fo = [], [], []
        for d in sorted(dev, key=lambda d: fold_of[d]):
            for x in feats(d):
                X.append(x)
                y.append(y_doc[d])
                fo.append(fold_of[d])
        tX, ty = [], []
        for d in test:
            for x in feats(d):
                tX.append(x)
                ty.append(y_doc[d])
        pr = Probe(r, X, y, fo, folds, L)
        res = pr.run(tX, ty)
        # the column-selection readouts use one column (docs: "minus the top-1 probability at one depth")
        res["n_dev"], res["n_test"] = len(X), len(tX)
        res["features"] = 1 if r.startswith(("negative", "winning")) else len(X[0])
        res["level"] = level
        out["readouts"][r] = res
    return out


def check_probe_invariants(rep, what, probes, folds, shuffled=True):
    for r in probes["readouts"]:
        w = "%s %s" % (what, r["readout"])
        cv = r["cv_auroc_folds"]
        rep.eq(w + " folds", len(cv), folds)
        defined = [v for v in cv if v is not None]
        rep.true(w + " AUROCs in [0,1]", all(0 <= v <= 1 for v in defined + [r["test_auroc"]]
                                             if v is not None))
        if defined:
            rep.eq(w + " cv_auroc_mean = mean of folds", r["cv_auroc_mean"], mean(defined), 1e-12)
            rep.eq(w + " cv_auroc_sd = sample sd", r["cv_auroc_sd"], sample_sd(defined), 1e-7)
        if shuffled:
            sh = [v for v in r["shuffled_cv_auroc_folds"] if v is not None]
            if sh:
                rep.eq(w + " shuffled_cv_auroc_mean", r["shuffled_cv_auroc_mean"], mean(sh), 1e-12)
        else:
            rep.eq(w + " --no-shuffle: shuffled_cv_auroc_mean null", r.get("shuffled_cv_auroc_mean"), None)
        roc = r["test_roc"]
        ok = roc[0] == [0.0, 0.0] and roc[-1] == [1.0, 1.0] and all(
            roc[i][0] <= roc[i + 1][0] and roc[i][1] <= roc[i + 1][1] for i in range(len(roc) - 1))
        rep.true(w + " test_roc from (0,0) to (1,1), monotone", ok)
        area = sum((roc[i + 1][0] - roc[i][0]) * (roc[i + 1][1] + roc[i][1]) / 2 for i in range(len(roc) - 1))
        rep.eq(w + " test_auroc = trapezoid area of test_roc", r["test_auroc"], area, 1e-9)
        sp = probes["split"]
        if r["level"] == "sequence":
            rep.eq(w + " n_dev/n_test = documents", [r["n_dev"], r["n_test"]], [sp["documents_dev"],
                                                                                 sp["documents_test"]])
        else:
            rep.eq(w + " n_dev/n_test = windows", [r["n_dev"], r["n_test"]], [sp["windows_dev"], sp["windows_test"]])


def check_probes_exact(rep, what, probes, ref):
    for k, v in ref["split"].items():
        rep.eq("%s split %s" % (what, k), probes["split"].get(k), v)
    got = {r["readout"]: r for r in probes["readouts"]}
    rep.eq(what + " readouts", sorted(got), sorted(ref["readouts"]))
    for name, want in ref["readouts"].items():
        g = got.get(name)
        if g is None:
            continue
        w = "%s [%s]" % (what, name)
        rep.eq(w + " level", g["level"], want["level"])
        rep.eq(w + " features", g["features"], want["features"])
        rep.eq(w + " n_dev, n_test", [g["n_dev"], g["n_test"]], [want["n_dev"], want["n_test"]])
        rep.eq(w + " cv_auroc_folds", g["cv_auroc_folds"], want["cv"], EXACT_TOL)
        rep.eq(w + " test_auroc", g["test_auroc"], want["test_auroc"], EXACT_TOL)
        rep.eq(w + " test_roc", g["test_roc"], want["test_roc"], EXACT_TOL)
        for i, (gf, wf) in enumerate(zip(g["fits"]["cv"], want["fits"])):
            compare_fit(rep, "%s fit cv[%d]" % (w, i), gf, wf)
        compare_fit(rep, w + " fit test", g["fits"]["test"], want["test_fit"])


# ------------------------------------------------------------------ mode paths
def mode_path_reference(traces, seqs, label, L, D, rule):
    E, A, obs, agr, amb = [], [], [], [], []
    sel = [tr for tr, s in zip(traces, seqs) if s["label"] == label and tr is not None]
    for l in range(D):
        K = max(len(tr[l]) for tr in sel)
        er, ar, orow, grow = [], [], [], []
        for k in range(K):
            cells = [tr[l][k] for tr in sel if k < len(tr[l])]
            n = len(cells)
            mp = [sum(c[2][e] for c in cells) / n for e in range(L)]
            if rule == "mean-prob":
                score = mp
                tie_eps = 1e-6
            else:
                score = [sum(1 for c in cells if c[0] == e) for e in range(L)]
                tie_eps = 0.5
            # ASSUMED: ties to the lowest expert index (undocumented)
            e = max(range(L), key=lambda m: (score[m], -m))
            s = sorted(score, reverse=True)
            if len(s) > 1 and s[0] - s[1] < tie_eps:
                amb.append((l, k))
            er.append(e)
            # ASSUMED for most-selected (undocumented): alpha = mean router probability of the expert
            ar.append(mp[e])
            orow.append(n)
            grow.append(sum(1 for c in cells if c[0] == e) / n)
        E.append(er)
        A.append(ar)
        obs.append(orow)
        agr.append(grow)
    return E, A, obs, agr, amb


def windows_auto(cfg):
    """--extend auto: 'every window a max_seq_len sequence can have'. ASSUMED: the most
    windows over all routed depths and all prompt lengths (0 = none, 1..n): a 1-token
    prompt window gives the most."""
    n, W, S, D = cfg["max_seq_len"], cfg["window"], cfg["stride"], cfg["core_depth"]
    best = 0
    for l in range(1, D + 1):
        delta = ((l - 1) * S) % W
        best = max(best, (n - 1 + delta) // W + 1, 1 + (n - 2 + delta) // W + 1 if n >= 2 else 1)
    return best


def check_paths(rep, what, out_dir, traces, seqs, L, D, rule, extend, strategies, model):
    agj = json.load(open(os.path.join(out_dir, "agreement.json")))
    for s in strategies:
        E, A, obs, agr, amb = mode_path_reference(traces, seqs, s, L, D, rule)
        p = json.load(open(os.path.join(out_dir, "S%d.json" % s)))
        w = "%s S%d" % (what, s)
        rep.eq(w + " format/version/library_size/core_depth",
               [p.get("format"), p.get("version"), p.get("library_size"), p.get("core_depth")],
               ["lol-routing-path", 1, L, D])
        rep.eq(w + " meta.rule/strategy/task", [p["meta"].get("rule"), p["meta"].get("strategy"), p["meta"].get("task")],
               [rule, s, "maze"])
        for l in range(D):
            K = len(E[l])
            if extend == "auto":
                want_len = max(K, windows_auto(model.c))
            else:
                want_len = max(K, int(extend))
            rep.eq("%s depth %d row length (extend %s)" % (w, l + 1, extend), len(p["expert"][l]), want_len)
            gotE, gotA = p["expert"][l][:K], p["alpha"][l][:K]
            for k in range(K):
                if gotE[k] != E[l][k] and (l, k) in amb:
                    rep.ambiguous("%s depth %d window %d: near-tie, lol E%d, reference E%d" % (w, l + 1, k, gotE[k],
                                                                                              E[l][k]))
                    gotE[k] = E[l][k]
                    gotA[k] = A[l][k]
            rep.eq("%s depth %d experts (%s)" % (w, l + 1, rule), gotE, E[l])
            rep.eq("%s depth %d alphas" % (w, l + 1), gotA, A[l], PROB_TOL)
            tail_e, tail_a = p["expert"][l][K:], p["alpha"][l][K:]
            rep.eq("%s depth %d extended windows reuse the last observed one" % (w, l + 1),
                   [tail_e, tail_a], [[E[l][-1]] * len(tail_e), [A[l][-1]] * len(tail_a)], PROB_TOL)
        g = agj["labels"][str(s)]
        rep.eq(w + " agreement.json observations [depth][window]", g["observations"], obs)
        rep.eq(w + " agreement.json agreement [depth][window]", g["agreement"], agr, 1e-12)


def soften_router(ckpt, scale):
    path = os.path.join(ckpt, "model.safetensors")
    t = read_st(path)
    out = {}
    for k, (shape, vals, _) in t.items():
        if "router" in k:
            vals = [v * scale for v in vals]
            vals = list(struct.unpack("<%df" % len(vals), struct.pack("<%df" % len(vals), *vals)))
        out[k] = (shape, vals, "F32")
    write_st(path, out)


def min_feature_gap(traces):
    """Smallest gap between distinct values of one router-probability column over all
    window items: below ~1e-6, float32 may order (or tie) them differently."""
    cols = {}
    for tr in traces:
        for it in window_items(tr):
            for j, v in enumerate(it["probs"]):
                cols.setdefault(("p", j), set()).add(v)
            for j, v in enumerate(it["top1"]):
                cols.setdefault(("t", j), set()).add(v)
    gap = float("inf")
    for v in cols.values():
        v = sorted(v)
        gap = min([gap] + [b - a for a, b in zip(v, v[1:])])
    return gap


# ------------------------------------------------------------------ lol runs
class Lol:
    def __init__(self, exe, work):
        self.exe, self.work = exe, work
        self.env = dict(os.environ, OMP_NUM_THREADS="1", LOL_NUM_THREADS="1")
        self.runs, self.seconds = 0, 0.0

    def __call__(self, *args, ok=True):
        t = time.time()
        r = subprocess.run([self.exe] + [str(a) for a in args], capture_output=True, text=True, env=self.env)
        self.runs += 1
        self.seconds += time.time() - t
        if ok and r.returncode != 0:
            raise RuntimeError("lol %s: exit %d\n%s" % (" ".join(map(str, args)), r.returncode, r.stderr[-2000:]))
        return r


def check(exe, work):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    for name in ("init", "ck", "maze", "probe_data", "two_data", "empty_data", "an_maze", "an_cut", "an_probe",
                 "an_two", "an_label", "an_bad", "an_empty", "px_mean", "px_most", "px_ext", "ev", "cfg.json"):
        p = os.path.join(work, name)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    W = lambda *a: os.path.join(work, *a)  # noqa: E731
    lol = Lol(exe, work)
    rep = Report()
    with open(W("cfg.json"), "w") as f:
        json.dump(MODEL_CFG, f)
    lol("init", "--config", W("cfg.json"), "--seed", 1, "--out", W("init"))
    perturb(W("init"), W("ck"), seed=7)
    soften_router(W("ck"), ROUTER_SCALE)
    model = LoL(W("ck"))
    L, D = MODEL_CFG["library_size"], MODEL_CFG["core_depth"]

    # ---------------------------------------------------------------- maze data
    lol("data", "maze", "--n", 16, "--size", 4, "--seed", 3, "--valid-fraction", 0.4, "--out", W("maze"),
        "--no-progress")
    vocab = json.load(open(W("maze", "dataset.json")))["vocab"]["tokens"]
    seqs = read_split(W("maze"), "valid")
    print("maze valid split: %d sequences; reference forward ..." % len(seqs))
    traces = [route(model, s) for s in seqs]
    gap = min(trace_margin(model, tr) for tr in traces)
    print("  smallest routing margin (a + b, best - second) %.2e" % gap)
    if gap < 1e-5:
        rep.ambiguous("maze data: a routing decision within 1e-5 of a tie (float32 may differ)")
    names = {c: "S%d (%s)" % (c, n) for c, n in
             zip(range(1, 6), ["BFS", "DFS walk", "A*", "bidirectional BFS", "dead-end filling"])}

    # analyze routing, default depth, probes on S1 (2 folds)
    lol("analyze", "routing", "--model", W("ck"), "--data", W("maze"), "--out", W("an_maze"),
        "--label-positive", "S1", "--folds", 2)
    j = json.load(open(W("an_maze", "routing.json")))
    print("analyze routing (maze, valid, --label-positive S1 --folds 2)")
    rep.eq("maze sequences", j["sequences"], len(seqs))
    want = utilization(traces, L, D)
    rep.eq("maze window_items", j["window_items"], want["window_items"])
    check_utilization(rep, "maze utilization", j["utilization"], want)
    for c in range(1, 6):
        sel = [tr for tr, s in zip(traces, seqs) if s["label"] == c]
        g = j["utilization_by_label"].get(str(c), {})
        rep.eq("maze utilization_by_label[%d] name" % c, g.get("name"), names[c])
        check_utilization(rep, "maze utilization_by_label[%d]" % c, g, utilization(sel, L, D))
    check_heatmap(rep, "maze utilization.png.dat (% per depth)", W("an_maze", "utilization.png.dat"),
                  [[100 * v for v in row] for row in want["share"]])
    check_heatmap(rep, "maze expert_depth_profile.png.dat (% per expert)",
                  W("an_maze", "expert_depth_profile.png.dat"),
                  [[100 * v for v in row] for row in want["expert_depth_profile"]])
    for c in range(1, 6):
        u = utilization([tr for tr, s in zip(traces, seqs) if s["label"] == c], L, D)
        check_heatmap(rep, "maze utilization_label%d.png.dat" % c, W("an_maze", "utilization_label%d.png.dat" % c),
                      [[100 * v for v in row] for row in u["share"]])
    items_by_doc = {i: window_items(tr) for i, tr in enumerate(traces)}
    sref = separation_reference(items_by_doc, {i: s["label"] for i, s in enumerate(seqs)}, L, 2)
    check_separation_invariants(rep, "maze separation", j["separation"])
    check_separation(rep, "maze separation", j["separation"], sref, names, W("an_maze"), exact_cv=False)
    check_probe_invariants(rep, "maze probes", j["probes"], 2)
    # the split sizes follow from the window counts alone (see greedy_split)
    pref = probe_reference({i: tr for i, tr in enumerate(traces)}, {i: s["label"] for i, s in enumerate(seqs)}, 1,
                           L, 2, 0.2)
    for k, v in pref["split"].items():
        rep.eq("maze probes split %s" % k, j["probes"]["split"].get(k), v)
    for r in j["probes"]["readouts"]:
        want_r = pref["readouts"][r["readout"]]
        if "train_items" in r["fits"]["test"]:
            got_ti = [f["train_items"] for f in r["fits"]["cv"]] + [r["fits"]["test"]["train_items"]]
            want_ti = [f["train_items"] for f in want_r["fits"]] + [want_r["test_fit"]["train_items"]]
            rep.eq("maze probes [%s] train_items per fit" % r["readout"], got_ti, want_ti)

    # --depth 2, --max, --max-tokens (cut after the prompt window), --no-shuffle, batch 3
    lol("analyze", "routing", "--model", W("ck"), "--data", W("maze"), "--out", W("an_cut"), "--depth", 2,
        "--max", 23, "--max-tokens", 70, "--no-shuffle", "--batch", 3, "--label-positive", "BFS", "--folds", 2)
    j = json.load(open(W("an_cut", "routing.json")))
    print("analyze routing (maze, --depth 2 --max 23 --max-tokens 70 --no-shuffle --label-positive BFS)")
    cut = [route(model, s, depth=2, max_tokens=70) for s in seqs[:23]]
    rep.eq("cut sequences", j["sequences"], 23)
    check_utilization(rep, "cut utilization", j["utilization"], utilization(cut, L, 2))
    rep.eq("cut probes positive_label (name BFS)", j["probes"]["positive_label"], 1)
    check_separation_invariants(rep, "cut separation", j["separation"], shuffled=False)
    check_probe_invariants(rep, "cut probes", j["probes"], 2, shuffled=False)

    # label by id / by strategy name
    for arg, want_id in (("5", 5), ("dead-end filling", 5)):
        r = lol("analyze", "routing", "--model", W("ck"), "--data", W("maze"), "--out", W("an_label"),
                "--label-positive", arg, "--folds", 2, "--no-separation", "--no-shuffle", ok=False)
        if r.returncode != 0:
            rep.true("--label-positive %r accepted" % arg, False, "exit %d: %s" % (r.returncode, _error_line(r.stderr)))
            continue
        jj = json.load(open(W("an_label", "routing.json")))
        rep.eq("--label-positive %r -> positive_label" % arg, jj["probes"]["positive_label"], want_id)
        rep.true("--no-separation: no separation result", not jj.get("separation"), str(jj.get("separation"))[:80])

    # ---------------------------------------------------------------- probe data (exact)
    rng = random.Random(11)
    Wn = MODEL_CFG["window"]
    # window counts per label: all distinct inside label 1 and inside labels 0 + 2 (the negatives)
    plan = {0: [3, 5, 7], 1: [3, 4, 5], 2: [4, 6, 8]}
    firsts = list(range(2, MODEL_CFG["vocab_size"]))
    rng.shuffle(firsts)
    types = []
    for lab in (0, 1, 2):
        for K in plan[lab]:
            n = Wn * (K - 1) - rng.randrange(0, 3)   # K windows at the most shifted depth
            # distinct first tokens: window 0's router input (e + s_0)/2 differs per type
            types.append(dict(tokens=[firsts.pop()] + [rng.randrange(2, 31) for _ in range(n - 1)], label=lab,
                              prompt_len=0, router_only=[]))
    types.append(dict(tokens=[firsts.pop()] + [rng.randrange(2, 31) for _ in range(12)], label=-1, prompt_len=0,
                      router_only=[]))
    pseqs = [dict(t) for t in types[:-1] for _ in range(3)] + [dict(types[-1])]
    rng.shuffle(pseqs)
    label_names = ["zero", "one", "two"]
    write_dataset(W("probe_data"), "valid", pseqs, MODEL_CFG["vocab_size"], label_names)
    print("probe data: %d sequences (%d distinct), reference forward ..." % (len(pseqs), len(types)))
    tmemo = {}
    for t in types:
        tmemo[tuple(t["tokens"])] = route(model, t)
    ptr = {i: tmemo[tuple(s["tokens"])] for i, s in enumerate(pseqs)}
    gap = min(trace_margin(model, tr) for tr in tmemo.values())
    fgap = min_feature_gap(list(tmemo.values()))
    print("  smallest routing margin %.2e, smallest gap between distinct feature values %.2e" % (gap, fgap))
    if gap < 1e-5:
        rep.ambiguous("probe data: a routing decision within 1e-5 of a tie")
    if fgap < 1e-6:
        rep.ambiguous("probe data: two feature values within 1e-6 (float32 may order them differently)")
    lol("analyze", "routing", "--model", W("ck"), "--data", W("probe_data"), "--out", W("an_probe"),
        "--label-positive", "one", "--folds", 3, "--batch", 1)
    j = json.load(open(W("an_probe", "routing.json")))
    print("analyze routing (probe data, --label-positive one --folds 3 --batch 1)")
    rep.eq("probe data sequences", j["sequences"], len(pseqs))
    check_utilization(rep, "probe data utilization", j["utilization"], utilization(list(ptr.values()), L, D))
    rep.eq("probe data utilization_by_label keys (label -1 not a label)", sorted(j["utilization_by_label"]),
           ["0", "1", "2"])
    labels_of = {i: s["label"] for i, s in enumerate(pseqs)}
    sref = separation_reference({i: window_items(tr) for i, tr in ptr.items()}, labels_of, L, 3)
    pn = {i: n for i, n in enumerate(label_names)}
    check_separation_invariants(rep, "probe data separation", j["separation"])
    check_separation(rep, "probe data separation", j["separation"], sref, pn, W("an_probe"), exact_cv=True)
    check_heatmap(rep, "probe data separation_confusion.png.dat (% of the true label)",
                  W("an_probe", "separation_confusion.png.dat"),
                  [[100.0 * v / sum(row) for v in row] for row in sref["confusion"]])
    check_heatmap(rep, "probe data centroid_distances.png.dat", W("an_probe", "centroid_distances.png.dat"),
                  sref["centroid_distances"])
    check_probe_invariants(rep, "probe data probes", j["probes"], 3)
    pref = probe_reference(ptr, labels_of, 1, L, 3, 0.2)
    check_probes_exact(rep, "probe data probes", j["probes"], pref)

    # two labels without --label-positive: the larger id is positive (docs/analysis.md);
    # another --seed and --test-fraction must give the same (shuffle-independent) split sizes here
    two = [q for q in pseqs if q["label"] in (0, 2)]
    write_dataset(W("two_data"), "valid", two, MODEL_CFG["vocab_size"], label_names)
    lol("analyze", "routing", "--model", W("ck"), "--data", W("two_data"), "--out", W("an_two"), "--folds", 3,
        "--batch", 1, "--seed", 5, "--test-fraction", 0.3)
    j = json.load(open(W("an_two", "routing.json")))
    print("analyze routing (labels 0 and 2 only, no --label-positive, --seed 5 --test-fraction 0.3)")
    rep.eq("two labels: positive_label = the larger id", (j.get("probes") or {}).get("positive_label"), 2)
    if j.get("probes"):
        two_tr = {i: tmemo[tuple(q["tokens"])] for i, q in enumerate(two)}
        pref = probe_reference(two_tr, {i: q["label"] for i, q in enumerate(two)}, 2, L, 3, 0.3)
        check_probe_invariants(rep, "two-label probes", j["probes"], 3)
        check_probes_exact(rep, "two-label probes", j["probes"], pref)
    # five labels without --label-positive: probes skipped, the rest written; and
    # --max-tokens 40 cuts inside the 60-token prompt window (ASSUMED: the prefix is window 0)
    lol("analyze", "routing", "--model", W("ck"), "--data", W("maze"), "--out", W("an_label"), "--folds", 2,
        "--max", 10, "--no-shuffle", "--max-tokens", 40)
    j = json.load(open(W("an_label", "routing.json")))
    rep.true("5 labels, no --label-positive: probes null with probes_skipped",
             j.get("probes") is None and bool(j.get("probes_skipped")), str(j.get("probes_skipped")))
    check_utilization(rep, "--max-tokens 40 (inside the prompt window) utilization", j["utilization"],
                      utilization([route(model, q, max_tokens=40) for q in seqs[:10]], L, D))
    for arg in ("S7", "nonexistent", ""):
        r = lol("analyze", "routing", "--model", W("ck"), "--data", W("maze"), "--out", W("an_bad"),
                "--label-positive", arg, "--max", 10, ok=False)
        rep.eq("--label-positive %r refused with exit 2" % arg, r.returncode, 2)
        rep.true("--label-positive %r: nothing written" % arg, not os.path.exists(W("an_bad", "routing.json")))

    # an empty sequence is skipped (docs/analysis.md: "empty ones are skipped"), at any --batch
    eseqs = pseqs + [dict(tokens=[], label=1, prompt_len=0, router_only=[])]
    write_dataset(W("empty_data"), "valid", eseqs, MODEL_CFG["vocab_size"], label_names)
    for batch in (16, 1):
        r = lol("analyze", "routing", "--model", W("ck"), "--data", W("empty_data"), "--out", W("an_empty"),
                "--label-positive", "one", "--folds", 3, "--batch", batch, "--no-shuffle", ok=False)
        if rep.true("empty sequence skipped (--batch %d): exit 0" % batch, r.returncode == 0,
                    "exit %d: %s" % (r.returncode, _error_line(r.stderr))):
            jj = json.load(open(W("an_empty", "routing.json")))
            rep.eq("empty sequence skipped (--batch %d): sequences" % batch, jj["sequences"], len(pseqs))

    # ---------------------------------------------------------------- paths extract
    print("paths extract (maze valid)")
    lol("paths", "extract", "--model", W("ck"), "--data", W("maze"), "--out", W("px_mean"))
    check_paths(rep, "paths mean-prob", W("px_mean"), traces, seqs, L, D, "mean-prob", "auto", range(1, 6), model)
    lol("paths", "extract", "--model", W("ck"), "--data", W("maze"), "--out", W("px_most"), "--rule",
        "most-selected", "--extend", 0)
    check_paths(rep, "paths most-selected", W("px_most"), traces, seqs, L, D, "most-selected", 0, range(1, 6), model)
    lol("paths", "extract", "--model", W("ck"), "--data", W("maze"), "--out", W("px_ext"), "--extend", 9, "--max", 7)
    check_paths(rep, "paths --max 7 --extend 9", W("px_ext"), traces[:7], seqs[:7], L, D, "mean-prob", 9,
                range(1, 6), model)
    lol("paths", "extract", "--model", W("ck"), "--data", W("maze"), "--out", W("px_ext"), "--max", 3)
    rep.eq("paths --max 3: files (S4/S5 of the earlier run removed)",
           sorted(f for f in os.listdir(W("px_ext")) if f.startswith("S") and f.endswith(".json")),
           ["S1.json", "S2.json", "S3.json"])
    check_paths(rep, "paths --max 3", W("px_ext"), traces[:3], seqs[:3], L, D, "mean-prob", "auto", range(1, 4), model)

    # ---------------------------------------------------------------- eval-strategies
    print("eval-strategies (--n 1 --max-new 5), reference greedy decoding ...")
    lol("eval-strategies", "--model", W("ck"), "--paths", W("px_mean"), "--data", W("maze"), "--n", 1,
        "--max-new", 5, "--out", W("ev"))
    res = json.load(open(W("ev", "results.json")))
    ids = {t: i for i, t in enumerate(vocab)}
    rows, cols = res["confusion_rows"], res["confusion_columns"]
    rep.eq("eval confusion rows/columns", [rows, cols], [["S1", "S2", "S3", "S4", "S5"],
                                                          ["none", "S1", "S2", "S3", "S4", "S5"]])
    conf = [[0] * 6 for _ in range(5)]
    for smp in res["samples"]:
        if smp["forced"]:
            conf[smp["strategy"] - 1][smp["verdict"]["followed"]] += 1
    rep.eq("eval confusion = forced samples by verdict.followed", res["confusion"], conf)
    for s in range(1, 6):
        fs = [smp for smp in res["samples"] if smp["forced"] and smp["strategy"] == s]
        st = res["forced"]["S%d" % s]
        rep.eq("eval forced S%d n" % s, st["n"], len(fs))
        if fs:
            rep.eq("eval forced S%d strategy_as_requested = confusion diagonal" % s, st["strategy_as_requested"],
                   100.0 * conf[s - 1][s] / len(fs) if st["strategy_as_requested"] > 1 else conf[s - 1][s] / len(fs),
                   1e-9)
    rep.eq("eval max_new_tokens", res["max_new_tokens"], 5)
    for smp in res["samples"]:
        q = [ids[t] for t in smp["question"].split()]
        lb = q.index(ids["["])
        path = json.load(open(W("px_mean", "S%d.json" % smp["strategy"]))) if smp["forced"] else None
        want_label = ["["] + ["..."] * 6 + ["]"] if smp["forced"] else None
        if want_label:
            rep.eq("eval S%d forced question ends with the length-matched filler" % smp["strategy"],
                   smp["question"].split()[lb:], want_label)
        toks, out, amb = list(q), [], False
        for _ in range(5):
            logits, tr = model.forward(toks, len(q), list(range(lb, len(q))), None, path)
            z = logits[-1]
            t = argmax_low(z)
            srt = sorted(z, reverse=True)
            if srt[0] - srt[1] < 1e-4 * max(abs(v) for v in z) or trace_margin(model, tr) < 1e-5:
                amb = True
            out.append(vocab[t])
            toks.append(t)
            if t == ids["<eos>"]:
                break
        got = smp["generated"].split()[:len(out)]
        what = "eval S%d %s: first generated tokens" % (smp["strategy"], "forced" if smp["forced"] else "unforced")
        if got != out and amb:
            rep.ambiguous(what + " (near-tie in the reference)")
        else:
            rep.eq(what, got, out)

    dt = time.time() - t0
    print("\n%d checks agree, %d differ, %d ambiguous; %d lol runs (%.1f s), total %.1f s" % (
        rep.ok, len(rep.fail), len(rep.amb), lol.runs, lol.seconds, dt))
    for f in rep.fail:
        print("  DIFF  " + f)
    return 1 if rep.fail else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run lol's analyses on a tiny model and compare with this reference")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory (its own outputs are replaced)")
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))
