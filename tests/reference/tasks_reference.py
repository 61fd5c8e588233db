#!/usr/bin/env python3
"""Independent reference checker for the sudoku and maze task data of `lol`.

Provenance
----------
Written from the LoL paper (McLeish et al., "Library of Layers (LoL): Adaptively
Ordering Transformer Layers at Runtime"; appendix C.3/C.3.1 for sudoku, C.4/C.4.1
for mazes, sections 4.1.3/4.1.4), from docs/tasks.md and from the `--help` text of
`lol data`, `lol data maze`, `lol data sudoku` and `lol data verify`, *without*
reading the C++ sources (src/) or the C++ task tests (tests/tasks/).  Only the JSONL
field names were learned by looking at a small generated file.

The paper's Tables 3 and 4 (which describe the strategies in words) did not survive
in the text version of the paper; what the paper fixes is (a) the prose of C.3/C.4
(30..36 givens, solvable by every strategy; 8x8 perfect mazes, distinct start and
goal, unique trace per strategy, path >= 12 cells, DFS backtracks, BFS expands >= 3
cells off the path) and (b) the ten worked example sequences of C.3.1 and C.4.1,
copied verbatim below (`PAPER_SUDOKU`, `PAPER_MAZE`).  Every rule that the prose
does not spell out is therefore *inferred* from those examples.  To be honest about
that, each strategy is implemented with a small set of plausible variants (neighbour
order, snapshot-vs-immediate sweeps, tie-breaks, forward-check definitions, ...); the
`selfcheck` step keeps only the variants that regenerate the paper's sequences token
for token ("paper-consistent" variants).  When checking generated data, a lol record
agrees when it equals the trace of the *primary* paper-consistent variant; if it only
equals another paper-consistent variant the record is reported as an ambiguity, and
if it equals none it is a disagreement.  If the paper-consistent variants disagree
among themselves on a record, the paper is ambiguous there and the report says which
reading lol takes.

Usage
-----
    python3 tests/reference/tasks_reference.py selfcheck
    python3 tests/reference/tasks_reference.py check --lol build/lol --work /tmp/lol_ref
    python3 tests/reference/tasks_reference.py check-file FILE.jsonl

`check` generates small maze (sizes 4..16, several seeds) and sudoku datasets with
`lol data maze|sudoku` (one of each with `--max-tokens`), re-derives every strategy's
trace and answer for every record and compares exactly.  It also checks the properties
the paper's prose states (30..36 givens, unique solution, solvable by every strategy,
one sequence per strategy per puzzle, no duplicate puzzles; perfect maze, distinct
start/goal, path >= 12 cells at 8x8, DFS backtracks, BFS expands >= 3 cells off the
path), the labels (`[ Sx ]`; the paper's 8x8 maze labels, with the docs' "8 -> N"
reading for other sides), runs `selfcheck`, runs `lol data verify` on every directory
and on deliberately corrupted records (which it must reject), and compares repeated
runs byte for byte (same seed; sudoku `--threads 1` vs `2`).  Exit status 0 when
everything agrees, 1 on any disagreement, 2 on a usage / tool error.  Python 3
standard library only.  The binary is copied into --work first, so a rebuild of the
build tree during the run does not break it.

What the examples fix (see `selfcheck`; one neighbour order is assumed for all maze
strategies, so A* variants are restricted to the orders S1, S2 and S4 allow):
  sudoku S1: row-major sweeps, a single is placed at once (snapshot / restart fail);
  S2: units row1..9, col1..9, box1..9, digits ascending inside a unit, placed at once;
  S3: digit-major (digit 1..9, then box1..9), placed at once;
  S4: FIFO queue seeded row-major, newly single peers listed in ascending cell order;
  S5: row-major DFS, ascending candidates, forward check = every blank cell keeps a
      candidate AND every digit missing from a unit keeps a place in it.
  maze neighbour order: N E S W, N E W S and N S E W all reproduce the example;
  BFS stops when the goal is dequeued; DFS is a walk listing back-steps; A* with
  Manhattan h and ties by smaller g or first-discovered (not smaller h, not LIFO,
  not Euclidean h; row-major ties also fit); bidirectional BFS alternates single
  dequeues and stops at a neighbour already *discovered* by the other side;
  dead-end filling sweeps row-major filling at once.
"""

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque

# ---------------------------------------------------------------------------
# The paper's worked examples, verbatim (appendix C.3.1 and C.4.1).
# ---------------------------------------------------------------------------

PAPER_SUDOKU_Q = ("Q : . . . . 3 . 1 9 4 . 1 . 4 . 7 . 3 . . . . 1 . . 8 7 6 . 5 . 9 1 8 3 . 7 . "
                  "7 8 . 4 6 . . 1 . . . 7 5 2 . . . 2 . 6 . 9 4 . . 8 . 8 . . . . . . 3 . . 1 . . . 6 . 2")
PAPER_SUDOKU_A = ("A : 8 2 7 6 3 5 1 9 4 6 1 9 4 8 7 2 3 5 3 4 5 1 2 9 8 7 6 4 5 2 9 1 8 3 6 7 "
                  "9 7 8 3 4 6 5 2 1 1 6 3 7 5 2 4 8 9 2 3 6 5 9 4 7 1 8 7 8 4 2 6 1 9 5 3 "
                  "5 9 1 8 7 3 6 4 2 <eos>")
