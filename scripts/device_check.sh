#!/usr/bin/env bash
# GPU check (issue 12, docs/benchmarks.md "CUDA"): builds against a CUDA LibTorch, runs
# the LibTorch test binaries and the training benchmark on the GPU, in under 8 minutes.
# Untested so far (no GPU was available when it was written).
#
# Usage: TORCH_DIR=/path/to/libtorch scripts/device_check.sh [build-dir]
#   TORCH_DIR: a CUDA LibTorch (cxx11 ABI), or a Python torch install's
#   share/cmake parent (default: found via python3 -c 'import torch').
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cuda}
if [ -z "${TORCH_DIR:-}" ]; then
  TORCH_DIR=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)
fi
[ -n "$TORCH_DIR" ] || { echo "device_check: set TORCH_DIR to a CUDA LibTorch" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
start=$(date +%s)
left() { echo $(( 470 - ($(date +%s) - start) )); }

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOL_CUDA=ON -DLOL_BUILD_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$TORCH_DIR" >/dev/null
timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" --target lol test_model test_training test_inference
echo "device_check: built in $(( $(date +%s) - start )) s"

"$BUILD/lol" bench matmul --device cuda --n 4096 --seconds 1
for t in test_model test_training test_inference; do
  timeout "$(( $(left) > 60 ? 60 : $(left) ))" "$BUILD/$t" --gtest_brief=1 || { echo "device_check: $t failed" >&2; exit 1; }
done
timeout "$(left)" "$BUILD/lol" bench train --preset small --arch both --device cuda --steps 20 --warmup 3 --peak-n 4096
echo "device_check: done in $(( $(date +%s) - start )) s"
