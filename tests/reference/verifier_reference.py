#!/usr/bin/env python3
"""Independent differential check of the maze / sudoku task VERIFIER of `lol`
(`lol data judge`), whose verdicts fill `lol eval-strategies`' confusion table.

Provenance
----------
Written from docs/tasks.md ("Sequence format", "The five strategies (exact rules)"
and the two verifier sections: "Verifier (paper C.3 metrics, Figure 14)" for
sudoku and "Verifier (`maze_verify.h`)" for mazes), from the LoL paper
(/work/shared/seeds/000_8d63fd016cd52d41.txt: section 4.1.3, appendix C.3 with
the metric definitions of Figure 14, C.3.1, C.4, C.4.1) and from the task
description of `lol data judge` (input/output fields, exit codes), *without*
reading the C++ sources (src/) or the C++ tests (tests/ other than
tests/reference/).  The canonical traces of the five strategies (needed for
`followed`) come from tests/reference/tasks_reference.py, an independent
re-implementation written by another reviewer and checked there against the
paper's worked examples and lol's generator; everything else here (legal /
faithful / exact / answer / padding / followed / as_requested / error) is my own
reading of the docs.  Where the docs are silent the choice is marked ASSUMED.

What it checks
--------------
`check --lol build/lol --work DIR`:
  1. generates small maze datasets (sides 4, 5, 8, 12) and sudoku datasets with
     `lol data maze|sudoku`, adds the paper's own maze and sudoku (C.3.1, C.4.1)
     and a few random perfect mazes of my own (not filtered by the generator's
     acceptance rules: A* ties, DFS without backtracking, coinciding traces);
  2. builds continuations per puzzle: every strategy's canonical trace + answer
     under every requested strategy with the label / the neutral filler / no
     label, and mutations aimed at each verdict level: faithful-but-not-exact
     (orders the rules leave free), legal-but-not-faithful (FIFO / DFS / A* /
     dead-end / bidirectional-stop violations; wrong sudoku deductions),
     illegal traces, wrong answers, markers, <pad> tokens, tokens after <eos>,
     missing <eos>, empty continuations (fixed random seed: deterministic);
  3. computes its own verdict for each and compares with one `lol data judge`
     call per task: followed, as_requested, legal, faithful, correct exactly,
     padding to 1e-9, error as empty / non-empty; also the line numbers (blank
     input lines are counted) and `--out`;
  4. malformed input files must exit 2 with a message naming the file, the line
     and (for field errors) the field.
Prints one line per check group and a summary; exit 1 on any disagreement.
Python 3 standard library only.  About 50 s on one core (most of it is the ~25
starts of the lol binary).

Readings the docs leave open (marked ASSUMED in the code)
---------------------------------------------------------
* splitting: the trace is what follows a leading 'R :' up to the first 'A' token;
  the answer is what follows the first 'A :' (judged even when 'R :' is missing);
  'A' without ':' ends the trace and leaves no answer.  One rule for both tasks.
* error is empty iff followed == requested, the answer is correct and <eos> was
  produced (both tasks; padding alone is no error).
* padding is 0 for a continuation with no token before <eos>.
* followed: the requested strategy first, then the lowest-numbered one.
* maze S1 / S4 faithfulness: a real FIFO queue with free order among siblings
  (skipping a queued cell is not faithful); S4 "seen by the other side" = its root,
  its listed cells and their open neighbours; "new" = listed by neither side.
* sudoku: an empty step (';' ';') or a ':' with no claim is an unknown step; an S4
  step may leave a newly single peer unlisted (claims are all true: faithful); S5
  'back' with no placement left is not a dead branch; '= d x' judges "d is not a
  candidate" with the cell blanked.
* tokens are separated by any whitespace; extra JSON fields, CRLF, blank lines are
  accepted; a sudoku question with several / no solutions is exit 2.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks_reference as TR  # noqa: E402  (canonical strategy traces only)

PAD, EOS = "<pad>", "<eos>"
MAZE_FILLER = "[ ... ... ... ... ... ... ]"
SUDOKU_FILLER = "[ ... ]"
DIGITS = {str(d): d for d in range(1, 10)}

# ---------------------------------------------------------------------------
# Continuation splitting (common to both tasks)
# ---------------------------------------------------------------------------


class Split:
    """The continuation cut at the first <eos>, pads counted and dropped.
    trace: tokens between the leading 'R :' and the first 'A' (None when the
    continuation does not start with 'R :');  answer: tokens after the first
    'A :' (None when there is no 'A :')."""

    def __init__(self, gen):
        toks = gen.split()
        self.eos = EOS in toks
        if self.eos:
            toks = toks[:toks.index(EOS)]       # tokens after the first <eos> are ignored
        n_all = len(toks)
        n_pad = toks.count(PAD)
        # padding = <pad> tokens / tokens before the first <eos> (all if none);
        # ASSUMED: 0 when there is no token at all (0/0), and <eos> itself is not counted.
        self.padding = n_pad / n_all if n_all else 0.0
        toks = [t for t in toks if t != PAD]
        self.tokens = toks
        # ASSUMED: the trace is the run of tokens after a leading 'R :' up to the first
        # 'A' token (or the end); a continuation not starting with 'R :' has no trace.
        # The answer is whatever follows the first 'A :' (judged even without 'R :').
        if len(toks) >= 2 and toks[0] == "R" and toks[1] == ":":
            body = toks[2:]
            k = body.index("A") if "A" in body else len(body)
            self.trace = body[:k]
            rest = body[k:]
        else:
            self.trace = None
            k = toks.index("A") if "A" in toks else len(toks)
            rest = toks[k:]
        if len(rest) >= 2 and rest[0] == "A" and rest[1] == ":":
            self.answer = rest[2:]
        else:
            self.answer = None       # ASSUMED: 'A' not followed by ':' = no answer


def finish(v, sp, r):
    """ASSUMED: error is empty iff the trace is exactly the requested strategy's
    (followed == requested, hence as requested, legal and faithful), the answer is
    correct and <eos> was produced.  The maze docs list as errors "the requested
    strategy's violation, a trace of another strategy, a wrong answer, missing <eos>";
    the sudoku docs say nothing about `error`, the same rule is applied.  Padding
    alone is no error."""
    ok = v["followed"] == r and v["correct"] and sp.eos
    v["error_empty"] = bool(ok)
    v["padding"] = sp.padding
    return v


# ---------------------------------------------------------------------------
# Maze
# ---------------------------------------------------------------------------

DIRS = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
CELL_RE = re.compile(r"^r([1-9][0-9]*)c([1-9][0-9]*)$")


class MazeP:
    """A parsed maze prompt (question plus optional label / filler)."""

    def __init__(self, prompt):
        t = prompt.split()
        if "[" in t:
            t = t[:t.index("[")]
        m, problems = TR.parse_maze_question(" ".join(t))  # the other reviewer's question parser
        assert not problems, problems
        n = m.n
        self.n = n
        self.opened = [set(o) for o in m.opened]
        self.names = ["r%dc%d" % (i // n + 1, i % n + 1) for i in range(n * n)]
        self.index = {nm: i for i, nm in enumerate(self.names)}
        self.start, self.goal = m.start, m.goal
        self.adj = []
        for i in range(n * n):
            r, c = divmod(i, n)
            self.adj.append([(r + DIRS[d][0]) * n + c + DIRS[d][1] for d in "NESW" if d in self.opened[i]])
        # solution path (tree: unique)
        prev = {self.start: None}
        q = deque([self.start])
        while q:
            i = q.popleft()
            for j in self.adj[i]:
                if j not in prev:
                    prev[j] = i
                    q.append(j)
        path, i = [], self.goal
        while i is not None:
            path.append(i)
            i = prev[i]
        self.path = path[::-1]
        self.path_set = set(self.path)
        self.off_path = set(range(n * n)) - self.path_set
        m = TR.Maze(n, self.opened, self.start, self.goal)
        self.tr = m
        # canonical traces (tasks_reference; A* ties broken by (f, g, discovery order))
        self.canon = {1: TR.maze_bfs(m), 2: TR.maze_dfs(m), 3: TR.maze_astar(m, tie="g"),
                      4: TR.maze_bidir(m, meet="discover"), 5: TR.maze_deadend(m)}

    def h(self, i):
        n = self.n
        return abs(i // n - self.goal // n) + abs(i % n - self.goal % n)

    def question(self):
        parts = ["Q :"]
        for i in range(self.n * self.n):
            parts.append(self.names[i])
            parts.extend(d for d in "NESW" if d in self.opened[i])
        parts += ["start", self.names[self.start], "goal", self.names[self.goal]]
        return " ".join(parts)


# --- legality (move model) -------------------------------------------------

def mz_legal(mz, s, t):
    if not t:
        return False
    if s in (1, 3):
        # starts at the start, every later cell new and next to an earlier listed cell,
        # ends at the goal
        if t[0] != mz.start or t[-1] != mz.goal:
            return False
        seen = {t[0]}
        for c in t[1:]:
            if c in seen or not any(j in seen for j in mz.adj[c]):
                return False
            seen.add(c)
        return True
    if s == 2:
        if t[0] != mz.start or t[-1] != mz.goal:
            return False
        return all(b in mz.adj[a] for a, b in zip(t, t[1:]))
    if s == 4:
        # start, goal, then cells alternating sides (position parity), each new and next
        # to an earlier cell of its side; the last cell is next to the cell before it and
        # seen (root, listed, or next to a listed cell) by the other side.
        # ASSUMED: "new" = listed by neither side before; "seen" as just said.
        if len(t) < 2 or t[0] != mz.start:
            return False
        k = len(t) - 1
        if k >= 2 and t[1] != mz.goal:
            return False
        listed = ([], [])
        allc = set()
        for i in range(k):
            c, side = t[i], i % 2
            if i >= 2:
                if c in allc or not any(j in listed[side] for j in mz.adj[c]):
                    return False
            listed[side].append(c)
            allc.add(c)
        last, before = t[k], t[k - 1]
        other = 1 - (k - 1) % 2
        seen_o = {mz.goal if other == 1 else mz.start}
        for c in listed[other]:
            seen_o.add(c)
            seen_o.update(mz.adj[c])
        return last in mz.adj[before] and last in seen_o
    if s == 5:
        return len(set(t)) == len(t) and set(t) == mz.off_path
    return False


# --- faithfulness (given legality) -----------------------------------------

def _fifo_take(groups, c):
    while groups and not groups[0]:
        groups.popleft()
    if not groups or c not in groups[0]:
        return False
    groups[0].discard(c)
    return True


def mz_faithful(mz, s, t):
    if not mz_legal(mz, s, t):
        return False
    if s == 1:
        # FIFO: a queue of sibling groups; the next dequeued cell must be in the
        # first non-empty group (siblings in any order).  ASSUMED: "children of earlier
        # cells first" is read as a real FIFO queue, so skipping a queued cell (and
        # reaching the goal without dequeuing it) is not faithful either.
        disc = {mz.start}
        groups = deque()
        for idx, c in enumerate(t):
            if idx and not _fifo_take(groups, c):
                return False
            kids = {j for j in mz.adj[c] if j not in disc}
            disc |= kids
            groups.append(kids)
        return True
    if s == 3:
        g = {mz.start: 0}
        open_ = set()
        for idx, c in enumerate(t):
            if idx:
                if c not in open_:
                    return False
                fmin = min(g[x] + mz.h(x) for x in open_)
                if g[c] + mz.h(c) != fmin:
                    return False
                open_.discard(c)
            for j in mz.adj[c]:
                if j not in g:
                    g[j] = g[c] + 1
                    open_.add(j)
        return True
    if s == 2:
        stack, visited = [mz.start], {mz.start}
        for c in t[1:]:
            top = stack[-1]
            if top == mz.goal:
                return False                     # must stop on entering the goal
            unv = [j for j in mz.adj[top] if j not in visited]
            if unv:
                if c not in unv:
                    return False                 # must advance while it can
                stack.append(c)
                visited.add(c)
            else:
                if len(stack) < 2 or c != stack[-2]:
                    return False                 # must step back to where it came from
                stack.pop()
        return True
    if s == 4:
        k = len(t) - 1
        disc = ({mz.start}, {mz.goal})
        groups = (deque(), deque())
        for i in range(k):
            c, a = t[i], i % 2
            b = 1 - a
            if i >= 2 and not _fifo_take(groups[a], c):
                return False
            sees = [j for j in mz.adj[c] if j in disc[b]]
            if i < k - 1:
                if sees:
                    return False                 # the search should have stopped here
            else:
                return t[k] in sees
            kids = {j for j in mz.adj[c] if j not in disc[a]}
            disc[a].update(kids)
            groups[a].append(kids)
        return True  # k == 0 cannot happen for a legal trace
    if s == 5:
        filled = set()
        for c in t:
            if sum(1 for j in mz.adj[c] if j not in filled) > 1:
                return False
            filled.add(c)
        return True
    return False


def maze_verdict(mz, r, gen):
    sp = Split(gen)
    trace = None
    if sp.trace is not None and all(x in mz.index for x in sp.trace):
        trace = [mz.index[x] for x in sp.trace]
    followed, legal, faithful = 0, False, False
    if trace:
        if trace == mz.canon[r]:
            followed = r
        else:
            # ASSUMED: when several other strategies share the trace, the lowest number
            followed = next((s for s in range(1, 6) if mz.canon[s] == trace), 0)
        for s in [r] + [x for x in range(1, 6) if x != r]:
            legal = legal or mz_legal(mz, s, trace)
            faithful = faithful or mz_faithful(mz, s, trace)
    correct = sp.answer is not None and sp.answer == [mz.names[i] for i in mz.path]
    v = {"followed": followed, "as_requested": followed == r, "legal": legal,
         "faithful": faithful, "correct": correct}
    return finish(v, sp, r)


# --- maze continuation generators -------------------------------------------

def mz_text(mz, cells):
    return [mz.names[c] if isinstance(c, int) else c for c in cells]


def mz_cont(mz, trace, answer=None, eos=True):
    ans = mz.path if answer is None else answer
    s = "R : " + " ".join(mz_text(mz, trace))
    s = s.rstrip() + " A : " + " ".join(mz_text(mz, ans))
    s = s.rstrip()
    return s + " <eos>" if eos else s


def mz_bfs_rand(mz, rng):
    seen, q, tr = {mz.start}, deque([mz.start]), []
    while q:
        i = q.popleft()
        tr.append(i)
        if i == mz.goal:
            return tr
        nb = list(mz.adj[i])
        rng.shuffle(nb)
        for j in nb:
            if j not in seen:
                seen.add(j)
                q.append(j)
    return None


def mz_dfs_rand(mz, rng, early_back_at=None):
    """DFS walk with random sibling order; with early_back_at=k, the k-th advance
    is replaced by a step back although an unvisited neighbour exists."""
    visited, tr, stack = {mz.start}, [mz.start], [mz.start]
    adv = 0
    while stack:
        i = stack[-1]
        if i == mz.goal:
            return tr
        nxt = [j for j in mz.adj[i] if j not in visited]
        rng.shuffle(nxt)
        if nxt and not (early_back_at is not None and adv == early_back_at and len(stack) > 1):
            adv += 1
            visited.add(nxt[0])
            stack.append(nxt[0])
            tr.append(nxt[0])
        else:
            if nxt:
                adv += 1
                early_back_at = None
            stack.pop()
            if stack:
                tr.append(stack[-1])
        if len(tr) > 10 * mz.n * mz.n:
            return None
    return None


def mz_astar_var(mz, rng, bad_pop=None):
    """A* popping a random cell of minimal f (faithful), or at pop number bad_pop the
    open cell of largest f (not faithful when its f is not minimal)."""
    g = {mz.start: 0}
    open_ = {mz.start}
    tr = []
    while open_:
        f = {x: g[x] + mz.h(x) for x in open_}
        if bad_pop is not None and len(tr) == bad_pop:
            fm = max(f.values())
        else:
            fm = min(f.values())
        cand = sorted(x for x in open_ if f[x] == fm)
        i = rng.choice(cand)
        open_.discard(i)
        tr.append(i)
        if i == mz.goal:
            return tr
        for j in mz.adj[i]:
            if j not in g:
                g[j] = g[i] + 1
                open_.add(j)
    return None


def mz_bidir_var(mz, rng, shuffle=True, ignore_meets=0, lifo_step=None):
    """Bidirectional BFS; shuffle: random sibling order (faithful); ignore_meets:
    the first meetings are not reported (the neighbour is skipped, the search goes
    on: legal, not faithful); lifo_step: that step dequeues the newest cell."""
    seen = ({mz.start}, {mz.goal})
    qs = (deque([mz.start]), deque([mz.goal]))
    tr = []
    side = 0
    steps = 0
    while qs[0] or qs[1]:
        if not qs[side]:
            return None
        if lifo_step is not None and steps == lifo_step and len(qs[side]) >= 2:
            i = qs[side].pop()
        else:
            i = qs[side].popleft()
        steps += 1
        tr.append(i)
        nb = list(mz.adj[i])
        if shuffle:
            rng.shuffle(nb)
        for j in nb:
            if j in seen[1 - side]:
                if ignore_meets > 0:
                    ignore_meets -= 1
                    continue
                tr.append(j)
                return tr
            if j not in seen[side]:
                seen[side].add(j)
                qs[side].append(j)
        side ^= 1
        if len(tr) > 4 * mz.n * mz.n:
            return None
    return None


def mz_deadend_rand(mz, rng):
    filled, tr = set(), []
    while True:
        cand = [i for i in range(mz.n * mz.n) if i not in filled and i not in (mz.start, mz.goal)
                and sum(1 for j in mz.adj[i] if j not in filled) <= 1]
        if not cand:
            return tr
        i = rng.choice(cand)
        filled.add(i)
        tr.append(i)


def mz_random_frontier(mz, rng):
    listed, seen = [mz.start], {mz.start}
    frontier = set(mz.adj[mz.start])
    while True:
        c = rng.choice(sorted(frontier))
        frontier.discard(c)
        listed.append(c)
        seen.add(c)
        if c == mz.goal:
            return listed
        frontier.update(j for j in mz.adj[c] if j not in seen)


def add_whitespace(add, text, r, rng):
    """Tokens are space-separated; ASSUMED: runs of spaces, leading / trailing spaces
    (group whitespace) and also tabs / newlines (group whitespace_tabs) separate tokens."""
    t = text.split()
    add("whitespace", r, None, raw="  " + "  ".join(t) + "  ")
    add("whitespace", r, None, raw=" ".join(t[:3]) + "   " + " ".join(t[3:]) + " ")
    add("whitespace_tabs", r, None, raw="\t".join(t))
    add("whitespace_tabs", r, None, raw=" ".join(t[:-1]) + "\n" + t[-1] + "\n")


def maze_cases(mz, rng, full_cross=True):
    """Yields (group, requested, generated, prompt-label-kind)."""
    C = mz.canon
    out = []

    def add(group, r, trace, answer=None, eos=True, lab=None, raw=None):
        gen = raw if raw is not None else mz_cont(mz, trace, answer, eos)
        out.append((group, r, gen, lab))

    # canonical traces of every strategy under every requested strategy
    for s in range(1, 6):
        for r in range(1, 6):
            labs = ("label", "filler", "none") if full_cross else (rng.choice(("label", "filler", "none")),)
            for lab in labs:
                add("canon_cross", r, C[s], lab=lab)
    for s in range(1, 6):
        add("label_mismatch", s, C[s], lab=("label_of", s % 5 + 1))

    # faithful variants (orders the rules leave free)
    for s, fn in ((1, mz_bfs_rand), (2, mz_dfs_rand), (3, mz_astar_var),
                  (4, mz_bidir_var), (5, mz_deadend_rand)):
        got = set()
        for _ in range(12):
            tr = fn(mz, rng)
            if tr and tuple(tr) not in got and tr != C[s]:
                got.add(tuple(tr))
                add("faithful_variant", s, tr)
                if len(got) >= 2:
                    break
        if got:
            add("faithful_variant", rng.choice([x for x in range(1, 6) if x != s]), list(next(iter(got))))

    # legal but not faithful
    for _ in range(3):
        tr = mz_random_frontier(mz, rng)
        add("unfaithful", rng.choice((1, 3)), tr)
    bfs = C[1]
    swaps = 0
    for i in range(1, len(bfs) - 2):
        t2 = bfs[:i] + [bfs[i + 1], bfs[i]] + bfs[i + 2:]
        if mz_legal(mz, 1, t2) and not mz_faithful(mz, 1, t2):
            add("unfaithful", 1, t2)
            swaps += 1
            if swaps >= 2:
                break
    # BFS skipping a cell of the queue
    for i in range(1, len(bfs) - 1):
        t2 = bfs[:i] + bfs[i + 1:]
        if mz_legal(mz, 1, t2):
            add("unfaithful", 1, t2)
            break
    for k in (1, 3, 5):
        tr = mz_astar_var(mz, rng, bad_pop=k)
        if tr:
            add("unfaithful", 3, tr)
    dfs = C[2]
    for k in range(1, 12):
        tr = mz_dfs_rand(mz, random.Random(k), early_back_at=k)
        if tr and tr != dfs and mz_legal(mz, 2, tr):
            add("unfaithful", 2, tr)
            break
    add("unfaithful", 2, dfs + [dfs[-2], dfs[-1]])                      # goes on past the goal
    i = len(dfs) // 2
    add("unfaithful", 2, dfs[:i + 1] + [dfs[i - 1], dfs[i]] + dfs[i + 1:])  # detour into a visited cell
    for ign in (1, 2):
        tr = mz_bidir_var(mz, rng, shuffle=False, ignore_meets=ign)
        if tr:
            add("unfaithful", 4, tr)
    for st in (4, 5, 6, 7):
        tr = mz_bidir_var(mz, rng, shuffle=False, lifo_step=st)
        if tr and tr != C[4]:
            add("unfaithful", 4, tr)
            break
    # S4 endings: the last cell next to the cell before it but seen only by its own side
    # (its parent), or seen by the other side but not next to the cell before it
    b4 = C[4]
    k4 = len(b4) - 1
    side_b = (k4 - 1) % 2
    own = [c for c in b4[side_b:k4:2] if c in mz.adj[b4[k4 - 1]]]
    if own:
        add("illegal", 4, b4[:k4] + [own[0]])
    other_listed = b4[1 - side_b:k4:2]
    far = [c for c in other_listed if c not in mz.adj[b4[k4 - 1]]]
    if far:
        add("illegal", 4, b4[:k4] + [far[0]])
    de = C[5]
    add("unfaithful", 5, de[::-1])
    perm = list(de)
    rng.shuffle(perm)
    add("unfaithful", 5, perm)
    if len(de) > 2:
        add("unfaithful", 5, [de[-1]] + de[:-1])

    # illegal traces
    n2 = mz.n * mz.n
    for s in range(1, 6):
        t = C[s]
        if len(t) >= 3:
            i = rng.randrange(1, len(t) - 1)
            bad = [c for c in range(n2) if c != t[i] and c not in mz.adj[t[i - 1]]
                   and c not in mz.adj[t[i]]]
            add("illegal", s, t[:i] + [rng.choice(bad)] + t[i + 1:])   # non-adjacent / wrong cell
            add("illegal", s, t[:i + 1] + [t[i]] + t[i + 1:])          # repeated cell
        add("illegal", s, t[1:])                                        # no start / first cell
        add("illegal", s, t[:-1])                                       # truncated
        add("illegal", s, [mz.goal] + t)                                # wrong start
        j = rng.randrange(0, len(t) + 1)
        for junk in ("N", "start", "r0c0", "r%dc1" % (mz.n + 1), "<unk>", "...", "S1", "r01c1",
                     "r1c01", "R1C1", "r1c1r1c2"):
            add("illegal_token", s, t[:j] + [junk] + t[j:])
            j = rng.randrange(0, len(t) + 1)
        add("illegal", s, [])                                           # empty trace
    add("illegal", 5, C[5] + [mz.path[len(mz.path) // 2]])              # fills a path cell
    add("illegal", 5, C[5] + [C[5][0]])                                 # fills twice

    # answers
    for s in range(1, 6):
        r = s
        p = mz.path
        add("answer", r, C[s], answer=p[:-1])
        add("answer", r, C[s], answer=p[1:])
        add("answer", r, C[s], answer=p[::-1])
        add("answer", r, C[s], answer=p + [p[-2]])
        add("answer", r, C[s], answer=p[:2] + [p[1]] + p[2:])
        add("answer", r, C[s], answer=p[:3] + ["N"] + p[3:])
        add("answer", r, C[s], answer=[])
        add("answer", r, C[s], answer=C[1])

    # markers (ASSUMED readings, see Split)
    for s in range(1, 6):
        body = " ".join(mz_text(mz, C[s]))
        ans = " ".join(mz_text(mz, mz.path))
        add("markers", s, None, raw="%s A : %s <eos>" % (body, ans))           # no 'R :'
        add("markers", s, None, raw="R %s A : %s <eos>" % (body, ans))         # 'R' without ':'
        add("markers", s, None, raw="R : %s %s <eos>" % (body, ans))           # no 'A :'
        add("markers", s, None, raw="R : %s A %s <eos>" % (body, ans))         # 'A' without ':'
        add("markers", s, None, raw="R : %s A : A : %s <eos>" % (body, ans))   # doubled marker
        add("markers", s, None, raw="R : R : %s A : %s <eos>" % (body, ans))   # doubled R

    # padding, <eos> handling
    for s in range(1, 6):
        base = mz_cont(mz, C[s]).split()
        for k in (1, 3, 10):
            t = list(base[:-1])
            for _ in range(k):
                t.insert(rng.randrange(0, len(t) + 1), PAD)
            add("padding", s, None, raw=" ".join(t + [EOS]))
        add("padding", s, None, raw=" ".join(base + [PAD, PAD, "r1c1", "A", ":"]))   # pads after eos
        add("padding", s, None, raw=" ".join([PAD] * 5 + base))
        add("after_eos", s, None, raw=" ".join(base + ["r1c1", "r1c2", "A", ":", EOS, "junk"]))
        add("after_eos", s, None, raw=" ".join(base[:-1] + [EOS, EOS]))
        add("no_eos", s, None, raw=" ".join(base[:-1]))
        add("no_eos", s, None, raw=" ".join(base[:-1] + [PAD, PAD]))
        add("no_eos", s, None, raw=" ".join(base[:len(base) // 2]))               # cut mid-way
    for raw in ("", EOS, PAD, "%s %s %s" % (PAD, PAD, EOS), "R :", "R : %s" % EOS,
                "R : A : %s" % EOS, "A : %s %s" % (" ".join(mz_text(mz, mz.path)), EOS)):
        add("degenerate", rng.randrange(1, 6), None, raw=raw)
    add_whitespace(add, mz_cont(mz, C[1]), 1, rng)
    return out


def random_perfect_maze(rng, n):
    """A random spanning tree (randomized DFS), random distinct start and goal:
    not filtered by the generator's acceptance rules."""
    opened = [set() for _ in range(n * n)]
    start = rng.randrange(n * n)
    visited, stack = {start}, [start]
    while stack:
        i = stack[-1]
        r, c = divmod(i, n)
        opts = []
        for d, (dr, dc) in DIRS.items():
            rr, cc = r + dr, c + dc
            if 0 <= rr < n and 0 <= cc < n and rr * n + cc not in visited:
                opts.append((d, rr * n + cc))
        if not opts:
            stack.pop()
            continue
        d, j = rng.choice(opts)
        opened[i].add(d)
        opened[j].add({"N": "S", "S": "N", "E": "W", "W": "E"}[d])
        visited.add(j)
        stack.append(j)
    s = rng.randrange(n * n)
    g = rng.randrange(n * n - 1)
    g = g + 1 if g >= s else g
    parts = ["Q :"]
    for i in range(n * n):
        parts.append("r%dc%d" % (i // n + 1, i % n + 1))
        parts.extend(d for d in "NESW" if d in opened[i])
    parts += ["start", "r%dc%d" % (s // n + 1, s % n + 1), "goal", "r%dc%d" % (g // n + 1, g % n + 1)]
    return " ".join(parts)


# ---------------------------------------------------------------------------
# Sudoku
# ---------------------------------------------------------------------------

ROWS, COLS, BOXES = TR.ROWS, TR.COLS, TR.BOXES
UNIT_CELLS = {}
for _k in range(9):
    UNIT_CELLS["row%d" % (_k + 1)] = ROWS[_k]
    UNIT_CELLS["col%d" % (_k + 1)] = COLS[_k]
    UNIT_CELLS["box%d" % (_k + 1)] = BOXES[_k]
ALL_UNITS = list(UNIT_CELLS.values())
PEERS = [set(p) for p in TR.PEERS]
CELL_IDX = {"r%dc%d" % (i // 9 + 1, i % 9 + 1): i for i in range(81)}
CELL_NAME = {i: n for n, i in CELL_IDX.items()}


def s_cands(g, i):
    """Plain candidates: digits absent from the 20 peers (the cell's own digit ignored)."""
    used = {g[p] for p in PEERS[i]}
    return {d for d in range(1, 10) if d not in used}


def fwd_check(g):
    """(a) every blank cell keeps a candidate, (b) every digit missing from a unit
    keeps a blank cell of the unit that allows it."""
    cm = {}
    for i in range(81):
        if g[i] == 0:
            c = s_cands(g, i)
            if not c:
                return False
            cm[i] = c
    for u in ALL_UNITS:
        present = {g[i] for i in u if g[i]}
        allowed = set()
        for i in u:
            if g[i] == 0:
                allowed |= cm[i]
        for d in range(1, 10):
            if d not in present and d not in allowed:
                return False
    return True


def step_syntax(st):
    """0 = unknown, else the strategy whose step syntax this is; with parsed fields."""
    n = len(st)
    isd = lambda x: x in DIGITS  # noqa: E731
    isc = lambda x: x in CELL_IDX  # noqa: E731
    if n == 5 and isc(st[0]) and st[1] == "=" and st[2] == "{" and isd(st[3]) and st[4] == "}":
        return 1, (CELL_IDX[st[0]], DIGITS[st[3]])
    if n == 4 and st[0] in UNIT_CELLS and isd(st[1]) and st[2] == "->" and isc(st[3]):
        return 2, (st[0], DIGITS[st[1]], CELL_IDX[st[3]])
    if n == 4 and isd(st[0]) and re.match(r"^box[1-9]$", st[1]) and st[2] == "->" and isc(st[3]):
        return 3, (st[1], DIGITS[st[0]], CELL_IDX[st[3]])
    if n >= 4 and st[0] == "set" and isc(st[1]) and st[2] == "=" and isd(st[3]):
        if n == 4:
            return 4, (CELL_IDX[st[1]], DIGITS[st[3]], [])
        rest = st[5:]
        # ASSUMED: a ':' must be followed by at least one 'rRcC -> { e }'
        if st[4] == ":" and rest and len(rest) % 5 == 0:
            claims = []
            for k in range(0, len(rest), 5):
                c = rest[k:k + 5]
                if not (isc(c[0]) and c[1] == "->" and c[2] == "{" and isd(c[3]) and c[4] == "}"):
                    return 0, None
                claims.append((CELL_IDX[c[0]], DIGITS[c[3]]))
            return 4, (CELL_IDX[st[1]], DIGITS[st[3]], claims)
        return 0, None
    if n == 3 and isc(st[0]) and st[1] == "=" and isd(st[2]):
        return 5, ("place", CELL_IDX[st[0]], DIGITS[st[2]])
    if n == 4 and isc(st[0]) and st[1] == "=" and isd(st[2]) and st[3] == "x":
        return 5, ("reject", CELL_IDX[st[0]], DIGITS[st[2]])
    if n == 2 and isc(st[0]) and st[1] == "back":
        return 5, ("back", CELL_IDX[st[0]], 0)
    return 0, None


def split_steps(toks):
    if not toks:
        return []
    steps, cur = [], []
    for t in toks:
        if t == ";":
            steps.append(cur)
            cur = []
        else:
            cur.append(t)
    steps.append(cur)
    return steps   # ASSUMED: an empty step (';' ';', leading / trailing ';') is an unknown step


def sudoku_replay(P, sol, kind, parsed):
    """(legal, faithful) of a trace whose steps all have syntax `kind`."""
    g = list(P)
    faithful = True
    if kind in (1, 2, 3, 4):
        for f in parsed:
            if kind == 1:
                cell, d = f
            elif kind in (2, 3):
                unit, d, cell = f
            else:
                cell, d, claims = f
            if g[cell] != 0 or any(g[p] == d for p in PEERS[cell]):
                return False, False                # placement into a filled cell / held digit
            if kind in (1, 4) and s_cands(g, cell) != {d}:
                faithful = False
            if kind in (2, 3):
                u = UNIT_CELLS[unit]
                if cell not in u or any(j != cell and g[j] == 0 and d in s_cands(g, j) for j in u):
                    faithful = False
            if kind == 4 and claims:
                before = list(g)
                after = list(g)
                after[cell] = d
                seen = set()
                for pc, e in claims:
                    if pc in seen or pc not in PEERS[cell] or after[pc] != 0 \
                            or d not in s_cands(before, pc) or s_cands(after, pc) != {e}:
                        faithful = False
                    seen.add(pc)
            g[cell] = d
    else:
        givens = {i for i in range(81) if P[i]}
        for op, cell, d in parsed:
            if op == "place":
                if cell in givens or any(g[p] == d for p in PEERS[cell]):
                    return False, False
                g[cell] = d
                if not fwd_check(g):
                    faithful = False
            elif op == "reject":
                # ASSUMED: "d is not a candidate" is judged with the cell blanked (the
                # try replaces whatever the cell held), the check with the cell = d
                g[cell] = 0
                if d in s_cands(g, cell):
                    g[cell] = d
                    ok = fwd_check(g)
                    g[cell] = 0
                    if ok:
                        faithful = False
            else:  # back
                g[cell] = 0
                # a dead branch: the placements left are not all those of the solution.
                # ASSUMED: with no placement left (vacuously all of the solution) it is not.
                if all(g[i] == sol[i] for i in range(81) if g[i] and i not in givens):
                    faithful = False
    if g != list(sol):
        return False, False
    return True, faithful


class SudokuP:
    def __init__(self, question, record_traces=None):
        self.P = TR.parse_sudoku_question(question)
        self.question = question
        self.canon = {}
        self.canon_steps = {}
        fns = {1: TR.s1_naked, 2: TR.s2_hidden, 3: TR.s3_cross, 4: TR.s4_prop, 5: TR.s5_backtrack}
        sol = None
        for s in range(1, 6):
            steps, g = fns[s](self.P)
            assert steps is not None, "strategy %d cannot solve %s" % (s, question)
            self.canon_steps[s] = steps
            self.canon[s] = TR.sudoku_trace_text(steps).split()[2:]
            sol = g
        self.sol = sol
        self.mismatch = []
        if record_traces:
            for s, tr in record_traces.items():
                if tr.split()[2:] != self.canon[s]:
                    self.mismatch.append(s)


def sudoku_verdict(sp_, r, gen):
    sp = Split(gen)
    followed, as_req, legal, faithful = 0, False, False, False
    if sp.trace is not None:
        if sp.trace == sp_.canon[r]:
            followed = r
        else:
            followed = next((s for s in range(1, 6) if sp_.canon[s] == sp.trace), 0)
        steps = split_steps(sp.trace)
        syn = [step_syntax(st) for st in steps]
        kinds = [k for k, _ in syn]
        as_req = bool(steps) and all(k == r for k in kinds)
        if steps and kinds[0] != 0 and all(k == kinds[0] for k in kinds):
            legal, faithful = sudoku_replay(sp_.P, sp_.sol, kinds[0], [f for _, f in syn])
    a = sp.answer
    correct = a is not None and len(a) == 81 and all(x in DIGITS for x in a) \
        and [DIGITS[x] for x in a] == list(sp_.sol)
    v = {"followed": followed, "as_requested": as_req, "legal": legal, "faithful": faithful,
         "correct": correct}
    return finish(v, sp, r)


# --- sudoku continuation generators -----------------------------------------

def sd_cont(sp_, steps, answer=None, eos=True):
    ans = " ".join(str(d) for d in (sp_.sol if answer is None else answer))
    s = ("R : " + " ; ".join(steps)).rstrip() + " A : " + ans
    s = s.rstrip()
    return s + " <eos>" if eos else s


def sd_singles_rand(P, rng, kind):
    """Naked (1) / hidden (2) / box-hidden (3) singles in random order (faithful)."""
    g = list(P)
    steps = []
    while 0 in g:
        opts = []
        if kind == 1:
            for i in range(81):
                if g[i] == 0:
                    c = s_cands(g, i)
                    if len(c) == 1:
                        opts.append("%s = { %d }" % (CELL_NAME[i], next(iter(c))))
        else:
            for name, u in UNIT_CELLS.items():
                if kind == 3 and not name.startswith("box"):
                    continue
                for d in range(1, 10):
                    if any(g[i] == d for i in u):
                        continue
                    w = [i for i in u if g[i] == 0 and d in s_cands(g, i)]
                    if len(w) == 1:
                        opts.append("%s %d -> %s" % (name, d, CELL_NAME[w[0]]) if kind == 2
                                    else "%d %s -> %s" % (d, name, CELL_NAME[w[0]]))
        if not opts:
            return None
        st = rng.choice(opts)
        steps.append(st)
        k, f = step_syntax(st.split())
        cell, d = (f[0], f[1]) if k == 1 else (f[2], f[1])
        g[cell] = d
    return steps


def sd_prop_rand(P, rng, drop_claims=False):
    """S4 with random queue pops and random claim order (faithful); drop_claims
    leaves some newly single peers unlisted (ASSUMED faithful: claims all true)."""
    g = list(P)
    cs = {i: s_cands(g, i) for i in range(81) if g[i] == 0}
    queue = [i for i in range(81) if g[i] == 0 and len(cs[i]) == 1]
    queued = set(queue)
    steps = []
    while queue:
        i = queue.pop(rng.randrange(len(queue)))
        d = next(iter(cs[i]))
        g[i] = d
        new = []
        for j in sorted(PEERS[i]):
            if g[j] == 0 and d in cs[j]:
                cs[j].discard(d)
                if len(cs[j]) == 1 and j not in queued:
                    queue.append(j)
                    queued.add(j)
                    new.append(j)
        rng.shuffle(new)
        if drop_claims and new:
            new = new[1:]
        s = "set %s = %d" % (CELL_NAME[i], d)
        if new:
            s += " : " + " ".join("%s -> { %d }" % (CELL_NAME[j], next(iter(cs[j]))) for j in new)
        steps.append(s)
    return steps if 0 not in g else None


def sd_backtrack_var(P, order, desc, max_steps=3000):
    """Backtracking over the blanks in another cell order / candidate order, with the
    same forward check (faithful, not exact)."""
    g = list(P)
    blanks = [i for i in range(81) if g[i] == 0]
    if order == "reverse":
        blanks = blanks[::-1]
    elif order == "colmajor":
        blanks.sort(key=lambda i: (i % 9, i // 9))
    steps = []
    stack = [sorted(s_cands(g, blanks[0]), reverse=desc)]
    k = 0
    while True:
        if len(steps) > max_steps:
            return None
        i = blanks[k]
        rem = stack[k]
        g[i] = 0
        adv = False
        while rem:
            d = rem.pop(0)
            g[i] = d
            if fwd_check(g):
                steps.append("%s = %d" % (CELL_NAME[i], d))
                adv = True
                break
            steps.append("%s = %d x" % (CELL_NAME[i], d))
            g[i] = 0
        if adv:
            if k + 1 == len(blanks):
                return steps
            k += 1
            stack.append(sorted(s_cands(g, blanks[k]), reverse=desc))
            continue
        steps.append("%s back" % CELL_NAME[i])
        stack.pop()
        k -= 1
        if k < 0:
            return None


def sudoku_cases(sp_, rng):
    C = sp_.canon_steps
    P, sol = sp_.P, sp_.sol
    blanks = [i for i in range(81) if P[i] == 0]
    givens = [i for i in range(81) if P[i]]
    out = []

    def add(group, r, steps, answer=None, eos=True, lab=None, raw=None):
        gen = raw if raw is not None else sd_cont(sp_, steps, answer, eos)
        out.append((group, r, gen, lab))

    for s in range(1, 6):
        for r in range(1, 6):
            for lab in ("label", "filler", "none"):
                add("canon_cross", r, C[s], lab=lab)
    for s in range(1, 6):
        add("label_mismatch", s, C[s], lab=("label_of", s % 5 + 1))

    # faithful, not the canonical order
    for kind in (1, 2, 3):
        for _ in range(2):
            st = sd_singles_rand(P, rng, kind)
            if st:
                add("faithful_variant", kind, st)
                add("faithful_variant", kind % 5 + 1, st)
    for _ in range(2):
        add("faithful_variant", 4, sd_prop_rand(P, rng))
    add("faithful_variant", 4, sd_prop_rand(P, rng, drop_claims=True))
    # S4 with the canonical order but one step's claims reversed
    s4 = list(C[4])
    for i, st in enumerate(s4):
        if st.count("->") >= 2:
            head, claims = st.split(" : ")
            parts = re.findall(r"r\dc\d -> \{ \d \}", claims)
            add("faithful_variant", 4, s4[:i] + [head + " : " + " ".join(parts[::-1])] + s4[i + 1:])
            break
    # S5: place the solution row-major; other backtracking orders
    add("faithful_variant", 5, ["%s = %d" % (CELL_NAME[i], sol[i]) for i in blanks])
    for order, desc in (("reverse", False), ("rowmajor", True), ("colmajor", False)):
        st = sd_backtrack_var(P, order, desc)
        if st:
            add("faithful_variant", 5, st)

    # legal but not faithful: wrong claimed deductions
    add("unfaithful", 1, ["%s = { %d }" % (CELL_NAME[i], sol[i]) for i in blanks])
    add("unfaithful", 2, ["row%d %d -> %s" % (i // 9 + 1, sol[i], CELL_NAME[i]) for i in blanks])
    add("unfaithful", 2, ["box%d %d -> %s" % (TR.box_of(i) + 1, sol[i], CELL_NAME[i]) for i in blanks])
    add("unfaithful", 3, ["%d box%d -> %s" % (sol[i], TR.box_of(i) + 1, CELL_NAME[i]) for i in blanks])
    add("unfaithful", 4, ["set %s = %d" % (CELL_NAME[i], sol[i]) for i in blanks])
    # one step with a unit that does not hold the cell / another unit that does
    for s in (2, 3):
        st = list(C[s])
        k = len(st) // 2
        toks = st[k].split()
        if s == 2:
            cell = CELL_IDX[toks[3]]
            wrong = "row%d" % ((cell // 9 + 1) % 9 + 1)
            add("unfaithful", 2, st[:k] + [" ".join([wrong] + toks[1:])] + st[k + 1:])
            for alt in ("row%d" % (cell // 9 + 1), "col%d" % (cell % 9 + 1), "box%d" % (TR.box_of(cell) + 1)):
                if alt != toks[0]:
                    add("unfaithful", 2, st[:k] + [" ".join([alt] + toks[1:])] + st[k + 1:])
        else:
            cell = CELL_IDX[toks[3]]
            wrong = "box%d" % ((TR.box_of(cell) + 1) % 9 + 1)
            add("unfaithful", 3, st[:k] + [" ".join([toks[0], wrong] + toks[2:])] + st[k + 1:])
    # S4 claims: wrong digit, a non-peer, listed twice, a peer not newly single, an extra claim
    s4 = list(C[4])
    idx = [i for i, st in enumerate(s4) if " : " in st]
    if idx:
        i = idx[len(idx) // 2]
        head, claims = s4[i].split(" : ")
        parts = re.findall(r"(r\dc\d) -> \{ (\d) \}", claims)
        c0, e0 = parts[0]
        wrong_e = (int(e0) % 9) + 1
        variants = [
            " ".join("%s -> { %s }" % (c, e) for c, e in parts) + " %s -> { %s }" % (c0, e0),
            " ".join("%s -> { %s }" % (c, (wrong_e if c == c0 else e)) for c, e in parts),
        ]
        setcell = CELL_IDX[head.split()[1]]
        nonpeer = next(j for j in range(81) if j not in PEERS[setcell] and j != setcell)
        variants.append(claims + " %s -> { %s }" % (CELL_NAME[nonpeer], e0))
        # a blank peer that is not left with a single candidate
        g = list(P)
        for st in s4[:i]:
            f = step_syntax(st.split())[1]
            g[f[0]] = f[1]
        d = int(head.split()[3])
        g2 = list(g)
        g2[setcell] = d
        multi = [j for j in sorted(PEERS[setcell]) if g2[j] == 0 and len(s_cands(g2, j)) >= 2]
        if multi:
            j = multi[0]
            variants.append(claims + " %s -> { %d }" % (CELL_NAME[j], min(s_cands(g2, j))))
        single = [j for j in sorted(PEERS[setcell]) if g[j] == 0 and d not in s_cands(g, j)
                  and len(s_cands(g, j)) == 1]
        if single:
            j = single[0]
            variants.append(claims + " %s -> { %d }" % (CELL_NAME[j], min(s_cands(g, j))))
        for vv in variants:
            add("unfaithful", 4, s4[:i] + [head + " : " + vv] + s4[i + 1:])
    # a ':' part added to a step without one: a blank peer that already had one candidate
    # S5: rejecting a digit that passes, accepting one that fails, backing out of a live branch
    s5 = list(C[5])
    acc = [i for i, st in enumerate(s5) if re.match(r"^r\dc\d = \d$", st)]
    if acc:
        i = acc[0]
        cell, _, d = s5[i].split()
        add("unfaithful", 5, s5[:i] + ["%s = %s x" % (cell, d)] + s5[i:])
        i = acc[len(acc) // 2]
        cell, _, d = s5[i].split()
        add("unfaithful", 5, s5[:i] + ["%s = %s x" % (cell, d)] + s5[i:])
    # '= e x' -> '= e' (a placement whose check fails): pick rejections failing part (a)
    # of the check and rejections failing only part (b), when the trace has them
    g = list(P)
    a_fail, b_only = [], []
    for i, st in enumerate(s5):
        op, cell, d = step_syntax(st.split())[1]
        if op == "place":
            g[cell] = d
        elif op == "back":
            g[cell] = 0
        else:
            g[cell] = d
            if d not in s_cands([0 if j == cell else g[j] for j in range(81)], cell):
                pass
            elif any(g[j] == 0 and not s_cands(g, j) for j in range(81)):
                a_fail.append(i)
            else:
                b_only.append(i)
            g[cell] = 0
    for i in a_fail[:2] + b_only[:2]:
        add("unfaithful", 5, s5[:i] + [s5[i][:-2]] + s5[i + 1:])
    b1, b2 = blanks[0], blanks[1]
    add("unfaithful", 5, ["%s = %d" % (CELL_NAME[b1], sol[b1]), "%s = %d" % (CELL_NAME[b2], sol[b2]),
                          "%s back" % CELL_NAME[b2], "%s back" % CELL_NAME[b1]] + s5)
    add("unfaithful", 5, ["%s = %d" % (CELL_NAME[b1], sol[b1]), "%s = %d" % (CELL_NAME[b2], sol[b2]),
                          "%s back" % CELL_NAME[b2]] + s5)
    add("unfaithful", 5, ["%s = %d" % (CELL_NAME[b1], sol[b1]), "%s back" % CELL_NAME[b1]] + s5)  # vacuous
    # '= d x' for a digit that is not a candidate (a peer holds it): a true claim
    if acc:
        i = acc[0]
        cell = s5[i].split()[0]
        ci = CELL_IDX[cell]
        held = sorted({P[j] for j in PEERS[ci] if P[j]})
        if held:
            add("faithful_variant", 5, s5[:i] + ["%s = %d x" % (cell, held[0])] + s5[i:])
    backs = [i for i, st in enumerate(s5) if st.endswith(" back")]
    if backs:
        i = backs[0]
        add("unfaithful", 5, s5[:i] + s5[i + 1:])                    # a 'back' dropped

    # illegal
    for s in range(1, 6):
        st = list(C[s])
        add("illegal", s, st[:-1])                                   # incomplete
        add("illegal", s, st + [st[-1]])                             # last step twice
        k = len(st) // 2
        add("illegal", s, st[:k] + ["r1c1 = 5 = 5"] + st[k:])        # unknown step
        add("illegal", s, st[:k] + [""] + st[k:])                    # empty step (';' ';')
        other = s % 5 + 1
        add("illegal_mixed", s, st[:k] + [C[other][0]] + st[k:])     # mixed syntax
        add("illegal", s, [])                                        # empty trace
    # tokens that are not step tokens / syntax variants that are no strategy's
    s1, s4_ = list(C[1]), list(C[4])
    f1 = step_syntax(s1[0].split())[1]
    c1 = CELL_NAME[f1[0]]
    r_, c_ = c1[1], c1[3]
    for bad in ("r0%sc%s = { %d }" % (r_, c_, f1[1]), "%s = { 0 }" % c1, "%s = { %d %d }" % (c1, f1[1], f1[1]),
                "%s = %d }" % (c1, f1[1]), "R%sC%s = { %d }" % (r_, c_, f1[1])):
        add("illegal", 1, [bad] + s1[1:])
    add("illegal", 3, ["%d row%s -> %s" % (f1[1], r_, c1)] + list(C[3]))
    add("illegal", 4, [s4_[0] + " :"] + s4_[1:])                       # ':' without claims
    f4 = step_syntax(s4_[0].split())[1]
    add("illegal", 4, ["set %s = %d : %s -> %d" % (CELL_NAME[f4[0]], f4[1], CELL_NAME[f4[0]], f4[1])] + s4_[1:])
    # a claim naming the set cell itself (not a peer): legal, not faithful
    add("unfaithful", 4, ["set %s = %d : %s -> { %d }" % (CELL_NAME[f4[0]], f4[1], CELL_NAME[f4[0]], f4[1])]
        + s4_[1:])
    gv = givens[0]
    add("illegal", 5, ["%s = %d x" % (CELL_NAME[gv], P[gv] % 9 + 1)] + C[5])
    add("illegal", 1, ["%s = { %d }" % (CELL_NAME[gv], P[gv])] + C[1])
    add("illegal", 5, ["%s = %d" % (CELL_NAME[gv], P[gv])] + C[5])
    add("illegal", 5, ["%s back" % CELL_NAME[gv]] + C[5])
    # a digit its row already holds
    for s in (1, 4):
        st = list(C[s])
        f = step_syntax(st[0].split())[1]
        cell = f[0]
        held = next(P[j] for j in ROWS[cell // 9] if P[j])
        if s == 1:
            st[0] = "%s = { %d }" % (CELL_NAME[cell], held)
        else:
            st[0] = "set %s = %d" % (CELL_NAME[cell], held)
        add("illegal", s, st)
    add("illegal", 5, s5[:-1] + [s5[-1].rsplit(" ", 1)[0] + " " + str(sol[CELL_IDX[s5[-1].split()[0]]] % 9 + 1)])

    # answers
    for s in range(1, 6):
        add("answer", s, C[s], answer=sol[:-1])
        add("answer", s, C[s], answer=sol + [sol[0]])
        bad = list(sol)
        bad[40] = bad[40] % 9 + 1
        add("answer", s, C[s], answer=bad)
        add("answer", s, C[s], answer=["." if x == 0 else x for x in P])
        add("answer", s, C[s], answer=[])
        add("answer", s, C[s], answer=sol[:40] + ["0"] + sol[41:])
        add("answer", s, C[s], answer=sol[:40] + ["r1c1"] + sol[41:])
    # markers
    ans = " ".join(str(d) for d in sol)
    for s in range(1, 6):
        body = " ; ".join(C[s])
        add("markers", s, None, raw="%s A : %s <eos>" % (body, ans))
        add("markers", s, None, raw="R : %s %s <eos>" % (body, ans))
        add("markers", s, None, raw="R : %s A %s <eos>" % (body, ans))
        add("markers", s, None, raw="R : %s ; A : %s <eos>" % (body, ans))   # trailing ';'
    # padding / eos
    for s in range(1, 6):
        base = sd_cont(sp_, C[s]).split()
        for k in (1, 7, 40):
            t = list(base[:-1])
            for _ in range(k):
                t.insert(rng.randrange(0, len(t) + 1), PAD)
            add("padding", s, None, raw=" ".join(t + [EOS]))
        add("padding", s, None, raw=" ".join(base + [PAD] * 3))
        add("after_eos", s, None, raw=" ".join(base + ["1", "2", ";", "A", ":", EOS]))
        add("no_eos", s, None, raw=" ".join(base[:-1]))
        add("no_eos", s, None, raw=" ".join(base[:len(base) // 3]))
    for raw in ("", EOS, PAD, "%s %s" % (PAD, EOS), "R :", "R : %s" % EOS, "R : A : %s" % EOS,
                "A : %s %s" % (ans, EOS)):
        add("degenerate", rng.randrange(1, 6), None, raw=raw)
    add_whitespace(add, sd_cont(sp_, C[5]), 5, rng)
    return out


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def run(cmd, timeout=600, stdin_text=None):
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       input=stdin_text)
    return p.returncode, p.stdout, p.stderr, time.time() - t


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out


def load_dataset(d):
    by_q = {}
    for split in ("train", "valid", "test"):
        for r in read_jsonl(os.path.join(d, split + ".jsonl")):
            by_q.setdefault(r["question"], {})[r["strategy"]] = r
    return by_q


def prompt_of(question, lab, r, task, size):
    if lab == "none":
        return question
    if lab == "filler":
        return question + " " + (MAZE_FILLER if task == "maze" else SUDOKU_FILLER)
    s = r if lab == "label" else lab[1]
    if task == "maze":
        return question + " " + TR.maze_label(s, size)
    return question + " [ S%d ]" % s


FIELDS = ("followed", "as_requested", "legal", "faithful", "correct")


def compare(ref, got):
    diffs = []
    for f in FIELDS:
        if got.get(f) != ref[f]:
            diffs.append("%s lol=%r ref=%r" % (f, got.get(f), ref[f]))
    pad = got.get("padding")
    if not isinstance(pad, (int, float)) or abs(pad - ref["padding"]) > 1e-9:
        diffs.append("padding lol=%r ref=%r" % (pad, ref["padding"]))
    err = got.get("error")
    if not isinstance(err, str) or (err == "") != ref["error_empty"]:
        diffs.append("error lol=%r ref=%s" % (err, "empty" if ref["error_empty"] else "non-empty"))
    return diffs


def judge(lol, work, name, records, rng):
    """Writes records (dicts) with blank lines sprinkled in, runs lol data judge;
    returns (list of outputs in order, line numbers expected, problems)."""
    path = os.path.join(work, name + ".jsonl")
    lines, expect_line = [], []
    for rec in records:
        if rng.random() < 0.05:
            lines.append("")
        lines.append(json.dumps(rec))
        expect_line.append(len(lines))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    rc, out, err, dt = run([lol, "data", "judge", path])
    problems = []
    if rc != 0:
        problems.append("lol data judge %s exited %d: %s" % (path, rc, err.strip()[-500:]))
        return None, expect_line, problems, dt
    if not err.strip():
        problems.append("no summary line on stderr")
    outs = [json.loads(x) for x in out.splitlines() if x.strip()]
    if len(outs) != len(records):
        problems.append("%d output lines for %d records" % (len(outs), len(records)))
    for o, L in zip(outs, expect_line):
        if o.get("line") != L:
            problems.append("output line field %r, expected %d" % (o.get("line"), L))
            break
    # --out gives the same lines
    outp = os.path.join(work, name + ".out.jsonl")
    rc2, out2, _, _ = run([lol, "data", "judge", path, "--out", outp])
    if rc2 != 0 or not os.path.exists(outp):
        problems.append("--out run exited %d" % rc2)
    else:
        with open(outp, encoding="utf-8") as f:
            if [json.loads(x) for x in f.read().splitlines() if x.strip()] != outs:
                problems.append("--out file differs from stdout")
        if out2.strip():
            problems.append("--out run also wrote to stdout")
    # '-' reads standard input
    with open(path, encoding="utf-8") as f:
        rc3, out3, _, _ = run([lol, "data", "judge", "-"], stdin_text=f.read())
    if rc3 != 0 or [json.loads(x) for x in out3.splitlines() if x.strip()] != outs:
        problems.append("'-' (standard input) gives exit %d / other lines than the file" % rc3)
    return outs, expect_line, problems, dt


def malformed_checks(lol, work, good_maze, good_sudoku):
    """Each bad file: (name, lines, bad line number, field or None)."""
    gm, gs = json.dumps(good_maze), json.dumps(good_sudoku)
    cases = []
    cases.append(("not_json", [gm, "{not json", gs], 2, None))
    for fld in ("question", "strategy", "generated"):
        r = dict(good_maze)
        del r[fld]
        cases.append(("missing_" + fld, [gs, gm, json.dumps(r)], 3, fld))
    r = dict(good_maze); r["strategy"] = "2"
    cases.append(("strategy_string", [gm, json.dumps(r)], 2, "strategy"))
    r = dict(good_maze); r["strategy"] = 2.5
    cases.append(("strategy_float", [gm, json.dumps(r)], 2, "strategy"))
    for bad in (0, 6, -1):
        r = dict(good_sudoku); r["strategy"] = bad
        cases.append(("strategy_%d" % bad, [gs, gs, "", json.dumps(r)], 4, "strategy"))
    r = dict(good_maze); r["generated"] = 17
    cases.append(("generated_number", [json.dumps(r)], 1, "generated"))
    r = dict(good_maze); r["question"] = ["Q", ":"]
    cases.append(("question_list", [json.dumps(r)], 1, "question"))
    r = dict(good_maze); r["task"] = "chess"
    cases.append(("task_unknown", [gm, json.dumps(r)], 2, "task"))
    r = dict(good_sudoku); r["question"] = "Q : 1 2 3"
    cases.append(("sudoku_question_short", [gs, json.dumps(r)], 2, "question"))
    r = dict(good_maze); r["question"] = good_maze["question"].replace(" start ", " begin ")
    r["task"] = "maze"
    cases.append(("maze_question_no_start", [json.dumps(r)], 1, "question"))
    r = dict(good_maze); r["question"] = "Q : r1c1 E r1c2 W start r1c1 goal r1c2 [ x"
    r["task"] = "maze"
    cases.append(("maze_question_garbage", [gm, gm, json.dumps(r)], 3, "question"))
    r = dict(good_sudoku); r["task"] = "maze"
    cases.append(("sudoku_question_as_maze", [json.dumps(r)], 1, "question"))
    r = dict(good_maze); r["task"] = "sudoku"
    cases.append(("maze_question_as_sudoku", [gm, json.dumps(r)], 2, "question"))
    r = dict(good_sudoku); r["question"] = good_sudoku["question"].replace(" . ", " 0 ", 1)
    cases.append(("sudoku_question_zero_cell", [json.dumps(r)], 1, "question"))
    cases.append(("json_array", [gm, "[1, 2]"], 2, None))
    # a sudoku puzzle with several solutions / with none: docs, verify_sudoku "throws
    # lol::InputError on a malformed question, a puzzle without exactly one solution";
    # ASSUMED judge reports it like an unparsable question (exit 2)
    q = good_sudoku["question"].split()
    cells = q[2:83]
    given = [k for k, x in enumerate(cells) if x != "."]
    multi = list(cells)
    for k in given[:12]:
        multi[k] = "."
    r = dict(good_sudoku); r["question"] = " ".join(q[:2] + multi + q[83:])
    cases.append(("sudoku_several_solutions", [gs, gs, json.dumps(r)], 3, "question"))
    blank = next(k for k, x in enumerate(cells) if x == "." and k // 9 == given[0] // 9)
    clash = list(cells)
    clash[blank] = cells[given[0]]
    r = dict(good_sudoku); r["question"] = " ".join(q[:2] + clash + q[83:])
    cases.append(("sudoku_no_solution", [json.dumps(r)], 1, "question"))
    res = []
    # files that must be accepted (exit 0, one output line per record)
    extra = dict(good_maze); extra.update({"label": "[ x ]", "puzzle_id": 7, "note": None})
    oks = [("ok_extra_fields", json.dumps(extra) + "\n" + gs + "\n", 2),
           ("ok_crlf", gm + "\r\n" + gs + "\r\n", 2),
           ("ok_no_final_newline", gm + "\n" + gs, 2),
           ("ok_blank_lines", "\n" + gm + "\n\n  \n" + gs + "\n\n", 2),
           ("ok_spaced_json", "  " + json.dumps(good_sudoku, indent=None, separators=(" , ", " : ")) + "  \n", 1)]
    for name, text, n in oks:
        path = os.path.join(work, "good_%s.jsonl" % name)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        rc, out, err, _ = run([lol, "data", "judge", path])
        outs = [x for x in out.splitlines() if x.strip()]
        probs = []
        if rc != 0:
            probs.append("exit %d (expected 0)" % rc)
        if len(outs) != n:
            probs.append("%d output lines (expected %d)" % (len(outs), n))
        res.append((name, path, rc, (err.strip().splitlines() or [""])[-1], probs))
    for name, lines, L, fld in cases:
        path = os.path.join(work, "bad_%s.jsonl" % name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        rc, out, err, _ = run([lol, "data", "judge", path])
        msg = err.strip()
        probs = []
        if rc != 2:
            probs.append("exit %d (expected 2)" % rc)
        if os.path.basename(path) not in msg:
            probs.append("message does not name the file")
        if not re.search(r"(?<![0-9])%d(?![0-9])" % L, msg.replace(os.path.basename(path), "")):
            probs.append("message does not name line %d" % L)
        if fld and fld not in msg:
            probs.append("message does not name the field '%s'" % fld)
        res.append((name, path, rc, msg.splitlines()[-1] if msg else "", probs))
    return res


def cmd_check(args):
    t0 = time.time()
    rng = random.Random(20240611)
    os.makedirs(args.work, exist_ok=True)
    lol = os.path.join(args.work, "lol-under-test")
    shutil.copy2(args.lol, lol)

    # --- data -------------------------------------------------------------
    mazes = []   # (origin, MazeP)
    for size, n, seed in ((4, 4, 11), (5, 4, 12), (8, 5, 13), (12, 2, 14)):
        d = os.path.join(args.work, "maze%d" % size)
        shutil.rmtree(d, ignore_errors=True)
        rc, out, err, _ = run([lol, "data", "maze", "--n", str(n), "--size", str(size), "--seed", str(seed),
                               "--n-test", "1", "--out", d, "--no-progress"])
        if rc != 0:
            print("lol data maze failed: %s" % err)
            return 2
        for q, recs in sorted(load_dataset(d).items()):
            mz = MazeP(q)
            bad = [s for s, rr in recs.items() if rr["trace"].split()[2:] != mz_text(mz, mz.canon[s])]
            if bad:
                print("  note: maze generator traces differ from tasks_reference for S%s (not a verifier "
                      "issue; the reference's canonical traces are used)" % bad)
            mazes.append(("data%d" % size, mz, True))
    mazes.append(("paper", MazeP(TR.PAPER_MAZE_Q), True))
    own_rng = random.Random(7)
    for k in range(14):
        mazes.append(("own", MazeP(random_perfect_maze(own_rng, (4, 5, 6, 4)[k % 4])), False))
    sudokus = []
    d = os.path.join(args.work, "sudoku")
    shutil.rmtree(d, ignore_errors=True)
    rc, out, err, _ = run([lol, "data", "sudoku", "--n", "5", "--seed", "21", "--n-test", "1",
                           "--max-tokens", "2500", "--out", d, "--no-progress"])
    if rc != 0:
        print("lol data sudoku failed: %s" % err)
        return 2
    for q, recs in sorted(load_dataset(d).items()):
        sp_ = SudokuP(q, {s: rr["trace"] for s, rr in recs.items()})
        if sp_.mismatch:
            print("  note: sudoku generator traces differ from tasks_reference for S%s" % sp_.mismatch)
        sudokus.append(("data", sp_))
    sudokus.append(("paper", SudokuP(TR.PAPER_SUDOKU_Q)))
    t_data = time.time() - t0

    # --- cases + reference verdicts ----------------------------------------
    all_cases = {"maze": [], "sudoku": []}
    for origin, mz, full in mazes:
        q = mz.question()
        for group, r, gen, lab in maze_cases(mz, rng, full_cross=full):
            g = ("own_mazes/" + group) if origin == "own" else group
            rec = {"question": prompt_of(q, lab or rng.choice(("label", "filler", "none")), r, "maze", mz.n),
                   "strategy": r, "generated": gen}
            if rng.random() < 0.5:
                rec["task"] = "maze"
            all_cases["maze"].append((g, rec, maze_verdict(mz, r, gen)))
    for origin, sp_ in sudokus:
        for group, r, gen, lab in sudoku_cases(sp_, rng):
            rec = {"question": prompt_of(sp_.question, lab or rng.choice(("label", "filler", "none")), r,
                                         "sudoku", 9),
                   "strategy": r, "generated": gen}
            if rng.random() < 0.5:
                rec["task"] = "sudoku"
            all_cases["sudoku"].append((group, rec, sudoku_verdict(sp_, r, gen)))
    t_ref = time.time() - t0 - t_data

    # --- lol ---------------------------------------------------------------
    disagreements = []
    other_problems = []
    groups = {}
    t_lol = 0.0
    for task in ("maze", "sudoku"):
        cases = all_cases[task]
        outs, lines, probs, dt = judge(lol, args.work, "judge_" + task, [c[1] for c in cases], rng)
        t_lol += dt
        other_problems += ["%s: %s" % (task, p) for p in probs]
        if outs is None:
            continue
        for (group, rec, ref), got, L in zip(cases, outs, lines):
            key = "%s/%s" % (task, group)
            st = groups.setdefault(key, {"n": 0, "bad": 0, "legal": 0, "faithful": 0, "followed_req": 0,
                                         "followed_other": 0, "correct": 0, "err": 0, "lnf": 0, "fne": 0})
            st["n"] += 1
            st["legal"] += ref["legal"]
            st["faithful"] += ref["faithful"]
            st["lnf"] += ref["legal"] and not ref["faithful"]
            st["fne"] += ref["faithful"] and ref["followed"] == 0
            st["followed_req"] += ref["followed"] == rec["strategy"]
            st["followed_other"] += ref["followed"] not in (0, rec["strategy"])
            st["correct"] += ref["correct"]
            st["err"] += not ref["error_empty"]
            diffs = compare(ref, got)
            if diffs:
                st["bad"] += 1
                disagreements.append((key, L, rec, ref, got, diffs))

    # --- malformed input ---------------------------------------------------
    mz0 = mazes[0][1]
    good_m = {"question": prompt_of(mz0.question(), "label", 1, "maze", mz0.n), "strategy": 1,
              "generated": mz_cont(mz0, mz0.canon[1])}
    sp0 = sudokus[0][1]
    good_s = {"question": prompt_of(sp0.question, "filler", 2, "sudoku", 9), "strategy": 2,
              "generated": sd_cont(sp0, sp0.canon_steps[2])}
    bad_res = malformed_checks(lol, args.work, good_m, good_s)

    # --- report ------------------------------------------------------------
    print("verifier_reference: %d maze continuations on %d mazes, %d sudoku continuations on %d puzzles"
          % (len(all_cases["maze"]), len(mazes), len(all_cases["sudoku"]), len(sudokus)))
    print("%-34s %5s %5s  %s" % ("group", "n", "disag", "reference verdicts (legal / faithful / legal-not-faithful"
                                 " / faithful-not-exact / followed=req / followed=other / correct / error)"))
    for key in sorted(groups):
        st = groups[key]
        print("%-34s %5d %5d  L%d F%d LnF%d FnE%d fr%d fo%d C%d E%d" % (
            key, st["n"], st["bad"], st["legal"], st["faithful"], st["lnf"], st["fne"],
            st["followed_req"], st["followed_other"], st["correct"], st["err"]))
    # coverage: each mutation family must really reach the level it aims at
    cover = [("maze/faithful_variant", "fne"), ("maze/unfaithful", "lnf"), ("sudoku/faithful_variant", "fne"),
             ("sudoku/unfaithful", "lnf")]
    for key, f in cover:
        if groups.get(key, {}).get(f, 0) == 0:
            other_problems.append("coverage: group %s has no case of kind %s" % (key, f))
    n_bad_mal = 0
    for name, path, rc, last, probs in bad_res:
        status = "ok" if not probs else "FAIL: " + "; ".join(probs)
        n_bad_mal += bool(probs)
        print("input %-30s exit %d  %s  [%s]" % (name, rc, status, last[:110]))
    for p in other_problems:
        print("PROBLEM: " + p)
    if disagreements:
        print("\nDISAGREEMENTS: %d (first ones in full)" % len(disagreements))
        shown = {}
        for key, L, rec, ref, got, diffs in disagreements:
            sig = (key, tuple(d.split()[0] for d in diffs))
            shown[sig] = shown.get(sig, 0) + 1
            if shown[sig] > 2:
                continue
            print("--- %s line %d: %s" % (key, L, "; ".join(diffs)))
            print("    question:  %s" % rec["question"][-120:])
            print("    strategy:  %d   task: %s" % (rec["strategy"], rec.get("task", "(default)")))
            print("    generated: %s" % rec["generated"][:600])
            print("    lol: %s" % json.dumps(got))
            print("    ref: %s" % json.dumps(ref))
        print("disagreement signatures:")
        for sig, c in sorted(shown.items()):
            print("  %4d  %s: %s" % (c, sig[0], ",".join(sig[1])))
    total = sum(len(v) for v in all_cases.values())
    print("summary: %d continuations, %d disagreements, %d input-file failures, %d other problems; "
          "data %.1fs, reference %.1fs, lol %.1fs, total %.1fs"
          % (total, len(disagreements), n_bad_mal, len(other_problems), t_data, t_ref, t_lol, time.time() - t0))
    return 1 if (disagreements or n_bad_mal or other_problems) else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("check", help="compare lol data judge with this reference")
    a.add_argument("--lol", required=True)
    a.add_argument("--work", required=True)
    args = ap.parse_args(argv)
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
