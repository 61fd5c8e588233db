#!/usr/bin/env bash
# The sanitizer pass of the test suite (issue 13; docs/robustness.md "Sanitizers"),
# run by scripts/test.sh after the normal tests (skip it with LOL_SKIP_SANITIZE=1).
#
#  1. builds fuzz/CMakeLists.txt with clang into $SAN_BUILD_DIR (default build-san):
#     the LibTorch-free libraries (util io tasks tokenizers dataset stats) compiled with
#     AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=undefined),
#     their test binaries and the libFuzzer targets; LibTorch is not involved;
#  2. runs those tests with CTest; any ASan / LeakSanitizer / UBSan report fails a test;
#  3. runs every fuzz target for $LOL_FUZZ_SECONDS seconds (default 15) on a scratch
#     copy of its seed corpus fuzz/corpus/<target>, $JOBS targets at a time; a crash,
#     sanitizer report, uncaught non-InputError exception, hang (> 10 s per input) or
#     > 2 GB of memory fails the pass, and the input is kept in
#     $SAN_BUILD_DIR/fuzz-artifacts/ (add it to fuzz/corpus/<target>/ with a
#     regression test once fixed).
#
# Exit status: 0 = all clean; non-zero = a build error, a failed test or a fuzz finding.
# Environment: SAN_BUILD_DIR, JOBS (default nproc), LOL_FUZZ_SECONDS (0 skips fuzzing),
# CXX (default clang++; must be clang).
set -euo pipefail
cd "$(dirname "$0")/.."
SAN_DIR=${SAN_BUILD_DIR:-build-san}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${LOL_FUZZ_SECONDS:-15}
CXX=${CXX:-clang++}
if ! command -v "$CXX" >/dev/null || ! "$CXX" --version | grep -qi clang; then
  echo "sanitize.sh: needs clang++ with compiler-rt (Debian: clang libclang-rt-dev; scripts/install_deps.sh installs them)" >&2
  exit 1
fi
t0=$SECONDS

# Leak checks off where LeakSanitizer cannot run (scripts/sanitizer_env.sh).
. scripts/sanitizer_env.sh
lsan_probe "$CXX"
leaks=$LSAN_STATE

echo "== sanitizer build ($SAN_DIR, $CXX, ASan+UBSan, leak checks $leaks, -j$JOBS)"
CXX=$CXX cmake -S fuzz -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOL_FUZZ_TESTS=ON \
  -DLOL_SAN_DETECT_LEAKS=$leaks >/dev/null
cmake --build "$SAN_DIR" -j "$JOBS"
t_build=$((SECONDS - t0))

echo "== sanitized tests (LibTorch-free code, src/nn kernels)"
(cd "$SAN_DIR" && ctest --output-on-failure -j "$JOBS" --timeout 600)
t_test=$((SECONDS - t0 - t_build))

fuzz_failed=0
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  echo "== fuzzing: each target ${FUZZ_SECONDS} s on its seed corpus, $JOBS at a time"
  work="$SAN_DIR/fuzz-work"
  rm -rf "$work" && mkdir -p "$work" "$SAN_DIR/fuzz-artifacts"
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  run_target() {  # $1 = target name; writes $work/$1.log and $work/$1.rc
    local t=$1 rc=0
    mkdir -p "$work/$t.corpus"
    "$SAN_DIR/$t" "$work/$t.corpus" "fuzz/corpus/$t" -max_total_time="$FUZZ_SECONDS" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$SAN_DIR/fuzz-artifacts/$t-" >"$work/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$t.rc"
  }
  targets=()
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
  for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    run_target "$t" &
  done
  wait
  printf '%-24s %12s %8s  %s\n' target executions corpus result
  for t in "${targets[@]}"; do
    rc=$(cat "$work/$t.rc")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
    units=$(find "$work/$t.corpus" -type f | wc -l)
    if [ "$rc" = 0 ]; then result=ok; else result="FAILED (exit $rc)"; fuzz_failed=1; fi
    printf '%-24s %12s %8s  %s\n' "$t" "${execs:-?}" "$units" "$result"
  done
  if [ "$fuzz_failed" = 1 ]; then
    for t in "${targets[@]}"; do
      [ "$(cat "$work/$t.rc")" = 0 ] && continue
      echo "---- $t: last lines of $work/$t.log"
      tail -40 "$work/$t.log"
    done
    echo "inputs that failed: $SAN_DIR/fuzz-artifacts/" >&2
  fi
fi
t_fuzz=$((SECONDS - t0 - t_build - t_test))
echo "sanitize.sh: build ${t_build} s, tests ${t_test} s, fuzzing ${t_fuzz} s, total $((SECONDS - t0)) s"
exit "$fuzz_failed"
