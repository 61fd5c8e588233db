#!/usr/bin/env python3
"""An independent check of data-parallel training (`lol launch --nproc N -- lol train ...`),
in pure Python (stdlib only).

Provenance: written by a reviewer from docs/distributed.md (every section), docs/training.md
("Data and targets", "Each step", "Outputs", "Resume and determinism", exit statuses),
README.md and the `lol launch --help` / `lol train --help` texts, WITHOUT reading src/ or
tests/ (other than safetensors_io.py and load_split() of lol_train_reference.py in this
folder). Nothing here re-implements the model: every expectation is either a relation
between two runs of lol that the docs promise (one process vs N processes, interrupted vs
uninterrupted, launcher vs manual environment) or a documented exit status / message.

  python3 tests/reference/distributed_reference.py check --lol build/lol --work /tmp/x

Tolerances. docs/distributed.md "Equivalence with one process" states the test tolerance:
every weight within 1e-4 relative, the balancing bias bit-identical, losses, token counts
and global expert loads "agree per step". Here a tensor's difference is max|a - b| /
max|b| (relative to the tensor's scale: element-wise relative error is meaningless for
elements near 0); the loss and grad_norm must agree within 1e-5 relative (float32
reductions in another order); tokens, expert_load, active_depth, lr and valid_targets
exactly. Two runs with the SAME process count (resume, launcher vs manual environment,
WORLD_SIZE=1) must agree bit for bit: docs/training.md promises bit-exact resume on CPU
with the same threads, and docs/distributed.md that each rank's data position and
generator states are checkpointed and restored.

Check groups (one line each, then a summary; exit 1 on any disagreement):
 A  maze data (loss masks: targets != tokens, so a rank weighting by tokens or averaging
    per-rank means would show), 1 process x batch 4 vs 2 processes x batch 2, 6 steps
    (a batch crosses an epoch boundary), growing 1 -> 3, balancing, eval every 3 steps on
    an odd-sized validation split (5 sequences: shards of unequal size), checkpoints
    every 3 steps: per-step loss / grad_norm / tokens / expert_load / active_depth / lr;
    valid_loss / valid_targets / valid_acc; final weights, bias (bit-identical),
    optimizer state (per-parameter `.step` counters exactly: a parameter without a
    gradient on every rank must keep none, as in one process), at both checkpoints.
 O  outputs of the 2-process run: rank 0 alone writes (one metrics line per step, the
    eval records once, exactly the checkpoints of save_every, no .tmp leftovers, `latest`,
    one environment.jsonl line with world_size 2, the same files as one process);
    trainer_state.json `data_position` (world_size, ranks[r].rank = r, only the documented
    keys); `replica_check` records at every LOL_DIST_CHECK_EVERY-th step, at every
    checkpoint and at the last step, with 0 mismatches over every tensor of the model.
 R  resume: the 2-process run resumed from its step-3 checkpoint ends bit-identical to the
    uninterrupted one (weights, bias, optimizer, losses/loads of steps 4-6); resuming with
    another process count (1 or 3 processes from a 2-process checkpoint, 2 from a 1-process
    one) is an error that says so; a trainer_state.json whose ranks[r].rank != r, or with
    an unknown key, is refused.
 N  router noise on (drawn per rank, so no 1-process comparison): the ranks' checkpointed
    generator states differ; resume from step 3 of a noisy 2-process run is bit-identical.
 T  3 processes x batch 1 vs 1 process x batch 3 (text documents of very different
    lengths), and 2 processes x batch 1 x grad_accum 2 vs 1 process x batch 4.
 D  sharding: 5 text documents of lengths 3, 6, 12, 24, 48 (every subset sum distinct),
    learning rate 0 and one expert (the model never changes): the 1-process batch-1 run
    reveals the order of each epoch (tokens per step) and each document's loss; then
    2 (and 3) processes x batch 1 must see, per step, exactly positions r + N j of the
    epoch's order (tokens, FLOPs), the target-weighted mean of those documents' losses,
    and per epoch n - (n mod N) distinct documents, the last (n mod N) dropped.
 E  entry points: `lol launch --nproc 1` and WORLD_SIZE=1 are the ordinary single process
    (bit-identical to plain `lol train`); two `lol train` processes started by hand with
    RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT (as
    torchrun sets them) are bit-identical to `lol launch --nproc 2`.
 S  signals: SIGINT to the launcher stops every rank at the same step with a checkpoint,
    exit 0, and a resume to k + 3 steps is bit-identical to an uninterrupted k + 3-step
    run (noise on, so the per-rank generators matter); SIGKILL of the launcher makes the
    ranks save and stop (PR_SET_PDEATHSIG) instead of running on: 3 trials, each must stop
    both ranks with a checkpoint of their last logged step (this script makes itself a child
    subreaper, prctl PR_SET_CHILD_SUBREAPER, to collect the orphaned ranks' exit statuses).
 F  failures and bad input, each bounded by a timeout: a rank with another --set, other
    data, another LOL_DIST_CHECK_EVERY (exit 2 on every rank, naming the field), a rank
    with a missing data.dir (exit 2), a rank killed by SIGKILL (peer exits 4 at once,
    launcher 137), a stalled rank (SIGSTOP: peer exits 4 after --timeout, launcher 4), a
    rendezvous that never completes (bounded by --timeout), MASTER_PORT in use (exit 2
    naming the port), --nproc 0 / -1 / 1025 / abc, no command, a missing program,
    --nnodes 2 without --master-port, --node-rank out of range, another lol command
    under the launcher, train.device=cuda in this CPU build, a train.out that holds a run
    without --resume.
Runtime: about 4-5 minutes on 2 shared cores (most of it process start-up, ~45 launches, and
the documented waits of the failure cases: --timeout, --grace, the launcher's 10 s SIGKILL).
"""
import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_st, write_st  # noqa: E402

W_REL = 1e-4      # docs/distributed.md: "every weight agrees within 1e-4 relative"
LOSS_REL = 1e-5   # loss / grad_norm of the same global batch, float32 sums in another order
OUTPUTS = ["data", "runs", "wrap", "logs"]

DIST_VARS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "LOL_DIST_TIMEOUT", "LOL_DIST_CHECK_EVERY", "LOL_NUM_THREADS", "GROUP_RANK"]
BASE_ENV = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
BASE_ENV.update(OMP_NUM_THREADS="1")


# ---------------------------------------------------------------- report
class Report:
    def __init__(self):
        self.groups = []        # (name, n, failures, notes)
        self.cur = None

    def group(self, name):
        self.cur = [name, 0, [], []]
        self.groups.append(self.cur)
        t = time.time()
        return t

    def check(self, ok, what):
        self.cur[1] += 1
        if not ok:
            self.cur[2].append(what)
        return ok

    def note(self, what):
        self.cur[3].append(what)

    def end(self, t0):
        name, n, fails, notes = self.cur
        print("%s %s: %d checks, %d disagree (%.0f s)" % ("ok  " if not fails else "FAIL", name, n, len(fails),
                                                           time.time() - t0), flush=True)
        for f in fails:
            print("     x " + f, flush=True)
        for f in notes:
            print("     note: " + f, flush=True)


