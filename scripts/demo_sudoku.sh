#!/usr/bin/env bash
# The sudoku counterpart of README command 1 (paper 4.1.3): generate 9x9 puzzles solved
# with all five strategies, train a CPU-sized LoL (configs/sudoku_cpu.json), extract each
# strategy's mode routing path, force it on held-out puzzles with the label [ Sx ]
# replaced by a neutral filler, and print the confusion table and metrics.
# Knobs (environment): DEMO_DIR (runs/sudoku), PUZZLES, MAX_TOKENS, STEPS, BATCH, EVAL_N,
# SEED (data), TRAIN_SEED. Results of these defaults: docs/results.md, "Sudoku".
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
BUILD_TARGETS=lol ./scripts/build.sh
LOL=./build/lol
DIR=${DEMO_DIR:-runs/sudoku}
PUZZLES=${PUZZLES:-3000}
MAX_TOKENS=${MAX_TOKENS:-1024}
STEPS=${STEPS:-3000}
BATCH=${BATCH:-16}
EVAL_N=${EVAL_N:-100}
SEED=${SEED:-1}
TRAIN_SEED=${TRAIN_SEED:-0}
. scripts/warmup_for_steps.sh
# shellcheck disable=SC2207
WARMUP_SET=($(warmup_for_steps configs/sudoku_cpu.json "$STEPS"))
# A rerun replaces the previous results (lol refuses to overwrite a dataset or a run).
rm -rf "$DIR"
mkdir -p "$DIR"
start=$(date +%s)
echo "== 1/4 generate $PUZZLES sudoku puzzles (5 strategies each, sequences <= $MAX_TOKENS tokens)"
$LOL data sudoku --n "$PUZZLES" --seed "$SEED" --max-tokens "$MAX_TOKENS" --threads "$(nproc)" --out "$DIR/data"
echo "== 2/4 train LoL (configs/sudoku_cpu.json, $STEPS steps of $BATCH sequences)"
$LOL train --config configs/sudoku_cpu.json --set data.dir="$DIR/data" --set train.out="$DIR/run" \
  --set train.steps="$STEPS" "${WARMUP_SET[@]}" --set data.batch_size="$BATCH" --set train.seed="$TRAIN_SEED"
echo "== 3/4 extract mode paths"
$LOL paths extract --model "$DIR/run" --data "$DIR/data" --out "$DIR/paths"
echo "== 4/4 force each strategy's mode path on $EVAL_N held-out puzzles"
$LOL eval-strategies --model "$DIR/run" --paths "$DIR/paths" --data "$DIR/data" --n "$EVAL_N" --out "$DIR/eval"
echo "sudoku demo finished in $(( $(date +%s) - start )) s; results in $DIR/eval, paths in $DIR/paths"
