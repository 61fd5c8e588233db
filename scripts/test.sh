#!/usr/bin/env bash
# README command 2 (what CI runs): install what is missing, then
#  1. build the whole project (library, CLI, every test binary) with AddressSanitizer +
#     UndefinedBehaviorSanitizer into build-asan/ (GCC, -DLOL_SANITIZE=ON, Release
#     optimisation; LibTorch and the other system libraries stay uninstrumented) and run
#     the complete test suite on it: a sanitizer report fails the test that triggers it;
#  2. scripts/sanitize.sh: the clang build of the LibTorch-free code and the src/nn
#     kernels, their tests, and short libFuzzer runs of every parser.
# docs/robustness.md "Sanitizers". The demo (README command 1) uses the normal build in build/.
#
# Environment: LOL_SANITIZE=0 runs the suite on the normal Release build (BUILD_DIR,
# default build/) instead of build-asan/; LOL_SKIP_SANITIZE=1 skips step 2; JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
if [ "${LOL_SANITIZE:-1}" = 1 ]; then
  . scripts/sanitizer_env.sh
  lsan_probe "${CXX:-c++}"   # before building: test discovery runs the sanitized binaries
  dir=${ASAN_BUILD_DIR:-build-asan}
  BUILD_DIR=$dir ./scripts/build.sh -DLOL_SANITIZE=ON -DLOL_BUILD_BENCH=OFF
else
  dir=${BUILD_DIR:-build}
  ./scripts/build.sh
fi
(cd "$dir" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900)
[ "${LOL_SKIP_SANITIZE:-0}" = 1 ] || ./scripts/sanitize.sh
