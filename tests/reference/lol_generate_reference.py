#!/usr/bin/env python3
"""`lol generate` (the KV-cached incremental decoder, docs/generation.md) against full
recomputation with the independent float64 pure-Python forward of lol_reference.py.

  python3 tests/reference/lol_generate_reference.py check --lol build/lol --work /tmp/x

Written by a reviewer from the paper, docs/generation.md, docs/routing-paths.md,
docs/checkpoint-format.md and `lol generate --help`, without reading src/.

For every case the reference decodes greedily by running the *whole* sequence through
`lol_reference.LoL.forward` at every step (no cache of any kind) and taking the argmax
of the last position's logits (after the repetition penalty when one is asked for;
lowest id on ties). `lol generate --ids --trace T` must produce exactly the same tokens,
and every routing decision it records in T (expert exactly; alpha and the router
probabilities within 1e-5; the window's first position; the `forced` flag) must equal
the reference's decision for that (depth, window) on the same token sequence.

Checkpoints: `lol init` of small configs, every tensor randomised as lol_reference.py
does (FiLM, norms, balancing bias, depth embeddings all matter): grouped-query
attention, a single kv head, W/S with overlapping strided windows, S = 0, W = 1, more
depths than experts, untied embeddings and routers, an MoE prelude/coda.

Cases: prompts of many lengths (ending at, just before and just after the window
boundaries of every depth), enough new tokens to cross several windows, prompt windows
(`--prompt-window`, `--prompt-len`), router-only prompt tokens (`--router-only-last`),
forced routing paths (with and without alpha; entries for windows that only generated
tokens reach), test-time depth (`--depth` with `stretch` and `cycle`; the reference
re-maps the depth-specific parameters by the rule in docs/generation.md), the
repetition penalty (greedy), sampling settings that reduce to greedy (`--top-k 1`,
`--top-p 0` at a temperature > 0), stop tokens (`--stop`, ids and a token text with a
byte tokenizer), `--max-new` (including 0) and the `max_seq_len` cap (a prompt that fills it: exit 2), the
default stop token of a tokenizer (the byte tokenizer's <eos>), the tie rule (lowest
id) on an LM head whose rows are all equal, and overflowing logits (exit 3).

A step whose two best reference logits are within 1e-4 of the largest |logit|, or a
routing decision whose two best a + b are within 1e-5, is a near-tie: float32 may
legitimately go either way, so a difference there is reported as ambiguous and does not
fail the check (the seeds below avoid them). Exit status 1 on any other difference.
`lol generate` prints no logits, so per-step logits are compared only through the
greedy tokens (and exactly, through the tie cases); the trace's router probabilities
check the cached states feeding every routed depth.

Measured (2026-12-05, 2-core container under load, one lol thread): 68 cases, 1118
generated tokens and 1185 routing decisions compared, no difference, no near-tie;
about 115 s (roughly 60% of it is the start-up of the 68 `lol` processes).
`--cases 3,7` runs a subset (by the numbers printed).
"""
import argparse, copy, json, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lol_reference import LoL, perturb, read_st, write_st, argmax_low  # noqa: E402

LOGIT_TIE = 1e-4    # relative to the largest |logit| of the step
ROUTE_TIE = 1e-5    # absolute, on a + b
PROB_TOL = 1e-5     # alpha and router probabilities (float32 vs float64)

