#!/usr/bin/env python3
"""kill -9 trials outside the test suite (docs/robustness.md; the same procedure as
CrashSafety.Kill9AtRandomMomentsAlwaysLeavesALoadableLatestCheckpoint):

    python3 fuzz/kill9_trials.py build/lol DATA_DIR RUN_JSON [SECONDS]

DATA_DIR: a maze dataset (`lol data maze --n 40 --size 4 --out DATA_DIR`); RUN_JSON: a
tiny run config (its data.dir and train.* are overridden). Prints one summary line.
"""
import json, os, random, shutil, signal, subprocess, sys, tempfile, time
lol = os.path.abspath(sys.argv[1]); work = tempfile.mkdtemp(prefix='lol_kill9_'); shutil.rmtree(work, ignore_errors=True); os.makedirs(work)
c = json.load(open(sys.argv[3])); c['data']['dir'] = os.path.abspath(sys.argv[2])
budget = float(sys.argv[4]) if len(sys.argv) > 4 else 60
c['train'].update(steps=100000, out=work + '/run', save_every=1, keep_last=2, threads=1)
json.dump(c, open(work + '/run.json', 'w'))
seed = int(time.time()); rng = random.Random(seed)
trials = mid = before = early = bad = 0; last = 0; t0 = time.time()
while trials < 60 and time.time() - t0 < budget:
    run = work + '/run'
    args = [lol, 'train', '--resume', run, '--no-progress'] if os.path.exists(run + '/latest') else [lol, 'train', '--config', work + '/run.json']
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(work + '/child.log', 'w'))
    t_sp = time.time(); mp = run + '/metrics.jsonl'
    while time.time() - t_sp < 30 and not (os.path.exists(mp) and os.path.getmtime(mp) >= t_sp - 0.01): time.sleep(0.01)
    time.sleep(rng.uniform(0, 1.5))
    ck = run + '/checkpoints'
    m = os.path.isdir(ck) and any(n.startswith('.tmp-') for n in os.listdir(ck))
    p.send_signal(signal.SIGKILL); rc = p.wait(); trials += 1
    if rc != -9: early += 1; print('early exit', rc, open(work + '/child.log').read()[-300:]); continue
    mid += m
    if not os.path.exists(run + '/latest'): before += 1; continue
    ckp = os.path.join(run, open(run + '/latest').read().strip())
    st = json.load(open(ckp + '/trainer_state.json'))['step']
    r = subprocess.run([lol, 'info', ckp], capture_output=True, text=True)
    if r.returncode != 0 or st < last: bad += 1; print('BAD', r.stderr, st, last)
    last = st
r = subprocess.run([lol, 'train', '--resume', work + '/run', '--no-progress', '--set', f'train.steps={last+2}'], capture_output=True, text=True)
print(f'seed {seed}: {trials} trials, {mid} killed during a checkpoint write, {before} before the first checkpoint, {early} early exits, {bad} bad; last step {last}; final resume rc {r.returncode}')
shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if bad or early or r.returncode else 0)
