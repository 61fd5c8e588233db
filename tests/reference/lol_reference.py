#!/usr/bin/env python3
"""An independent float64 reference of the LoL forward pass in pure Python (no numpy,
no torch), written from docs/checkpoint-format.md, docs/routing-paths.md and the paper
(Algorithm 1, Appendix A) by a reviewer who did not read src/ (session 36), and a
check that `lol forward` agrees with it (llm.c's test_gpt2 idea: every output against
an implementation that shares no code).

  python3 tests/reference/lol_reference.py check --lol build/lol --work /tmp/x

builds three small checkpoints with `lol init` (grouped-query attention, a single kv
head, untied embeddings and routers, an MoE prelude/coda), replaces every tensor by
non-trivial random values (so that FiLM, norm weights, the balancing bias and the
depth embeddings matter; `lol init` starts them at the identity / zero), runs `lol
forward` on random token sequences (plain, a prompt window, router-only tokens, fewer
routed depths, a forced routing path) and compares the expert chosen for every window
(exactly), alpha and the router probabilities (1e-5) and the logits (1e-4 of their
largest magnitude; `lol` computes in float32); then `lol eval lm --packing pack` on three
documents packed into one row, whose summed loss must be the sum of the documents' own
(1e-5 relative: no attention, window, position or router input crosses a document).
Exit status 1 on any difference. CTest
runs it as LolReference.PurePythonFloat64ForwardAgrees.
"""
import argparse, json, math, os, random, shutil, struct, subprocess, sys

# ---------------------------------------------------------------- safetensors
from safetensors_io import DT, read_st, write_st  # noqa: E402,F401  (re-exported to importers)


def mat(t):
    shape, vals, _ = t
    if len(shape) == 1:
        return list(vals)
    r, c = shape
    return [vals[i * c:(i + 1) * c] for i in range(r)]


# ---------------------------------------------------------------- math
def matvec(W, x):
    return [sum(w * xi for w, xi in zip(row, x)) for row in W]