PAPER_SUDOKU_R = {
    1: "R : r1c6 = { 5 } ; r2c9 = { 5 } ; r3c5 = { 2 } ; r3c6 = { 9 } ; r5c4 = { 3 } ; r6c9 = { 9 } ; r7c2 = { 3 } ; r7c4 = { 5 } ; r7c7 = { 7 } ; r7c8 = { 1 } ; r8c6 = { 1 } ; r9c4 = { 8 } ; r9c5 = { 7 } ; r9c6 = { 3 } ; r1c4 = { 6 } ; r2c5 = { 8 } ; r2c7 = { 2 } ; r3c2 = { 4 } ; r5c1 = { 9 } ; r5c7 = { 5 } ; r5c8 = { 2 } ; r6c2 = { 6 } ; r6c7 = { 4 } ; r6c8 = { 8 } ; r8c4 = { 2 } ; r8c5 = { 6 } ; r8c7 = { 9 } ; r9c2 = { 9 } ; r1c2 = { 2 } ; r1c3 = { 7 } ; r2c1 = { 6 } ; r2c3 = { 9 } ; r4c1 = { 4 } ; r4c3 = { 2 } ; r4c8 = { 6 } ; r6c3 = { 3 } ; r9c1 = { 5 } ; r9c8 = { 4 } ; r1c1 = { 8 } ; r3c1 = { 3 } ; r3c3 = { 5 } ; r6c1 = { 1 } ; r8c1 = { 7 } ; r8c3 = { 4 } ; r8c8 = { 5 }",
    2: "R : row6 1 -> r6c1 ; row6 8 -> r6c8 ; row7 1 -> r7c8 ; row7 7 -> r7c7 ; row8 1 -> r8c6 ; col6 3 -> r9c6 ; col6 9 -> r3c6 ; col8 6 -> r4c8 ; col9 5 -> r2c9 ; col9 9 -> r6c9 ; box3 2 -> r2c7 ; box4 2 -> r4c3 ; box4 6 -> r6c2 ; box4 9 -> r5c1 ; box5 3 -> r5c4 ; box6 2 -> r5c8 ; box6 4 -> r6c7 ; box6 5 -> r5c7 ; box7 3 -> r7c2 ; box9 9 -> r8c7 ; row2 9 -> r2c3 ; row4 4 -> r4c1 ; row6 3 -> r6c3 ; row7 5 -> r7c4 ; row9 9 -> r9c2 ; col1 3 -> r3c1 ; col2 4 -> r3c2 ; col3 4 -> r8c3 ; col3 7 -> r1c3 ; col6 5 -> r1c6 ; col8 4 -> r9c8 ; col8 5 -> r8c8 ; box1 2 -> r1c2 ; box1 5 -> r3c3 ; box2 2 -> r3c5 ; box7 5 -> r9c1 ; box7 7 -> r8c1 ; box8 2 -> r8c4 ; box8 6 -> r8c5 ; box8 7 -> r9c5 ; box8 8 -> r9c4 ; row1 8 -> r1c1 ; row2 6 -> r2c1 ; row2 8 -> r2c5 ; col4 6 -> r1c4",
    3: "R : 1 box4 -> r6c1 ; 1 box8 -> r8c6 ; 1 box9 -> r7c8 ; 2 box3 -> r2c7 ; 2 box4 -> r4c3 ; 2 box6 -> r5c8 ; 3 box5 -> r5c4 ; 3 box8 -> r9c6 ; 5 box3 -> r2c9 ; 5 box6 -> r5c7 ; 8 box6 -> r6c8 ; 9 box2 -> r3c6 ; 9 box9 -> r8c7 ; 3 box7 -> r7c2 ; 6 box6 -> r4c8 ; 7 box9 -> r7c7 ; 9 box6 -> r6c9 ; 3 box4 -> r6c3 ; 4 box6 -> r6c7 ; 6 box4 -> r6c2 ; 9 box4 -> r5c1 ; 9 box7 -> r9c2 ; 3 box1 -> r3c1 ; 4 box4 -> r4c1 ; 4 box7 -> r8c3 ; 4 box9 -> r9c8 ; 5 box9 -> r8c8 ; 9 box1 -> r2c3 ; 4 box1 -> r3c2 ; 5 box7 -> r9c1 ; 5 box8 -> r7c4 ; 7 box7 -> r8c1 ; 7 box8 -> r9c5 ; 8 box8 -> r9c4 ; 2 box1 -> r1c2 ; 2 box2 -> r3c5 ; 2 box8 -> r8c4 ; 5 box2 -> r1c6 ; 6 box8 -> r8c5 ; 7 box1 -> r1c3 ; 8 box2 -> r2c5 ; 5 box1 -> r3c3 ; 6 box2 -> r1c4 ; 8 box1 -> r1c1 ; 6 box1 -> r2c1",
    4: "R : set r1c6 = 5 : r3c6 -> { 9 } r8c6 -> { 1 } r9c6 -> { 3 } ; set r2c9 = 5 : r2c7 -> { 2 } ; set r3c5 = 2 ; set r5c4 = 3 : r5c1 -> { 9 } r7c4 -> { 5 } ; set r6c9 = 9 : r6c7 -> { 4 } ; set r7c2 = 3 ; set r3c6 = 9 : r3c2 -> { 4 } ; set r8c6 = 1 ; set r9c6 = 3 ; set r2c7 = 2 : r2c3 -> { 9 } r5c7 -> { 5 } ; set r5c1 = 9 ; set r7c4 = 5 : r7c7 -> { 7 } r7c8 -> { 1 } r9c4 -> { 8 } ; set r6c7 = 4 : r6c2 -> { 6 } r6c3 -> { 3 } ; set r3c2 = 4 : r9c2 -> { 9 } ; set r2c3 = 9 ; set r5c7 = 5 : r5c8 -> { 2 } ; set r7c7 = 7 : r8c7 -> { 9 } ; set r7c8 = 1 ; set r9c4 = 8 : r1c4 -> { 6 } r9c5 -> { 7 } ; set r6c2 = 6 : r1c2 -> { 2 } r4c1 -> { 4 } r6c8 -> { 8 } ; set r6c3 = 3 : r3c3 -> { 5 } r6c1 -> { 1 } ; set r9c2 = 9 ; set r5c8 = 2 : r4c8 -> { 6 } ; set r8c7 = 9 ; set r1c4 = 6 : r2c5 -> { 8 } r8c4 -> { 2 } ; set r9c5 = 7 : r8c5 -> { 6 } ; set r1c2 = 2 : r1c3 -> { 7 } ; set r4c1 = 4 : r4c3 -> { 2 } r9c1 -> { 5 } ; set r6c8 = 8 ; set r3c3 = 5 : r3c1 -> { 3 } ; set r6c1 = 1 ; set r4c8 = 6 ; set r2c5 = 8 : r2c1 -> { 6 } ; set r8c4 = 2 ; set r8c5 = 6 ; set r1c3 = 7 : r1c1 -> { 8 } r8c3 -> { 4 } ; set r4c3 = 2 ; set r9c1 = 5 : r8c1 -> { 7 } r9c8 -> { 4 } ; set r3c1 = 3 ; set r2c1 = 6 ; set r1c1 = 8 ; set r8c3 = 4 : r8c8 -> { 5 } ; set r8c1 = 7 ; set r9c8 = 4 ; set r8c8 = 5",
    5: "R : r1c1 = 5 x ; r1c1 = 6 ; r1c2 = 2 ; r1c3 = 5 x ; r1c3 = 7 ; r1c4 = 5 x ; r1c4 = 8 ; r1c6 = 5 ; r2c1 = 5 x ; r2c1 = 8 ; r2c3 = 5 x ; r2c3 = 9 ; r2c5 = 2 x ; r2c5 = 6 ; r2c7 = 2 ; r2c9 = 5 ; r3c1 = 3 ; r3c2 = 4 ; r3c3 = 5 ; r3c5 = 2 ; r3c6 = 9 ; r4c1 = 4 ; r4c3 = 2 ; r4c8 = 6 ; r5c1 = 9 ; r5c4 = 3 ; r5c7 = 5 ; r5c8 = 2 ; r6c1 = 1 ; r6c2 = 3 x ; r6c2 = 6 ; r6c3 = 3 ; r6c7 = 4 ; r6c8 = 8 ; r6c9 = 9 ; r7c2 = 3 ; r7c4 = 5 x ; r7c4 back ; r7c2 back ; r6c9 back ; r6c8 back ; r6c7 = 9 x ; r6c7 back ; r6c3 back ; r6c2 back ; r6c1 back ; r5c8 back ; r5c7 back ; r5c4 back ; r5c1 back ; r4c8 back ; r4c3 back ; r4c1 back ; r3c6 back ; r3c5 back ; r3c3 back ; r3c2 back ; r3c1 = 4 x ; r3c1 = 5 ; r3c2 = 3 x ; r3c2 = 4 ; r3c3 = 3 ; r3c5 = 2 ; r3c6 = 9 ; r4c1 = 4 x ; r4c1 back ; r3c6 back ; r3c5 back ; r3c3 back ; r3c2 back ; r3c1 back ; r2c9 back ; r2c7 = 5 x ; r2c7 back ; r2c5 back ; r2c3 back ; r2c1 = 9 x ; r2c1 back ; r1c6 back ; r1c4 back ; r1c3 back ; r1c2 back ; r1c1 = 7 ; r1c2 = 2 ; r1c3 = 5 x ; r1c3 back ; r1c2 = 6 ; r1c3 = 2 x ; r1c3 = 5 x ; r1c3 back ; r1c2 back ; r1c1 = 8 ; r1c2 = 2 ; r1c3 = 5 x ; r1c3 = 7 ; r1c4 = 5 x ; r1c4 = 6 ; r1c6 = 5 ; r2c1 = 5 x ; r2c1 = 6 ; r2c3 = 5 x ; r2c3 = 9 ; r2c5 = 2 x ; r2c5 = 8 ; r2c7 = 2 ; r2c9 = 5 ; r3c1 = 3 ; r3c2 = 4 ; r3c3 = 5 ; r3c5 = 2 ; r3c6 = 9 ; r4c1 = 4 ; r4c3 = 2 ; r4c8 = 6 ; r5c1 = 9 ; r5c4 = 3 ; r5c7 = 5 ; r5c8 = 2 ; r6c1 = 1 ; r6c2 = 3 x ; r6c2 = 6 ; r6c3 = 3 ; r6c7 = 4 ; r6c8 = 8 ; r6c9 = 9 ; r7c2 = 3 ; r7c4 = 5 ; r7c7 = 7 ; r7c8 = 1 ; r8c1 = 5 ; r8c3 = 4 x ; r8c3 back ; r8c1 = 7 ; r8c3 = 4 ; r8c4 = 2 ; r8c5 = 6 ; r8c6 = 1 ; r8c7 = 9 ; r8c8 = 5 ; r9c1 = 5 ; r9c2 = 9 ; r9c4 = 8 ; r9c5 = 7 ; r9c6 = 3 ; r9c8 = 4",
}