CONFIGS = {
    # overlapping strided windows (S < W), GQA 4 query heads on 2 kv heads, shared router
    "A": {"vocab_size": 40, "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 24, "n_prelude": 1,
          "n_coda": 1, "library_size": 3, "core_depth": 3, "window": 5, "stride": 2, "tie_embeddings": True,
          "untied_router": False, "max_seq_len": 48},
    # one kv head, untied head and routers, MoE prelude/coda, S > W/2, two coda blocks
    "B": {"vocab_size": 50, "d_model": 24, "n_heads": 4, "n_kv_heads": 1, "ffn_hidden": 20, "n_prelude": 1,
          "n_coda": 2, "library_size": 4, "core_depth": 4, "window": 6, "stride": 4, "tie_embeddings": False,
          "untied_router": True, "rope_theta": 500.0, "norm_eps": 1e-4, "prelude_coda_experts": 3,
          "prelude_coda_top_k": 2, "prelude_coda_expert_ffn": 12, "max_seq_len": 64},
    # small windows, more routed depths than experts
    "C": {"vocab_size": 30, "d_model": 12, "n_heads": 2, "n_kv_heads": 2, "ffn_hidden": 16, "n_prelude": 1,
          "n_coda": 1, "library_size": 2, "core_depth": 5, "window": 3, "stride": 1, "tie_embeddings": True,
          "untied_router": False, "max_seq_len": 40},
    # stride 0 (aligned windows at every depth), untied router, no prelude
    "D": {"vocab_size": 30, "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 16, "n_prelude": 0,
          "n_coda": 1, "library_size": 5, "core_depth": 2, "window": 4, "stride": 0, "tie_embeddings": True,
          "untied_router": True, "max_seq_len": 40},
    # W = 1: every token is its own window (attends only to itself in the core)
    "E": {"vocab_size": 30, "d_model": 8, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 12, "n_prelude": 1,
          "n_coda": 1, "library_size": 3, "core_depth": 2, "window": 1, "stride": 0, "tie_embeddings": True,
          "untied_router": False, "max_seq_len": 40},
    # the byte tokenizer's 259 ids (text prompts, stop token given as text)
    "T": {"vocab_size": 260, "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 16, "n_prelude": 1,
          "n_coda": 1, "library_size": 3, "core_depth": 2, "window": 4, "stride": 2, "tie_embeddings": False,
          "untied_router": False, "max_seq_len": 64},
    # untied LM head with every row equal: all logits tie, greedy takes the lowest id
    "Z": {"vocab_size": 20, "d_model": 8, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 8, "n_prelude": 1,
          "n_coda": 1, "library_size": 2, "core_depth": 2, "window": 3, "stride": 1, "tie_embeddings": False,
          "untied_router": False, "max_seq_len": 40},
}
CONFIGS["Y"] = CONFIGS["T"]  # its LM head rewritten so that greedy reaches the byte tokenizer's <eos>
PERTURB_SEED = {"A": 301, "B": 302, "C": 303, "D": 304, "E": 305, "T": 306, "Z": 307, "Y": 306}
BYTE_EOS = 258  # docs/tokenizers.md: ids 0..255 the bytes, then <pad>, <bos>, <eos>