# ---------------------------------------------------------------- running lol
def sh(cmd, env=None, timeout=120):
    """run a command; returns (rc, stdout, stderr, wall); rc None on a hang (killed)"""
    t = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(BASE_ENV, **(env or {})), start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.time() - t
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err + "\n[killed by the reference after %d s: hang]" % timeout, time.time() - t


def must(r, what):
    if r[0] != 0:
        raise RuntimeError("%s failed (exit %s):\n%s%s" % (what, r[0], r[1][-3000:], r[2][-3000:]))
    return r


def train1(cfg_path, sets=(), env=None, extra=()):
    return sh([LOL, "train", "--config", cfg_path, "--no-progress"] + ["--set=" + s for s in sets] + list(extra),
              env=env)


def launch(n, cmd, opts=(), env=None, timeout=120):
    return sh([LOL, "launch", "--nproc", str(n), "--threads", "1"] + list(opts) + ["--"] + cmd, env=env,
              timeout=timeout)


def train_cmd(cfg_path, sets=(), extra=()):
    return ["lol", "train", "--config", cfg_path, "--no-progress"] + ["--set=" + s for s in sets] + list(extra)


def write_cfg(name, cfg):
    path = os.path.join(WORK, "runs", name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def rundir(name):
    return os.path.join(WORK, "runs", name)


def ckpt(run_dir, k):
    return os.path.join(run_dir, "checkpoints", "step-%06d" % k)


def metrics(run_dir):
    """(steps: step -> record, evals: step -> record, counts of step lines, counts of eval lines)"""
    steps, evals, ns, ne = {}, {}, {}, {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        d = json.loads(line)
        if "valid_loss" in d:
            evals[d["step"]] = d
            ne[d["step"]] = ne.get(d["step"], 0) + 1
        else:
            steps[d["step"]] = d
            ns[d["step"]] = ns.get(d["step"], 0) + 1
    return steps, evals, ns, ne


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


# ---------------------------------------------------------------- tensor comparison
def tensor_diff(pa, pb):
    """per tensor: max|a-b| / max|b|; returns (missing keys, {name: reldiff}, {name: bit-identical})"""
    a, b = read_st(pa), read_st(pb)
    missing = sorted(set(a) ^ set(b))
    d, same = {}, {}
    for k in sorted(set(a) & set(b)):
        va, vb = a[k][1], b[k][1]
        if a[k][0] != b[k][0]:
            d[k], same[k] = float("inf"), False
            continue
        scale = max([abs(x) for x in vb] + [1e-30])
        d[k] = max([abs(x - y) for x, y in zip(va, vb)] + [0.0]) / scale
        same[k] = va == vb
    return missing, d, same


def compare_checkpoints(R, what, ca, cb, exact=False):
    """model + optimizer state of two checkpoints (cb the reference)"""
    ok_all = True
    for fn in ("model.safetensors", "optimizer.safetensors"):
        missing, d, same = tensor_diff(os.path.join(ca, fn), os.path.join(cb, fn))
        ok_all &= R.check(not missing, "%s %s: tensor names differ: %s" % (what, fn, missing[:6]))
        if exact:
            bad = [k for k in d if not same[k]]
            ok_all &= R.check(not bad, "%s %s: %d tensors not bit-identical (max rel diff %.2e; %s)"
                              % (what, fn, len(bad), max([d[k] for k in bad] + [0]), ", ".join(bad[:5])))
            continue
        steps = [k for k in d if k.endswith(".step")]
        bad_steps = [k for k in steps if not same[k]]
        ok_all &= R.check(not bad_steps, "%s %s: optimizer step counters differ (a parameter with / without a "
                          "gradient in one run only): %s" % (what, fn, ", ".join(bad_steps[:6])))
        bias = [k for k in d if k.endswith("balance_bias")]
        bad_bias = [k for k in bias if not same[k]]
        ok_all &= R.check(not bad_bias, "%s %s: balancing bias not bit-identical: %s (rel %s)"
                          % (what, fn, bad_bias, [d[k] for k in bad_bias]))
        rest = [k for k in d if k not in steps and k not in bias]
        worst = max(rest, key=lambda k: d[k]) if rest else None
        bad = [k for k in rest if not d[k] <= W_REL]
        ok_all &= R.check(not bad, "%s %s: %d tensors differ by more than %g relative (worst %s %.2e)"
                          % (what, fn, len(bad), W_REL, worst, d[worst] if worst else 0))
        if worst is not None:
            R.note("%s %s: largest relative difference %.1e (%s)" % (what, fn, d[worst], worst))
    return ok_all


def compare_steps(R, what, sa, sb, steps, exact=False):
    """per-step metrics of run a vs reference run b"""
    bad = []
    for k in steps:
        if k not in sa or k not in sb:
            bad.append("step %d missing (%s / %s)" % (k, k in sa, k in sb))
            continue
        a, b = sa[k], sb[k]
        for f in ("tokens", "expert_load", "active_depth", "lr"):
            if a.get(f) != b.get(f):
                bad.append("step %d %s %s vs %s" % (k, f, a.get(f), b.get(f)))
        for f in ("loss", "grad_norm"):
            if exact:
                if a[f] != b[f]:
                    bad.append("step %d %s %r vs %r" % (k, f, a[f], b[f]))
            elif not rel(a[f], b[f]) <= LOSS_REL:
                bad.append("step %d %s %.9g vs %.9g (%.1e rel)" % (k, f, a[f], b[f], rel(a[f], b[f])))
    return R.check(not bad, "%s: per-step metrics differ: %s" % (what, "; ".join(bad[:6])))


# ---------------------------------------------------------------- data
def load_split(data_dir, split):
    """sequences of a split: dicts tokens, loss_mask (text shards: all 1)"""
    meta = json.load(open(os.path.join(data_dir, "dataset.json")))
    seqs = []
    for shard in meta["splits"].get(split, []):
        t = read_st(os.path.join(data_dir, shard))
        tok, off = t["tokens"][1], t["offsets"][1]
        lm = t["loss_mask"][1] if "loss_mask" in t else [1] * len(tok)
        for i in range(len(off) - 1):
            a, b = off[i], off[i + 1]
            seqs.append(dict(tokens=tok[a:b], loss_mask=lm[a:b]))
    return seqs


def targets(s):
    return sum(s["loss_mask"][1:])


def text_corpus(name, lengths, valid_lengths=()):
    """byte-tokenised documents of exactly the given lengths (one token per byte)"""
    letters = "abcdefghijklmnopqrstuvwxyz"
    docs = []
    for i, n in enumerate(lengths):
        docs.append("".join(letters[(7 * i + 3 * j + j * j) % 26] for j in range(n)))
    d = os.path.join(WORK, "data", name)
    tr = d + "_train.txt"
    with open(tr, "w") as f:
        f.write("\n\n".join(docs) + "\n")
    cmd = [LOL, "corpus", "--in", tr, "--tokenizer", "byte", "--out", d, "--no-progress", "--valid-fraction", "0"]
    if valid_lengths:
        va = d + "_valid.txt"
        with open(va, "w") as f:
            f.write("\n\n".join("".join(letters[(5 * i + j) % 26] for j in range(n))
                                for i, n in enumerate(valid_lengths)) + "\n")
        cmd += ["--valid-in", va]
    must(sh(cmd), "lol corpus")
    got = [len(s["tokens"]) for s in load_split(d, "train")]
    if sorted(got) != sorted(lengths):
        raise RuntimeError("corpus %s: document lengths %s, wanted %s" % (name, got, lengths))
    return d


def maze_data():
    d = os.path.join(WORK, "data", "maze")
    for seed in range(1, 60):
        shutil.rmtree(d, ignore_errors=True)
        must(sh([LOL, "data", "maze", "--n", "3", "--size", "4", "--valid-fraction", "0.34", "--n-test", "0",
                 "--seed", str(seed), "--out", d, "--no-progress"]), "lol data maze")
        st = json.load(open(os.path.join(d, "dataset.json")))["stats"]
        if st["sequences_train"] == 10 and st["sequences_valid"] == 5:
            return d
    raise RuntimeError("no seed gave 10 train / 5 valid maze sequences")


MODEL = {"architecture": "lol", "d_model": 16, "n_heads": 2, "n_kv_heads": 2, "ffn_hidden": 24,
         "n_prelude": 1, "n_coda": 1, "library_size": 4, "core_depth": 3, "window": 8, "stride": 4,
         "router_noise_std": 0.0, "balance_update_rate": 0.01, "tie_embeddings": True, "max_seq_len": 128}


def config(data, out, steps, batch, model=None, lr=0.01, grow=0.0, eval_every=0, save_every=0, accum=1, seed=3):
    return {"model": dict(MODEL, **(model or {})),
            "data": {"dir": data, "batch_size": batch, "packing": "pad"},
            "optim": {"type": "muon", "lr": lr, "muon_lr": lr, "weight_decay": 0.1},
            "schedule": {"type": "constant", "warmup_steps": 0},
            "grow": {"start": 1, "fraction": grow, "shape": "1-sqrt"},
            "train": {"steps": steps, "grad_accum": accum, "eval_every": eval_every, "eval_batches": 0,
                      "save_every": save_every, "keep_last": 100, "log_every": 1, "seed": seed, "threads": 1,
                      "out": out, "progress": False}}


def launcher_ranks(err):
    """'lol launch: rank R (pid P) exited with status S' / 'was killed by signal S' lines"""
    out = {}
    for line in err.splitlines():
        if line.startswith("lol launch: rank "):
            r = int(line.split()[3])
            if "exited with status" in line:
                out[r] = ("status", int(line.split("exited with status")[1].split()[0].rstrip(";")))
            elif "killed by signal" in line:
                out[r] = ("signal", int(line.split("killed by signal")[1].split()[0]))
    return out


def failed_after(err, rank):
    """seconds in 'error: rank R/N: ... failed after S s'"""
    for line in err.splitlines():
        if line.startswith("error: rank %d/" % rank) and "failed after" in line:
            return float(line.split("failed after")[1].split()[0])
    return None


# ---------------------------------------------------------------- A, O, R: maze, 1 vs 2 processes
def part_equivalence(R, maze):
    t0 = R.group("A  1 process x batch 4 vs 2 processes x batch 2 (maze, growing, balancing, eval, 6 steps)")
    c1 = write_cfg("A1", config(maze, rundir("A1"), 6, 4, grow=0.5, eval_every=3, save_every=3))
    c2 = write_cfg("A2", config(maze, rundir("A2"), 6, 2, grow=0.5, eval_every=3, save_every=3))
    must(train1(c1), "A1")
    r2 = must(launch(2, train_cmd(c2), env={"LOL_DIST_CHECK_EVERY": "2"}), "A2")
    s1, e1, _, _ = metrics(rundir("A1"))
    s2, e2, ns2, ne2 = metrics(rundir("A2"))
    compare_steps(R, "A2 vs A1", s2, s1, range(1, 7))
    R.check(any(0 in s1[k]["expert_load"] for k in s1) and len({s1[k]["active_depth"] for k in s1}) > 1,
            "A1 is not discriminating: no step with an unused expert or no growing")
    R.check(sorted(e1) == sorted(e2), "A: eval steps %s vs %s" % (sorted(e2), sorted(e1)))
    for k in sorted(set(e1) & set(e2)):
        a, b = e2[k], e1[k]
        R.check(a["valid_targets"] == b["valid_targets"] and rel(a["valid_loss"], b["valid_loss"]) <= LOSS_REL
                and abs(a["valid_acc"] - b["valid_acc"]) <= 1e-12 and a["tokens"] == b["tokens"],
                "A eval at step %d: 2 processes valid_loss %.9g targets %s acc %s tokens %s, 1 process %.9g %s %s %s"
                % (k, a["valid_loss"], a["valid_targets"], a["valid_acc"], a["tokens"], b["valid_loss"],
                   b["valid_targets"], b["valid_acc"], b["tokens"]))
    nvalid = sum(targets(s) for s in load_split(maze, "valid"))
    R.check(all(e1[k]["valid_targets"] == nvalid for k in e1), "A1 valid_targets %s != %d targets of the split"
            % ([e1[k]["valid_targets"] for k in e1], nvalid))
    for k in (3, 6):
        compare_checkpoints(R, "A step %d (2 processes vs 1)" % k, ckpt(rundir("A2"), k), ckpt(rundir("A1"), k))
    fl = [k for k in s1 if s1[k]["flops"] != s2[k]["flops"]]
    if fl:
        R.note("flops differ between 1 x batch 4 and 2 x batch 2 in steps %s (%s vs %s at step 1): padding to the "
               "longest row differs per rank; the docs do not promise equal FLOPs with padding"
               % (fl, s2[1]["flops"], s1[1]["flops"]))
    R.end(t0)

    t0 = R.group("O  what the 2-process run writes (rank 0 only), trainer_state data_position, replica_check")
    A1, A2 = rundir("A1"), rundir("A2")
    R.check(sorted(ns2) == list(range(1, 7)) and set(ns2.values()) == {1},
            "A2 metrics.jsonl step lines: %s (step: count), want 1..6 once each" % ns2)
    R.check(set(ne2.values()) <= {1}, "A2 eval records written more than once: %s" % ne2)
    R.check(sorted(os.listdir(A2)) == sorted(os.listdir(A1)), "A2 run dir %s vs 1-process %s"
            % (sorted(os.listdir(A2)), sorted(os.listdir(A1))))
    cks = sorted(os.listdir(os.path.join(A2, "checkpoints")))
    R.check(cks == ["step-000003", "step-000006"], "A2 checkpoints/ holds %s, want step-000003, step-000006" % cks)
    R.check(open(os.path.join(A2, "latest")).read().strip() == "checkpoints/step-000006",
            "A2 latest = %r" % open(os.path.join(A2, "latest")).read())
    env = [json.loads(x) for x in open(os.path.join(A2, "environment.jsonl"))]
    R.check(len(env) == 1 and env[0].get("world_size") == 2,
            "A2 environment.jsonl: %d lines, world_size %s (want 1 line, 2)" % (len(env), [e.get("world_size") for e in env]))
    env1 = [json.loads(x) for x in open(os.path.join(A1, "environment.jsonl"))]
    R.check(len(env1) == 1 and env1[0].get("world_size") == 1, "A1 environment.jsonl world_size %s"
            % [e.get("world_size") for e in env1])
    for k in (3, 6):
        ts = json.load(open(os.path.join(ckpt(A2, k), "trainer_state.json")))
        dp = ts.get("data_position", {})
        ranks = dp.get("ranks")
        ok = (dp.get("world_size") == 2 and isinstance(ranks, list) and len(ranks) == 2
              and all(r.get("rank") == i for i, r in enumerate(ranks))
              and all(set(r) <= {"rank", "position", "rng_cpu", "rng_device"} and "position" in r for r in ranks)
              and ts.get("step") == k)
        R.check(ok, "A2 step %d trainer_state.json step %s data_position world_size %s ranks %s"
                % (k, ts.get("step"), dp.get("world_size"),
                   [sorted(r) for r in ranks] if isinstance(ranks, list) else ranks))
    # replica check: LOL_DIST_CHECK_EVERY=2, checkpoints at 3 and 6, last step 6
    ntensors = len(read_st(os.path.join(ckpt(A2, 6), "model.safetensors")))
    rc = {k: s2[k]["replica_check"] for k in s2 if "replica_check" in s2[k]}
    R.check(sorted(rc) == [2, 3, 4, 6], "A2 replica_check logged at steps %s, want [2, 3, 4, 6] "
            "(every LOL_DIST_CHECK_EVERY=2 steps, every checkpoint, the last step)" % sorted(rc))
    bad = {k: v for k, v in rc.items() if v.get("mismatched") != 0 or v.get("max_rel_diff") != 0 or v.get("names")}
    R.check(not bad, "A2 replica_check found differences: %s" % bad)
    badn = {k: v.get("tensors") for k, v in rc.items() if v.get("tensors") != ntensors}
    R.check(not badn, "A2 replica_check hashed %s tensors, the model has %d (every parameter and buffer)"
            % (badn, ntensors))
    R.check("replica_check" not in json.dumps(metrics(A1)[0]), "a 1-process run logs replica_check")
    R.check(r2[1].count("lol train: done") <= 1 and r2[2].count("lol train: done") <= 1,
            "A2: the final summary is printed by more than one rank")
    R.end(t0)

    t0 = R.group("R  resume of the 2-process run; another process count; tampered data_position")
    A2R = rundir("A2R")
    must(launch(2, ["lol", "train", "--resume", ckpt(A2, 3), "--set", "train.out=" + A2R, "--no-progress"],
                env={"LOL_DIST_CHECK_EVERY": "2"}), "A2 resume")
    compare_checkpoints(R, "A2 resumed at 3 -> 6 vs uninterrupted", ckpt(A2R, 6), ckpt(A2, 6), exact=True)
    sr = metrics(A2R)[0]
    compare_steps(R, "A2 resumed steps 4-6", sr, s2, range(4, 7), exact=True)
    # 1-process run resumed likewise agrees with the 2-process resumed one (docs "Equivalence")
    A1R = rundir("A1R")
    must(sh([LOL, "train", "--resume", ckpt(A1, 3), "--set", "train.out=" + A1R, "--no-progress"]), "A1 resume")
    compare_checkpoints(R, "A resumed: 2 processes vs 1", ckpt(A2R, 6), ckpt(A1R, 6))
    # another process count
    for n, src, what in [(1, ckpt(A2, 3), "2-process checkpoint with 1 process"),
                         (3, ckpt(A2, 3), "2-process checkpoint with 3 processes"),
                         (2, ckpt(A1, 3), "1-process checkpoint with 2 processes")]:
        out = rundir("wrongn%d_%s" % (n, os.path.basename(os.path.dirname(os.path.dirname(src)))))
        cmd = ["train", "--resume", src, "--set", "train.out=" + out, "--no-progress"]
        r = sh([LOL] + cmd) if n == 1 else launch(n, ["lol"] + cmd, opts=["--timeout", "20", "--grace", "2"])
        msg = r[2].lower()
        R.check(r[0] == 2 and ("process" in msg or "world" in msg or "rank" in msg),
                "resume of a %s: exit %s (want 2 and an error naming the process count): %s"
                % (what, r[0], r[2].strip()[-400:]))
        R.check(not os.path.exists(os.path.join(out, "checkpoints")) or not os.listdir(os.path.join(out, "checkpoints")),
                "refused resume (%s) wrote checkpoints" % what)
    # tampered trainer_state.json
    for what, fix in [("ranks[1].rank = 0", lambda dp: dp["ranks"][1].__setitem__("rank", 0)),
                      ("an unknown key in ranks[0]", lambda dp: dp["ranks"][0].__setitem__("bogus", 1))]:
        src = os.path.join(WORK, "runs", "tamper", "checkpoints", "step-000003")
        shutil.rmtree(os.path.join(WORK, "runs", "tamper"), ignore_errors=True)
        shutil.copytree(ckpt(A2, 3), src)
        p = os.path.join(src, "trainer_state.json")
        ts = json.load(open(p))
        fix(ts["data_position"])
        json.dump(ts, open(p, "w"), indent=1)
        out = rundir("tamper_out")
        shutil.rmtree(out, ignore_errors=True)
        r = launch(2, ["lol", "train", "--resume", src, "--set", "train.out=" + out, "--no-progress"],
                   opts=["--timeout", "20", "--grace", "2"])
        R.check(r[0] == 2 and "error" in r[2], "resume with trainer_state.json %s: exit %s (want 2, refused): %s"
                % (what, r[0], r[2].strip()[-300:]))
    R.end(t0)


# ---------------------------------------------------------------- N: router noise
def part_noise(R, maze):
    t0 = R.group("N  router noise on: per-rank generators checkpointed; resume bit-identical")
    c = write_cfg("N2", config(maze, rundir("N2"), 6, 2, model={"router_noise_std": 0.5}, save_every=3))
    must(launch(2, train_cmd(c)), "N2")
    ts = json.load(open(os.path.join(ckpt(rundir("N2"), 3), "trainer_state.json")))
    rk = ts["data_position"]["ranks"]
    R.check(rk[0]["rng_cpu"] != rk[1]["rng_cpu"], "N2: both ranks checkpointed the same CPU generator state "
            "(rank r > 0 should be reseeded from (seed, r))")
    NR = rundir("N2R")
    must(launch(2, ["lol", "train", "--resume", ckpt(rundir("N2"), 3), "--set", "train.out=" + NR, "--no-progress"]),
         "N2 resume")
    compare_checkpoints(R, "N2 resumed at 3 -> 6 vs uninterrupted", ckpt(NR, 6), ckpt(rundir("N2"), 6), exact=True)
    compare_steps(R, "N2 resumed steps 4-6", metrics(NR)[0], metrics(rundir("N2"))[0], range(4, 7), exact=True)
    # the noise must be on at all: the 1-process run of the same global batch differs
    c1 = write_cfg("N1", config(maze, rundir("N1"), 6, 4, model={"router_noise_std": 0.5}))
    must(train1(c1), "N1")
    s1, s2 = metrics(rundir("N1"))[0], metrics(rundir("N2"))[0]
    if all(rel(s1[k]["loss"], s2[k]["loss"]) <= LOSS_REL and s1[k]["expert_load"] == s2[k]["expert_load"] for k in s1):
        R.note("noise 0.5: the 2-process run equals the 1-process run in every step (noise per rank not visible)")
    R.end(t0)


# ---------------------------------------------------------------- T: 3 processes, grad_accum
def part_three_accum(R, text6, text4z):
    t0 = R.group("T  3 x batch 1 vs 1 x batch 3; 2 x batch 1 x grad_accum 2 vs 1 x batch 4; a rank without targets; pack")
    c1 = write_cfg("T1", config(text6, rundir("T1"), 4, 3, eval_every=4))
    c3 = write_cfg("T3", config(text6, rundir("T3"), 4, 1, eval_every=4))
    must(train1(c1), "T1")
    must(launch(3, train_cmd(c3)), "T3")
    s1, e1 = metrics(rundir("T1"))[:2]
    s3, e3 = metrics(rundir("T3"))[:2]
    compare_steps(R, "3 processes vs 1", s3, s1, range(1, 5))
    R.check(e3.get(4, {}).get("valid_targets") == e1.get(4, {}).get("valid_targets")
            and rel(e3[4]["valid_loss"], e1[4]["valid_loss"]) <= LOSS_REL,
            "3 processes eval %s vs 1 process %s" % (e3.get(4), e1.get(4)))
    compare_checkpoints(R, "3 processes vs 1 at step 4", ckpt(rundir("T3"), 4), ckpt(rundir("T1"), 4))
    ca = write_cfg("GA1", config(text6, rundir("GA1"), 3, 4))
    cb = write_cfg("GA2", config(text6, rundir("GA2"), 3, 1, accum=2))
    must(train1(ca), "GA1")
    must(launch(2, train_cmd(cb)), "GA2")
    compare_steps(R, "2 x batch 1 x accum 2 vs 1 x batch 4", metrics(rundir("GA2"))[0], metrics(rundir("GA1"))[0],
                  range(1, 4))
    compare_checkpoints(R, "2 x batch 1 x accum 2 vs 1 x batch 4 at step 3", ckpt(rundir("GA2"), 3),
                        ckpt(rundir("GA1"), 3))
    # a rank whose batch has no target at all (a 1-token document): its share of the targets is 0
    za = write_cfg("Z1", config(text4z, rundir("Z1"), 4, 2))
    zb = write_cfg("Z2", config(text4z, rundir("Z2"), 4, 1))
    must(train1(za), "Z1")
    must(launch(2, train_cmd(zb)), "Z2")
    sz1, sz2 = metrics(rundir("Z1"))[0], metrics(rundir("Z2"))[0]
    compare_steps(R, "a rank with 0 targets: 2 x batch 1 vs 1 x batch 2", sz2, sz1, range(1, 5))
    compare_checkpoints(R, "a rank with 0 targets, step 4", ckpt(rundir("Z2"), 4), ckpt(rundir("Z1"), 4))
    # packing: each rank packs its own rows of seq_len tokens (other rows than one process: only the
    # token count per step, N x batch x seq_len, is comparable)
    pk = config(text6, rundir("PK2"), 3, 2)
    pk["data"].update(packing="pack", seq_len=16)
    r = launch(2, train_cmd(write_cfg("PK2", pk)))
    if R.check(r[0] == 0, "pack, 2 processes: exit %s %s" % (r[0], r[2][-300:])):
        sp = metrics(rundir("PK2"))[0]
        R.check([sp[k]["tokens"] for k in (1, 2, 3)] == [64, 128, 192],
                "pack, 2 processes x 2 rows x 16 tokens: cumulative tokens %s, want 64, 128, 192"
                % [sp[k]["tokens"] for k in (1, 2, 3)])
    R.end(t0)


# ---------------------------------------------------------------- D: sharding
def part_sharding(R, text5):
    t0 = R.group("D  sharding: rank r reads positions r, r+N, ... of each epoch; n mod N dropped per epoch")
    seqs = load_split(text5, "train")
    n = len(seqs)
    by_len = {len(s["tokens"]): s for s in seqs}
    model = {"library_size": 1, "core_depth": 2, "window": 4, "stride": 2}
    E = 3
    c1 = write_cfg("D1", config(text5, rundir("D1"), E * n, 1, model=model, lr=0.0))
    must(train1(c1), "D1")
    s1 = metrics(rundir("D1"))[0]
    prev, order, loss, flops = 0, [], [], []
    pf = 0.0
    for k in range(1, E * n + 1):
        order.append(s1[k]["tokens"] - prev)
        flops.append(s1[k]["flops"] - pf)
        loss.append(s1[k]["loss"])
        prev, pf = s1[k]["tokens"], s1[k]["flops"]
    epochs = [order[e * n:(e + 1) * n] for e in range(E)]
    R.check(all(sorted(ep) == sorted(by_len) for ep in epochs),
            "1 process batch 1: each epoch is not a permutation of the documents: %s" % epochs)
    if len({tuple(ep) for ep in epochs}) == 1:
        R.note("the three epochs have the same order %s" % epochs[0])
    # a document's loss is the same whenever it is seen (lr 0, one expert: the model never changes)
    per_doc = {}
    for ln, l in zip(order, loss):
        per_doc.setdefault(ln, []).append(l)
    R.check(all(max(v) - min(v) <= 1e-6 * max(v) for v in per_doc.values()),
            "lr 0: a document's loss changed between epochs: %s" % per_doc)
    for N in (2, 3):
        m = n // N
        steps = E * m
        cN = write_cfg("D%d" % N, config(text5, rundir("D%d" % N), steps, 1, model=model, lr=0.0))
        must(launch(N, train_cmd(cN)), "D%d" % N)
        sN = metrics(rundir("D%d" % N))[0]
        bad, seen = [], {}
        prev, pf = 0, 0.0
        for k in range(1, steps + 1):
            e, j = (k - 1) // m, (k - 1) % m
            pos = [r + N * j for r in range(N)]
            want = [order[e * n + p] for p in pos]
            got_tokens = sN[k]["tokens"] - prev
            got_flops = sN[k]["flops"] - pf
            prev, pf = sN[k]["tokens"], sN[k]["flops"]
            want_loss = (sum(per_doc[ln][0] * targets(by_len[ln]) for ln in want)
                         / sum(targets(by_len[ln]) for ln in want))
            mean_of_means = sum(per_doc[ln][0] for ln in want) / N
            if got_tokens != sum(want):
                # which documents did it see? (every subset sum is distinct)
                subset = [list(cb) for q in range(1, n + 1) for cb in itertools.combinations(sorted(by_len), q)
                          if sum(cb) == got_tokens]
                bad.append("step %d: tokens %d = documents %s, want epoch %d positions %s = documents %s"
                           % (k, got_tokens, subset, e, pos, want))
            elif not rel(sN[k]["loss"], want_loss) <= LOSS_REL:
                bad.append("step %d: loss %.8g, want the target-weighted mean %.8g (mean of per-rank means %.8g)"
                           % (k, sN[k]["loss"], want_loss, mean_of_means))
            if abs(got_flops - sum(flops[e * n + p] for p in pos)) > 1e-6 * got_flops:
                bad.append("step %d: flops %.6g, want the sum over ranks %.6g (rank 0 alone: %.6g)"
                           % (k, got_flops, sum(flops[e * n + p] for p in pos), flops[e * n + pos[0]]))
            seen.setdefault(e, []).extend(want if got_tokens == sum(want) else [])
        R.check(not bad, "%d processes x batch 1 over %d epochs of %d documents: %s"
                % (N, E, n, "; ".join(bad[:4])))
        for e, docs in seen.items():
            R.check(len(docs) == len(set(docs)) == N * m,
                    "%d processes, epoch %d: documents seen %s (want %d distinct, the last %d of the order dropped)"
                    % (N, e, docs, N * m, n - N * m))
    R.end(t0)


# ---------------------------------------------------------------- E: entry points
def part_entry(R, text6):
    t0 = R.group("E  launch --nproc 1 / WORLD_SIZE=1 = one process; manual torchrun-style env = lol launch")
    c = config(text6, None, 3, 2, save_every=3)
    paths = {}
    for name in ("E0", "E1", "EW", "EL2", "EM2"):
        cc = dict(c, train=dict(c["train"], out=rundir(name)))
        paths[name] = write_cfg(name, cc)
    must(train1(paths["E0"]), "E0")
    must(launch(1, train_cmd(paths["E1"])), "E1 (launch --nproc 1)")
    must(train1(paths["EW"], env={"WORLD_SIZE": "1", "RANK": "0"}), "EW (WORLD_SIZE=1)")
    for name, what in (("E1", "lol launch --nproc 1"), ("EW", "WORLD_SIZE=1")):
        compare_checkpoints(R, "%s vs plain lol train" % what, ckpt(rundir(name), 3), ckpt(rundir("E0"), 3), exact=True)
        env = [json.loads(x) for x in open(os.path.join(rundir(name), "environment.jsonl"))]
        R.check(env[0].get("world_size") == 1, "%s: environment.jsonl world_size %s" % (what, env[0].get("world_size")))
    must(launch(2, train_cmd(paths["EL2"])), "EL2")
    port = free_port()
    procs = []
    logs = []
    for r in range(2):
        env = dict(BASE_ENV, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOL_NUM_THREADS="1")
        lf = open(os.path.join(WORK, "logs", "EM2_rank%d.log" % r), "w")
        logs.append(lf)
        procs.append(subprocess.Popen([LOL, "train", "--config", paths["EM2"], "--no-progress"], env=env,
                                      stdout=lf, stderr=subprocess.STDOUT, start_new_session=True))
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=120))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rcs.append(None)
    for lf in logs:
        lf.close()
    if R.check(rcs == [0, 0], "two lol train processes with RANK=0/1 WORLD_SIZE=2 MASTER_*: exit %s" % rcs):
        compare_checkpoints(R, "manual RANK/WORLD_SIZE start vs lol launch --nproc 2", ckpt(rundir("EM2"), 3),
                            ckpt(rundir("EL2"), 3), exact=True)
    R.end(t0)