PAPER_MAZE_Q = ("Q : r1c1 E S r1c2 E W r1c3 E W r1c4 E S W r1c5 W r1c6 E S r1c7 E W r1c8 S W "
                "r2c1 N E r2c2 E S W r2c3 W r2c4 N E r2c5 S W r2c6 N S r2c7 E S r2c8 N W "
                "r3c1 S r3c2 N S r3c3 E S r3c4 E W r3c5 N W r3c6 N S r3c7 N E r3c8 S W "
                "r4c1 N E r4c2 N W r4c3 N S r4c4 E S r4c5 E W r4c6 N E W r4c7 W r4c8 N S "
                "r5c1 E S r5c2 S W r5c3 N S r5c4 N E r5c5 S W r5c6 S r5c7 S r5c8 N S "
                "r6c1 N S r6c2 N E r6c3 N S W r6c4 E S r6c5 N W r6c6 N S r6c7 N S r6c8 N S "
                "r7c1 N S r7c2 E r7c3 N W r7c4 N E r7c5 S W r7c6 N S r7c7 N E r7c8 N W "
                "r8c1 N E r8c2 E W r8c3 E W r8c4 E W r8c5 N E W r8c6 N E W r8c7 E W r8c8 W "
                "start r3c6 goal r8c2")
PAPER_MAZE_A = ("A : r3c6 r4c6 r4c5 r4c4 r5c4 r5c5 r6c5 r6c4 r7c4 r7c5 r8c5 r8c4 r8c3 r8c2 <eos>")
PAPER_MAZE_LABEL = {
    1: "[ r1c1 r1c2 r2c1 r1c3 r2c2 r3c1 ]",
    2: "[ r1c1 r1c2 r1c3 r1c4 r1c3 r1c2 ]",
    3: "[ r1c1 r1c2 r2c2 r2c3 r3c3 r3c4 ]",
    4: "[ r1c1 r8c8 r1c2 r8c7 r1c3 r8c6 ]",
    5: "[ r8c1 r8c2 r8c3 r1c8 r2c8 r3c8 ]",
}
PAPER_MAZE_R = {
    1: "R : r3c6 r2c6 r4c6 r1c6 r4c7 r4c5 r1c7 r4c4 r1c8 r5c4 r2c8 r5c5 r2c7 r6c5 r3c7 r6c4 r3c8 r7c4 r4c8 r7c5 r5c8 r8c5 r6c8 r8c6 r8c4 r7c8 r7c6 r8c7 r8c3 r7c7 r6c6 r8c8 r8c2",
    2: "R : r3c6 r2c6 r1c6 r1c7 r1c8 r2c8 r2c7 r3c7 r3c8 r4c8 r5c8 r6c8 r7c8 r7c7 r6c7 r5c7 r6c7 r7c7 r7c8 r6c8 r5c8 r4c8 r3c8 r3c7 r2c7 r2c8 r1c8 r1c7 r1c6 r2c6 r3c6 r4c6 r4c7 r4c6 r4c5 r4c4 r5c4 r5c5 r6c5 r6c4 r7c4 r7c5 r8c5 r8c6 r7c6 r6c6 r5c6 r6c6 r7c6 r8c6 r8c7 r8c8 r8c7 r8c6 r8c5 r8c4 r8c3 r8c2",
    3: "R : r3c6 r4c6 r4c5 r4c4 r5c4 r2c6 r4c7 r5c5 r6c5 r6c4 r7c4 r1c6 r7c5 r8c5 r8c4 r8c3 r8c2",
    4: "R : r3c6 r8c2 r2c6 r8c3 r4c6 r8c1 r1c6 r8c4 r4c7 r7c1 r4c5 r8c5 r1c7 r6c1 r4c4 r7c5 r1c8 r8c6 r5c4 r5c1 r2c8 r7c4 r5c5 r7c6 r2c7 r8c7 r6c5 r6c4",
    5: "R : r1c5 r2c3 r3c1 r4c1 r4c2 r4c7 r5c6 r5c7 r6c6 r6c7 r7c2 r7c3 r7c6 r7c7 r7c8 r8c8 r3c2 r6c8 r8c7 r2c2 r5c8 r8c6 r2c1 r4c8 r1c1 r1c2 r1c3 r1c4 r2c4 r2c5 r3c5 r3c8 r3c4 r3c7 r2c7 r2c8 r3c3 r4c3 r5c3 r6c3 r1c8 r6c2 r1c7 r5c2 r1c6 r2c6 r5c1 r6c1 r7c1 r8c1",
}


# ---------------------------------------------------------------------------
# Sudoku
# ---------------------------------------------------------------------------

def _rc(i):
    return i // 9, i % 9


