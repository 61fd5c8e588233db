#!/usr/bin/env bash
# README command 1 -- the main job (paper 4.1.4): generate mazes, train a CPU-sized
# LoL, extract each strategy's mode routing path, force it on new mazes (the test split) with the
# label replaced by a neutral filler of its length ("[ ... ... ... ... ... ... ]"), and
# print the confusion table and metrics.
# Knobs (environment): DEMO_DIR (runs/demo), MAZES, MAZE_SIZE, STEPS, EVAL_N, SEED (data), TRAIN_SEED.
# Results of this pipeline (these defaults) and why these sizes: docs/results.md section 1.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
BUILD_TARGETS=lol ./scripts/build.sh   # the CLI only (the tests are README command 2)
LOL=./build/lol
DIR=${DEMO_DIR:-runs/demo}
MAZES=${MAZES:-20000}
MAZE_SIZE=${MAZE_SIZE:-4}
STEPS=${STEPS:-2000}
EVAL_N=${EVAL_N:-200}
SEED=${SEED:-1}
TRAIN_SEED=${TRAIN_SEED:-0}
. scripts/warmup_for_steps.sh
# shellcheck disable=SC2207
WARMUP_SET=($(warmup_for_steps configs/maze_demo.json "$STEPS"))
# A rerun replaces the previous results (lol refuses to overwrite a dataset or a run).
rm -rf "$DIR"
mkdir -p "$DIR"
start=$(date +%s)
echo "== 1/4 generate $MAZES ${MAZE_SIZE}x${MAZE_SIZE} mazes (5 strategies each)"
$LOL data maze --n "$MAZES" --size "$MAZE_SIZE" --seed "$SEED" --out "$DIR/data"
echo "== 2/4 train LoL (configs/maze_demo.json, $STEPS steps)"
$LOL train --config configs/maze_demo.json --set data.dir="$DIR/data" --set train.out="$DIR/run" \
  --set train.steps="$STEPS" "${WARMUP_SET[@]}" --set train.seed="$TRAIN_SEED"
echo "== 3/4 extract mode paths"
$LOL paths extract --model "$DIR/run" --data "$DIR/data" --out "$DIR/paths"
echo "== 4/4 force each strategy's mode path on $EVAL_N new mazes (the test split)"
$LOL eval-strategies --model "$DIR/run" --paths "$DIR/paths" --data "$DIR/data" --n "$EVAL_N" --out "$DIR/eval"
echo "demo finished in $(( $(date +%s) - start )) s; results in $DIR/eval (results.json, confusion.png), paths in $DIR/paths"