def rmsnorm(x, w, eps):
    ms = sum(v * v for v in x) / len(x)
    r = 1.0 / math.sqrt(ms + eps)
    return [wi * v * r for wi, v in zip(w, x)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def argmax_low(v):
    best = 0
    for i in range(1, len(v)):
        if v[i] > v[best]:
            best = i
    return best


def rope(x, pos, theta):
    hd = len(x)
    half = hd // 2
    out = [0.0] * hd
    for j in range(half):
        inv = theta ** (-2.0 * j / hd)
        a = pos * inv
        c, s = math.cos(a), math.sin(a)
        out[j] = x[j] * c - x[j + half] * s
        out[j + half] = x[j + half] * c + x[j] * s
    return out


# ---------------------------------------------------------------- model
class LoL:
    def __init__(self, ckpt):
        self.cfg = json.load(open(os.path.join(ckpt, "config.json")))
        d = dict(vocab_size=256, d_model=256, n_heads=8, n_kv_heads=8, ffn_hidden=688,
                 n_prelude=2, n_coda=2, library_size=8, core_depth=8, window=64, stride=32,
                 rope_theta=10000.0, norm_eps=1e-5, tie_embeddings=True, untied_router=False,
                 prelude_coda_experts=0, prelude_coda_top_k=2, prelude_coda_expert_ffn=0)
        d.update(self.cfg)
        self.c = d
        self.T = read_st(os.path.join(ckpt, "model.safetensors"))
        self.M = {k: mat(v) for k, v in self.T.items()}

    def block(self, p, X, pos, segments, ronly, film=None, moe=False):
        """X: list of states (all tokens of the row); segments: list of lists of
        token indices (ascending) = attention segments. Returns block output for
        every token that is in some segment (dict idx -> y)."""
        c, M = self.c, self.M
        eps = c["norm_eps"]
        H, Hkv = c["n_heads"], c["n_kv_heads"]
        hd = c["d_model"] // H
        grp = H // Hkv
        scale = 1.0 / math.sqrt(hd)

        def norm(x, which):
            y = rmsnorm(x, M[p + "." + which + ".weight"], eps)
            if film is not None:
                g, b = film[0 if which == "input_layernorm" else 1]
                y = [gi * yi + bi for gi, yi, bi in zip(g, y, b)]
            return y

        out = {}
        for seg in segments:
            Q, K, V = {}, {}, {}
            for i in seg:
                u = norm(X[i], "input_layernorm")
                q = matvec(M[p + ".self_attn.q_proj.weight"], u)
                k = matvec(M[p + ".self_attn.k_proj.weight"], u)
                v = matvec(M[p + ".self_attn.v_proj.weight"], u)
                Q[i] = [rope(q[h * hd:(h + 1) * hd], pos[i], c["rope_theta"]) for h in range(H)]
                K[i] = [rope(k[h * hd:(h + 1) * hd], pos[i], c["rope_theta"]) for h in range(Hkv)]
                V[i] = [v[h * hd:(h + 1) * hd] for h in range(Hkv)]
            for qi_, i in enumerate(seg):
                keys = [j for j in seg[:qi_ + 1] if not ronly[j]]
                att = []
                for h in range(H):
                    kh = h // grp
                    if not keys:
                        att += [0.0] * hd
                        continue
                    sc = [scale * sum(a * b for a, b in zip(Q[i][h], K[j][kh])) for j in keys]
                    w = softmax(sc)
                    o = [0.0] * hd
                    for wj, j in zip(w, keys):
                        for t in range(hd):
                            o[t] += wj * V[j][kh][t]
                    att += o
                o = matvec(M[p + ".self_attn.o_proj.weight"], att)
                h1 = [a + b for a, b in zip(X[i], o)]
                u2 = norm(h1, "post_attention_layernorm")
                if moe:
                    mlp = self.moe_ffn(p, u2)
                else:
                    mlp = self.swiglu(p + ".mlp", u2)
                out[i] = [a + b for a, b in zip(h1, mlp)]
        return out

    def swiglu(self, p, u):
        M = self.M
        g = matvec(M[p + ".gate_proj.weight"], u)
        up = matvec(M[p + ".up_proj.weight"], u)
        hmid = [silu(a) * b for a, b in zip(g, up)]
        return matvec(M[p + ".down_proj.weight"], hmid)

    def moe_ffn(self, p, u):
        c, M = self.c, self.M
        E, k = c["prelude_coda_experts"], c["prelude_coda_top_k"]
        pr = softmax(matvec(M[p + ".mlp.gate.weight"], u))
        b = M[p + ".mlp.balance_bias"]
        sc = [pr[e] + b[e] for e in range(E)]
        order = sorted(range(E), key=lambda e: (-sc[e], e))[:k]
        out = [0.0] * len(u)
        for e in order:
            y = self.swiglu(p + ".mlp.experts.%d" % e, u)
            out = [o + pr[e] * yi for o, yi in zip(out, y)]
        return out

    def windows(self, n, l, prompt_len):
        W, S = self.c["window"], self.c["stride"]
        delta = ((l - 1) * S) % W
        win = []
        for j in range(n):
            if prompt_len > 0:
                win.append(0 if j < prompt_len else 1 + (j - prompt_len + delta) // W)
            else:
                win.append((j + delta) // W)
        return win

    def forward(self, tokens, prompt_len=0, router_only=(), depth=None, force=None):
        c, M = self.c, self.M
        n = len(tokens)
        ronly = [i in set(router_only) for i in range(n)]
        pos = list(range(n))
        E = M["model.embed_tokens.weight"]
        X = [list(E[t]) for t in tokens]
        moe = c["prelude_coda_experts"] > 0
        full = [list(range(n))]
        for i in range(c["n_prelude"]):
            y = self.block("model.prelude.%d" % i, X, pos, full, ronly, moe=moe)
            X = [y[j] for j in range(n)]
        D = c["core_depth"] if depth is None else depth
        L = c["library_size"]
        trace = []
        for l in range(1, D + 1):
            win = self.windows(n, l, prompt_len)
            K = max(win) + 1
            segs = [[j for j in range(n) if win[j] == k] for k in range(K)]
            mus = [[sum(X[j][t] for j in seg) / len(seg) for t in range(c["d_model"])] for seg in segs]
            R = M["model.routers.%d.weight" % (l - 1)] if c["untied_router"] else M["model.router.weight"]
            e_l = M["model.depth_embed"][l - 1]
            b = M["model.balance_bias"]
            film = ((M["model.film.%d.attn_gamma" % (l - 1)], M["model.film.%d.attn_beta" % (l - 1)]),
                    (M["model.film.%d.ffn_gamma" % (l - 1)], M["model.film.%d.ffn_beta" % (l - 1)]))
            dec = []
            for k in range(K):
                if k == 0:
                    r = [(a + s) / 2 for a, s in zip(e_l, X[0])]
                else:
                    r = [sum(mus[j][t] for j in range(k)) / k for t in range(c["d_model"])]
                a = softmax(matvec(R, r))
                rho = argmax_low([a[m] + b[m] for m in range(L)])
                alpha = a[rho]
                if force is not None and l - 1 < len(force["expert"]) and k < len(force["expert"][l - 1]) \
                        and force["expert"][l - 1][k] is not None:
                    rho = force["expert"][l - 1][k]
                    fa = force.get("alpha")
                    fa = fa[l - 1][k] if fa and l - 1 < len(fa) and k < len(fa[l - 1]) else None
                    alpha = fa if fa is not None else a[rho]
                dec.append((rho, alpha, a))
            newX = [list(x) for x in X]
            for k, seg in enumerate(segs):
                rho, alpha, _ = dec[k]
                y = self.block("model.library.%d" % rho, X, pos, [seg], ronly, film=film)
                for j in seg:
                    newX[j] = [s + alpha * (yy - s) for s, yy in zip(X[j], y[j])]
            X = newX
            trace.append(dec)
        for i in range(c["n_coda"]):
            y = self.block("model.coda.%d" % i, X, pos, full, ronly, moe=moe)
            X = [y[j] for j in range(n)]
        head = M["model.embed_tokens.weight"] if c["tie_embeddings"] else M["lm_head.weight"]
        logits = []
        for j in range(n):
            h = rmsnorm(X[j], M["model.norm.weight"], c["norm_eps"])
            logits.append(matvec(head, h))
        return logits, trace


def compare(ckpt, outfile, tokens, prompt_len=0, router_only=(), depth=None, verbose=True, force=None):
    m = LoL(ckpt)
    logits, trace = m.forward(tokens, prompt_len, router_only, depth, force)
    o = read_st(outfile)
    lshape, lv, _ = o["logits"]
    V = lshape[1]
    maxabs, maxref = 0.0, 0.0
    for j in range(len(tokens)):
        for v in range(V):
            maxabs = max(maxabs, abs(lv[j * V + v] - logits[j][v]))
            maxref = max(maxref, abs(logits[j][v]))
    eshape, ev, _ = o["routing.expert"]
    _, av, _ = o["routing.alpha"]
    _, pv, _ = o["routing.probs"]
    Dt, Kmax = eshape
    L = m.c["library_size"]
    mism, amax, pmax = [], 0.0, 0.0
    mine = []
    for l in range(Dt):
        row = []
        for k in range(Kmax):
            te = ev[l * Kmax + k]
            if l < len(trace) and k < len(trace[l]):
                rho, alpha, a = trace[l][k]
                row.append(rho)
                if te != rho:
                    mism.append((l + 1, k, te, rho))
                amax = max(amax, abs(av[l * Kmax + k] - alpha))
                for mm in range(L):
                    pmax = max(pmax, abs(pv[(l * Kmax + k) * L + mm] - a[mm]))
            else:
                row.append(-1)
                if te != -1:
                    mism.append((l + 1, k, te, -1))
        mine.append(row)
    if len(trace) != Dt:
        mism.append(("depth count", Dt, len(trace)))
    tool = [[ev[l * Kmax + k] for k in range(Kmax)] for l in range(Dt)]
    res = dict(max_abs_logit_diff=maxabs, max_abs_logit=maxref, rel=maxabs / max(maxref, 1e-30),
               max_alpha_diff=amax, max_prob_diff=pmax, expert_mismatches=mism,
               tool_experts=tool, ref_experts=mine)
    if verbose:
        print(json.dumps(res))
    return res


# ---------------------------------------------------------------- the check
CONFIGS = [
    {"vocab_size": 40, "d_model": 16, "n_heads": 2, "n_kv_heads": 2, "ffn_hidden": 24, "n_prelude": 1,
     "n_coda": 1, "library_size": 3, "core_depth": 3, "window": 6, "stride": 2, "tie_embeddings": True,
     "untied_router": False},
    {"vocab_size": 50, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 40, "n_prelude": 2,
     "n_coda": 1, "library_size": 3, "core_depth": 3, "window": 5, "stride": 3, "tie_embeddings": False,
     "untied_router": True, "rope_theta": 500, "norm_eps": 1e-4},
    {"vocab_size": 30, "d_model": 24, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 20, "n_prelude": 1,
     "n_coda": 2, "library_size": 3, "core_depth": 2, "window": 4, "stride": 1, "tie_embeddings": True,
     "untied_router": False, "prelude_coda_experts": 3, "prelude_coda_top_k": 2, "prelude_coda_expert_ffn": 12},
]


def perturb(src, dst, seed, bias_scale=0.3):
    """Copies checkpoint `src` to `dst` with every tensor replaced by random values of
    non-trivial scale, rounded to float32 (the stored dtype)."""
    rng = random.Random(seed)
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
    out = {}
    for k, (shape, vals, _) in read_st(os.path.join(src, "model.safetensors")).items():
        n = len(vals)
        if k.endswith("balance_bias"):
            v = [rng.gauss(0, bias_scale) for _ in range(n)]
        elif "gamma" in k or "layernorm" in k or k == "model.norm.weight":
            v = [1 + rng.gauss(0, 0.5) for _ in range(n)]
        elif "beta" in k:
            v = [rng.gauss(0, 0.5) for _ in range(n)]
        elif k == "model.depth_embed" or "embed_tokens" in k or k == "lm_head.weight":
            v = [rng.gauss(0, 1.0) for _ in range(n)]
        elif "router" in k or k.endswith("mlp.gate.weight"):
            v = [rng.gauss(0, 2.0 / math.sqrt(shape[1])) for _ in range(n)]
        else:  # projections [out, in]
            v = [rng.gauss(0, 1.5 / math.sqrt(shape[1])) for _ in range(n)]
        v = list(struct.unpack("<%df" % n, struct.pack("<%df" % n, *v)))
        out[k] = (shape, v, "F32")
    write_st(os.path.join(dst, "model.safetensors"), out)


def trace_margin(model, trace):
    """Smallest gap between the best and second-best a + b of any window of a forward's
    trace: a decision closer than float32 rounding is not a meaningful comparison."""
    b = model.M["model.balance_bias"]
    gap = float("inf")
    for dec in trace:
        for _, _, a in dec:
            s = sorted((a[i] + b[i] for i in range(len(a))), reverse=True)
            if len(s) > 1:
                gap = min(gap, s[0] - s[1])
    return gap


def min_margin(ckpt, tokens, prompt_len, router_only, depth):
    """trace_margin of the forward of `tokens` through checkpoint `ckpt`."""
    m = LoL(ckpt)
    _, trace = m.forward(tokens, prompt_len, router_only, depth)
    return trace_margin(m, trace)


def check(lol, work):
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    failures, cases = [], 0
    for ci, cfg in enumerate(CONFIGS):
        cfg_path = os.path.join(work, "c%d.json" % ci)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        init = os.path.join(work, "init%d" % ci)
        ck = os.path.join(work, "ck%d" % ci)
        shutil.rmtree(init, ignore_errors=True)
        subprocess.run([lol, "init", "--config", cfg_path, "--seed", "1", "--out", init], check=True,
                       capture_output=True, env=env)
        perturb(init, ck, seed=100 + ci)
        rng = random.Random(ci)
        D = cfg["core_depth"]
        path = os.path.join(work, "path%d.json" % ci)
        with open(path, "w") as f:  # a forced routing path: some windows forced, some left to the router
            json.dump({"format": "lol-routing-path", "version": 1, "library_size": cfg["library_size"],
                       "core_depth": D, "expert": [[(l + k) % 3 if k % 2 == 0 else None for k in range(6)]
                                                   for l in range(D)],
                       "alpha": [[0.5 if k == 0 else None for k in range(6)] for l in range(D)]}, f)
        variants = [dict(), dict(prompt_len=5), dict(router_only=(2, 3, 9)), dict(depth=D - 1), dict(force=path)]
        for vi, var in enumerate(variants):
            for attempt in range(20):
                n = rng.randrange(12, 25)
                tokens = [rng.randrange(cfg["vocab_size"]) for _ in range(n)]
                if "force" in var or min_margin(ck, tokens, var.get("prompt_len", 0), var.get("router_only", ()),
                                                var.get("depth")) > 1e-4:
                    break
            out = os.path.join(work, "out%d_%d.safetensors" % (ci, vi))
            cmd = [lol, "forward", "--model", ck, "--tokens", " ".join(map(str, tokens)), "--out", out]
            if var.get("prompt_len"):
                cmd += ["--prompt-len", str(var["prompt_len"])]
            if var.get("router_only"):
                cmd += ["--router-only", ",".join(map(str, var["router_only"]))]
            if var.get("depth") is not None:
                cmd += ["--depth", str(var["depth"])]
            force = None
            if var.get("force"):
                cmd += ["--force-path", var["force"]]
                with open(var["force"]) as f:
                    force = json.load(f)
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            r = compare(ck, out, tokens, var.get("prompt_len", 0), var.get("router_only", ()), var.get("depth"),
                        verbose=False, force=force)
            cases += 1
            what = "config %d %s tokens %s" % (ci, json.dumps({k: str(v) for k, v in var.items()}), tokens)
            print("%s: experts %s, max |logit diff| %.2e (%.1e of the largest logit), alpha %.1e, probs %.1e"
                  % (what, "equal" if not r["expert_mismatches"] else r["expert_mismatches"],
                     r["max_abs_logit_diff"], r["rel"], r["max_alpha_diff"], r["max_prob_diff"]))
            if r["expert_mismatches"] or r["rel"] > 1e-4 or r["max_alpha_diff"] > 1e-5 or r["max_prob_diff"] > 1e-5:
                failures.append(what)
    # Packed rows: documents side by side in one row of `lol eval lm --packing pack`
    # never see each other (attention, windows, positions and the router's first-token
    # input restart per document; docs/text.md), so the row's summed loss is the sum of
    # the documents' own losses, every token but each document's first predicted.
    cfg = dict(CONFIGS[1], vocab_size=260, max_seq_len=128)  # the byte tokenizer's 259 ids
    cfg_path = os.path.join(work, "packed.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    init, ck = os.path.join(work, "init_packed"), os.path.join(work, "ck_packed")
    shutil.rmtree(init, ignore_errors=True)
    subprocess.run([lol, "init", "--config", cfg_path, "--seed", "2", "--out", init], check=True, capture_output=True,
                   env=env)
    perturb(init, ck, seed=200)
    docs = ["The cat sat.", "A dog ran far away", "Hi"]
    text = os.path.join(work, "docs.txt")
    with open(text, "w") as f:
        f.write("\n\n".join(docs) + "\n")
    data = os.path.join(work, "packed_data")
    shutil.rmtree(data, ignore_errors=True)
    subprocess.run([lol, "corpus", "--in", text, "--tokenizer", "byte", "--valid-fraction", "0", "--out", data,
                    "--no-progress"], check=True, capture_output=True, env=env)
    r = subprocess.run([lol, "eval", "lm", "--model", ck, "--data", data, "--split", "train", "--seq-len", "64",
                        "--packing", "pack", "--json", "--no-progress"], check=True, capture_output=True, env=env,
                       text=True)
    got = json.loads(r.stdout[r.stdout.index("{"):])
    model, want, targets = LoL(ck), 0.0, 0
    for doc in docs:
        tokens = list(doc.encode("utf-8"))  # the byte tokenizer: id = byte
        logits, _ = model.forward(tokens)
        for j in range(len(tokens) - 1):
            z = logits[j]
            m = max(z)
            want += m + math.log(sum(math.exp(v - m) for v in z)) - z[tokens[j + 1]]
            targets += 1
    rel = abs(got["loss_sum"] - want) / want
    print("packed row of %d documents: %d targets (lol %d), summed loss %.6f (lol %.6f, %.1e relative)"
          % (len(docs), targets, got["targets"], want, got["loss_sum"], rel))
    cases += 1
    if got["targets"] != targets or rel > 1e-5:
        failures.append("packed row")
    print("%d cases, %d differ" % (cases, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="compare lol forward with this reference on random checkpoints")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory")
    one = sub.add_parser("compare", help="compare one lol forward output with this reference")
    one.add_argument("ckpt")
    one.add_argument("out")
    one.add_argument("--tokens", required=True)
    one.add_argument("--prompt-len", type=int, default=0)
    one.add_argument("--router-only", default="")
    one.add_argument("--depth", type=int, default=None)
    a = ap.parse_args()
    if a.cmd == "check":
        sys.exit(check(a.lol, a.work))
    toks = [int(t) for t in a.tokens.replace(",", " ").split()]
    ro = [int(t) for t in a.router_only.split(",") if t.strip()]
    compare(a.ckpt, a.out, toks, a.prompt_len, ro, a.depth)