def cell_name(i, n=9):
    return "r%dc%d" % (i // n + 1, i % n + 1)


def box_of(i):
    r, c = _rc(i)
    return (r // 3) * 3 + c // 3


ROWS = [[r * 9 + c for c in range(9)] for r in range(9)]
COLS = [[r * 9 + c for r in range(9)] for c in range(9)]
BOXES = [[(3 * (b // 3) + dr) * 9 + 3 * (b % 3) + dc for dr in range(3) for dc in range(3)]
         for b in range(9)]
UNITS = [("row%d" % (k + 1), ROWS[k]) for k in range(9)] + \
        [("col%d" % (k + 1), COLS[k]) for k in range(9)] + \
        [("box%d" % (k + 1), BOXES[k]) for k in range(9)]
PEERS = []
for _i in range(81):
    _r, _c = _rc(_i)
    _p = set(ROWS[_r]) | set(COLS[_c]) | set(BOXES[box_of(_i)])
    _p.discard(_i)
    PEERS.append(sorted(_p))


def cands(g, i):
    """Plain candidates of blank cell i: digits absent from its 20 peers."""
    used = {g[p] for p in PEERS[i]}
    return [d for d in range(1, 10) if d not in used]


def parse_sudoku_question(q):
    t = q.split()
    if len(t) != 83 or t[0] != "Q" or t[1] != ":":
        raise ValueError("bad sudoku question: %r" % q[:60])
    g = []
    for x in t[2:]:
        if x == ".":
            g.append(0)
        elif len(x) == 1 and x in "123456789":
            g.append(int(x))
        else:
            raise ValueError("bad sudoku cell token %r" % x)
    return g


def grid_consistent(g):
    for _, u in UNITS:
        vals = [g[i] for i in u if g[i]]
        if len(vals) != len(set(vals)):
            return False
    return True


def count_solutions(g, limit=2):
    g = list(g)
    count = [0]

    def rec():
        best, bc = -1, None
        for i in range(81):
            if g[i] == 0:
                c = cands(g, i)
                if not c:
                    return
                if bc is None or len(c) < len(bc):
                    best, bc = i, c
        if best < 0:
            count[0] += 1
            return
        for d in bc:
            g[best] = d
            rec()
            g[best] = 0
            if count[0] >= limit:
                return
    rec()
    return count[0]


# --- S1 naked singles -------------------------------------------------------

def s1_naked(p, mode="immediate"):
    """Rounds over r1c1..r9c9; a blank cell with exactly one candidate is a step.
    mode 'immediate': placed at once (seen by the rest of the round);
    'snapshot': all singles of the round's starting grid, placed at the end;
    'restart': restart the scan from r1c1 after every placement."""
    g = list(p)
    steps = []
    while 0 in g:
        found = []
        for i in range(81):
            if g[i] == 0:
                c = cands(g, i)
                if len(c) == 1:
                    if mode == "snapshot":
                        found.append((i, c[0]))
                        continue
                    g[i] = c[0]
                    steps.append("%s = { %d }" % (cell_name(i), c[0]))
                    found.append(i)
                    if mode == "restart":
                        break
        if mode == "snapshot":
            for i, d in found:
                g[i] = d
                steps.append("%s = { %d }" % (cell_name(i), d))
        if not found:
            return None, g
    return steps, g


# --- S2 hidden singles ------------------------------------------------------

def s2_hidden(p, mode="immediate", order="unit"):
    """Rounds over units row1..9, col1..9, box1..9 and digits 1..9.
    order 'unit': unit-major (digits inside each unit); 'digit': digit-major."""
    g = list(p)
    steps = []
    if order == "unit":
        seq = [(name, u, d) for name, u in UNITS for d in range(1, 10)]
    else:
        seq = [(name, u, d) for d in range(1, 10) for name, u in UNITS]
    while 0 in g:
        found = []
        for name, u, d in seq:
            if any(g[i] == d for i in u):
                continue
            where = [i for i in u if g[i] == 0 and d in cands(g, i)]
            if len(where) == 1:
                i = where[0]
                if mode == "snapshot":
                    if all(i != j for j, _, _ in found):
                        found.append((i, d, name))
                    continue
                g[i] = d
                steps.append("%s %d -> %s" % (name, d, cell_name(i)))
                found.append(i)
        if mode == "snapshot":
            for i, d, name in found:
                g[i] = d
                steps.append("%s %d -> %s" % (name, d, cell_name(i)))
        if not found:
            return None, g
    return steps, g


# --- S3 crosshatching -------------------------------------------------------

def s3_cross(p, mode="immediate", order="digit"):
    """Hidden singles in boxes only; order 'digit': digits 1..9 x boxes 1..9
    (digit-major), 'box': box-major."""
    g = list(p)
    steps = []
    if order == "digit":
        seq = [(d, b) for d in range(1, 10) for b in range(9)]
    else:
        seq = [(d, b) for b in range(9) for d in range(1, 10)]
    while 0 in g:
        found = []
        for d, b in seq:
            u = BOXES[b]
            if any(g[i] == d for i in u):
                continue
            where = [i for i in u if g[i] == 0 and d in cands(g, i)]
            if len(where) == 1:
                i = where[0]
                if mode == "snapshot":
                    if all(i != j for j, _, _ in found):
                        found.append((i, d, b))
                    continue
                g[i] = d
                steps.append("%d box%d -> %s" % (d, b + 1, cell_name(i)))
                found.append(i)
        if mode == "snapshot":
            for i, d, b in found:
                g[i] = d
                steps.append("%d box%d -> %s" % (d, b + 1, cell_name(i)))
        if not found:
            return None, g
    return steps, g


# --- S4 propagation ---------------------------------------------------------

def s4_prop(p, peer_order="rowmajor"):
    """FIFO queue of cells with a single candidate.  Initially every blank cell
    with one candidate, row-major.  Popping sets the digit and removes it from
    the blank peers' candidate sets; peers left with one candidate and not yet
    queued are appended and listed after ':' in `peer_order`
    ('rowmajor' = ascending index, 'units' = row peers, column peers, box peers)."""
    g = list(p)
    cs = {i: set(cands(g, i)) for i in range(81) if g[i] == 0}
    queue = deque(i for i in range(81) if g[i] == 0 and len(cs[i]) == 1)
    queued = set(queue)
    steps = []
    while queue:
        i = queue.popleft()
        d = next(iter(cs[i]))
        g[i] = d
        if peer_order == "rowmajor":
            peers = PEERS[i]
        else:
            r, c = _rc(i)
            peers = []
            for u in (ROWS[r], COLS[c], BOXES[box_of(i)]):
                for j in u:
                    if j != i and j not in peers:
                        peers.append(j)
        new = []
        for j in peers:
            if g[j] == 0 and d in cs[j]:
                cs[j].discard(d)
                if len(cs[j]) == 1 and j not in queued:
                    queue.append(j)
                    queued.add(j)
                    new.append(j)
        s = "set %s = %d" % (cell_name(i), d)
        if new:
            s += " : " + " ".join("%s -> { %d }" % (cell_name(j), next(iter(cs[j]))) for j in new)
        steps.append(s)
    if 0 in g:
        return None, g
    return steps, g


# --- S5 backtracking --------------------------------------------------------

def _check_cells(g):
    return all(cands(g, i) for i in range(81) if g[i] == 0)


def _check_peers(g, i):
    return all(cands(g, j) for j in PEERS[i] if g[j] == 0)


def _check_units(g, units):
    for _, u in units:
        present = {g[i] for i in u if g[i]}
        blanks = [i for i in u if g[i] == 0]
        bc = [set(cands(g, i)) for i in blanks]
        for d in range(1, 10):
            if d not in present and not any(d in c for c in bc):
                return False
    return True


def _check_naked_propagation(g):
    """Stronger check: fill naked singles to a fixpoint; fail on a dead cell."""
    g = list(g)
    changed = True
    while changed:
        changed = False
        for j in range(81):
            if g[j] == 0:
                c = cands(g, j)
                if not c:
                    return False
                if len(c) == 1:
                    g[j] = c[0]
                    changed = True
    return grid_consistent(g)


def _units_of(i):
    r, c = _rc(i)
    return [UNITS[r], UNITS[9 + c], UNITS[18 + box_of(i)]]


FORWARD_CHECKS = {
    # (a) every blank cell keeps a candidate and (b) every digit missing from a
    # unit keeps a place in it
    "cells+units": lambda g, i: _check_cells(g) and _check_units(g, UNITS),
    "cells": lambda g, i: _check_cells(g),
    "units": lambda g, i: _check_units(g, UNITS),
    "peers": lambda g, i: _check_peers(g, i),
    "peers+ownunits": lambda g, i: _check_peers(g, i) and _check_units(g, _units_of(i)),
    "cells+ownunits": lambda g, i: _check_cells(g) and _check_units(g, _units_of(i)),
    "peers+units": lambda g, i: _check_peers(g, i) and _check_units(g, UNITS),
    "naked-propagation": lambda g, i: _check_naked_propagation(g),
    "none": lambda g, i: True,
}


def s5_backtrack(p, check="cells+units", max_steps=10 ** 7):
    """DFS over the puzzle's blank cells in row-major order; on entering a cell
    its candidates (current grid) are tried ascending; a try that fails the
    forward check is 'rRcC = d x', one that passes is 'rRcC = d' and the search
    enters the next blank cell; an exhausted cell gives 'rRcC back' and the
    search resumes the previous cell's next candidate.  Stops at the first full
    grid."""
    g = list(p)
    blanks = [i for i in range(81) if g[i] == 0]
    fc = FORWARD_CHECKS[check]
    steps = []
    if not blanks:
        return steps, g
    stack = []  # per depth: remaining candidates
    k = 0
    stack.append(deque(cands(g, blanks[0])))
    while True:
        if len(steps) > max_steps:
            return None, g
        i = blanks[k]
        rem = stack[k]
        g[i] = 0
        advanced = False
        while rem:
            d = rem.popleft()
            g[i] = d
            if fc(g, i):
                steps.append("%s = %d" % (cell_name(i), d))
                advanced = True
                break
            steps.append("%s = %d x" % (cell_name(i), d))
            g[i] = 0
        if advanced:
            if k + 1 == len(blanks):
                return steps, g
            k += 1
            stack.append(deque(cands(g, blanks[k])))
            continue
        steps.append("%s back" % cell_name(i))
        stack.pop()
        k -= 1
        if k < 0:
            return None, g


SUDOKU_VARIANTS = {
    1: [("immediate", lambda p: s1_naked(p, "immediate")),
        ("snapshot", lambda p: s1_naked(p, "snapshot")),
        ("restart", lambda p: s1_naked(p, "restart"))],
    2: [("unit-major immediate", lambda p: s2_hidden(p, "immediate", "unit")),
        ("unit-major snapshot", lambda p: s2_hidden(p, "snapshot", "unit")),
        ("digit-major immediate", lambda p: s2_hidden(p, "immediate", "digit"))],
    3: [("digit-major immediate", lambda p: s3_cross(p, "immediate", "digit")),
        ("digit-major snapshot", lambda p: s3_cross(p, "snapshot", "digit")),
        ("box-major immediate", lambda p: s3_cross(p, "immediate", "box"))],
    4: [("peers row-major", lambda p: s4_prop(p, "rowmajor")),
        ("peers row,col,box", lambda p: s4_prop(p, "units"))],
    5: [("check " + k, (lambda k: (lambda p: s5_backtrack(p, k)))(k)) for k in FORWARD_CHECKS],
}


def sudoku_trace_text(steps):
    return "R : " + " ; ".join(steps) if steps else "R :"


def sudoku_answer_text(g):
    return "A : " + " ".join(str(d) for d in g) + " <eos>"


# ---------------------------------------------------------------------------
# Maze
# ---------------------------------------------------------------------------

DIRS = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
CELL_RE = re.compile(r"^r(\d+)c(\d+)$")


class Maze:
    def __init__(self, n, opened, start, goal):
        self.n, self.opened, self.start, self.goal = n, opened, start, goal

    def nbr(self, i, order="NESW"):
        n = self.n
        r, c = divmod(i, n)
        out = []
        for dch in order:
            if dch in self.opened[i]:
                dr, dc = DIRS[dch]
                out.append((r + dr) * n + c + dc)
        return out

    def name(self, i):
        return cell_name(i, self.n)


def parse_maze_question(q):
    t = q.split()
    if t[:2] != ["Q", ":"]:
        raise ValueError("bad maze question")
    t = t[2:]
    cells = []  # (cell index in listing order, dirs)
    k = 0
    while k < len(t) and CELL_RE.match(t[k]):
        name = t[k]
        k += 1
        dirs = []
        while k < len(t) and t[k] in DIRS:
            dirs.append(t[k])
            k += 1
        cells.append((name, dirs))
    n = int(round(len(cells) ** 0.5))
    if n * n != len(cells):
        raise ValueError("maze question does not list a square grid")
    if t[k:k + 1] != ["start"] or t[k + 2:k + 3] != ["goal"] or len(t) != k + 4:
        raise ValueError("bad maze question tail")
    problems = []
    opened = []
    for idx, (name, dirs) in enumerate(cells):
        if name != cell_name(idx, n):
            problems.append("cell %d listed as %s (not row-major)" % (idx, name))
        if dirs != [d for d in "NESW" if d in dirs]:
            problems.append("%s directions not in N E S W order" % name)
        opened.append(set(dirs))
    for i in range(n * n):
        r, c = divmod(i, n)
        for dch in opened[i]:
            dr, dc = DIRS[dch]
            rr, cc = r + dr, c + dc
            if not (0 <= rr < n and 0 <= cc < n):
                problems.append("%s opens %s off the grid" % (cell_name(i, n), dch))
                continue
            back = {"N": "S", "S": "N", "E": "W", "W": "E"}[dch]
            if back not in opened[rr * n + cc]:
                problems.append("%s %s not mirrored" % (cell_name(i, n), dch))

    def cidx(s):
        m = CELL_RE.match(s)
        if not m:
            raise ValueError("bad cell %r" % s)
        r, c = int(m.group(1)) - 1, int(m.group(2)) - 1
        if not (0 <= r < n and 0 <= c < n):
            raise ValueError("cell %s off grid" % s)
        return r * n + c
    return Maze(n, opened, cidx(t[k + 1]), cidx(t[k + 3])), problems


def maze_is_perfect(m):
    n2 = m.n * m.n
    edges = sum(len(o) for o in m.opened) // 2
    seen = {0}
    stack = [0]
    while stack:
        i = stack.pop()
        for j in m.nbr(i):
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return edges == n2 - 1 and len(seen) == n2


def maze_path(m):
    prev = {m.start: None}
    q = deque([m.start])
    while q:
        i = q.popleft()
        for j in m.nbr(i):
            if j not in prev:
                prev[j] = i
                q.append(j)
    path = []
    i = m.goal
    while i is not None:
        path.append(i)
        i = prev[i]
    return path[::-1]


def maze_bfs(m, order="NESW", stop="dequeue"):
    seen = {m.start}
    q = deque([m.start])
    trace = []
    while q:
        i = q.popleft()
        trace.append(i)
        if i == m.goal:
            return trace
        for j in m.nbr(i, order):
            if j not in seen:
                seen.add(j)
                q.append(j)
                if stop == "discover" and j == m.goal:
                    return trace + [j]
    return None


def maze_dfs(m, order="NESW"):
    """Walk: lists every cell entered, advances included and steps back to the
    parent when a cell has no unvisited neighbour; stops on entering the goal."""
    visited = {m.start}
    trace = [m.start]
    stack = [m.start]
    while stack:
        i = stack[-1]
        if i == m.goal:
            return trace
        nxt = [j for j in m.nbr(i, order) if j not in visited]
        if nxt:
            j = nxt[0]
            visited.add(j)
            stack.append(j)
            trace.append(j)
        else:
            stack.pop()
            if stack:
                trace.append(stack[-1])
    return None


def maze_astar(m, order="NESW", tie="g", h="manhattan"):
    """g = steps from the start, h = distance to the goal (Manhattan, or
    Euclidean for the variant), f = g + h.  Pops the open cell of minimal key:
      'g'          (f, g, discovery)      smaller g first, then first discovered
      'fifo'       (f, discovery)         first discovered first
      'g-rowmajor' (f, g, cell index)
      'rowmajor'   (f, cell index)
      'g-lifo'     (f, g, -discovery)
      'lifo'       (f, -discovery)
      'maxg'       (f, -g, discovery)     = the common "smaller h first"
    Neighbours are discovered in `order` (each cell once: the maze is a tree);
    the trace lists popped cells and ends with the goal."""
    g = {m.start: 0}
    disc = {m.start: 0}
    open_ = {m.start}
    trace = []
    counter = 1
    n = m.n
    gr, gc = divmod(m.goal, n)

    def hval(i):
        r, c = divmod(i, n)
        if h == "manhattan":
            return abs(r - gr) + abs(c - gc)
        return ((r - gr) ** 2 + (c - gc) ** 2) ** 0.5

    def key(i):
        f = g[i] + hval(i)
        return {"g": (f, g[i], disc[i]), "fifo": (f, disc[i]), "g-rowmajor": (f, g[i], i),
                "rowmajor": (f, i), "g-lifo": (f, g[i], -disc[i]), "lifo": (f, -disc[i]),
                "maxg": (f, -g[i], disc[i])}[tie]
    while open_:
        i = min(open_, key=key)
        open_.discard(i)
        trace.append(i)
        if i == m.goal:
            return trace
        for j in m.nbr(i, order):
            if j not in g:
                g[j] = g[i] + 1
                disc[j] = counter
                counter += 1
                open_.add(j)
    return None


def maze_bidir_levels(m, order="NESW"):
    """Variant: level-by-level alternation (side 0 expands a whole BFS level,
    then side 1), meeting tested on discovery."""
    seen = ({m.start}, {m.goal})
    frontier = ([m.start], [m.goal])
    trace = []
    side = 0
    while frontier[0] or frontier[1]:
        nxt = []
        for i in frontier[side]:
            trace.append(i)
            for j in m.nbr(i, order):
                if j in seen[side ^ 1]:
                    trace.append(j)
                    return trace
                if j not in seen[side]:
                    seen[side].add(j)
                    nxt.append(j)
        frontier = (nxt, frontier[1]) if side == 0 else (frontier[0], nxt)
        side ^= 1
    return None


def maze_bidir(m, order="NESW", meet="discover"):
    """Two FIFO searches (side 0 from start, side 1 from goal), alternating one
    dequeue per step, side 0 first.  The dequeued cell is listed; its neighbours
    are scanned: with meet 'discover' a neighbour already seen (discovered) by
    the other side is listed and ends the search; with 'expanded' only a
    neighbour already dequeued by the other side counts; with 'dequeue' the
    search ends when a dequeued cell was seen by the other side."""
    seen = ({m.start}, {m.goal})
    expanded = (set(), set())
    qs = (deque([m.start]), deque([m.goal]))
    trace = []
    side = 0
    while qs[0] or qs[1]:
        if not qs[side]:
            side ^= 1
            continue
        i = qs[side].popleft()
        if meet == "dequeue" and i in seen[side ^ 1]:
            trace.append(i)
            return trace
        trace.append(i)
        expanded[side].add(i)
        for j in m.nbr(i, order):
            if meet == "discover" and j in seen[side ^ 1]:
                trace.append(j)
                return trace
            if meet == "expanded" and j in expanded[side ^ 1]:
                trace.append(j)
                return trace
            if j not in seen[side]:
                seen[side].add(j)
                qs[side].append(j)
        side ^= 1
    return None


def maze_deadend(m, mode="immediate"):
    n2 = m.n * m.n
    filled = set()
    trace = []
    while True:
        found = []
        snap = set(filled)
        for i in range(n2):
            if i in (m.start, m.goal) or i in filled:
                continue
            ref = filled if mode == "immediate" else snap
            live = [j for j in m.nbr(i) if j not in ref]
            if len(live) <= 1:
                filled.add(i)
                trace.append(i)
                found.append(i)
        if not found:
            return trace


MAZE_ORDERS = ["".join(p) for p in itertools.permutations("NESW")]


def maze_variants():
    """(strategy, variant name, function) for every variant tried."""
    out = []
    for o in MAZE_ORDERS:
        out.append((1, "order %s stop on dequeue" % o, lambda m, o=o: maze_bfs(m, o, "dequeue")))
        out.append((1, "order %s stop on discovery" % o, lambda m, o=o: maze_bfs(m, o, "discover")))
        out.append((2, "order %s" % o, lambda m, o=o: maze_dfs(m, o)))
        for tie in ("g", "fifo", "g-rowmajor", "rowmajor", "g-lifo", "lifo", "maxg"):
            out.append((3, "order %s tie %s" % (o, tie), lambda m, o=o, t=tie: maze_astar(m, o, t)))
        out.append((3, "order %s tie g euclidean-h" % o, lambda m, o=o: maze_astar(m, o, "g", "euclid")))
        for meet in ("discover", "dequeue", "expanded"):
            out.append((4, "order %s meet %s" % (o, meet), lambda m, o=o, k=meet: maze_bidir(m, o, k)))
        out.append((4, "order %s level-by-level" % o, lambda m, o=o: maze_bidir_levels(m, o)))
    out.append((5, "immediate", lambda m: maze_deadend(m, "immediate")))
    out.append((5, "snapshot", lambda m: maze_deadend(m, "snapshot")))
    return out


def maze_label(s, n):
    """The paper's 8x8 labels (C.4.1).  For N != 8 the paper says nothing; the
    reading checked here (and documented by lol's docs) replaces 8 by N."""
    lab = {
        1: [(1, 1), (1, 2), (2, 1), (1, 3), (2, 2), (3, 1)],
        2: [(1, 1), (1, 2), (1, 3), (1, 4), (1, 3), (1, 2)],
        3: [(1, 1), (1, 2), (2, 2), (2, 3), (3, 3), (3, 4)],
        4: [(1, 1), (n, n), (1, 2), (n, n - 1), (1, 3), (n, n - 2)],
        5: [(n, 1), (n, 2), (n, 3), (1, n), (2, n), (3, n)],
    }[s]
    return "[ " + " ".join("r%dc%d" % rc for rc in lab) + " ]"


def cells_text(m, prefix, cells, eos=False):
    s = prefix + " " + " ".join(m.name(i) for i in cells)
    return s + " <eos>" if eos else s


# ---------------------------------------------------------------------------
# Self-check: which variants regenerate the paper's examples
# ---------------------------------------------------------------------------

def paper_text_check(paper_path):
    """If the paper text is available, confirm the embedded examples are verbatim."""
    if not paper_path or not os.path.exists(paper_path):
        return None
    text = " ".join(open(paper_path, encoding="utf-8").read().split())
    pieces = [PAPER_SUDOKU_Q, PAPER_SUDOKU_A, PAPER_MAZE_Q, PAPER_MAZE_A]
    pieces += list(PAPER_SUDOKU_R.values()) + list(PAPER_MAZE_R.values()) + list(PAPER_MAZE_LABEL.values())
    missing = [p[:50] for p in pieces if p not in text]
    return missing


def selfcheck(verbose=True):
    """Returns (ok, consistent) where consistent maps (task, strategy) to the
    ordered list of paper-consistent variant names (primary first)."""
    consistent = {}
    ok = True
    p = parse_sudoku_question(PAPER_SUDOKU_Q)
    sol_text = PAPER_SUDOKU_A
    for s in range(1, 6):
        names = []
        for name, fn in SUDOKU_VARIANTS[s]:
            steps, g = fn(p)
            if steps is not None and sudoku_trace_text(steps) == PAPER_SUDOKU_R[s] \
                    and sudoku_answer_text(g) == sol_text:
                names.append(name)
            elif verbose:
                exp = PAPER_SUDOKU_R[s][4:].split(" ; ")
                got = sudoku_trace_text(steps)[4:].split(" ; ") if steps is not None else []
                k = next((k for k in range(min(len(exp), len(got))) if exp[k] != got[k]),
                         min(len(exp), len(got)))
                print("  sudoku S%d variant %-24s fails: first difference at step %d (%s vs paper %s)"
                      % (s, repr(name), k + 1, got[k] if k < len(got) else "<end>",
                         exp[k] if k < len(exp) else "<end>"))
        consistent[("sudoku", s)] = names
        if verbose:
            print("sudoku S%d: paper-consistent variants: %s" % (s, names))
        if not names:
            ok = False
    m, probs = parse_maze_question(PAPER_MAZE_Q)
    if probs or not maze_is_perfect(m):
        ok = False
        print("paper maze does not parse cleanly: %s" % probs)
    if cells_text(m, "A :", maze_path(m), eos=True) != PAPER_MAZE_A:
        ok = False
        print("paper maze: solution path differs from the paper's answer")
    for s in range(1, 6):
        if maze_label(s, 8) != PAPER_MAZE_LABEL[s]:
            ok = False
            print("paper maze label S%d differs" % s)
    per = {s: [] for s in range(1, 6)}
    failed = {s: set() for s in range(1, 6)}
    for s, name, fn in maze_variants():
        tr = fn(m)
        if tr is not None and cells_text(m, "R :", tr) == PAPER_MAZE_R[s]:
            per[s].append(name)
        else:
            failed[s].add(re.sub(r"^order \w+ ?", "", name) or "(order only)")
    # neighbour orders that reproduce S1, S2 and S4 (A* is insensitive to most)
    orders = [o for o in MAZE_ORDERS
              if all(any(v.startswith("order %s " % o) or v == "order %s" % o for v in per[s])
                     for s in (1, 2, 4))]
    consistent[("maze", "orders")] = orders
    # one neighbour-order convention for all strategies: restrict A* to those orders
    per[3] = [v for v in per[3] if v.split()[1] in orders]
    for s in range(1, 6):
        consistent[("maze", s)] = per[s]
        ok_kinds = {re.sub(r"^order \w+ ?", "", v) or "(order only)" for v in per[s]}
        if verbose:
            shown = per[s] if len(per[s]) <= 6 else per[s][:6] + ["... (%d in all)" % len(per[s])]
            print("maze S%d: paper-consistent variants: %s" % (s, shown))
            print("         ruled out by the example for every order: %s"
                  % sorted(failed[s] - ok_kinds))
        if not per[s]:
            ok = False
    if verbose:
        print("maze: neighbour orders consistent with S1, S2 and S4: %s "
              "(the question lists directions N E S W)" % orders)
        fill = maze_deadend(m)
        print("maze S5: the example fills %d cells; path %d cells; grid %d cells"
              % (len(fill), len(maze_path(m)), m.n * m.n))
    return ok, consistent


# ---------------------------------------------------------------------------
# Checking generated records
# ---------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.records = 0
        self.by_task = {}
        self.puzzles = 0
        self.disagreements = []   # (where, strategy, message)
        # (task, s) -> {"puzzles": n, "ambiguous": k, "match": {variant: count}, "example": where}
        self.variants = {}
        self.stats = {}

    def fail(self, where, s, msg):
        self.disagreements.append((where, s, msg))

    def variant_result(self, task, s, results, lol_trace, where):
        """results: variant name -> reference trace (paper-consistent variants)."""
        v = self.variants.setdefault((task, s), {"puzzles": 0, "ambiguous": 0, "match": {},
                                                 "example": None, "variants": list(results)})
        v["puzzles"] += 1
        if len(set(results.values())) > 1:
            v["ambiguous"] += 1
            if v["example"] is None:
                v["example"] = where
        for name, tr in results.items():
            if tr == lol_trace:
                v["match"][name] = v["match"].get(name, 0) + 1

    def stat(self, key, value):
        self.stats.setdefault(key, []).append(value)


def _first_diff(a, b):
    at, bt = a.split(), b.split()
    k = next((k for k in range(min(len(at), len(bt))) if at[k] != bt[k]), min(len(at), len(bt)))
    return "first difference at token %d: lol '%s' vs reference '%s'" % (
        k, " ".join(at[max(0, k - 4):k + 5]), " ".join(bt[max(0, k - 4):k + 5]))


def check_sudoku_puzzle(recs, where, rep, consistent):
    q = recs[0]["question"]
    p = parse_sudoku_question(q)
    givens = sum(1 for x in p if x)
    rep.stat("sudoku givens", givens)
    if not (30 <= givens <= 36):
        rep.fail(where, 0, "puzzle has %d givens; paper C.3: 'we then retain between 30 and 36 digits'"
                 % givens)
    if not grid_consistent(p):
        rep.fail(where, 0, "puzzle violates the sudoku rules")
    by_s = {}
    for r in recs:
        by_s.setdefault(r["strategy"], []).append(r)
    if sorted(by_s) != [1, 2, 3, 4, 5] or any(len(v) != 1 for v in by_s.values()):
        rep.fail(where, 0, "puzzle does not have exactly one record per strategy 1..5 (paper C.3: 'Each "
                 "puzzle is solved using all five strategies'): %s" % sorted(r["strategy"] for r in recs))
    answers = set()
    for s in sorted(by_s):
        r = by_s[s][0]
        if r["question"] != q:
            rep.fail(where, s, "records of one puzzle_id have different questions")
        if r.get("label") != "[ S%d ]" % s:
            rep.fail(where, s, "label %r, expected '[ S%d ]' (paper 4.1.3)" % (r.get("label"), s))
        names = consistent[("sudoku", s)]
        fns = dict(SUDOKU_VARIANTS[s])
        results, answer = {}, {}
        for name in names:
            steps, g = fns[name](p)
            results[name] = sudoku_trace_text(steps) if steps is not None else None
            answer[name] = sudoku_answer_text(g) if steps is not None else None
        prim = names[0]
        exp_t, exp_a = results[prim], answer[prim]
        if exp_t is None:
            rep.fail(where, s, "reference S%d cannot solve this puzzle; paper C.3 requires puzzles "
                     "'still solvable by all strategies'" % s)
            continue
        rep.stat("sudoku S%d tokens" % s, len(" ".join([q, r["label"], r["trace"], r["answer"]]).split()))
        answers.add(exp_a)
        rep.variant_result("sudoku", s, results, r["trace"], where)
        if r["trace"] != exp_t:
            if r["trace"] not in results.values():
                rep.fail(where, s, "S%d trace differs (%s)" % (s, _first_diff(r["trace"], exp_t)))
        if r["answer"] != exp_a:
            rep.fail(where, s, "S%d answer differs (%s)" % (s, _first_diff(r["answer"], exp_a)))
    if len(answers) > 1:
        rep.fail(where, 0, "strategies reach different grids")
    if count_solutions(p) != 1:
        rep.fail(where, 0, "puzzle does not have exactly one solution")


def check_maze_puzzle(recs, where, rep, consistent, all_fns):
    q = recs[0]["question"]
    m, probs = parse_maze_question(q)
    for pr in probs:
        rep.fail(where, 0, "question: " + pr)
    if not maze_is_perfect(m):
        rep.fail(where, 0, "maze is not perfect (paper C.4: 'loop-free mazes ... using randomized "
                 "recursive backtracking')")
        return
    if m.start == m.goal:
        rep.fail(where, 0, "start == goal (paper C.4: 'randomly choose distinct start and goal cells')")
    path = maze_path(m)
    exp_answer = cells_text(m, "A :", path, eos=True)
    by_s = {}
    for r in recs:
        by_s.setdefault(r["strategy"], []).append(r)
    if sorted(by_s) != [1, 2, 3, 4, 5] or any(len(v) != 1 for v in by_s.values()):
        rep.fail(where, 0, "maze has records for strategies %s, not exactly one per strategy 1..5 "
                 "(paper C.4: '7.2 M mazes and 36 M sequences, one per strategy for each maze'; "
                 "`lol data sudoku --max-tokens` skips whole puzzles instead)"
                 % sorted(r["strategy"] for r in recs))
    traces = {}
    for s in sorted(by_s):
        r = by_s[s][0]
        if r["question"] != q:
            rep.fail(where, s, "records of one puzzle_id have different questions")
        if r.get("label") != maze_label(s, m.n):
            rep.fail(where, s, "label %r, expected %r%s" % (
                r.get("label"), maze_label(s, m.n),
                " (paper C.4.1)" if m.n == 8 else " (docs' N-scaled reading of the 8x8 labels)"))
        if r["answer"] != exp_answer:
            rep.fail(where, s, "answer differs (%s)" % _first_diff(r["answer"], exp_answer))
        names = consistent[("maze", s)]
        results = {}
        for name in names:
            tr = all_fns[(s, name)](m)
            results[name] = cells_text(m, "R :", tr) if tr is not None else None
        exp = results[names[0]]
        traces[s] = exp
        rep.variant_result("maze", s, results, r["trace"], where)
        if r["trace"] != exp and r["trace"] not in results.values():
            rep.fail(where, s, "S%d trace differs (%s)" % (s, _first_diff(r["trace"], exp)))
    # acceptance properties stated in C.4 (8x8 thresholds; other sides: the docs' extension)
    n = m.n
    rep.stat("maze %dx%d path" % (n, n), len(path))
    if n == 8 and len(path) < 12:
        rep.fail(where, 0, "solution path %d cells; paper C.4: 'a solution path of at least 12 cells'"
                 % len(path))
    if n != 8 and len(path) < -(-3 * n // 2):
        rep.fail(where, 0, "solution path %d cells < ceil(1.5 N) = %d (docs/tasks.md short_path)"
                 % (len(path), -(-3 * n // 2)))
    if traces.get(2) and len(traces[2].split()) - 2 <= len(path):
        rep.fail(where, 2, "DFS does not backtrack (paper C.4: 'require DFS to backtrack at least once')")
    if traces.get(1):
        pset = set(path)
        off = sum(1 for t in traces[1].split()[2:] if cell_index(t, n) not in pset)
        if off < 3:
            rep.fail(where, 1, "BFS expands %d cells off the path (paper C.4: 'BFS to expand at least "
                     "three cells outside the solution path')" % off)
    if len(traces) == 5 and len(set(traces.values())) != 5:
        rep.fail(where, 0, "two strategies give the same trace (docs/tasks.md rule traces_not_distinct)")


def cell_index(tok, n):
    mm = CELL_RE.match(tok)
    return (int(mm.group(1)) - 1) * n + int(mm.group(2)) - 1


def check_file(path, rep, consistent, seen_questions=None, max_tokens=0):
    recs_by_pid = {}
    order = []
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            r["_line"] = ln
            rep.records += 1
            rep.by_task[r["task"]] = rep.by_task.get(r["task"], 0) + 1
            pid = r["puzzle_id"]
            if pid not in recs_by_pid:
                order.append(pid)
            recs_by_pid.setdefault(pid, []).append(r)
    all_fns = {(s, name): fn for s, name, fn in maze_variants()}
    for pid in order:
        recs = recs_by_pid[pid]
        where = "%s:%d" % (path, recs[0]["_line"])
        q = recs[0]["question"]
        rep.puzzles += 1
        if seen_questions is not None:
            if q in seen_questions:
                rep.fail(where, 0, "question also at %s (paper: duplicates removed)" % seen_questions[q])
            seen_questions[q] = where
        for r in recs:
            full = " ".join([r["question"], r["label"], r["trace"], r["answer"]])
            shape = (r"^Q : .* \[ .* \] R : .* A : .* <eos>$" if r["task"] == "maze"
                     else r"^Q : .* \[ S[1-5] \] R : .* A : .* <eos>$")
            if not re.match(shape, full):
                rep.fail(where, r["strategy"], "sequence not in the paper's 'Q : ... [ label ] R : ... "
                         "A : ... <eos>' form")
            if max_tokens and len(full.split()) > max_tokens:
                rep.fail(where, r["strategy"], "sequence has %d tokens > --max-tokens %d"
                         % (len(full.split()), max_tokens))
        try:
            if recs[0]["task"] == "sudoku":
                check_sudoku_puzzle(recs, where, rep, consistent)
            elif recs[0]["task"] == "maze":
                check_maze_puzzle(recs, where, rep, consistent, all_fns)
            else:
                rep.fail(where, 0, "unknown task %r" % recs[0]["task"])
        except ValueError as e:
            rep.fail(where, 0, "parse error: %s" % e)
    return len(order)


def print_report(rep):
    print("records compared: %d (%s), %d puzzles x 5 strategies"
          % (rep.records, ", ".join("%s %d" % kv for kv in sorted(rep.by_task.items())), rep.puzzles))
    print("where the paper's example leaves a choice open (paper-consistent variants that differ):")
    for (task, s), v in sorted(rep.variants.items()):
        full = [k for k in v["variants"] if v["match"].get(k, 0) == v["puzzles"]]
        part = ["%s (%d/%d)" % (k, v["match"].get(k, 0), v["puzzles"]) for k in v["variants"]
                if v["match"].get(k, 0) != v["puzzles"]]
        if not v["ambiguous"] and not part:
            print("  %s S%d: no ambiguity on %d puzzles; lol = reference (%s)"
                  % (task, s, v["puzzles"], v["variants"][0]))
            continue
        print("  %s S%d: %d of %d puzzles tell the variants apart (e.g. %s)"
              % (task, s, v["ambiguous"], v["puzzles"], v["example"]))
        print("        lol equals on every puzzle: %s" % (_short(full) or "NONE"))
        print("        lol contradicts: %s" % _short(part))
    for key in sorted(rep.stats):
        vals = sorted(rep.stats[key])
        print("  stat %-22s min %d median %d max %d (n=%d)"
              % (key, vals[0], vals[len(vals) // 2], vals[-1], len(vals)))


def _short(names):
    return names if len(names) <= 6 else names[:6] + ["... %d in all" % len(names)]


def run(cmd):
    t = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        return 127, "cannot run %s: %s" % (cmd[0], e), time.time() - t
    return p.returncode, p.stdout, time.time() - t


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _tamper_checks(lol, work, rep, maze_dir, sudoku_dir):
    """`lol data verify` must reject a record whose trace or answer we alter."""
    cases = []
    for d, field in ((maze_dir, "trace"), (sudoku_dir, "trace"),
                     (sudoku_dir, "answer"), (maze_dir, "answer")):
        lines = _read(os.path.join(d, "train.jsonl")).splitlines()
        r = json.loads(lines[0])
        if r["task"] == "sudoku" and field == "trace":
            # the first two steps in the other order: well-formed, but not the strategy's order
            steps = r[field][4:].split(" ; ")
            steps[0], steps[1] = steps[1], steps[0]
            r[field] = "R : " + " ; ".join(steps)
        else:
            # swap two adjacent distinct cells / digits after the marker
            t = r[field].split()
            k = next(k for k in range(2, len(t) - 1) if t[k] != t[k + 1] and t[k + 1] != "<eos>")
            t[k], t[k + 1] = t[k + 1], t[k]
            r[field] = " ".join(t)
        lines[0] = json.dumps(r)
        f = os.path.join(work, "tampered_%s_%s.jsonl" % (r["task"], field))
        with open(f, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        rc, txt, _ = run([lol, "data", "verify", f])
        cases.append((f, rc))
        if rc != 1:
            rep.fail(f, r["strategy"], "`lol data verify` returned %d on a tampered %s %s (expected 1)"
                     % (rc, r["task"], field))
    return cases


def cmd_check(args):
    t0 = time.time()
    ok_self, consistent = selfcheck(verbose=True)
    missing = paper_text_check(args.paper)
    if missing:
        print("embedded paper examples not found verbatim in %s: %s" % (args.paper, missing))
        ok_self = False
    elif missing is not None:
        print("embedded paper examples found verbatim in %s" % args.paper)
    print()
    rep = Report()
    if not ok_self:
        rep.fail("selfcheck", 0, "reference does not reproduce the paper's examples")
    os.makedirs(args.work, exist_ok=True)
    # pin the binary under test: the build tree may be rebuilt while this runs
    pinned = os.path.join(args.work, "lol-under-test")
    try:
        shutil.copy2(args.lol, pinned)
        args.lol = pinned
    except OSError as e:
        print("cannot copy %s (%s); running it in place" % (args.lol, e))
    jobs = []  # (task, extra args, n, seed, dir name, max_tokens)
    for size, n, seeds in ((4, 40, (0, 1)), (5, 30, (2,)), (6, 30, (3,)), (7, 20, (4,)),
                           (8, 150, (0, 1)), (9, 15, (5,)), (10, 15, (6,)), (12, 10, (7,)),
                           (16, 4, (8,))):
        for seed in seeds:
            jobs.append(("maze", ["--size", str(size)], n, seed, "maze_s%d_seed%d" % (size, seed), 0))
    jobs.append(("maze", ["--size", "8"], 30, 9, "maze_s8_seed9_max330", 330))
    for n, seed in ((40, 0), (40, 1), (30, 7)):
        jobs.append(("sudoku", [], n, seed, "sudoku_seed%d" % seed, 0))
    jobs.append(("sudoku", [], 20, 3, "sudoku_seed3_max800", 800))
    if args.quick:
        jobs = [j for j in jobs if j[3] in (0, 7)]
    verify_fail = []
    for task, extra, n, seed, name, maxtok in jobs:
        out = os.path.join(args.work, name)
        shutil.rmtree(out, ignore_errors=True)  # a rerun into the same --work
        cmd = [args.lol, "data", task, "--n", str(n), "--seed", str(seed), "--n-test", "2",
               "--valid-fraction", "0.2", "--out", out, "--no-progress"] + extra
        if maxtok:
            cmd += ["--max-tokens", str(maxtok)]
        rc, txt, dt = run(cmd)
        if rc != 0:
            print("FAILED (%d): %s\n%s" % (rc, " ".join(cmd), txt))
            return 2
        seen = {}
        np_ = 0
        for split in ("train", "valid", "test"):
            f = os.path.join(out, split + ".jsonl")
            if os.path.exists(f):
                np_ += check_file(f, rep, consistent, seen, maxtok)
        if np_ != n + 2:
            rep.fail(out, 0, "%d puzzles written, expected --n %d + --n-test 2" % (np_, n))
        vrc, vtxt, _ = run([args.lol, "data", "verify", out])
        if vrc != 0:
            verify_fail.append((out, vtxt[-500:]))
        print("  %-22s %4d puzzles  generated in %.1fs, `lol data verify` rc=%d" % (name, np_, dt, vrc))
    for out, txt in verify_fail:
        rep.fail(out, 0, "`lol data verify` failed on lol's own data: %s" % txt)
    # determinism: same seed -> same bytes; sudoku --threads must not matter
    # determinism: the same data again, byte for byte (sudoku with another --threads)
    d0, m0 = os.path.join(args.work, "sudoku_seed0"), os.path.join(args.work, "maze_s8_seed0")
    for task, first, again, extra, why in (
            ("sudoku", d0, "sudoku_seed0_threads2", ["--n", "40", "--threads", "2"], "--threads 1 and --threads 2"),
            ("maze", m0, "maze_s8_seed0_again", ["--n", "150", "--size", "8"], "two runs with the same seed")):
        again = os.path.join(args.work, again)
        shutil.rmtree(again, ignore_errors=True)
        rc, txt, _ = run([args.lol, "data", task, "--seed", "0", "--n-test", "2", "--valid-fraction", "0.2",
                          "--out", again, "--no-progress"] + extra)
        if rc != 0:
            print("FAILED (%d): %s" % (rc, txt))
            return 2
        for split in ("train", "valid", "test"):
            if _read(os.path.join(first, split + ".jsonl")) != _read(os.path.join(again, split + ".jsonl")):
                rep.fail(again, 0, "%s %s.jsonl differs between %s" % (task, split, why))
    print("  determinism: sudoku --threads 1 vs 2 and a repeated maze run compared byte for byte")
    cases = _tamper_checks(args.lol, args.work, rep, m0, d0)
    print("  tampered records given to `lol data verify`: %s"
          % ", ".join("%s rc=%d" % (os.path.basename(f), rc) for f, rc in cases))
    print()
    print_report(rep)
    if rep.disagreements:
        print("DISAGREEMENTS: %d" % len(rep.disagreements))
        for where, s, msg in rep.disagreements[:60]:
            print("  %s strategy %s: %s" % (where, s, msg))
    else:
        print("no disagreements")
    print("total time %.1fs" % (time.time() - t0))
    return 1 if rep.disagreements else 0


def cmd_check_file(args):
    ok, consistent = selfcheck(verbose=False)
    rep = Report()
    seen = {}
    for f in args.files:
        check_file(f, rep, consistent, seen)
    print_report(rep)
    for where, s, msg in rep.disagreements:
        print("DISAGREE %s strategy %s: %s" % (where, s, msg))
    return 1 if (rep.disagreements or not ok) else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("selfcheck", help="reproduce the paper's appendix examples")
    a.add_argument("--paper", default="/work/shared/seeds/000_8d63fd016cd52d41.txt")
    a = sub.add_parser("check", help="generate data with lol and compare every record")
    a.add_argument("--lol", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--paper", default="/work/shared/seeds/000_8d63fd016cd52d41.txt")
    a.add_argument("--quick", action="store_true", help="fewer datasets")
    a = sub.add_parser("check-file", help="compare records of existing JSONL files")
    a.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "selfcheck":
        ok, _ = selfcheck(verbose=True)
        missing = paper_text_check(args.paper)
        if missing:
            print("embedded examples not verbatim in the paper: %s" % missing)
            ok = False
        return 0 if ok else 1
    if args.cmd == "check":
        return cmd_check(args)
    return cmd_check_file(args)


if __name__ == "__main__":
    sys.exit(main())