# ---------------------------------------------------------------- S: signals
def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open("/proc/%s/stat" % d).read()
                if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError):
                pass
    return out


def alive(pid):
    try:
        st = open("/proc/%d/stat" % pid).read()
        return st[st.rindex(")") + 2] != "Z"
    except OSError:
        return False


def start_long_launch(name, cfg_path, n=2):
    lf = open(os.path.join(WORK, "logs", name + ".log"), "w")
    p = subprocess.Popen([LOL, "launch", "--nproc", str(n), "--threads", "1", "--"] + train_cmd(cfg_path),
                         env=BASE_ENV, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    mp = os.path.join(rundir(name), "metrics.jsonl")
    t = time.time()
    while time.time() - t < 60:
        if os.path.exists(mp) and sum(1 for _ in open(mp)) >= 3:
            return p, lf
        if p.poll() is not None:
            break
        time.sleep(0.02)
    return p, lf


def last_step(run_dir):
    s = metrics(run_dir)[0]
    return max(s) if s else 0


def part_signals(R, maze):
    t0 = R.group("S  SIGINT to the launcher: all ranks stop at one step, checkpoint, exit 0, resume = uninterrupted;"
                 " SIGKILL of the launcher")
    noisy = {"router_noise_std": 0.5}
    c = write_cfg("SI", config(maze, rundir("SI"), 100000, 2, model=noisy))
    p, lf = start_long_launch("SI", c)
    kids = children(p.pid)
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = None
    lf.close()
    log = open(os.path.join(WORK, "logs", "SI.log")).read()
    R.check(rc == 0, "SIGINT to lol launch: exit %s (want 0: stopped, checkpoint saved): %s" % (rc, log[-400:]))
    time.sleep(0.2)
    R.check(not any(alive(k) for k in kids), "SIGINT: ranks %s still running after the launcher exited" % kids)
    SI = rundir("SI")
    k = last_step(SI)
    lat = open(os.path.join(SI, "latest")).read().strip() if os.path.exists(os.path.join(SI, "latest")) else None
    R.check(lat == "checkpoints/step-%06d" % k, "SIGINT: latest %s, last logged step %d" % (lat, k))
    if lat == "checkpoints/step-%06d" % k:
        ts = json.load(open(os.path.join(ckpt(SI, k), "trainer_state.json")))
        R.check(ts["step"] == k and ts["data_position"]["world_size"] == 2, "SIGINT checkpoint trainer_state step %s"
                % ts["step"])
        K = k + 3
        r = launch(2, ["lol", "train", "--resume", SI, "--set", "train.steps=%d" % K, "--no-progress"])
        R.check(r[0] == 0, "resume of the interrupted run: exit %s %s" % (r[0], r[2][-300:]))
        cu = write_cfg("SU", config(maze, rundir("SU"), K, 2, model=noisy))
        must(launch(2, train_cmd(cu)), "SU")
        if r[0] == 0:
            compare_checkpoints(R, "interrupted at %d + resumed to %d vs uninterrupted" % (k, K), ckpt(SI, K),
                                ckpt(rundir("SU"), K), exact=True)
            si, su = metrics(SI), metrics(rundir("SU"))
            compare_steps(R, "interrupted + resumed, every step", si[0], su[0], range(1, K + 1), exact=True)
            R.check(set(si[2].values()) == {1} and sorted(si[2]) == list(range(1, K + 1)),
                    "interrupted + resumed metrics.jsonl step lines %s" % si[2])
    # SIGKILL of the launcher: the ranks get SIGTERM (PR_SET_PDEATHSIG), save and stop. This process
    # becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER) so that the orphaned ranks are
    # reparented to it and their exit statuses can be collected. 3 trials (the outcome may be timing
    # dependent); each must stop both ranks with a checkpoint of their last step.
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
        reaper = True
    except (OSError, AttributeError):
        reaper = False
    outcomes = []
    for trial in range(3):
        name = "SK%d" % trial
        c = write_cfg(name, config(maze, rundir(name), 100000, 2))
        p, lf = start_long_launch(name, c)
        kids = children(p.pid)
        R.check(len(kids) == 2, "SIGKILL test: the launcher has %d children, want 2 ranks" % len(kids))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        status, t = {}, time.time()
        while time.time() - t < 30 and len(status) < len(kids):
            for k in kids:
                if k in status:
                    continue
                if reaper:
                    try:
                        pid, st = os.waitpid(k, os.WNOHANG)
                    except ChildProcessError:
                        status[k] = "?"
                        continue
                    if pid:
                        status[k] = ("exit %d" % os.WEXITSTATUS(st)) if os.WIFEXITED(st) else \
                            ("signal %d" % os.WTERMSIG(st))
                elif not alive(k):
                    status[k] = "?"
            time.sleep(0.02)
        lf.close()
        still = [k for k in kids if k not in status]
        for k in still:
            os.kill(k, signal.SIGKILL)
        SK = rundir(name)
        ks = last_step(SK)
        lat = open(os.path.join(SK, "latest")).read().strip() if os.path.exists(os.path.join(SK, "latest")) else None
        cks = sorted(os.listdir(os.path.join(SK, "checkpoints"))) if os.path.isdir(os.path.join(SK, "checkpoints")) \
            else []
        ok = not still and lat == "checkpoints/step-%06d" % ks
        outcomes.append("trial %d: last logged step %d, ranks %s%s, checkpoints/ %s, latest %s"
                        % (trial + 1, ks, [status.get(k, "running") for k in kids], " (killed 30 s later)" if still
                           else "", cks, lat))
        R.check(ok, "SIGKILL of lol launch, " + outcomes[-1])
    R.note("SIGKILL of lol launch: " + "; ".join(outcomes))
    R.end(t0)


# ---------------------------------------------------------------- F: failures, bad input
WRAP = r"""#!/bin/sh
# rank 1 gets extra arguments / environment / a signal to itself; other ranks run unchanged
if [ "$RANK" = "1" ]; then
  if [ -n "$ENV1" ]; then export "$ENV1"; fi
  if [ -n "$SIG1" ]; then
    ( while [ ! -s "$WATCH" ]; do sleep 0.05; done; sleep 0.2; kill -"$SIG1" $$ ) &
  fi
  exec "$LOLBIN" "$@" $EXTRA1
fi
exec "$LOLBIN" "$@"
"""


def part_failures(R, text6):
    t0 = R.group("F  failing ranks and bad input: exit status, message, no hang")
    wrap = os.path.join(WORK, "wrap", "rank1.sh")
    with open(wrap, "w") as f:
        f.write(WRAP)
    os.chmod(wrap, 0o755)
    base = config(text6, None, 3, 1)

    def cfg(name, steps=3):
        return write_cfg(name, dict(base, train=dict(base["train"], out=rundir(name), steps=steps)))

    def wlaunch(name, env, opts=("--timeout", "20", "--grace", "2"), steps=3, timeout=120):
        c = cfg(name, steps)
        return launch(2, [wrap] + train_cmd(c)[1:], opts=list(opts), env=dict(env, LOLBIN=LOL), timeout=timeout)

    # 1. another --set on rank 1
    r = wlaunch("F_set", {"EXTRA1": "--set=optim.weight_decay=0.2"})
    st = launcher_ranks(r[2])
    R.check(r[0] == 2 and st.get(0) == ("status", 2) and st.get(1) == ("status", 2)
            and "weight_decay" in r[2] and "rank" in r[2] and r[3] < 60,
            "rank 1 with another --set: exit %s, ranks %s, %.1f s; stderr: %s" % (r[0], st, r[3], r[2][-500:]))
    # 2. other data on rank 1 (same size and vocabulary, one token changed)
    other = os.path.join(WORK, "data", "text6_changed")
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(text6, other)
    shard = os.path.join(other, json.load(open(os.path.join(other, "dataset.json")))["splits"]["train"][0])
    t = read_st(shard)
    toks = list(t["tokens"][1])
    toks[1] = ord("z") if toks[1] != ord("z") else ord("y")
    t["tokens"] = (t["tokens"][0], toks, t["tokens"][2])
    write_st(shard, t)
    r = wlaunch("F_data", {"EXTRA1": "--set=data.dir=" + other})
    st = launcher_ranks(r[2])
    R.check(r[0] == 2 and st.get(0) == ("status", 2) and st.get(1) == ("status", 2) and r[3] < 60
            and ("data" in r[2].lower() or "fingerprint" in r[2].lower()),
            "rank 1 with another copy of the data: exit %s, ranks %s, %.1f s; stderr: %s"
            % (r[0], st, r[3], r[2][-500:]))
    R.check("rank" in r[2] and ("fingerprint" in r[2] or "/data" in r[2]),
            "the data difference is not named: %s" % r[2][-300:])
    # 3. another LOL_DIST_CHECK_EVERY on rank 1
    r = wlaunch("F_every", {"ENV1": "LOL_DIST_CHECK_EVERY=7"})
    st = launcher_ranks(r[2])
    R.check(r[0] == 2 and st.get(0) == ("status", 2) and st.get(1) == ("status", 2)
            and "LOL_DIST_CHECK_EVERY" in r[2] and r[3] < 60,
            "rank 1 with another LOL_DIST_CHECK_EVERY: exit %s, ranks %s; stderr: %s" % (r[0], st, r[2][-400:]))
    # 4. a missing data.dir on rank 1: rank 1 exits 2 (its own reason), rank 0 4; launcher 2
    r = wlaunch("F_nodir", {"EXTRA1": "--set=data.dir=/nonexistent_lol_dir"})
    st = launcher_ranks(r[2])
    R.check(r[0] == 2 and st.get(1) == ("status", 2) and st.get(0, ("status", 0))[1] in (2, 4)
            and "/nonexistent_lol_dir" in r[2] and r[3] < 60,
            "rank 1 with a missing data.dir: exit %s (want 2), ranks %s, %.1f s; stderr: %s"
            % (r[0], st, r[3], r[2][-500:]))
    # 5. rank 1 killed (SIGKILL) mid-run: rank 0 fails at its next collective at once (4), launcher 137
    r = wlaunch("F_kill", {"SIG1": "KILL", "WATCH": os.path.join(rundir("F_kill"), "metrics.jsonl")},
                opts=("--timeout", "30", "--grace", "2"), steps=1000000)
    st = launcher_ranks(r[2])
    fa = failed_after(r[2], 0)
    R.check(r[0] == 128 + 9 and st.get(1) == ("signal", 9) and st.get(0) == ("status", 4)
            and fa is not None and fa < 5,
            "rank 1 SIGKILLed: exit %s (want 137), ranks %s, rank 0 failed after %s s (timeout 30: want at once); "
            "stderr: %s" % (r[0], st, fa, r[2][-500:]))
    # 6. rank 1 stalled (SIGSTOP): rank 0 fails after --timeout (4), launcher stops rank 1 after --grace, exit 4
    T = 3
    r = wlaunch("F_stop", {"SIG1": "STOP", "WATCH": os.path.join(rundir("F_stop"), "metrics.jsonl")},
                opts=("--timeout", str(T), "--grace", "1"), steps=1000000, timeout=90)
    st = launcher_ranks(r[2])
    fa = failed_after(r[2], 0)
    R.check(r[0] == 4 and st.get(0) == ("status", 4) and fa is not None and T - 0.5 <= fa <= T + 1.5
            and r[3] < T + 1 + 10 + 25,
            "rank 1 stopped (SIGSTOP), --timeout %d --grace 1: exit %s (want 4), ranks %s, rank 0 failed after %s s, "
            "%.1f s in all; stderr: %s" % (T, r[0], st, fa, r[3], r[2][-500:]))
    # 7. a rendezvous that never completes (node 1 of 2 never started): bounded by --timeout
    T = 2
    c = cfg("F_rdzv")
    r = launch(1, train_cmd(c), opts=["--nnodes", "2", "--node-rank", "0", "--master-port", str(free_port()),
                                      "--timeout", str(T), "--grace", "1"], timeout=90)
    fa = None
    for line in r[2].splitlines():
        if "failed after" in line:
            fa = float(line.split("failed after")[1].split()[0])
    R.check(r[0] == 4 and fa is not None, "rendezvous without the other node: exit %s (want 4); stderr: %s"
            % (r[0], r[2][-300:]))
    R.check(fa is not None and fa <= T + 1.0,
            "rendezvous with --timeout %d (LOL_DIST_TIMEOUT): rank 0 failed after %s s, %.1f s in all (docs: the "
            "rendezvous is bounded by LOL_DIST_TIMEOUT seconds)" % (T, fa, r[3]))
    # 8. MASTER_PORT in use
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    c = cfg("F_port")
    r = launch(2, train_cmd(c), opts=["--master-port", str(port), "--timeout", "10", "--grace", "1"])
    s.close()
    st = launcher_ranks(r[2])
    R.check(r[0] == 2 and st.get(0) == ("status", 2) and str(port) in r[2] and "master-port" in r[2],
            "--master-port %d held by another program: exit %s, ranks %s; stderr: %s" % (port, r[0], st, r[2][-400:]))
    # 9. launcher arguments
    c = cfg("F_args")
    for v in ("0", "-1", "1025", "abc"):
        rr = sh([LOL, "launch", "--nproc", v, "--"] + train_cmd(c), timeout=30)
        R.check(rr[0] not in (0, None) and "nproc" in rr[2] and "process(es)" not in rr[2],
                "--nproc %s: exit %s; stderr: %s" % (v, rr[0], rr[2][-200:]))
    rr = sh([LOL, "launch", "--nproc", "2"], timeout=30)
    R.check(rr[0] not in (0, None) and rr[2].strip() != "", "no command: exit %s" % rr[0])
    rr = sh([LOL, "launch", "--nproc", "2", "--", "/nonexistent_lol_prog"], timeout=60)
    R.check(rr[0] not in (0, None) and "/nonexistent_lol_prog" in rr[2] and rr[3] < 20,
            "a missing program: exit %s, %.1f s; stderr: %s" % (rr[0], rr[3], rr[2][-300:]))
    rr = sh([LOL, "launch", "--nproc", "1", "--nnodes", "2", "--"] + train_cmd(c), timeout=30)
    R.check(rr[0] == 2 and "master-port" in rr[2], "--nnodes 2 without --master-port: exit %s: %s"
            % (rr[0], rr[2][-200:]))
    for nr in ("2", "-1"):
        rr = sh([LOL, "launch", "--nproc", "1", "--nnodes", "2", "--node-rank", nr, "--master-port", "29999", "--"]
                + train_cmd(c), timeout=30)
        R.check(rr[0] not in (0, None) and "node-rank" in rr[2] and "process(es)" not in rr[2],
                "--node-rank %s of 2: exit %s: %s" % (nr, rr[0], rr[2][-200:]))
    # 10. train.out holding a run, without --resume: refused on every rank, nothing changed
    A2 = rundir("A2")
    before = open(os.path.join(A2, "metrics.jsonl")).read()
    rr = launch(2, train_cmd(os.path.join(WORK, "runs", "A2.json")), opts=["--grace", "2", "--timeout", "10"])
    R.check(rr[0] == 2 and "--resume" in rr[2] and open(os.path.join(A2, "metrics.jsonl")).read() == before
            and sorted(os.listdir(os.path.join(A2, "checkpoints"))) == ["step-000003", "step-000006"],
            "2 processes into a directory holding a run, no --resume: exit %s: %s" % (rr[0], rr[2][-300:]))
    # 11. another lol command under the launcher is refused
    rr = launch(2, ["lol", "info", "--model", ckpt(rundir("E0"), 3)], opts=["--grace", "1", "--timeout", "10"])
    R.check(rr[0] == 2 and "WORLD_SIZE" in rr[2], "lol info under lol launch: exit %s: %s" % (rr[0], rr[2][-300:]))
    # 12. a CUDA device in this CPU build
    c = cfg("F_cuda")
    rr = launch(2, train_cmd(c, sets=["train.device=cuda"]), opts=["--grace", "1", "--timeout", "10"])
    R.check(rr[0] == 2 and "cuda" in rr[2].lower(), "train.device=cuda, 2 processes, CPU build: exit %s: %s"
            % (rr[0], rr[2][-300:]))
    R.end(t0)


# ---------------------------------------------------------------- main
def check(lol, work):
    global LOL, WORK
    LOL, WORK = os.path.abspath(lol), os.path.abspath(work)
    t0 = time.time()
    os.makedirs(WORK, exist_ok=True)
    for o in OUTPUTS:
        p = os.path.join(WORK, o)
        if os.path.isdir(p):
            shutil.rmtree(p)
        os.makedirs(p)
    R = Report()
    maze = maze_data()
    text6 = text_corpus("text6", [3, 6, 12, 24, 48, 96], valid_lengths=[5, 17, 40])
    text5 = text_corpus("text5", [3, 6, 12, 24, 48])
    text4z = text_corpus("text4z", [1, 5, 9, 17])
    part_equivalence(R, maze)
    part_noise(R, maze)
    part_three_accum(R, text6, text4z)
    part_sharding(R, text5)
    part_entry(R, text6)
    part_signals(R, maze)
    part_failures(R, text6)
    nf = sum(len(g[2]) for g in R.groups)
    print("%d groups, %d checks, %d disagree (%.0f s)" % (len(R.groups), sum(g[1] for g in R.groups), nf,
                                                           time.time() - t0))
    return 1 if nf else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run lol launch / lol train jobs and compare what the docs promise")
    c.add_argument("--lol", required=True, help="the lol binary")
    c.add_argument("--work", required=True, help="a scratch directory (its outputs are replaced)")
    a = ap.parse_args()
    sys.exit(check(a.lol, a.work))
