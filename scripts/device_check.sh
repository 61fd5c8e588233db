#!/usr/bin/env bash
# GPU check (issue 12, docs/benchmarks.md "CUDA"): builds lol against a CUDA LibTorch,
# runs the device tests (tests/device: CPU against GPU), the GPU benchmarks (matmul
# peak, training tiny/small LoL and dense, decoding), the PyTorch eager reference of the
# training benchmark (bench/torch_reference.py) and then as much of the CPU suite
# as the time left allows (it checks the newer LibTorch too), in about 8 minutes.
# Run on an NVIDIA H200 with PyTorch 2.11.0+cu130 (docs/benchmarks.md "CUDA").
#
# Usage: [TORCH_DIR=...] scripts/device_check.sh [build-dir]
#   TORCH_DIR: a CUDA LibTorch (cxx11 ABI) or a Python torch's cmake prefix
#              (default: python3 -c 'import torch; print(torch.utils.cmake_prefix_path)').
#   DEVICE_CHECK_SECONDS: the time budget (default 480); LOG_DIR: where the logs go
#   (default <build-dir>/device_check); DEVICE_CHECK_CPU_SUITE=0 skips the CPU suite,
#   DEVICE_CHECK_TORCH_REFERENCE=0 the PyTorch reference.
# On a machine whose image lacks nlohmann-json, CLI11, PCRE2 or GoogleTest, run
# scripts/device_deps.sh on a Debian machine first and bring its .devdeps/ along.
# Exit status: 0 when the build, the device tests and the benchmarks succeeded.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cuda}
LOG=${LOG_DIR:-$BUILD/device_check}
mkdir -p "$LOG"
budget=${DEVICE_CHECK_SECONDS:-480}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
step() { echo "== $* (at $(( $(date +%s) - start )) s)"; }
fail=0
export OMP_WAIT_POLICY=PASSIVE

step environment
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
{
  uname -m; grep PRETTY_NAME /etc/os-release; g++ --version | head -1; cmake --version | head -1
  echo "ninja $(ninja --version 2>/dev/null)"; nvcc --version 2>/dev/null | tail -1; echo "cores $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
} 2>&1 | tee "$LOG/environment.txt"

if [ -z "${TORCH_DIR:-}" ]; then
  TORCH_DIR=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
fi
[ -n "$TORCH_DIR" ] || { echo "device_check: set TORCH_DIR to a CUDA LibTorch" >&2; exit 2; }
PREFIX="$TORCH_DIR"
EXTRA=()
if [ -d .devdeps ]; then
  step "GoogleTest from .devdeps (this machine's compiler)"
  if [ ! -f .devdeps/prefix/lib/libgtest.a ] && [ ! -f .devdeps/prefix/lib64/libgtest.a ]; then
    cmake -S .devdeps/googletest -B .devdeps/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
      -DCMAKE_INSTALL_PREFIX="$PWD/.devdeps/prefix" >"$LOG/gtest.log" 2>&1 &&
      cmake --build .devdeps/gtest-build >>"$LOG/gtest.log" 2>&1 &&
      cmake --install .devdeps/gtest-build >>"$LOG/gtest.log" 2>&1 || { tail -20 "$LOG/gtest.log"; exit 2; }
    cat "$LOG/gtest.log" >>"$LOG/environment.txt" && rm "$LOG/gtest.log"
  fi
  PREFIX="$PREFIX;$PWD/.devdeps/prefix"
  EXTRA+=(-DPCRE2_ROOT="$PWD/.devdeps/prefix")
fi

step configure
GEN=()
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DLOL_CUDA=ON -DLOL_BUILD_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$PREFIX" "${EXTRA[@]}" >"$LOG/configure.log" 2>&1 || { tail -40 "$LOG/configure.log"; exit 2; }
grep -iE "warning|filesystem|nccl|gloo" "$LOG/configure.log" | head -20

step "build lol"
# -k 0: every compile error at once (a newer LibTorch's API changes).
timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" --target lol -- -k 0 >"$LOG/build.log" 2>&1
rc=$?
grep -E "error|Error" "$LOG/build.log" | head -60
[ $rc -eq 0 ] || { echo "device_check: build failed (rc $rc, $LOG/build.log)"; tail -5 "$LOG/build.log"; exit 1; }

