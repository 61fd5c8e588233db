#!/usr/bin/env python3
"""Text generation on the baseline architectures (dense full / sliding / strided, looped,
MoE; docs/baselines.md) checked against the independent float64 forward of
baselines_reference.py, in pure Python (stdlib only), by a reviewer who did not read src/
(nor tests/ outside tests/reference/).

  python3 tests/reference/baselines_generate_reference.py check --lol build/lol --work /tmp/x

Written from docs/generation.md (sampling order and semantics, stop tokens, max_seq_len
cap, `lol generate` flags), docs/hf.md ("Commands", "Export", "Cached decoding": a dense
model generates through `lol export --hf` + `lol hf generate`; stop at any of the folder's
EOS ids; max_position_embeddings cap), docs/baselines.md (architectures; "a `dense`
strided model ... computes exactly what LoL computes with L = D and the forced identity
path"), docs/checkpoint-format.md (`lol forward` on baselines: logits alone),
docs/robustness.md (documented refusals and messages) and `lol generate|hf generate|
export --help`.

What the CLI offers (and so what is checked):
  * `lol generate` runs LoL checkpoints only: on a dense / looped / MoE checkpoint it must
    refuse (exit 2) naming the checkpoint's config.json and its `architecture` field,
    printing nothing on stdout; `lol bench generate` likewise (exit 2). `lol export --hf`
    refuses the sliding / strided dense, looped and MoE checkpoints (exit 2, "Only
    full-attention models export"; nothing left in the new --out). No other command
    generates from a sliding-window dense, a looped or an MoE model.
  * dense `full` (two models: Qwen2 export with GQA 4/2, q/k/v biases, tied, rope_theta 500;
    Llama export with one kv head, untied, 3 layers): `lol export --hf` then `lol hf
    generate --ids`. Greedy (float32 and `--dtype float64`) for prompts of several
    lengths: every generated token must be the argmax of the float64 reference's logits
    on the prefix lol itself produced (teacher forcing: by causality this is full
    recomputation at every step, one reference forward per run); cached decoding against
    lol's own full recomputation (`lol forward` of the source checkpoint on prompt +
    generated tokens: its argmax at every step must be the generated token, and its logits
    must match the reference within 1e-4 of the largest); `--max-new` exact and 0; the
    context cap (`--max-new` reduced to max_position_embeddings minus the prompt with a
    note and "max_position_embeddings reached"; a prompt filling the context: exit 2 naming
    --tokens; `--max-new 0` with such a prompt accepted); stop tokens (config.json /
    generation_config.json `eos_token_id` set to ids of the unstopped continuation: output
    = the continuation up to and including the first of them; `--no-stop` ignores them);
    repetition penalty 1.8 and 0.6 (greedy, z / p for z > 0 else z * p over prompt +
    generated ids); sampling that reduces to greedy (`--top-k 1` at T 0.8, `--top-p 0` at
    T 1.7, T 1e-30); seed reproducibility (same seed equal, other seeds not all equal);
    support of sampled tokens (top-k 3 + penalty 1.3 + T 1.5; top-p 0.6: every sampled
    token in the set the documented rule keeps, float tolerance 1e-4 of the largest
    logit); calibration (T 0.6, T 1.0, T 2.0 with top-k 8, T 1.0 with top-p 0.8 and
    penalty 1.3: the summed log-probability of the sampled tokens under the reference
    distribution, z-score against its expectation and variance, |z| < 5); bad options
    (exit 2 and a message naming the option / field); a `head_dim` other than
    hidden/heads: `hf generate` refuses naming head_dim (exit 2).
  * dense `strided` (two models: 1 + 3 + 1 layers W 4 S 3 tied; 0 + 3 + 1 layers W 5 S 2
    untied, rope_theta 500): copied into a LoL checkpoint (L = D, FiLM at identity,
    random router / depth embeddings / balancing bias) and run with `lol generate
    --force-path` (expert l at routed depth l in every window, alpha 1), the documented
    equivalence. Greedy for prompts shorter than, equal to and longer than a window, 20 new
    tokens (crossing many window boundaries at every depth) against the dense float64
    reference; the trace must be the identity path on every window the sequence has;
    cached decoding against full recomputation twice: `lol forward --force-path` of the
    LoL checkpoint and `lol forward` of the dense checkpoint itself on prompt + generated
    (argmax at every step = the generated token); the max_seq_len cap (note, "max_seq_len
    reached", exit 2 naming --tokens at a full prompt); `--stop` ids; `--top-k 1` = greedy;
    seed reproducibility; `lol generate` bad options (exit 2 naming the option).

Checkpoints: a 1-step `lol train` of each config on a tiny byte corpus, every tensor then
replaced by random values (baselines_reference.perturb) and the q / k projections (and
biases) multiplied by 3, so that attention is sharp and positions / RoPE decide greedy
picks (sensitivity, by hand: rope_theta 500 -> 550 in the reference flips 6 of 160 greedy
tokens of the Qwen2 case, 1000 flips 26; the strided reference with S 3 -> 1, W 4 -> 5 or
no full prelude layer differs from lol's tokens within the first steps; the calibration
z-scores of the same samples scored at 0.8 T / 1.25 T are printed: about -3 to -5 and +3
to +6).

A greedy step whose reference top-2 gap is below 1e-4 of the largest |logit| is a near
tie: a different pick there is reported as ambiguous and does not fail (teacher forcing
lets the following steps be compared still). Exit status 1 on any other difference.
Notes (printed, not failures): the refusal message of `lol generate` says `forward` runs LoL
models only, while `lol forward` runs every baseline (docs/checkpoint-format.md).

Measured (2026-12, 2-core container under load, one lol thread): 24 groups, 2386 generated
tokens checked, 165 `lol` runs (about 1 s of start-up each), no difference, no near tie;
about 5.5 minutes wall, 3 minutes CPU.
"""
import argparse, json, math, os, random, shutil, struct, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_st, write_st  # noqa: E402
import baselines_reference as br  # noqa: E402  (the float64 Baseline forward, perturb, training helpers)

