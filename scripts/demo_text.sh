#!/usr/bin/env bash
# Language modelling demo on CPU (issue 7): a byte-level BPE tokenizer trained on the
# King James Bible, a token-shard corpus, a short LoL training with packed,
# document-blocked rows (configs/text_kjv_cpu.json), validation loss / perplexity /
# bits per byte, and a generated sample. About 10-15 minutes on 2 cores.
#
#   scripts/demo_text.sh                 # outputs in runs/demo_text
#   OUT=/tmp/x STEPS=50 scripts/demo_text.sh
#
# Needs a built ./build/lol (scripts/build.sh) and the shared corpora next to the
# repository (../shared/data/corpora, or set CORPORA).
set -euo pipefail
cd "$(dirname "$0")/.."
LOL=${LOL:-build/lol}
OUT=${OUT:-runs/demo_text}
CORPORA=${CORPORA:-../shared/data/corpora}
VOCAB=${VOCAB:-1024}
STEPS=${STEPS:-300}
PROMPT=${PROMPT:-"And God said"}
. scripts/warmup_for_steps.sh
# shellcheck disable=SC2207
WARMUP_SET=($(warmup_for_steps configs/text_kjv_cpu.json "$STEPS"))
KJV="$CORPORA/en_kjv.txt"
[ -x "$LOL" ] || { echo "no $LOL: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$KJV" ] || { echo "no $KJV: set CORPORA to the folder holding en_kjv.txt" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT"
start=$(date +%s)
run() { { printf "+"; printf " %q" "$@"; echo; } | tee -a "$OUT/commands.txt"; "$@"; }

run "$LOL" tokenizer train --in "$KJV" --vocab-size "$VOCAB" --out "$OUT/tokenizer" --no-progress
run "$LOL" corpus --in "$KJV" --tokenizer "$OUT/tokenizer" --doc-split blank-line --valid-fraction 0.02 --seed 0 \
  --out "$OUT/data" --no-progress
t_train=$(date +%s)
run "$LOL" train --config configs/text_kjv_cpu.json --set data.dir="$OUT/data" --set train.out="$OUT/run" \
  --set train.steps="$STEPS" "${WARMUP_SET[@]}" --no-progress 2>&1 | tail -n 3
t_eval=$(date +%s)
run "$LOL" eval lm --model "$OUT/run" --data "$OUT/data" --split valid --out "$OUT/eval_valid.json" --no-progress
CKPT="$OUT/run/$(cat "$OUT/run/latest")"  # the checkpoint (generate also takes the run directory)
run "$LOL" generate --model "$CKPT" --tokenizer "$OUT/tokenizer" --prompt "$PROMPT" --max-new 120 \
  --temperature 0.8 --top-k 40 --seed 0 | tee "$OUT/sample.txt"
end=$(date +%s)

{
  echo "wall_s_total $((end - start))"
  echo "wall_s_train $((t_eval - t_train))"
  echo "nproc $(nproc)"
  echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
} | tee "$OUT/machine.txt"
echo "outputs in $OUT (commands.txt, eval_valid.json, sample.txt, run/metrics.jsonl)"
