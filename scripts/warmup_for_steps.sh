# Sourced by the demo scripts. warmup_for_steps CONFIG STEPS prints the `--set` that
# lets a run of STEPS steps (the scripts' STEPS knob) use CONFIG: nothing when STEPS
# covers the config's schedule.warmup_steps, else a warmup of a tenth of STEPS (lol train
# refuses a warmup longer than the run). Exits 2 for a STEPS that is not a positive integer.
warmup_for_steps() {
  local config=$1 steps=$2 warmup
  [[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "STEPS=$steps: expected a positive integer" >&2; exit 2; }
  warmup=$(sed -n 's/.*"warmup_steps": *\([0-9]*\).*/\1/p' "$config" | head -n 1)
  if [[ -n $warmup ]] && (( steps < warmup )); then
    echo "note: STEPS=$steps is shorter than $config's warmup of $warmup steps: warming up for $(( steps / 10 ))" >&2
    echo "--set schedule.warmup_steps=$(( steps / 10 ))"
  fi
}