# ---------------------------------------------------------------- reference model
def depth_map(T, R, rule):
    """Trained depth (0-based) whose depth-specific parameters run-time depth i uses
    (docs/generation.md, Test-time depth)."""
    out = []
    for i in range(R):
        if rule == "cycle":
            out.append(i % T)
        elif R == 1:
            out.append(0)
        else:  # round(i (T-1) / (R-1)), halves up (the doc's T = 3, R = 5: 0 1 1 2 2)
            out.append((2 * i * (T - 1) + (R - 1)) // (2 * (R - 1)))
    return out


def at_depth(model, R, rule):
    """A copy of the reference model that runs R routed depths, depth-specific parameters
    (e^(l), FiLM, the untied router) taken from the trained depths by `rule`."""
    if R is None:
        return model
    T = model.c["core_depth"]
    m = copy.copy(model)
    m.c = dict(model.c, core_depth=R)
    m.M = dict(model.M)
    mp = depth_map(T, R, rule)
    m.M["model.depth_embed"] = [model.M["model.depth_embed"][t] for t in mp]
    for i, t in enumerate(mp):
        for part in ("attn_gamma", "attn_beta", "ffn_gamma", "ffn_beta"):
            m.M["model.film.%d.%s" % (i, part)] = model.M["model.film.%d.%s" % (t, part)]
        if model.c["untied_router"]:
            m.M["model.routers.%d.weight" % i] = model.M["model.routers.%d.weight" % t]
    return m


def penalize(z, seen, p):
    if p == 1.0:
        return z
    z = list(z)
    for t in seen:
        z[t] = z[t] / p if z[t] > 0 else z[t] * p
    return z


def route_margin(model, trace, force):
    """Smallest gap between the best and second-best a + b over the router's own
    (not forced) decisions."""
    b = model.M["model.balance_bias"]
    gap = float("inf")
    for l, dec in enumerate(trace):
        for k, (_, _, a) in enumerate(dec):
            if force is not None and l < len(force["expert"]) and k < len(force["expert"][l]) \
                    and force["expert"][l][k] is not None:
                continue
            s = sorted((a[i] + b[i] for i in range(len(a))), reverse=True)
            if len(s) > 1:
                gap = min(gap, s[0] - s[1])
    return gap


def ref_generate(model, prompt, n_new, prompt_len, router_only, force, penalty, stops):
    """Greedy decoding by full recomputation: the whole sequence through the float64
    forward at every step. Returns the tokens and per-step (gap ratio) diagnostics."""
    seq, out, steps = list(prompt), [], []
    for _ in range(n_new):
        logits, trace = model.forward(seq, prompt_len, router_only, None, force)
        z = penalize(logits[-1], set(seq), penalty)
        tok = argmax_low(z)
        srt = sorted(z, reverse=True)
        scale = max(abs(v) for v in z)
        gap = (srt[0] - srt[1]) / max(scale, 1e-30) if len(z) > 1 else float("inf")
        steps.append(dict(gap=gap, route_gap=route_margin(model, trace, force)))
        out.append(tok)
        seq.append(tok)
        if tok in stops:
            break
    return out, steps


def ref_trace(model, seq, prompt_len, router_only, force):
    """(depth, window) -> (expert, alpha, probs, begin) of the full forward of seq."""
    _, trace = model.forward(seq, prompt_len, router_only, None, force)
    res = {}
    for l, dec in enumerate(trace, start=1):
        win = model.windows(len(seq), l, prompt_len)
        for k, (rho, alpha, a) in enumerate(dec):
            res[(l, k)] = (rho, alpha, a, win.index(k))
    return res, route_margin(model, trace, force)


# ---------------------------------------------------------------- checkpoints
def make_ckpt(lol, work, name, env):
    cfg = CONFIGS[name]
    cfg_path = os.path.join(work, "cfg_%s.json" % name)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    init, ck = os.path.join(work, "init_" + name), os.path.join(work, "ck_" + name)
    shutil.rmtree(init, ignore_errors=True)
    shutil.rmtree(ck, ignore_errors=True)
    subprocess.run([lol, "init", "--config", cfg_path, "--seed", "1", "--out", init], check=True,
                   capture_output=True, env=env)
    perturb(init, ck, seed=PERTURB_SEED[name])
    if name == "Z":  # every row of the LM head equal to the first: exact ties in every step
        st = os.path.join(ck, "model.safetensors")
        T = read_st(st)
        shape, vals, dt = T["lm_head.weight"]
        d = shape[1]
        T["lm_head.weight"] = (shape, vals[:d] * shape[0], dt)
        write_st(st, T)
    if name == "Y":  # every row r, row <eos> 2r: <eos> wins where r . h > 0, id 0 (ties) elsewhere
        st = os.path.join(ck, "model.safetensors")
        T = read_st(st)
        shape, vals, dt = T["lm_head.weight"]
        d = shape[1]
        T["lm_head.weight"] = (shape, [(2 * v if i == BYTE_EOS else v) for i in range(shape[0]) for v in vals[:d]],
                               dt)
        write_st(st, T)
    return ck


def write_path(work, name, cfg, fill, alpha_mode, rows=None):
    """A routing path. fill: 'some' (every other window forced, cells cycling over the
    experts), 'all' (every window of 16 forced). alpha_mode: 'mixed' (some numbers, some
    null), 'none' (no alpha field), 'all' (every alpha given)."""
    L, D = cfg["library_size"], cfg["core_depth"] if rows is None else rows
    K = 16
    expert = [[((l * 2 + k) % L) if (fill == "all" or (k + l) % 2 == 0) else None for k in range(K)]
              for l in range(D)]
    p = {"format": "lol-routing-path", "version": 1, "library_size": L, "core_depth": D, "expert": expert}
    if alpha_mode == "mixed":
        p["alpha"] = [[(0.25 + 0.5 * ((k + l) % 3) / 2) if (e is not None and k % 3 != 1) else None
                       for k, e in enumerate(row)] for l, row in enumerate(expert)]
    elif alpha_mode == "all":
        p["alpha"] = [[0.1 + 0.8 * ((3 * k + l) % 7) / 6 for k in range(K)] for l in range(D)]
    path = os.path.join(work, "path_%s_%s_%s_%d.json" % (name, fill, alpha_mode, D))
    with open(path, "w") as f:
        json.dump(p, f)
    return path, p


# ---------------------------------------------------------------- cases
def cases_for(work):
    """Each case: config, prompt (ids, or text with tokenizer 'byte'), options."""
    rng = random.Random(7)
    C = []

    def ids(cfg, n):
        return [rng.randrange(CONFIGS[cfg]["vocab_size"]) for _ in range(n)]

    # A: W=5, S=2, D=3: window starts at depth 1: 0,5,10,..; depth 2 (delta 2): 3,8,13;
    # depth 3 (delta 4): 1,6,11. Prompt lengths at, before and after each.
    for n in (1, 3, 4, 5, 6, 10, 11):
        C.append(("A", ids("A", n), dict(max_new=20)))
    for n in (4, 8):
        C.append(("A", ids("A", n), dict(max_new=24, penalty=1.8)))
    for n in (3, 5, 6, 10, 12):
        C.append(("A", ids("A", n), dict(max_new=18, prompt_window=True)))
    C.append(("A", ids("A", 9), dict(max_new=18, prompt_len=3)))
    C.append(("A", ids("A", 9), dict(max_new=18, prompt_len=5)))
    C.append(("A", ids("A", 8), dict(max_new=18, prompt_window=True, router_only_last=2)))
    C.append(("A", ids("A", 7), dict(max_new=18, router_only_last=3)))
    C.append(("A", ids("A", 4), dict(max_new=12, prompt_window=True, router_only_last=4)))
    C.append(("A", ids("A", 3), dict(max_new=12, router_only_last=3)))  # no prompt token is a key
    C.append(("A", ids("A", 6), dict(max_new=24, force=("some", "mixed"))))
    C.append(("A", ids("A", 6), dict(max_new=24, prompt_window=True, force=("all", "all"))))
    C.append(("A", ids("A", 5), dict(max_new=18, force=("some", "none"))))
    C.append(("A", ids("A", 6), dict(max_new=20, depth=5)))  # stretch: 0 1 1 2 2
    C.append(("A", ids("A", 6), dict(max_new=20, depth=5, depth_rule="cycle")))
    C.append(("A", ids("A", 7), dict(max_new=20, depth=2)))
    C.append(("A", ids("A", 7), dict(max_new=16, depth=1, depth_rule="cycle")))
    C.append(("A", ids("A", 5), dict(max_new=16, depth=0)))
    C.append(("A", ids("A", 6), dict(max_new=20, depth=4, force=("some", "mixed", 2))))
    C.append(("A", ids("A", 6), dict(max_new=20, temperature=0.8, top_k=1, seed=3)))
    C.append(("A", ids("A", 6), dict(max_new=20, temperature=1.7, top_p=0.0, seed=4)))
    C.append(("A", ids("A", 6), dict(max_new=20, stop="ref:4")))        # stop at the 5th reference token
    C.append(("A", ids("A", 6), dict(max_new=20, stop="ref:0")))        # the first token already stops
    C.append(("A", ids("A", 7), dict(max_new=20, stop="ref:6,ref:3")))  # two stop tokens
    C.append(("A", ids("A", 40), dict(max_new=100)))                    # cap: 48 - 40 = 8 new tokens
    C.append(("A", ids("A", 47), dict(max_new=5)))                      # room for one token
    C.append(("A", ids("A", 5), dict(max_new=0)))
    # B: W=6, S=4, D=4: window starts depth 1 and 4: 0,6,12,..; depth 2 (delta 4): 2,8,14;
    # depth 3 (delta 2): 4,10,16.
    for n in (1, 2, 5, 6, 7, 12, 13):
        C.append(("B", ids("B", n), dict(max_new=24)))
    for n in (3, 6, 9):
        C.append(("B", ids("B", n), dict(max_new=20, prompt_window=True)))
    C.append(("B", ids("B", 9), dict(max_new=20, prompt_window=True, router_only_last=3)))
    C.append(("B", ids("B", 7), dict(max_new=24, force=("some", "mixed"))))
    C.append(("B", ids("B", 7), dict(max_new=20, depth=6, depth_rule="cycle")))
    C.append(("B", ids("B", 7), dict(max_new=20, depth=3)))
    C.append(("B", ids("B", 5), dict(max_new=24, penalty=1.5)))
    # C: W=3, S=1, D=5, L=2
    for n in (1, 3, 4):
        C.append(("C", ids("C", n), dict(max_new=15)))
    C.append(("C", ids("C", 4), dict(max_new=15, prompt_window=True, force=("some", "mixed"))))
    # D: S=0, untied router, no prelude
    for n in (4, 5):
        C.append(("D", ids("D", n), dict(max_new=16)))
    C.append(("D", ids("D", 6), dict(max_new=16, depth=3)))
    # E: W=1
    for n in (1, 4):
        C.append(("E", ids("E", n), dict(max_new=12)))
    # T: text prompt through the byte tokenizer (ids = bytes), a stop token given as text
    C.append(("T", "Hello, world", dict(max_new=20)))
    C.append(("T", "Hello, world", dict(max_new=20, stop="reftext")))
    # Y: the default stop token with a tokenizer is its <eos> (the reference reaches it at step 1)
    C.append(("Y", "Hello", dict(max_new=6, stop="default", exact_ties=True)))
    # Z: ties everywhere: lowest id; with the penalty, the lowest id not yet in the sequence
    # (exact ties by construction: a difference there is not a near-tie but the tie rule)
    C.append(("Z", [5, 9, 2], dict(max_new=6, exact_ties=True)))
    C.append(("Z", [0, 1, 2, 4], dict(max_new=8, penalty=2.0, exact_ties=True)))
    return C


def run_case(lol, work, env, ckpts, models, ci, case):
    name, prompt, o = case
    cfg = CONFIGS[name]
    model = models[name]
    text = isinstance(prompt, str)
    ptoks = list(prompt.encode("utf-8")) if text else list(prompt)
    n = len(ptoks)
    prompt_len = n if o.get("prompt_window") else o.get("prompt_len", 0)
    rol = o.get("router_only_last", 0)
    router_only = tuple(range(n - rol, n))
    depth = o.get("depth")
    rmodel = at_depth(model, depth, o.get("depth_rule", "stretch"))
    force, fpath = None, None
    if o.get("force"):
        fo = o["force"]
        fpath, force = write_path(work, name, cfg, fo[0], fo[1], fo[2] if len(fo) > 2 else None)
    penalty = o.get("penalty", 1.0)
    n_new = min(o["max_new"], cfg["max_seq_len"] - n)

    # stop tokens picked from the unstopped reference continuation
    stops, stop_args = set(), []
    if o.get("stop"):
        free, _ = ref_generate(rmodel, ptoks, n_new, prompt_len, router_only, force, penalty, set())
        if o["stop"] == "default":
            if BYTE_EOS not in free:
                return dict(status="skip", why="the reference does not reach <eos>")
            stops = {BYTE_EOS}
        elif o["stop"] == "reftext":  # a printable, non-digit byte the reference generates at step >= 2
            cand = [t for j, t in enumerate(free) if j >= 2 and 33 <= t < 127 and not chr(t).isdigit()
                    and t not in free[:j] and chr(t) not in "\"'\\"]
            if not cand:
                return dict(status="skip", why="no printable reference token to stop at")
            stops, stop_args = {cand[0]}, [chr(cand[0])]
        else:
            for s in o["stop"].split(","):
                t = free[int(s.split(":")[1])]
                stops.add(t)
                stop_args.append(str(t))

    want, steps = ref_generate(rmodel, ptoks, n_new, prompt_len, router_only, force, penalty, stops)

    tr = os.path.join(work, "trace_%03d.json" % ci)
    if os.path.exists(tr):
        os.remove(tr)
    cmd = [lol, "generate", "--model", ckpts[name], "--max-new", str(o["max_new"]), "--ids", "--trace", tr,
           "--threads", "1"]
    if text:
        cmd += ["--prompt", prompt, "--tokenizer", "byte"]
    else:
        cmd += ["--tokens", ",".join(map(str, ptoks))]
    if o.get("prompt_window"):
        cmd += ["--prompt-window"]
    elif o.get("prompt_len"):
        cmd += ["--prompt-len", str(o["prompt_len"])]
    if rol:
        cmd += ["--router-only-last", str(rol)]
    if fpath:
        cmd += ["--force-path", fpath]
    if depth is not None:
        cmd += ["--depth", str(depth)]
        if o.get("depth_rule"):
            cmd += ["--depth-rule", o["depth_rule"]]
    if penalty != 1.0:
        cmd += ["--repetition-penalty", repr(penalty)]
    for k in ("temperature", "top_k", "top_p", "seed"):
        if k in o:
            cmd += ["--" + k.replace("_", "-"), repr(o[k])]
    if stop_args:
        cmd += ["--stop"] + stop_args
    elif o.get("stop") != "default":
        cmd += ["--no-stop"]
    r = subprocess.run(cmd, capture_output=True, env=env, text=True)
    res = dict(cmd=cmd, want=want, problems=[], ambiguous=[])
    if r.returncode != 0:
        res["problems"].append("exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
        return res
    got = [int(t) for t in r.stdout.split()]
    res["got"] = got
    T = json.load(open(tr))
    if T.get("generated") != got:
        res["problems"].append("--ids output %s != trace 'generated' %s" % (got, T.get("generated")))
    if T.get("prompt_tokens") != ptoks:
        res["problems"].append("trace prompt_tokens %s != %s" % (T.get("prompt_tokens"), ptoks))
    if n_new < o["max_new"] and "max_seq_len" not in r.stderr:
        res["problems"].append("--max-new reduced to %d but stderr does not say max_seq_len: %r"
                               % (n_new, r.stderr.strip()))

    # tokens: compare up to the first difference; a near-tie there is ambiguous
    first = None
    for j in range(max(len(got), len(want))):
        if j >= len(got) or j >= len(want) or got[j] != want[j]:
            first = j
            break
    if first is not None:
        if first < len(want) and first < len(got) and not o.get("exact_ties") and \
                (steps[first]["gap"] < LOGIT_TIE or steps[first]["route_gap"] < ROUTE_TIE):
            res["ambiguous"].append("token %d: lol %d, reference %d (logit gap %.1e of max, routing gap %.1e)"
                                    % (first, got[first], want[first], steps[first]["gap"],
                                       steps[first]["route_gap"]))
        else:
            res["problems"].append("tokens differ from step %d: lol %s, reference %s" % (first, got, want))
    res["min_gap"] = min((s["gap"] for s in steps), default=float("inf"))

    # routing decisions on the sequence lol actually processed
    seq = ptoks + got
    if not got:
        return res
    ref, rgap = ref_trace(rmodel, seq, prompt_len, router_only, force)
    fed = len(seq) - 1  # the last generated token need not be fed through the model
    lolw = {}
    for w in T.get("windows", []):
        key = (w["depth"], w["window"])
        if key in lolw:
            res["problems"].append("trace has window %s twice" % (key,))
        lolw[key] = w
    for key in sorted(ref):
        if ref[key][3] < fed and key not in lolw:
            res["problems"].append("trace lacks depth %d window %d (begins at %d)" % (key[0], key[1], ref[key][3]))
    nwin = 0
    for key, w in sorted(lolw.items()):
        if key not in ref:
            res["problems"].append("trace has depth %d window %d, which the sequence does not have" % key)
            continue
        rho, alpha, a, begin = ref[key]
        nwin += 1
        l, k = key
        forced = force is not None and l - 1 < len(force["expert"]) and k < len(force["expert"][l - 1]) \
            and force["expert"][l - 1][k] is not None
        if w["begin"] != begin:
            res["problems"].append("depth %d window %d begins at %d, reference %d" % (l, k, w["begin"], begin))
        if bool(w.get("forced")) != forced:
            res["problems"].append("depth %d window %d: forced %s, reference %s" % (l, k, w.get("forced"), forced))
        if w["expert"] != rho:
            msg = "depth %d window %d: expert %d, reference %d" % (l, k, w["expert"], rho)
            (res["ambiguous"] if rgap < ROUTE_TIE else res["problems"]).append(msg)
            continue
        da = abs(w["alpha"] - alpha)
        dp = max(abs(x - y) for x, y in zip(w["probs"], a)) if len(w["probs"]) == len(a) else float("inf")
        if da > PROB_TOL or dp > PROB_TOL:
            res["problems"].append("depth %d window %d: |alpha diff| %.1e, max |prob diff| %.1e" % (l, k, da, dp))
    res["windows"] = nwin
    return res


def check_refusal(lol, ck, cfg, env):
    """A prompt of max_seq_len tokens leaves no room: exit 2 naming --tokens."""
    n = cfg["max_seq_len"]
    r = subprocess.run([lol, "generate", "--model", ck, "--tokens", ",".join(["1"] * n), "--ids", "--threads", "1"],
                       capture_output=True, env=env, text=True)
    ok = r.returncode == 2 and "--tokens" in r.stderr
    return ok, "prompt of max_seq_len = %d tokens: exit %d, stderr %r" % (n, r.returncode, r.stderr.strip()[-200:])


def check_nonfinite(lol, ck, work, env):
    """Logits that overflow float32 stop generation with exit 3 (docs/generation.md)."""
    big = os.path.join(work, "ck_overflow")
    shutil.rmtree(big, ignore_errors=True)
    shutil.copytree(ck, big)
    st = os.path.join(big, "model.safetensors")
    T = read_st(st)
    shape, vals, dt = T["model.norm.weight"]
    T["model.norm.weight"] = (shape, [1e38 if v > 0 else -1e38 for v in vals], dt)  # finite, but logits overflow
    write_st(st, T)
    r = subprocess.run([lol, "generate", "--model", big, "--tokens", "1,2,3", "--max-new", "4", "--ids", "--threads", "1"],
                       capture_output=True, env=env, text=True)
    ok = r.returncode == 3 and not r.stdout.split()
    return ok, "final-norm weights of +-1e38: exit %d, stdout %r, stderr %r" % (r.returncode, r.stdout.strip(),
                                                                              r.stderr.strip()[-160:])


def check(lol, work, only=None):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    lol = os.path.abspath(lol)
    cases = cases_for(work)
    names = sorted({c[0] for c in cases})
    ckpts = {nm: make_ckpt(lol, work, nm, env) for nm in names}
    models = {nm: LoL(ckpts[nm]) for nm in names}
    fails, ambig, ntok, nwin, ncmp = [], [], 0, 0, 0
    for ci, case in enumerate(cases):
        if only is not None and ci not in only:
            continue
        r = run_case(lol, work, env, ckpts, models, ci, case)
        opts = json.dumps(case[2], sort_keys=True)
        head = "case %d [%s] prompt %s %s" % (ci, case[0], json.dumps(case[1]), opts)
        if r.get("status") == "skip":
            print("%s: skipped (%s)" % (head, r["why"]))
            continue
        ncmp += 1
        ntok += len(r["want"])
        nwin += r.get("windows", 0)
        state = "DIFFERS" if r["problems"] else ("ambiguous" if r["ambiguous"] else "ok")
        print("%s: %s; %d tokens, %d windows, smallest top-2 logit gap %.1e" % (
            head, state, len(r["want"]), r.get("windows", 0), r.get("min_gap", float("inf"))))
        for p in r["problems"] + r["ambiguous"]:
            print("    " + p)
        if r["problems"] or r["ambiguous"]:
            print("    repro: " + " ".join("'%s'" % a if (" " in a or "," in a or a == "") else a for a in r["cmd"]))
            print("    reference: %s" % r["want"])
        if r["problems"]:
            fails.append(ci)
        elif r["ambiguous"]:
            ambig.append(ci)
    if only is None:
        ok, msg = check_refusal(lol, ckpts["A"], CONFIGS["A"], env)
        print("refusal: %s: %s" % ("ok" if ok else "DIFFERS", msg))
        ncmp += 1
        if not ok:
            fails.append("refusal")
        ok, msg = check_nonfinite(lol, ckpts["A"], work, env)
        print("overflow: %s: %s" % ("ok" if ok else "DIFFERS", msg))
        ncmp += 1
        if not ok:
            fails.append("overflow")
    print("%d cases, %d generated tokens and %d routing decisions compared; %d differ, %d ambiguous; %.1f s"
          % (ncmp, ntok, nwin, len(fails), len(ambig), time.time() - t0))
    if fails:
        print("differing cases: %s" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="compare lol generate with full float64 recomputation")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory")
    c.add_argument("--cases", default="", help="comma separated case numbers to run (default: all)")
    a = ap.parse_args()
    only = {int(x) for x in a.cases.split(",") if x.strip()} or None
    sys.exit(check(a.lol, a.work, only))
