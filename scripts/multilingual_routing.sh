#!/usr/bin/env bash
# The multilingual routing experiment (paper 4.1.1, issue 7): train a small LoL on an
# equal mix of the 10 languages of ../shared/data/corpora/multilingual.jsonl, then, on
# the held-out multilingual_valid.jsonl, read each window's routing path (one-hot
# expert per routed depth), plot its PCA coloured by language and score how well the
# language can be read from the path (nearest-centroid accuracy on held-out documents)
# against a shuffled-label control. Results: docs/results.md section 4.
#   STEPS=800 scripts/multilingual_routing.sh      (~30 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
LOL=${LOL:-build/lol}
OUT=${OUT:-runs/multilingual}
CORPORA=${CORPORA:-../shared/data/corpora}
CAP=${CAP:-420000}      # text bytes per language: the smallest language (pt) has ~424 KB
VOCAB=${VOCAB:-4096}
STEPS=${STEPS:-800}
. scripts/warmup_for_steps.sh
# shellcheck disable=SC2207
WARMUP_SET=($(warmup_for_steps configs/multilingual_cpu.json "$STEPS"))
[ -x "$LOL" ] || { echo "no $LOL: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$CORPORA/multilingual.jsonl" ] || { echo "no $CORPORA/multilingual.jsonl: set CORPORA" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT"
run() { { printf "+"; printf " %q" "$@"; echo; } | tee -a "$OUT/commands.txt"; "$@"; }

run "$LOL" tokenizer train --in "$CORPORA/multilingual.jsonl" --label-field lang --max-bytes-per-label "$CAP" \
  --vocab-size "$VOCAB" --pattern qwen2 --out "$OUT/tokenizer" --no-progress
run "$LOL" corpus --in "$CORPORA/multilingual.jsonl" --valid-in "$CORPORA/multilingual_valid.jsonl" \
  --label-field lang --max-bytes-per-label "$CAP" --valid-fraction 0 --tokenizer "$OUT/tokenizer" --eos \
  --out "$OUT/data" --no-progress
run "$LOL" train --config configs/multilingual_cpu.json --set data.dir="$OUT/data" --set train.out="$OUT/run" \
  --set train.steps="$STEPS" "${WARMUP_SET[@]}" --no-progress 2>&1 | tail -n 3
run "$LOL" eval lm --model "$OUT/run" --data "$OUT/data" --split valid --out "$OUT/eval_valid.json" --no-progress
run "$LOL" analyze routing --model "$OUT/run" --data "$OUT/data" --split valid --max-tokens 1024 \
  --label-positive ja --out "$OUT/analysis"
# The script of each held-out document as the label (Latn, Cyrl, Jpan, Hans).
run "$LOL" corpus --in "$CORPORA/multilingual_valid.jsonl" --label-field script --valid-fraction 0 \
  --tokenizer "$OUT/tokenizer" --eos --out "$OUT/valid_script" --no-progress
run "$LOL" analyze routing --model "$OUT/run" --data "$OUT/valid_script" --split train --max-tokens 1024 \
  --label-positive Cyrl --out "$OUT/analysis_script"
echo "outputs in $OUT (commands.txt, eval_valid.json, analysis/routing.json, analysis/*.png)"