LOGIT_TIE = 1e-4     # relative to the largest |logit| of the step
Z_LIMIT = 5.0        # calibration z-score bound
QK_SCALE = 3.0       # q/k projections (and biases) scaled after the random perturbation

BASE = {"vocab_size": 264}
HF_CASES = [
    ("dense_full_qwen2", "qwen2", {"architecture": "dense", "d_model": 16, "n_heads": 4, "n_kv_heads": 2,
                                   "ffn_hidden": 20, "n_layers": 2, "attention": "full", "qkv_bias": True,
                                   "tie_word_embeddings": True, "rope_theta": 500.0, "norm_eps": 1e-4,
                                   "max_seq_len": 96}),
    ("dense_full_llama", "llama", {"architecture": "dense", "d_model": 16, "n_heads": 2, "n_kv_heads": 1,
                                   "ffn_hidden": 12, "n_layers": 3, "attention": "full",
                                   "tie_word_embeddings": False, "max_seq_len": 40}),
]
HD_CASE = ("dense_full_hd6", {"architecture": "dense", "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "head_dim": 6,
                              "ffn_hidden": 20, "n_layers": 2, "attention": "full", "tie_word_embeddings": True,
                              "max_seq_len": 64})
STRIDED_CASES = [
    ("dense_strided_w4s3", {"architecture": "dense", "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 12,
                            "n_layers": 5, "attention": "strided", "window": 4, "stride": 3, "n_full_prelude": 1,
                            "n_full_coda": 1, "tie_word_embeddings": True, "max_seq_len": 64}),
    ("dense_strided_w5s2", {"architecture": "dense", "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 16,
                            "n_layers": 4, "attention": "strided", "window": 5, "stride": 2, "n_full_prelude": 0,
                            "n_full_coda": 1, "tie_word_embeddings": False, "rope_theta": 500.0,
                            "max_seq_len": 48}),
]
OTHER_CASES = [  # no generation route: refusals only
    ("dense_sliding", {"architecture": "dense", "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 12,
                       "n_layers": 2, "attention": "sliding", "window": 5, "n_full_prelude": 1,
                       "tie_word_embeddings": True, "max_seq_len": 64}),
    ("looped", {"architecture": "looped", "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 12,
                "n_prelude": 1, "n_recur": 1, "n_coda": 1, "recurrence": 2, "state_init": "zero",
                "tie_word_embeddings": True, "max_seq_len": 64}),
    ("moe", {"architecture": "moe", "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 12,
             "n_prelude": 1, "core_depth": 2, "n_coda": 1, "n_experts": 3, "top_k": 2, "expert_ffn_hidden": 8,
             "core_attention": "strided", "window": 4, "stride": 3, "tie_word_embeddings": True,
             "max_seq_len": 64}),
]


# ---------------------------------------------------------------- sampling (docs/generation.md)
def penalize(z, seen, p):
    if p == 1.0:
        return list(z)
    z = list(z)
    for t in set(seen):  # once per id, however often it occurs
        z[t] = z[t] / p if z[t] > 0 else z[t] * p
    return z


def argmax_low(z):
    best = 0
    for i, v in enumerate(z):
        if v > z[best]:
            best = i
    return best


def distribution(z, T, top_k, top_p, tol=0.0):
    """probabilities after temperature, top-k (ties with the k-th kept), top-p (the
    smallest most-likely set with mass >= top_p; 0 keeps the most likely alone); with
    tol > 0, the sets are widened by the float tolerance and only membership is meant"""
    m = max(z)
    q = [math.exp((v - m) / T) for v in z]
    s = sum(q)
    q = [v / s for v in q]
    keep = list(range(len(z)))
    if top_k > 0 and top_k < len(z):
        kth = sorted(z, reverse=True)[top_k - 1]
        keep = [i for i in keep if z[i] >= kth - tol]
    if top_p < 1.0:
        order = sorted(keep, key=lambda i: -q[i])
        mass = sum(q[i] for i in order)
        above, nuc = 0.0, []
        for i in order:
            if nuc and above / mass >= top_p + (1e-6 if tol else 0.0):
                break
            nuc.append(i)
            above += q[i]
        keep = nuc
    s = sum(q[i] for i in keep)
    pi = [0.0] * len(z)
    for i in keep:
        pi[i] = q[i] / s
    return pi