step "device tests (CPU against GPU)"
if timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" --target test_device -- -k 0 >>"$LOG/build.log" 2>&1; then
  timeout 150 "$BUILD/test_device" 2>&1 | tee "$LOG/test_device.log" | grep -vE "^\[ (RUN|       OK) " || true
  grep -q "\[  PASSED  \] 5 tests" "$LOG/test_device.log" || { echo "device_check: device tests failed"; fail=1; }
else
  grep -E "error" "$LOG/build.log" | tail -30; echo "device_check: test_device did not build"; fail=1
fi

step "benchmarks"
{
  "$BUILD/lol" bench matmul --device cuda --n 8192 --seconds 2
  "$BUILD/lol" bench train --preset tiny --arch both --device cuda --steps 50 --warmup 5 --peak-n 0
  # The optimizer's grouping (auto = batched on a GPU) against one parameter per group,
  # and where the host time of a LoL step goes (operator calls and their host time).
  "$BUILD/lol" bench train --preset tiny --arch lol --device cuda --steps 20 --warmup 5 --peak-n 0 \
    --optimizer-grouping per-parameter
  "$BUILD/lol" bench train --preset tiny --arch lol --device cuda --steps 20 --warmup 5 --peak-n 0 \
    --profile 3 --profile-top 40
  "$BUILD/lol" bench train --preset small --arch both --device cuda --steps 20 --warmup 3 --peak-n 8192
  "$BUILD/lol" bench generate --model bench/small_model.json --device cuda --context 256 --new 64 --full-steps 4
} 2>&1 | tee "$LOG/bench.log" || fail=1

step "PyTorch eager reference (bench/torch_reference.py, same presets, same machine)"
[ "${DEVICE_CHECK_TORCH_REFERENCE:-1}" != 0 ] && {
  timeout 150 python3 bench/torch_reference.py --preset tiny --arch both --device cuda --steps 50 --warmup 5
  timeout 150 python3 bench/torch_reference.py --preset small --arch both --device cuda --steps 20 --warmup 3
} 2>&1 | tee "$LOG/torch_reference.log" || true

step "CPU suite on this LibTorch (as time allows)"
if [ "${DEVICE_CHECK_CPU_SUITE:-1}" != 0 ] && [ "$(left)" -gt 90 ]; then
  timeout "$(( $(left) - 60 ))" cmake --build "$BUILD" -j"$(nproc)" -- -k 0 >"$LOG/build_all.log" 2>&1
  grep -E "error:" "$LOG/build_all.log" | head -30
  readelf -d "$BUILD/lol" | grep NEEDED | head -3
  (cd "$BUILD" && timeout "$(( $(left) > 40 ? $(left) - 30 : 10 ))" ctest -j"$(nproc)" --timeout 120 \
    --output-on-failure -E "^cpu_self_check\." >"$LOG/ctest.log" 2>&1)
  grep -E "tests passed|tests failed|\(SEGFAULT\)|\(Failed\)|\(Timeout\)|Subprocess" "$LOG/ctest.log" | head -80
  # A backtrace of the first test that crashed (cuda-gdb also debugs programs without GPU code).
  first=$(grep -m1 -oE "[0-9]+ - [A-Za-z0-9_/.]+ \(SEGFAULT\)" "$LOG/ctest.log" | awk '{print $3}')
  if [ -n "$first" ] && command -v cuda-gdb >/dev/null; then
    bin=$(cd "$BUILD" && ctest -N -V -R "^${first}\$" | grep -oE "[^ ]*/test_[a-z_]+" | head -1)
    [ -n "$bin" ] && timeout 25 cuda-gdb -batch -ex run -ex bt --args "$bin" --gtest_filter="$first" >"$LOG/gdb.log" 2>&1
    grep -E "^#[0-9]+ " "$LOG/gdb.log" | head -15
  fi
fi
step "done (exit $fail)"
exit $fail