# ---------------------------------------------------------------- the checker
class Checker(br.Checker):
    def __init__(self, lol, work):
        super().__init__(lol, work)
        self.ambiguous = []
        self.notes = []
        self.nruns = 0
        self.ntokens = 0

    def call(self, args):
        self.nruns += 1
        r = subprocess.run([self.lol] + [str(a) for a in args], capture_output=True, text=True, env=self.env)
        return r.returncode, r.stdout, r.stderr

    def run(self, args, cwd=None):
        self.nruns += 1
        return super().run([str(a) for a in args], cwd)

    @staticmethod
    def repro(args):
        return "lol " + " ".join("'%s'" % a if (" " in str(a) or str(a) == "") else str(a) for a in args)

    def note(self, msg):
        self.notes.append(msg)
        print("  note: " + msg)

    # ---- greedy verification by teacher forcing
    def verify_greedy(self, model, prompt, got, penalty=1.0, tag=""):
        """problems, ambiguous, smallest gap: every token of `got` must be the argmax of the
        reference logits (after the penalty) on prompt + got[:j]"""
        probs, amb, gap_min = [], [], float("inf")
        if not got:
            return probs, amb, gap_min
        seq = prompt + got
        logits = model.forward(seq[:-1])
        for j, tok in enumerate(got):
            z = penalize(logits[len(prompt) - 1 + j], seq[:len(prompt) + j], penalty)
            best = argmax_low(z)
            scale = max(abs(v) for v in z)
            srt = sorted(z, reverse=True)
            gap_min = min(gap_min, (srt[0] - srt[1]) / scale)
            if tok != best:
                if (z[best] - z[tok]) / scale < LOGIT_TIE:
                    amb.append("%sstep %d: lol %d, reference %d (gap %.1e of max)" % (tag, j, tok, best,
                                                                                        (z[best] - z[tok]) / scale))
                else:
                    probs.append("%sstep %d: lol %d, reference argmax %d (logit %.5f vs %.5f)"
                                 % (tag, j, tok, best, z[tok], z[best]))
        return probs, amb, gap_min

    def full_recompute(self, args, prompt, got, V, ref_model=None):
        """`lol forward` (lol's own full forward) on prompt + got: its argmax at every step
        must be the generated token; with ref_model its logits are compared too"""
        if not got:
            return [], 0.0
        seq = prompt + got
        out = os.path.join(self.work, "fwd.safetensors")
        self.run(["forward"] + args + ["--tokens", " ".join(map(str, seq[:-1])), "--out", out])
        o = read_st(out)
        shape, lv = o["logits"][0], o["logits"][1]
        assert shape == [len(seq) - 1, V], shape
        probs = []
        for j, tok in enumerate(got):
            r = len(prompt) - 1 + j
            z = lv[r * V:(r + 1) * V]
            best = argmax_low(z)
            scale = max(abs(v) for v in z)
            if tok != best and (z[best] - z[tok]) / scale >= LOGIT_TIE:
                probs.append("step %d: generated %d, lol forward argmax %d" % (j, tok, best))
        rel = 0.0
        if ref_model is not None:
            want = ref_model.forward(seq[:-1])
            mx = max(abs(x) for row in want for x in row)
            rel = max(abs(lv[j * V + v] - want[j][v]) for j in range(len(want)) for v in range(V)) / mx
            if rel > 1e-4:
                probs.append("lol forward logits differ from the reference by %.1e of the largest" % rel)
        return probs, rel

    def finish(self, group, probs, amb, detail, cmd=None):
        ok = not probs
        if amb:
            self.ambiguous.append(group)
            detail += "; ambiguous (near tie): " + "; ".join(amb[:3])
        if probs:
            detail += "; " + "; ".join(probs[:4])
            if cmd:
                detail += " [%s]" % self.repro(cmd)
        self.report(group, ok, detail)

    # ---- checkpoints
    def baseline_ckpt(self, name, cfg, data, seed):
        init = self.trained_checkpoint(name, dict(BASE, **cfg), data)
        ck = os.path.join(self.work, "ck_" + name)
        br.perturb(init, ck, seed=seed)
        # sharper attention (q and k x QK_SCALE): positions and RoPE then move the greedy picks
        st = os.path.join(ck, "model.safetensors")
        T = read_st(st)
        for k, (shape, vals, dt) in list(T.items()):
            if ".q_proj." in k or ".k_proj." in k:
                v = [x * QK_SCALE for x in vals]
                T[k] = (shape, list(struct.unpack("<%df" % len(v), struct.pack("<%df" % len(v), *v))), "F32")
        write_st(st, T)
        return ck

    # ---- groups
    def refusals(self, cks):
        """lol generate / bench generate on baseline checkpoints; export of non-full ones"""
        bad, n, seen = [], 0, set()
        for name, ck in cks:
            arch = json.load(open(os.path.join(ck, "config.json")))["architecture"]
            args = ["generate", "--model", ck, "--tokens", "1,2,3", "--max-new", 4, "--ids", "--threads", 1]
            rc, out, err = self.call(args)
            n += 1
            if not (rc == 2 and not out.strip() and "config.json" in err and "architecture" in err and arch in err):
                bad.append("%s: exit %d, stdout %r, stderr %r" % (name, rc, out[:60], err.strip()[-200:]))
            # The message lists what runs LoL models only; `forward` must not be among them.
            only = err.split("LoL models only")[0] if "LoL models only" in err else ""
            if "forward" in only.rsplit("(", 1)[-1] and arch not in seen:
                seen.add(arch)
                # lol forward does run baselines (docs/checkpoint-format.md "`lol forward` output")
                rcf, _, _ = self.call(["forward", "--model", ck, "--tokens", "1 2 3",
                                       "--out", os.path.join(self.work, "refusal_fwd.safetensors")])
                if rcf == 0:
                    self.note("`lol generate` on a %s checkpoint says \"forward, generate, ... run LoL models only\", "
                              "but `lol forward` runs it (exit 0, logits only, as docs/checkpoint-format.md says): "
                              "%s" % (arch, err.strip()[-240:]))
            if name in ("dense_sliding", "looped", "moe"):
                rc, out, err = self.call(["bench", "generate", "--model", ck, "--context", 8, "--new", 2,
                                          "--full-steps", 1, "--threads", 1])
                n += 1
                if rc != 2 or "architecture" not in err:
                    bad.append("%s bench generate: exit %d, stderr %r" % (name, rc, err.strip()[-200:]))
        self.report("lol generate / bench generate refuse baselines", not bad,
                    "%d commands: exit 2 naming config.json, 'architecture' and its value%s"
                    % (n, ("; " + "; ".join(bad[:4])) if bad else ""))

        bad, n = [], 0
        for name, ck in cks:
            c = json.load(open(os.path.join(ck, "config.json")))
            if c["architecture"] == "dense" and c["attention"] == "full":
                continue
            out = os.path.join(self.work, "export_refused_" + name)
            shutil.rmtree(out, ignore_errors=True)
            rc, o, err = self.call(["export", "--hf", ck, "--out", out])
            n += 1
            left = os.listdir(out) if os.path.isdir(out) else []
            if rc != 2 or left:
                bad.append("%s: exit %d, left %s, stderr %r" % (name, rc, left, err.strip()[-200:]))
        self.report("export --hf refuses non-full baselines", not bad,
                    "%d exports (sliding, strided, looped, MoE): exit 2, nothing written%s"
                    % (n, ("; " + "; ".join(bad[:4])) if bad else ""))

    def hf_generate(self, folder, prompt, extra, max_new):
        args = ["hf", "generate", folder, "--tokens", ",".join(map(str, prompt)), "--ids", "--max-new", max_new,
                "--threads", 1] + extra
        rc, out, err = self.call(args)
        got = [int(t) for t in out.split()] if rc == 0 else None
        return args, rc, got, err

    def check_hf_case(self, name, arch, cfg, data, seed, sampling):
        ck = self.baseline_ckpt(name, cfg, data, seed)
        folder = os.path.join(self.work, "hf_" + name)
        shutil.rmtree(folder, ignore_errors=True)
        self.run(["export", "--hf", ck, "--out", folder, "--arch", arch])
        model = br.Baseline(ck)
        V, N = cfg.get("vocab_size", BASE["vocab_size"]), cfg["max_seq_len"]
        rng = random.Random(seed)
        prompts = [[rng.randrange(256) for _ in range(n)] for n in (1, 5, 17, N - 20)]

        # greedy, float32 and float64, against the reference; float32 against lol forward
        probs, amb, gmin, ntok, worst_fwd = [], [], float("inf"), 0, 0.0
        cont = {}
        for dtype in ("float32", "float64"):
            for pi, p in enumerate(prompts):
                if dtype == "float64" and pi in (0, 2):
                    continue
                args, rc, got, err = self.hf_generate(folder, p, ["--no-stop", "--dtype", dtype], 16)
                if rc != 0:
                    probs.append("exit %d: %s [%s]" % (rc, err.strip()[-200:], self.repro(args)))
                    continue
                if len(got) != min(16, N - len(p)):
                    probs.append("%d tokens for --max-new 16 [%s]" % (len(got), self.repro(args)))
                pr, am, g = self.verify_greedy(model, p, got, tag="%s prompt %d " % (dtype, len(p)))
                if pr:
                    pr[-1] += " [%s]" % self.repro(args)
                probs += pr
                amb += am
                gmin = min(gmin, g)
                ntok += len(got)
                if dtype == "float32":
                    cont[pi] = got
                    if pi in (1, 3):
                        pf, rel = self.full_recompute(["--model", ck], p, got, V, model)
                        worst_fwd = max(worst_fwd, rel)
                        probs += ["cached vs lol forward, prompt %d: %s" % (len(p), x) for x in pf]
                elif got != cont.get(pi):
                    probs.append("float64 tokens %s differ from float32 %s (prompt %d)" % (got, cont.get(pi), len(p)))
        self.ntokens += ntok
        self.finish(name + " greedy (hf generate)", probs, amb,
                    "%d tokens, float32 + float64, prompts %s, smallest top-2 gap %.1e; lol forward "
                    "argmax = cached tokens, its logits within %.1e of the reference"
                    % (ntok, [len(p) for p in prompts], gmin, worst_fwd))

        # the context cap, --max-new 0
        probs = []
        p = [rng.randrange(256) for _ in range(N - 4)]
        args, rc, got, err = self.hf_generate(folder, p, ["--no-stop"], 10)
        if rc != 0 or len(got or []) != 4 or "max_position_embeddings reached" not in err or "note" not in err:
            probs.append("prompt %d of %d, --max-new 10: exit %d, %s tokens, stderr %r [%s]"
                         % (len(p), N, rc, len(got or []), err.strip()[-240:], self.repro(args)))
        else:
            pr, am, _ = self.verify_greedy(model, p, got, tag="capped ")
            probs += pr
        pfull = [rng.randrange(256) for _ in range(N)]
        args, rc, got, err = self.hf_generate(folder, pfull, ["--no-stop"], 3)
        if rc != 2 or "--tokens" not in err:
            probs.append("prompt of %d = max_position_embeddings tokens: exit %d, stderr %r (expected 2 naming "
                         "--tokens)" % (N, rc, err.strip()[-200:]))
        args, rc, got, err = self.hf_generate(folder, pfull, ["--no-stop"], 0)
        if rc != 0 or got:
            probs.append("--max-new 0 with a full prompt: exit %d, output %s, stderr %r" % (rc, got, err.strip()[-160:]))
        args, rc, got, err = self.hf_generate(folder, prompts[1], ["--no-stop"], 0)
        if rc != 0 or got:
            probs.append("--max-new 0: exit %d, output %s" % (rc, got))
        self.finish(name + " context cap / max-new 0", probs, [],
                    "prompt %d of %d + --max-new 10 -> 4 tokens with a note; full prompt refused naming --tokens; "
                    "--max-new 0 accepted" % (N - 4, N))

        # stop tokens: eos ids of config.json / generation_config.json
        probs = []
        base = cont[2]  # 16 tokens after the 17-token prompt
        tok_eos = json.load(open(os.path.join(folder, "config.json"))).get("eos_token_id")
        tok_eos = set(tok_eos if isinstance(tok_eos, list) else [] if tok_eos is None else [tok_eos])

        def upto(ids):  # the continuation up to and including the first stop id
            for j, t in enumerate(base):
                if t in ids:
                    return base[:j + 1]
            return base
        args, rc, got, err = self.hf_generate(folder, prompts[2], [], 16)
        if got != upto(tok_eos):
            probs.append("default stop (eos %s): got %s, expected %s [%s]" % (sorted(tok_eos), got, upto(tok_eos),
                                                                             self.repro(args)))
        cands = [j for j, t in enumerate(base) if t not in base[:j] and j >= 2 and t not in tok_eos]
        if len(cands) < 2:
            self.note("%s: too few distinct tokens in the greedy continuation %s for the stop checks" % (name, base))
        else:
            j1, j2 = cands[1], cands[0]
            for where, stop_ids, expect in (("config.json", [base[j1]], j1),
                                            ("generation_config.json", [base[j2]], j2),
                                            ("both", None, min(j1, j2))):
                fol = os.path.join(self.work, "hf_%s_eos_%s" % (name, where.split(".")[0]))
                shutil.rmtree(fol, ignore_errors=True)
                shutil.copytree(folder, fol)
                for fn, ids in (("config.json", [base[j1]]), ("generation_config.json", [base[j2]])):
                    if where in (fn, "both"):
                        c = json.load(open(os.path.join(fol, fn)))
                        c["eos_token_id"] = ids
                        with open(os.path.join(fol, fn), "w") as f:
                            json.dump(c, f, indent=1)
                args, rc, got, err = self.hf_generate(fol, prompts[2], [], 16)
                want = upto(tok_eos | {base[expect]})  # the tokenizer's eos_token still stops
                if got != want:
                    probs.append("eos in %s: got %s, expected %s [%s]" % (where, got, want, self.repro(args)))
                args, rc, got, err = self.hf_generate(fol, prompts[2], ["--no-stop"], 16)
                if got != base:
                    probs.append("eos in %s with --no-stop: got %s, expected %s" % (where, got, base))
        self.finish(name + " stop tokens (eos ids)", probs, [],
                    "default (the export's eos); eos_token_id set in config.json, generation_config.json, both: "
                    "output up to and including the first; --no-stop ignores them")

        # repetition penalty (greedy) and sampling settings that reduce to greedy
        probs, amb = [], []
        for pen in (1.8, 0.6):
            args, rc, got, err = self.hf_generate(folder, prompts[2], ["--no-stop", "--repetition-penalty", pen], 24)
            if rc != 0:
                probs.append("exit %d %s" % (rc, err.strip()[-160:]))
                continue
            pr, am, _ = self.verify_greedy(model, prompts[2], got, penalty=pen, tag="penalty %g " % pen)
            probs += [x + " [%s]" % self.repro(args) for x in pr]
            amb += am
            self.ntokens += len(got)
        for extra in (["--temperature", 0.8, "--top-k", 1, "--seed", 3],
                      ["--temperature", 1.7, "--top-p", 0, "--seed", 4],
                      ["--temperature", 1e-30, "--seed", 5],
                      ["--temperature", 1.3, "--top-k", 1, "--repetition-penalty", 1.8, "--seed", 6]):
            args, rc, got, err = self.hf_generate(folder, prompts[2], ["--no-stop"] + extra, 16)
            pen = extra[extra.index("--repetition-penalty") + 1] if "--repetition-penalty" in extra else 1.0
            pr, am, _ = self.verify_greedy(model, prompts[2], got or [], penalty=pen, tag=" ".join(map(str, extra)) + ": ")
            if rc != 0:
                pr.append("exit %d %s" % (rc, err.strip()[-160:]))
            probs += [x + " [%s]" % self.repro(args) for x in pr]
            amb += am
        self.finish(name + " penalty / greedy-equivalent sampling", probs, amb,
                    "--repetition-penalty 1.8, 0.6 (greedy); --top-k 1 (T 0.8), --top-p 0 (T 1.7), T 1e-30, "
                    "--top-k 1 + penalty 1.8 (T 1.3) = the reference's argmax at every step")
        if sampling:
            self.check_sampling(name, folder, model, rng)
            self.bad_options(name, folder, ck, N, V)

    def check_sampling(self, name, folder, model, rng):
        prompt = [rng.randrange(256) for _ in range(3)]
        nmax = model.c["max_seq_len"] - len(prompt)
        # seed reproducibility
        outs = {}
        for seed, rep in ((1, 0), (1, 1), (2, 0), (3, 0)):
            _, rc, got, err = self.hf_generate(folder, prompt, ["--no-stop", "--temperature", 1.2, "--seed", seed], 24)
            outs[(seed, rep)] = got
        ok = outs[(1, 0)] is not None and outs[(1, 0)] == outs[(1, 1)] and \
            (outs[(2, 0)] != outs[(1, 0)] or outs[(3, 0)] != outs[(1, 0)])
        self.report(name + " seed reproducibility", ok,
                    "T 1.2, 24 tokens: seed 1 twice %s, seeds 2 / 3 differ from seed 1: %s / %s"
                    % ("equal" if outs[(1, 0)] == outs[(1, 1)] else "DIFFERENT", outs[(2, 0)] != outs[(1, 0)],
                       outs[(3, 0)] != outs[(1, 0)]))
        # support and calibration
        settings = [  # (label, T, top_k, top_p, penalty, seeds, calibrate)
            ("T 1.5 top-k 3 penalty 1.3", 1.5, 3, 1.0, 1.3, (11, 12), False),
            ("T 1.0 top-p 0.6", 1.0, 0, 0.6, 1.0, (21, 22), False),
            ("T 0.6", 0.6, 0, 1.0, 1.0, (31, 32, 33, 34), True),
            ("T 1.0", 1.0, 0, 1.0, 1.0, (41, 42, 43, 44), True),
            ("T 2.0 top-k 8", 2.0, 8, 1.0, 1.0, (51, 52, 53, 54), True),
            ("T 1.0 top-p 0.8 penalty 1.3", 1.0, 0, 0.8, 1.3, (61, 62, 63, 64), True),
        ]
        for label, T, k, p, pen, seeds, calib in settings:
            probs, amb = [], []
            sL = sE = sV = 0.0
            nsamp, distinct_support, alt = 0, 0, {}
            for seed in seeds:
                extra = ["--no-stop", "--temperature", T, "--seed", seed]
                if k:
                    extra += ["--top-k", k]
                if p < 1:
                    extra += ["--top-p", p]
                if pen != 1.0:
                    extra += ["--repetition-penalty", pen]
                args, rc, got, err = self.hf_generate(folder, prompt, extra, nmax)
                if rc != 0 or len(got) != nmax:
                    probs.append("exit %d, %s tokens: %s [%s]" % (rc, len(got or []), err.strip()[-160:],
                                                                  self.repro(args)))
                    continue
                seq = prompt + got
                logits = model.forward(seq[:-1])
                for j, tok in enumerate(got):
                    z = penalize(logits[len(prompt) - 1 + j], seq[:len(prompt) + j], pen)
                    tol = LOGIT_TIE * max(abs(v) for v in z)
                    pi = distribution(z, T, k, p)
                    nsamp += 1
                    distinct_support += sum(1 for v in pi if v > 0) > 1
                    if pi[tok] == 0.0:
                        if distribution(z, T, k, p, tol)[tok] > 0:
                            amb.append("seed %d step %d: token %d at the set's float boundary" % (seed, j, tok))
                        else:
                            probs.append("seed %d step %d: token %d outside the kept set (%d tokens) [%s]"
                                         % (seed, j, tok, sum(1 for v in pi if v > 0), self.repro(args)))
                        continue
                    lp = [math.log(v) if v > 0 else 0.0 for v in pi]
                    e = sum(v * l for v, l in zip(pi, lp))
                    sL += lp[tok]
                    sE += e
                    sV += sum(v * l * l for v, l in zip(pi, lp)) - e * e
                    for Ta in (T * 0.8, T * 1.25):  # what a mis-scaled temperature would score
                        qa = distribution(z, Ta, k, p)
                        if qa[tok] > 0:
                            la = [math.log(v) if v > 0 else 0.0 for v in qa]
                            ea = sum(v * l for v, l in zip(qa, la))
                            a = alt.setdefault(Ta, [0.0, 0.0, 0.0])
                            a[0] += la[tok]
                            a[1] += ea
                            a[2] += sum(v * l * l for v, l in zip(qa, la)) - ea * ea
            self.ntokens += nsamp
            detail = "%d sampled tokens (%d steps with more than one candidate): all in the kept set" % (
                nsamp, distinct_support)
            if calib and sV > 0:
                zs = (sL - sE) / math.sqrt(sV)
                detail += "; log-probability z-score %.2f (|z| < %g)" % (zs, Z_LIMIT)
                za = ["T x %.2f: %.1f" % (Ta / T, (v[0] - v[1]) / math.sqrt(v[2])) for Ta, v in sorted(alt.items())
                      if v[2] > 0]
                detail += " [same samples scored at %s]" % ", ".join(za)
                if abs(zs) >= Z_LIMIT:
                    probs.append("the sampled tokens' log-probability is %.1f standard deviations from its "
                                 "expectation under softmax(z / %g) with the documented filters" % (zs, T))
            self.finish("%s sampling %s" % (name, label), probs, amb, detail)

    def bad_options(self, name, folder, ck, N, V):
        cases = [
            (["--temperature", -1], "temperature"), (["--temperature", "nan"], "temperature"),
            (["--top-p", 1.5], "top_p"), (["--top-p", -0.1], "top_p"), (["--top-k", -1], "top_k"),
            (["--repetition-penalty", 0], "repetition_penalty"),
            (["--repetition-penalty", "1e39"], "repetition_penalty"),
            (["--max-new", -1], "--max-new"), (["--threads", -3], "--threads"),
            (["--dtype", "int8"], "--dtype"),
        ]
        bad = []
        for extra, word in cases:
            args = ["hf", "generate", folder, "--tokens", "1,2,3", "--ids", "--max-new", 2, "--threads", 1] + extra
            if "--max-new" in extra or "--threads" in extra:
                args = ["hf", "generate", folder, "--tokens", "1,2,3", "--ids"] + extra
            rc, out, err = self.call(args)
            if rc != 2 or word not in err or out.strip():
                bad.append("%s: exit %d, stderr %r" % (" ".join(map(str, extra)), rc, err.strip()[-160:]))
        for toks, word in (("1,%d" % V, "vocab_size"), ("1,-1", "--tokens"), ("1,,2", "--tokens")):
            rc, out, err = self.call(["hf", "generate", folder, "--tokens", toks, "--ids", "--max-new", 2])
            if rc != 2 or word not in err:
                bad.append("--tokens %s: exit %d, stderr %r" % (toks, rc, err.strip()[-160:]))
        self.report(name + " bad hf generate options", not bad,
                    "%d refused with exit 2 naming the option%s" % (len(cases) + 3,
                                                                   ("; " + "; ".join(bad)) if bad else ""))

    def check_head_dim(self, data):
        name, cfg = HD_CASE
        ck = self.baseline_ckpt(name, cfg, data, 77)
        folder = os.path.join(self.work, "hf_" + name)
        shutil.rmtree(folder, ignore_errors=True)
        self.run(["export", "--hf", ck, "--out", folder])
        rc, out, err = self.call(["hf", "generate", folder, "--tokens", "1,2,3", "--ids", "--max-new", 2])
        self.report(name + " hf generate refusal", rc == 2 and "head_dim" in err and not out.strip(),
                    "head_dim 6 != 16/4: exit %d, stderr %r" % (rc, err.strip()[-200:]))

    # ---- dense strided through the documented LoL equivalence
    def lol_from_dense(self, name, dense_ck, seed):
        dc = json.load(open(os.path.join(dense_ck, "config.json")))
        P, C = dc["n_full_prelude"], dc["n_full_coda"]
        D = dc["n_layers"] - P - C
        lcfg = {"vocab_size": dc["vocab_size"], "d_model": dc["d_model"], "n_heads": dc["n_heads"],
                "n_kv_heads": dc["n_kv_heads"], "ffn_hidden": dc["ffn_hidden"], "n_prelude": P, "n_coda": C,
                "library_size": D, "core_depth": D, "window": dc["window"], "stride": dc["stride"],
                "rope_theta": dc["rope_theta"], "norm_eps": dc["norm_eps"],
                "tie_embeddings": dc["tie_word_embeddings"], "max_seq_len": dc["max_seq_len"]}
        path = os.path.join(self.work, "lol_%s.json" % name)
        with open(path, "w") as f:
            json.dump(lcfg, f)
        init = os.path.join(self.work, "lol_init_" + name)
        self.run(["init", "--config", path, "--seed", 3, "--out", init, "--force"])
        ck = os.path.join(self.work, "lol_" + name)
        br.perturb(init, ck, seed=seed)  # router, depth embeddings, balancing bias: random
        T = read_st(os.path.join(ck, "model.safetensors"))
        for k in list(T):
            if k.startswith("model.film."):
                shape, vals, dt = T[k]
                T[k] = (shape, [1.0 if "gamma" in k else 0.0] * len(vals), dt)
        for k, v in read_st(os.path.join(dense_ck, "model.safetensors")).items():
            if not k.startswith("model.layers."):
                T[k] = v
                continue
            i = int(k.split(".")[2])
            rest = ".".join(k.split(".")[3:])
            if i < P:
                T["model.prelude.%d.%s" % (i, rest)] = v
            elif i < P + D:
                T["model.library.%d.%s" % (i - P, rest)] = v
            else:
                T["model.coda.%d.%s" % (i - P - D, rest)] = v
        write_st(os.path.join(ck, "model.safetensors"), T)
        kmax = dc["max_seq_len"] // dc["window"] + 2
        fp = os.path.join(self.work, "identity_%s.json" % name)
        with open(fp, "w") as f:
            json.dump({"format": "lol-routing-path", "version": 1, "library_size": D, "core_depth": D,
                       "expert": [[l] * kmax for l in range(D)], "alpha": [[1.0] * kmax for _ in range(D)]}, f)
        return ck, fp, D

    def lol_generate(self, ck, fp, prompt, max_new, extra=(), trace=None):
        args = ["generate", "--model", ck, "--force-path", fp, "--tokens", ",".join(map(str, prompt)), "--ids",
                "--max-new", max_new, "--threads", 1] + list(extra)
        if trace:
            args += ["--trace", trace]
        rc, out, err = self.call(args)
        got = [int(t) for t in out.split()] if rc == 0 else None
        return args, rc, got, err

    def check_trace(self, trace, seq, W, S, D):
        """every window the fed sequence has, at every depth: forced, expert l-1, alpha 1"""
        T = json.load(open(trace))
        probs = []
        fed = len(seq) - 1
        want = set()
        for l in range(1, D + 1):
            delta = ((l - 1) * S) % W
            for j in range(fed):
                want.add((l, (j + delta) // W))
        have = set()
        for w in T.get("windows", []):
            have.add((w["depth"], w["window"]))
            if not (w.get("forced") and w["expert"] == w["depth"] - 1 and abs(w["alpha"] - 1.0) < 1e-7):
                probs.append("trace depth %d window %d: expert %s alpha %s forced %s"
                             % (w["depth"], w["window"], w["expert"], w["alpha"], w.get("forced")))
        if have != want:
            probs.append("trace windows: %d, expected %d (missing %s, extra %s)"
                         % (len(have), len(want), sorted(want - have)[:3], sorted(have - want)[:3]))
        if T.get("generated") != seq[len(T.get("prompt_tokens", [])):]:
            probs.append("trace 'generated' differs from the printed ids")
        return probs, len(have)

    def check_strided_case(self, name, cfg, data, seed):
        dense_ck = self.baseline_ckpt(name, cfg, data, seed)
        ck, fp, D = self.lol_from_dense(name, dense_ck, seed + 1)
        model = br.Baseline(dense_ck)
        W, S, N, V = cfg["window"], cfg["stride"], cfg["max_seq_len"], BASE["vocab_size"]
        rng = random.Random(seed)
        probs, amb, gmin, ntok, nwin, worst = [], [], float("inf"), 0, 0, 0.0
        cont = {}
        lens = (1, W - 1, W, W + 1, 2 * W + 3, 3 * W + 2)
        for n in lens:
            p = [rng.randrange(256) for _ in range(n)]
            tr = os.path.join(self.work, "trace_%s_%d.json" % (name, n))
            args, rc, got, err = self.lol_generate(ck, fp, p, 20, trace=tr)
            if rc != 0:
                probs.append("exit %d: %s [%s]" % (rc, err.strip()[-200:], self.repro(args)))
                continue
            if len(got) != 20:
                probs.append("prompt %d: %d tokens for --max-new 20 (no stop token) [%s]" % (n, len(got),
                                                                                             self.repro(args)))
            pr, am, g = self.verify_greedy(model, p, got, tag="prompt %d " % n)
            probs += [x + " [%s]" % self.repro(args) for x in pr]
            amb += am
            gmin = min(gmin, g)
            ntok += len(got)
            cont[n] = (p, got)
            pt, nw = self.check_trace(tr, p + got, W, S, D)
            probs += pt
            nwin += nw
            if n in (W, 3 * W + 2):
                pf, rel = self.full_recompute(["--model", ck, "--force-path", fp], p, got, V, model)
                probs += ["cached vs lol forward (LoL, identity path), prompt %d: %s" % (n, x) for x in pf]
                worst = max(worst, rel)
                pf, rel = self.full_recompute(["--model", dense_ck], p, got, V, None)
                probs += ["cached (LoL) vs lol forward of the dense checkpoint, prompt %d: %s" % (n, x) for x in pf]
        self.ntokens += ntok
        self.finish(name + " greedy (LoL identity path)", probs, amb,
                    "W %d S %d D %d: prompts %s + 20 tokens, %d tokens = the dense reference's argmax (smallest "
                    "top-2 gap %.1e); %d trace windows all forced identity; lol forward (LoL and dense) argmax = "
                    "cached tokens, logits within %.1e" % (W, S, D, list(lens), ntok, gmin, nwin, worst))

        # cap, stop ids, top-k 1, seed reproducibility, --max-new 0
        probs = []
        p = [rng.randrange(256) for _ in range(N - 3)]
        args, rc, got, err = self.lol_generate(ck, fp, p, 10)
        if rc != 0 or len(got) != 3 or "max_seq_len reached" not in err or "note" not in err:
            probs.append("prompt %d of %d, --max-new 10: exit %d, %s tokens, stderr %r [%s]"
                         % (len(p), N, rc, len(got or []), err.strip()[-240:], self.repro(args)))
        else:
            pr, am, _ = self.verify_greedy(model, p, got, tag="capped ")
            probs += pr
        args, rc, got, err = self.lol_generate(ck, fp, [5] * N, 2)
        if rc != 2 or "--tokens" not in err:
            probs.append("prompt of max_seq_len tokens: exit %d, stderr %r" % (rc, err.strip()[-200:]))
        args, rc, got, err = self.lol_generate(ck, fp, [5] * N, 0)
        if rc != 0 or got:
            probs.append("--max-new 0 with a full prompt: exit %d, output %s" % (rc, got))
        p, base = cont[W + 1]
        cands = [j for j, t in enumerate(base) if j >= 3 and t not in base[:j]]
        if len(cands) >= 2:
            stops = [base[cands[1]], base[cands[0]]]
            args, rc, got, err = self.lol_generate(ck, fp, p, 20, ["--stop"] + [str(s) for s in stops])
            if got != base[:cands[0] + 1]:
                probs.append("--stop %s: got %s, expected %s [%s]" % (stops, got, base[:cands[0] + 1],
                                                                     self.repro(args)))
        else:
            self.note("%s: the continuation %s has too few distinct tokens for --stop" % (name, base))
        args, rc, got, err = self.lol_generate(ck, fp, p, 20, ["--temperature", 0.9, "--top-k", 1, "--seed", 7])
        if got != base:
            probs.append("--top-k 1 at T 0.9: %s, greedy %s [%s]" % (got, base, self.repro(args)))
        runs = [self.lol_generate(ck, fp, p, 20, ["--temperature", 1.5, "--seed", s])[2] for s in (9, 9, 10)]
        if runs[0] is None or runs[0] != runs[1] or runs[0] == runs[2]:
            probs.append("T 1.5 seeds 9, 9, 10: %s" % runs)
        self.finish(name + " cap / stop / sampling", probs, [],
                    "prompt %d of %d -> 3 tokens with a note; full prompt refused naming --tokens; --max-new 0; "
                    "--stop ids; --top-k 1 = greedy; seed 9 twice equal, seed 10 differs" % (N - 3, N))

    def lol_bad_options(self, name, cfg):
        ck, fp = os.path.join(self.work, "lol_" + name), os.path.join(self.work, "identity_%s.json" % name)
        V = BASE["vocab_size"]
        cases = [
            (["--temperature", -1], "temperature"), (["--top-p", 2], "top_p"), (["--top-k", -1], "top_k"),
            (["--repetition-penalty", 0], "repetition_penalty"), (["--max-new", -1], "--max-new"),
            (["--stop", 5, "--no-stop"], "--no-stop"), (["--stop", V + 7], "--stop"),
            (["--depth-rule", "zigzag"], "--depth-rule"), (["--prompt-len", 9], "--prompt-len"),
        ]
        bad = []
        for extra, word in cases:
            args = ["generate", "--model", ck, "--force-path", fp, "--tokens", "1,2,3", "--ids", "--threads", 1] + \
                [str(x) for x in extra]
            rc, out, err = self.call(args)
            if rc != 2 or word not in err or out.strip():
                bad.append("%s: exit %d, stderr %r" % (" ".join(map(str, extra)), rc, err.strip()[-160:]))
        rc, out, err = self.call(["generate", "--model", ck, "--tokens", "1,%d" % V, "--ids"])
        if rc != 2 or "--tokens" not in err:
            bad.append("--tokens 1,%d: exit %d, stderr %r" % (V, rc, err.strip()[-160:]))
        self.report(name + " bad lol generate options", not bad,
                    "%d refused with exit 2 naming the option%s" % (len(cases) + 1,
                                                                   ("; " + "; ".join(bad)) if bad else ""))


def check(lol, work):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ch = Checker(os.path.abspath(lol), os.path.abspath(work))
    rng = random.Random(0)
    docs = [" ".join(rng.choice(br.WORDS) for _ in range(rng.randrange(5, 12))) for _ in range(8)]
    data = ch.corpus("gen_train_data", docs)
    # refusals on every kind of baseline
    cks = []
    for i, (name, cfg) in enumerate(OTHER_CASES + [(n, c) for n, _, c in HF_CASES[:1]] + STRIDED_CASES[:1]):
        cks.append((name, ch.baseline_ckpt("refuse_" + name, cfg, data, 500 + i)))
    ch.refusals(cks)
    ch.check_head_dim(data)
    for i, (name, arch, cfg) in enumerate(HF_CASES):
        ch.check_hf_case(name, arch, cfg, data, 100 + i, sampling=(i == 0))
    for i, (name, cfg) in enumerate(STRIDED_CASES):
        ch.check_strided_case(name, cfg, data, 200 + 10 * i)
    ch.lol_bad_options(STRIDED_CASES[0][0], STRIDED_CASES[0][1])
    print("%d check groups, %d differ, %d with near ties; %d generated tokens checked; %d lol runs; %.0f s"
          % (ch.groups, len(ch.failures), len(ch.ambiguous), ch.ntokens, ch.nruns, time.time() - t0))
    if ch.notes:
        print("%d notes (not failures): see above" % len(ch.notes))
    return 1 if ch.failures else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check lol's generation on baseline checkpoints against the float64 reference")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory")
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))
